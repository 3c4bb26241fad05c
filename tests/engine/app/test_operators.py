"""Operators on their own, with real (memory-engine) stores: window firing by watermark,
allowed lateness, session merging, interval-join pruning, watermark and end propagation
(SAMZA-REFERENCE 2.7)."""

from __future__ import annotations


import pytest

from weir.engine.app import KV, Windows, count
from weir.engine.app.errors import MissingEventTimeError
from weir.engine.app.graph import OpCode, OpSpec
from weir.engine.app.join_operators import StreamJoinOperator
from weir.engine.app.operators import (ENDED, InputOperator, MapOperator, MergeOperator,
                                       OperatorContext)
from weir.engine.app.serdes import registry_config
from weir.engine.app.window_operator import WindowOperator
from weir.engine.control.messages import WATERMARK_MAX, WATERMARK_NOT_EXIST
from weir.engine.metrics import TaskMetrics
from weir.stores.builder import build_store
from weir.stores.config import Config
from weir.stores.spec import StoreSpec

CONFIG = Config(registry_config())


def context(tmp_path, stores: dict):
    def store(name):
        if name not in stores:
            ordered = name.endswith("-expiry") or "-window-" in name and not name.endswith("-sessions")
            key = "weir-time-key" if ordered else "weir-key"
            spec = StoreSpec.from_config(CONFIG.merged({f"stores.{name}.factory": "memory",
                                                        f"stores.{name}.key.serde": key,
                                                        f"stores.{name}.msg.serde": "msgpack"}), name)
            stores[name] = build_store(spec, tmp_path / name, changelog=None, config=CONFIG)
        return stores[name]
    return OperatorContext("Partition 0", None, store, None, TaskMetrics("t"), None, CONFIG)


class Sink:
    def __init__(self):
        self.items = []

    def __call__(self, value, ts):
        self.items.append((value, ts))


def wire(op, ctx):
    """An input operator feeding ``op``, which feeds a sink."""
    source = InputOperator(OpSpec(OpCode.INPUT, None), ctx)
    source.used = op.used = True
    source.connect(op, 0)
    op.open()
    sink = Sink()
    op.emit.append(sink)
    return source, sink


def window(tmp_path, spec, name="w"):
    s = OpSpec(OpCode.WINDOW, name, window=spec)
    s.id = f"app-1-window-{name}"
    ctx = context(tmp_path, {})
    op = WindowOperator(s, ctx)
    source, sink = wire(op, ctx)
    return op, source, sink, ctx


def test_a_tumbling_window_fires_once_the_watermark_reaches_its_end_minus_one(tmp_path):
    op, source, sink, _ = window(tmp_path, Windows.tumbling(100))
    for ts in (5, 50, 99, 130):
        op.on_message(KV("a", 1), ts)
    source.set_watermark(98)
    assert sink.items == []
    source.set_watermark(99)
    [(pane, ts)] = sink.items
    assert (pane.key, pane.start, pane.end, pane.value, pane.late, ts) == ("a", 0, 100, 3, False, 99)


def test_windows_fire_in_order_of_end_start_and_key(tmp_path):
    op, source, sink, _ = window(tmp_path, Windows.tumbling(10))
    for key, ts in (("b", 12), ("a", 15), ("c", 3), ("a", 4)):
        op.on_message(KV(key, 1), ts)
    source.set_watermark(WATERMARK_MAX)
    assert [(p.start, p.key) for p, _ in sink.items] == [(0, "a"), (0, "c"), (10, "a"), (10, "b")]


def test_an_element_too_late_for_its_window_is_dropped_and_counted(tmp_path):
    op, source, sink, ctx = window(tmp_path, Windows.tumbling(100))
    source.set_watermark(150)
    op.on_message(KV("a", 1), 20)
    source.set_watermark(WATERMARK_MAX)
    assert sink.items == []
    assert ctx.counter("late-dropped-app-1-window-w").count == 1


def test_allowed_lateness_refires_late_updates_and_purges_after_it(tmp_path):
    op, source, sink, ctx = window(tmp_path, Windows.tumbling(100, allowed_lateness_ms=50))
    op.on_message(KV("a", 1), 10)
    source.set_watermark(120)                      # fires [0, 100)
    op.on_message(KV("a", 1), 20)                  # late, within lateness: refinement
    assert [(p.value, p.late) for p, _ in sink.items] == [(1, False), (2, True)]
    source.set_watermark(149)                      # 99 + 50 = 149: purged now
    op.on_message(KV("a", 1), 30)                  # beyond the lateness: dropped
    assert len(sink.items) == 2 and ctx.counter("late-dropped-app-1-window-w").count == 1
    with op.store.all() as it:
        assert list(it) == []


def test_session_windows_keep_sessions_further_apart_than_the_gap_separate(tmp_path):
    op, source, sink, _ = window(tmp_path, Windows.session(10, aggregate=count()), "s")
    for ts in (0, 5, 30, 18):
        op.on_message(KV("u", 1), ts)
    source.set_watermark(WATERMARK_MAX)
    spans = [(p.start, p.end, p.value) for p, _ in sink.items]
    # 0 and 5 -> [0, 15); 18 -> [18, 28) overlaps neither; 30 -> [30, 40)
    assert spans == [(0, 15, 2), (18, 28, 1), (30, 40, 1)]


def test_session_windows_merge_overlapping_sessions_and_their_counts(tmp_path):
    op, source, sink, _ = window(tmp_path, Windows.session(10, aggregate=count()), "s2")
    for ts in (0, 20, 12):             # [0, 10), [20, 30), then [12, 22) joins the second
        op.on_message(KV("u", 1), ts)
    source.set_watermark(WATERMARK_MAX)
    assert [(p.start, p.end, p.value) for p, _ in sink.items] == [(0, 10, 1), (12, 30, 2)]


def test_a_window_element_without_an_event_time_is_a_clear_error(tmp_path):
    op, *_ = window(tmp_path, Windows.tumbling(10))
    with pytest.raises(MissingEventTimeError, match="timestamp"):
        op.on_message(KV("a", 1), -1)


def test_operator_watermark_is_the_minimum_of_used_upstreams_and_never_goes_back(tmp_path):
    ctx = context(tmp_path, {})
    a, b = (InputOperator(OpSpec(OpCode.INPUT, None), ctx) for _ in range(2))
    merge = MergeOperator(OpSpec(OpCode.MERGE, None), ctx)
    for u in (a, b):
        u.used = True
        u.connect(merge, 0)
    merge.used = True
    assert merge.input_wm == WATERMARK_NOT_EXIST          # operators start at -1
    a.set_watermark(10)
    assert merge.input_wm == WATERMARK_NOT_EXIST          # b has none yet
    b.set_watermark(7)
    assert merge.input_wm == 7
    a.set_watermark(5)                                    # lower: ignored
    assert merge.input_wm == 7 and merge.output_wm == 7


def test_an_upstream_this_task_does_not_use_never_holds_the_watermark_back(tmp_path):
    ctx = context(tmp_path, {})
    used, unused = (InputOperator(OpSpec(OpCode.INPUT, None), ctx) for _ in range(2))
    merge = MergeOperator(OpSpec(OpCode.MERGE, None), ctx)
    used.used, merge.used = True, True
    for u in (used, unused):
        u.connect(merge, 0)
    used.set_watermark(42)
    assert merge.input_wm == 42


def test_an_operator_ends_only_when_every_used_input_ended_and_drains_if_any_drained(tmp_path):
    ctx = context(tmp_path, {})
    a, b = (InputOperator(OpSpec(OpCode.INPUT, None), ctx) for _ in range(2))
    merge = MergeOperator(OpSpec(OpCode.MERGE, None), ctx)
    m = MapOperator(OpSpec(OpCode.MAP, None, fn=lambda x: x), ctx)
    for u in (a, b):
        u.used = True
        u.connect(merge, 0)
    merge.used = m.used = True
    merge.connect(m, 0)
    a.set_finished(None)
    assert merge.finished is None
    b.set_finished("run-7")
    assert merge.finished == "run-7" and m.finished == "run-7"
    c = InputOperator(OpSpec(OpCode.INPUT, None), ctx)
    c.used = True
    solo = MapOperator(OpSpec(OpCode.MAP, None, fn=lambda x: x), ctx)
    solo.used = True
    c.connect(solo, 0)
    c.set_finished(None)
    assert solo.finished == ENDED


def interval_join(tmp_path, op_id: str):
    """An open interval join (10 ms) of two inputs on ``v["k"]`` that pairs the elements' ``t``:
    ``(ctx, join, left input, right input, sink of its output)``."""
    s = OpSpec(OpCode.JOIN, "j", key=lambda v: v["k"], other_key=lambda v: v["k"],
               fn=lambda a, b: (a["t"], b["t"]), within_ms=10)
    s.id = op_id
    ctx = context(tmp_path, {})
    op = StreamJoinOperator(s, ctx)
    left, right = (InputOperator(OpSpec(OpCode.INPUT, None), ctx) for _ in range(2))
    left.used = right.used = op.used = True
    left.connect(op, 0)
    right.connect(op, 1)
    op.open()
    sink = Sink()
    op.emit.append(sink)
    return ctx, op, left, right, sink


def test_an_interval_join_prunes_elements_the_watermark_has_passed(tmp_path):
    ctx, op, left, right, sink = interval_join(tmp_path, "app-1-join-j")
    left.emit[0]({"k": 1, "t": 100}, 100)
    right.emit[0]({"k": 1, "t": 108}, 108)
    right.emit[0]({"k": 1, "t": 120}, 120)       # 20 apart from 100: no pair
    assert sink.items == [((100, 108), 108)]
    left.set_watermark(200)
    right.set_watermark(200)
    with op.store.all() as it:
        assert list(it) == []                    # everything older than 200 - 10 is gone
    left.emit[0]({"k": 1, "t": 150}, 150)        # behind the watermark: dropped
    assert ctx.counter("late-dropped-app-1-join-j").count == 1


def test_an_element_between_two_sessions_merges_them_and_their_accumulators(tmp_path):
    op, source, sink, _ = window(tmp_path, Windows.session(10, aggregate=count()), "s3")
    for ts in (0, 15, 8):              # [0, 10) and [15, 25); [8, 18) overlaps both
        op.on_message(KV("u", 1), ts)
    source.set_watermark(WATERMARK_MAX)
    assert [(p.start, p.end, p.value) for p, _ in sink.items] == [(0, 25, 3)]
    with op.sessions.all() as it:
        assert list(it) == []          # the index forgets purged sessions


def test_an_interval_join_keeps_its_elements_through_a_drain(tmp_path):
    ctx, op, left, right, sink = interval_join(tmp_path, "app-1-join-jd")
    left.emit[0]({"k": 1, "t": 100}, 100)
    ctx.draining = True                          # the drain's end of time is not the data's
    left.set_watermark(WATERMARK_MAX)
    right.set_watermark(WATERMARK_MAX)
    with op.store.all() as it:
        assert len(list(it)) == 1                # kept: its partner may come after the restart


def test_partition_by_without_the_tasks_control_bookkeeping_is_refused_naming_it(tmp_path):
    from weir.engine.app.operators import PartitionByOperator
    from weir.engine.model import SystemStream

    spec = OpSpec(OpCode.PARTITION_BY, "by-user", stream=SystemStream("filelog", "app-by-user"),
                  key_fn=lambda m: m, value_fn=lambda m: m)
    with pytest.raises(TypeError, match="partition_by 'by-user'.*control"):
        PartitionByOperator(spec, context(tmp_path, {}))
