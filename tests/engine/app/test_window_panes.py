"""The window operator with a processing-time clock the test moves: Samza's processing-time
windows (keyed and unkeyed, tumbling and session), early and late triggers, accumulating and
discarding panes, pane information (timing, index, mode), drains that keep window state, and
late elements made visible (side output, counter, rate-limited warning)."""

from __future__ import annotations

import logging

import pytest

from tests.engine.app.test_operators import CONFIG, Sink, context
from weir.engine.app import KV, Windows, count
from weir.engine.app.graph import OpCode, OpSpec
from weir.engine.app.operators import InputOperator, LateElementsOperator, OperatorContext
from weir.engine.app.triggers import Triggers
from weir.engine.app.window_operator import WindowOperator
from weir.engine.app.windows import AccumulationMode, PaneTiming, TimeDomain, collecting
from weir.engine.control.messages import WATERMARK_MAX
from weir.engine.metrics import TaskMetrics

EARLY, ON_TIME, LATE = PaneTiming.EARLY, PaneTiming.ON_TIME, PaneTiming.LATE


class Clock:
    def __init__(self, now: int = 0):
        self.now = now

    def __call__(self) -> int:
        return self.now


def make(tmp_path, spec, *, name="w", stores=None, clock=None, late_output=False):
    """A window operator fed by an input operator, its panes into a sink; with
    ``late_output`` a late side output into a second sink."""
    clock = clock or Clock()
    base = context(tmp_path, {} if stores is None else stores)
    ctx = OperatorContext("Partition 0", None, base.store, None, TaskMetrics("t"), None,
                          CONFIG, clock_ms=clock)
    s = OpSpec(OpCode.WINDOW, name, window=spec)
    s.id = f"app-1-window-{name}"
    op = WindowOperator(s, ctx)
    source = InputOperator(OpSpec(OpCode.INPUT, None), ctx)
    source.used = op.used = True
    source.connect(op, 0)
    late_sink = Sink()
    if late_output:
        late = LateElementsOperator(OpSpec(OpCode.LATE_ELEMENTS, None), ctx)
        late.used = True
        op.connect(late, 0)
        late.emit.append(late_sink)
    op.open()
    sink = Sink()
    op.emit.append(sink)
    return op, source, sink, late_sink, ctx, clock


def panes(sink):
    return [(p.key, p.start, p.value, p.timing, p.index) for p, _ in sink.items]


# -- processing time (Samza's windows) ---------------------------------------------------------

def test_a_processing_time_tumbling_window_groups_by_arrival_and_fires_when_the_clock_passes(
        tmp_path):
    spec = Windows.keyed_tumbling_window(lambda v: v["user"], 1_000, lambda: 0,
                                         lambda view, n: n + 1)
    op, source, sink, _, _, clock = make(tmp_path, spec)
    for now, ts in ((100, 99_999), (900, -1)):   # event times do not matter
        clock.now = now
        op.on_message({"user": "ann"}, ts)
    source.set_watermark(50_000)                 # event time closes nothing here
    assert sink.items == []
    clock.now = 999
    op.on_timer()
    assert sink.items == []
    clock.now = 1_000
    op.on_timer()
    assert panes(sink) == [("ann", 0, 2, ON_TIME, 0)]
    assert sink.items[0][1] == 999               # a pane's event time is end - 1
    clock.now = 1_200
    op.on_message({"user": "ann"}, 5)
    source.set_watermark(WATERMARK_MAX)          # the end of input fires the rest
    assert panes(sink)[1:] == [("ann", 1_000, 1, ON_TIME, 0)]


def test_an_unkeyed_samza_window_without_an_aggregator_carries_the_messages(tmp_path):
    op, source, sink, _, _, clock = make(tmp_path, Windows.tumbling_window(500))
    for now, m in ((10, "a"), (20, "b"), (600, "c")):
        clock.now = now
        op.on_message(m, -1)
    clock.now = 1_000
    op.on_timer()
    assert [(p.key, p.start, p.value) for p, _ in sink.items] == [(None, 0, ["a", "b"]),
                                                                  (None, 500, ["c"])]


def test_a_processing_time_session_closes_after_the_gap_without_messages(tmp_path):
    spec = Windows.keyed_session_window(lambda v: v, 100, lambda: 0, lambda m, n: n + 1)
    op, _, sink, _, _, clock = make(tmp_path, spec, name="s")
    for now in (0, 80, 170):                     # each within 100 ms of the previous
        clock.now = now
        op.on_message("u", -1)
    clock.now = 269
    op.on_timer()
    assert sink.items == []
    clock.now = 270
    op.on_timer()
    assert [(p.start, p.end, p.value) for p, _ in sink.items] == [(0, 270, 3)]
    clock.now = 400
    op.on_message("u", -1)                       # a new session
    clock.now = 500
    op.on_timer()
    assert [(p.start, p.value) for p, _ in sink.items][1:] == [(400, 1)]


def test_processing_time_windows_refuse_allowed_lateness():
    with pytest.raises(ValueError, match="no late elements"):
        Windows.tumbling(1_000, time=TimeDomain.PROCESSING_TIME, allowed_lateness_ms=10)


def test_samza_factories_need_both_initial_value_and_aggregator_or_neither():
    with pytest.raises(ValueError, match="both initial_value and aggregator"):
        Windows.keyed_tumbling_window(lambda v: v, 1_000, lambda: 0)


# -- early triggers, accumulation mode ---------------------------------------------------------

def test_a_repeated_count_early_trigger_emits_indexed_early_panes_then_the_on_time_pane(tmp_path):
    spec = Windows.tumbling(100).set_early_trigger(Triggers.repeat(Triggers.count(2)))
    op, source, sink, *_ = make(tmp_path, spec)
    for ts in (1, 2, 3, 4, 5):
        op.on_message(KV("a", 1), ts)
    source.set_watermark(99)
    assert panes(sink) == [("a", 0, 2, EARLY, 0), ("a", 0, 4, EARLY, 1), ("a", 0, 5, ON_TIME, 2)]
    assert all(p.mode is AccumulationMode.ACCUMULATING for p, _ in sink.items)


def test_discarding_panes_carry_only_what_arrived_since_the_previous_pane(tmp_path):
    spec = (Windows.tumbling(100).set_early_trigger(Triggers.repeat(Triggers.count(2)))
            .set_accumulation_mode(AccumulationMode.DISCARDING))
    op, source, sink, *_ = make(tmp_path, spec)
    for ts in (1, 2, 3, 4, 5):
        op.on_message(KV("a", 1), ts)
    source.set_watermark(99)
    assert [(p.value, p.timing, p.index) for p, _ in sink.items] == [
        (2, EARLY, 0), (2, EARLY, 1), (1, ON_TIME, 2)]
    assert sum(p.value for p, _ in sink.items) == 5
    assert sink.items[0][0].to_dict()["mode"] == "discarding"


def test_a_time_since_first_message_early_trigger_fires_on_the_window_timer(tmp_path):
    spec = Windows.tumbling(1_000).set_early_trigger(Triggers.time_since_first_message(50))
    op, source, sink, _, _, clock = make(tmp_path, spec)
    clock.now = 10_000
    op.on_message(KV("a", 1), 5)
    clock.now = 10_030
    op.on_message(KV("a", 1), 6)
    op.on_timer()
    assert sink.items == []
    clock.now = 10_050
    op.on_timer()
    assert panes(sink) == [("a", 0, 2, EARLY, 0)]
    clock.now = 20_000
    op.on_message(KV("a", 1), 7)                 # not repeated: it fired once
    op.on_timer()
    source.set_watermark(999)
    assert panes(sink)[1:] == [("a", 0, 3, ON_TIME, 1)]


def test_a_time_trigger_survives_a_restart_with_its_window(tmp_path):
    stores = {}
    spec = Windows.tumbling(1_000).set_early_trigger(Triggers.time_since_last_message(100))
    op, *_, clock = make(tmp_path, spec, stores=stores)
    clock.now = 500
    op.on_message(KV("a", 1), 5)
    # a new operator on the same store (the task restarted): the timer comes back from it
    again, _, sink, _, _, clock2 = make(tmp_path, spec, stores=stores, clock=Clock(599))
    again.on_timer()
    assert sink.items == []
    clock2.now = 600
    again.on_timer()
    assert panes(sink) == [("a", 0, 1, EARLY, 0)]


# -- late elements -----------------------------------------------------------------------------

def test_a_late_count_trigger_batches_late_refinements_and_flushes_them_at_the_purge(tmp_path):
    spec = Windows.tumbling(100, allowed_lateness_ms=500).set_late_trigger(
        Triggers.repeat(Triggers.count(2)))
    op, source, sink, *_ = make(tmp_path, spec)
    op.on_message(KV("a", 1), 10)
    source.set_watermark(120)
    for ts in (20, 30, 40):                       # late, within the lateness
        op.on_message(KV("a", 1), ts)
    assert panes(sink) == [("a", 0, 1, ON_TIME, 0), ("a", 0, 3, LATE, 1)]
    source.set_watermark(599)                     # 99 + 500: purged, the pending one flushed
    assert panes(sink)[2:] == [("a", 0, 4, LATE, 2)]
    with op.store.all() as it:
        assert list(it) == []


def test_dropped_late_elements_go_to_the_side_output_are_counted_and_logged_rate_limited(
        tmp_path, caplog):
    op, source, sink, late_sink, ctx, _ = make(tmp_path, Windows.tumbling(100), late_output=True)
    source.set_watermark(1_000)
    with caplog.at_level(logging.WARNING, logger="weir.app"):
        for i, ts in enumerate((20, 30, 950)):
            op.on_message(KV("a", i), ts)
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 1                 # the first drop at once, the rest later
        assert "window 'w' dropped 1 late element (1 in all)" in warnings[0]
        assert "980 ms behind the watermark" in warnings[0]
        assert "task.watermark.max.out.of.orderness.ms" in warnings[0]
        source.set_finished(None)                 # the end logs what was not logged yet
    assert "dropped 2 late elements since the last warning (3 in all)" in caplog.records[-1].getMessage()
    assert [(v, ts) for v, ts in late_sink.items] == [(KV("a", 0), 20), (KV("a", 1), 30),
                                                      (KV("a", 2), 950)]
    assert ctx.counter("late-dropped-app-1-window-w").count == 3
    assert sink.items == []


def test_the_late_warning_can_be_turned_off_but_drops_are_still_counted(tmp_path, caplog):
    from weir.engine.app import late
    spec = Windows.tumbling(100)
    base = context(tmp_path, {})
    config = CONFIG.merged({late.APP_LATE_LOG_INTERVAL_MS.name: "-1"})
    ctx = OperatorContext("Partition 0", None, base.store, None, TaskMetrics("t"), None, config)
    s = OpSpec(OpCode.WINDOW, "w", window=spec)
    s.id = "app-1-window-w"
    op = WindowOperator(s, ctx)
    op.used = True
    op.open()
    op.input_wm = 1_000
    with caplog.at_level(logging.WARNING, logger="weir.app"):
        op.on_message(KV("a", 1), 5)
        op.handle_end(None)
    assert caplog.records == [] and ctx.counter("late-dropped-app-1-window-w").count == 1


# -- drains and panes --------------------------------------------------------------------------

def test_a_drain_emits_early_panes_and_keeps_the_windows_so_the_next_run_refines_them(tmp_path):
    stores = {}
    op, source, sink, _, ctx, _ = make(tmp_path, Windows.tumbling(100), stores=stores)
    for ts in (5, 50, 150):
        op.on_message(KV("a", 1), ts)
    source.set_watermark(99)                      # [0, 100) closes for real
    ctx.draining = True
    source.set_watermark(WATERMARK_MAX)           # the drain's end of time
    assert panes(sink) == [("a", 0, 2, ON_TIME, 0), ("a", 100, 1, EARLY, 0)]
    # the next run: the same store, the watermark continues where the data left it
    again, source2, sink2, *_ = make(tmp_path, Windows.tumbling(100), stores=stores)
    again.on_message(KV("a", 1), 160)
    source2.set_watermark(199)
    [(pane, _)] = sink2.items
    assert (pane.value, pane.timing, pane.index) == (2, ON_TIME, 1)   # refines the early pane


def test_a_pane_dict_carries_its_timing_index_and_mode(tmp_path):
    op, source, sink, *_ = make(tmp_path, Windows.tumbling(100, aggregate=count()))
    op.on_message(KV("a", 1), 5)
    source.set_watermark(WATERMARK_MAX)
    assert sink.items[0][0].to_dict() == {"key": "a", "start": 0, "end": 100, "value": 1,
                                          "late": False, "timing": "on_time", "index": 0,
                                          "mode": "accumulating"}


def test_window_entries_of_an_older_weir_are_read_and_fire(tmp_path):
    stores = {}
    op, *_ = make(tmp_path, Windows.tumbling(100, aggregate=collecting()), stores=stores)
    op.store.put((100, 0, "a"), [["x", "y"], False])      # [acc, fired] of the old format
    op.store.put((200, 100, "a"), [["z"], True])          # fired, kept for lateness
    again, source, sink, *_ = make(tmp_path, Windows.tumbling(100, aggregate=collecting()),
                                   stores=stores)
    source.set_watermark(WATERMARK_MAX)
    assert panes(sink) == [("a", 0, ["x", "y"], ON_TIME, 0)]


def test_a_session_merged_after_a_drain_pane_emits_a_pane_that_replaces_it(tmp_path):
    op, _, sink, _, ctx, _ = make(tmp_path, Windows.session(10, aggregate=count()), name="s")
    op.on_message(KV("u", 1), 20)
    ctx.draining = True
    op.handle_watermark(WATERMARK_MAX)           # the drain: [20, 30) early, kept
    ctx.draining = False
    assert [(p.start, p.end, p.timing, p.index) for p, _ in sink.items] == [(20, 30, EARLY, 0)]
    op.on_message(KV("u", 1), 15)                # the next run: before the session's start
    op.handle_watermark(100)
    [(merged, _)] = sink.items[1:]
    assert (merged.start, merged.end, merged.value, merged.timing, merged.index) == (
        15, 30, 2, ON_TIME, 1)                   # contains [20, 30), a higher index
