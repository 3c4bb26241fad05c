"""One task's control bookkeeping: reconciliation in order, what the task hears, task counts,
source watermarks with idle partitions, the checkpoint round trip, and drain."""

from __future__ import annotations

import pytest

from weir.engine.control import (BadTaskCountError, ControlMessageError, DrainMessage,
                                 EndOfStreamMessage, UnknownControlVersionError, WATERMARK_MAX,
                                 WatermarkMessage, WatermarkStatus, WatermarkStatusMessage,
                                 decode_control)
from weir.engine.control.drain import DrainMonitor, write_drain_request
from weir.engine.control.messages import ControlDecodeFailure
from weir.engine.control.settings import ControlSettings
from weir.engine.control.sources import SourceWatermarks
from weir.engine.control.task_control import TaskControl
from weir.engine.model import EnvelopeKind, IncomingMessageEnvelope, SystemStreamPartition

I0 = SystemStreamPartition("filelog", "by-user", 0)
I1 = SystemStreamPartition("filelog", "by-user", 1)
S0 = SystemStreamPartition("filelog", "views", 0)
S1 = SystemStreamPartition("filelog", "views", 1)
BY_USER, VIEWS = I0.system_stream, S0.system_stream


class Listener:
    """Records every control call a task gets."""

    def __init__(self):
        self.calls = []

    def process(self, envelope, collector, coordinator):
        pass

    def on_watermark(self, wm, collector, coordinator):
        self.calls.append(("task", wm))

    def on_stream_watermark(self, ss, wm, collector, coordinator):
        self.calls.append(("wm", ss.stream, wm))

    def on_stream_end(self, ss, collector, coordinator):
        self.calls.append(("end", ss.stream))

    def on_stream_drain(self, ss, run_id, collector, coordinator):
        self.calls.append(("drain", ss.stream, run_id))

    def on_drain(self, collector, coordinator):
        self.calls.append(("on_drain",))


class Clock:
    def __init__(self):
        self.now = 1_000

    def __call__(self):
        return self.now


def control_env(ssp, message, offset=0):
    return IncomingMessageEnvelope(ssp, offset, None, message, kind=EnvelopeKind.CONTROL)


def make(ssps=(I0, I1), intermediate=None, settings=None, monitor=None, clock=None):
    listener = Listener()
    inter = {s: 2 for s in ssps if s.stream == "by-user"} if intermediate is None else intermediate
    control = TaskControl("Partition 0", ssps, intermediate=inter, settings=settings,
                          monitor=monitor, task=listener, clock_ms=clock or Clock())
    return control, listener


# -- reconciliation ---------------------------------------------------------------------------

def test_partition_ends_when_every_upstream_task_sent_eos_and_the_stream_when_all_partitions():
    control, listener = make()
    assert control.on_envelope(control_env(I0, EndOfStreamMessage("a", 2)), None, None).ended == ()
    out = control.on_envelope(control_env(I0, EndOfStreamMessage("b", 2)), None, None)
    assert out.ended == (I0,) and out.released == (I0,)
    assert ("end", "by-user") not in listener.calls
    control.on_envelope(control_env(I1, EndOfStreamMessage("a", 2)), None, None)
    control.on_envelope(control_env(I1, EndOfStreamMessage("b", 2)), None, None)
    assert listener.calls[-3:] == [("wm", "by-user", WATERMARK_MAX), ("end", "by-user"),
                                   ("task", WATERMARK_MAX)]


def test_stream_watermark_is_the_minimum_over_partitions_and_announced_only_when_it_advances():
    control, listener = make()
    for ssp, ts in ((I0, 4), (I1, 2)):
        control.on_envelope(control_env(ssp, WatermarkMessage(ts, "a", 2)), None, None)
        control.on_envelope(control_env(ssp, WatermarkMessage(ts + 1, "b", 2)), None, None)
    assert listener.calls == [("wm", "by-user", 2), ("task", 2)]
    control.on_envelope(control_env(I1, WatermarkMessage(2, "a", 2)), None, None)   # no advance
    assert len(listener.calls) == 2


def test_worked_example_sink_watermark_is_the_minimum_of_the_upstream_tasks():
    # WatermarkIntegrationTest: upstream task P0 ends with watermark 4, P1 with 3; the sink of
    # each partition of p1 sees min(4, 3) = 3.
    for ssp in (I0, I1):
        control, listener = make(ssps=(ssp,), intermediate={ssp: 2})
        for ts, task in ((1, "Partition 0"), (2, "Partition 1"), (4, "Partition 0"),
                         (3, "Partition 1")):
            control.on_envelope(control_env(ssp, WatermarkMessage(ts, task, 2)), None, None)
        assert control.watermark(BY_USER) == 3


def test_an_upstream_task_that_ended_no_longer_holds_the_stream_back():
    control, listener = make(ssps=(I0,), intermediate={I0: 2})
    control.on_envelope(control_env(I0, WatermarkMessage(100, "a", 2)), None, None)
    control.on_envelope(control_env(I0, WatermarkMessage(900, "b", 2)), None, None)
    control.on_envelope(control_env(I0, EndOfStreamMessage("a", 2)), None, None)
    assert control.watermark(BY_USER) == 900


def test_a_task_count_that_disagrees_with_the_plan_is_a_typed_error_naming_the_offset():
    control, _ = make()
    with pytest.raises(BadTaskCountError) as err:
        control.on_envelope(control_env(I0, WatermarkMessage(1, "a", 3), offset=12), None, None)
    assert "filelog.by-user partition 0 offset 12" in str(err.value)
    assert (err.value.expected, err.value.got) == (2, 3)


def test_more_distinct_senders_than_upstream_tasks_is_a_bad_task_count():
    control, _ = make()
    control.on_envelope(control_env(I0, WatermarkMessage(1, "a", 2)), None, None)
    control.on_envelope(control_env(I0, WatermarkMessage(1, "b", 2)), None, None)
    with pytest.raises(BadTaskCountError, match="3 distinct upstream tasks"):
        control.on_envelope(control_env(I0, WatermarkMessage(1, "c", 2), offset=7), None, None)


def test_without_a_configured_count_the_first_task_count_is_learned():
    control, _ = make(intermediate={I0: None, I1: None})
    control.on_envelope(control_env(I0, EndOfStreamMessage("a", 1)), None, None)
    assert control.eos.expected(I0) == 1 and I0 in control.ended_ssps()


def test_a_named_message_without_any_known_count_is_refused():
    control, _ = make(intermediate={I0: None, I1: None})
    with pytest.raises(BadTaskCountError, match="intermediate.upstream.tasks"):
        control.on_envelope(control_env(I0, WatermarkMessage(1, "a")), None, None)


def test_an_undecodable_control_record_raises_its_typed_error_in_order():
    control, _ = make()
    try:
        decode_control(b'\x01{"timestamp":1,"taskName":"a","version":7}', ssp=I0, offset=3)
    except UnknownControlVersionError as exc:
        error = exc
    with pytest.raises(UnknownControlVersionError, match="offset 3"):
        control.on_envelope(control_env(I0, ControlDecodeFailure(error)), None, None)


def test_a_control_message_on_a_stream_not_marked_intermediate_is_refused():
    control, _ = make(ssps=(S0,), intermediate={})
    with pytest.raises(ControlMessageError, match="samza.intermediate"):
        control.on_envelope(control_env(S0, EndOfStreamMessage("a", 1)), None, None)


# -- sources ----------------------------------------------------------------------------------

def test_source_watermark_is_largest_event_time_minus_bound_minus_one_at_each_tick():
    clock = Clock()
    control, listener = make(ssps=(S0,), intermediate={}, clock=clock,
                             settings=ControlSettings(out_of_orderness_ms=10))
    control.clock(S0).observe(500)
    control.clock(S0).observe(480)
    control.tick(None, None)
    assert listener.calls == [("wm", "views", 489), ("task", 489)]


def test_a_source_end_of_stream_ends_the_partition_and_lets_event_time_run_out():
    control, listener = make(ssps=(S0,), intermediate={})
    out = control.on_envelope(IncomingMessageEnvelope.end_of_stream(S0, 9), None, None)
    assert out.ended == (S0,)
    assert listener.calls == [("wm", "views", WATERMARK_MAX), ("end", "views"),
                              ("task", WATERMARK_MAX)]


IDLE, ACTIVE = WatermarkStatus.IDLE, WatermarkStatus.ACTIVE


def test_a_partition_whose_upstream_tasks_all_declared_idle_is_left_out_of_the_stream():
    control, listener = make()
    for ssp, ts in ((I0, 40), (I1, 10)):
        control.on_envelope(control_env(ssp, WatermarkMessage(ts, "a", 2)), None, None)
        control.on_envelope(control_env(ssp, WatermarkMessage(ts, "b", 2)), None, None)
    assert control.watermark(BY_USER) == 10 and not control.stream_idle(BY_USER)
    control.on_envelope(control_env(I1, WatermarkStatusMessage(IDLE, "a", 2)), None, None)
    assert control.watermark(BY_USER) == 10                  # b still active on I1
    control.on_envelope(control_env(I1, WatermarkStatusMessage(IDLE, "b", 2)), None, None)
    assert control.watermark(BY_USER) == 40 and not control.stream_idle(BY_USER)
    control.on_envelope(control_env(I0, WatermarkStatusMessage(IDLE, "a", 2)), None, None)
    control.on_envelope(control_env(I0, WatermarkStatusMessage(IDLE, "b", 2)), None, None)
    assert control.stream_idle(BY_USER) and control.watermark(BY_USER) == 40
    control.on_envelope(control_env(I1, WatermarkStatusMessage(ACTIVE, "a", 2)), None, None)
    assert not control.stream_idle(BY_USER)


def test_a_quiet_upstream_task_is_never_left_out_by_the_receiver():
    clock = Clock()
    control, _ = make(ssps=(I0,), intermediate={I0: 2},
                      settings=ControlSettings(idle_timeout_ms=100), clock=clock)
    control.on_envelope(control_env(I0, WatermarkMessage(10, "slow", 2)), None, None)
    control.on_envelope(control_env(I0, WatermarkMessage(20, "fast", 2)), None, None)
    for step in range(1, 20):
        clock.now += 1_000
        control.on_envelope(control_env(I0, WatermarkMessage(20 + step, "fast", 2)), None, None)
        control.tick(None, None)
    assert control.watermark(BY_USER) == 10


def test_sources_are_idle_after_the_timeout_and_the_declared_status_survives_the_checkpoint():
    clock = Clock()
    control, _ = make(ssps=(S0, S1), intermediate={},
                      settings=ControlSettings(idle_timeout_ms=100), clock=clock)
    control.clock(S0).observe(50)
    control.tick(None, None)
    assert not control.stream_idle(VIEWS)
    clock.now += 150
    control.tick(None, None)
    assert control.stream_idle(VIEWS)
    control.set_declared_idle(BY_USER, True)
    assert control.checkpoint()["idleOutputs"] == ["filelog.by-user"]
    again, _ = make(ssps=(S0, S1), intermediate={}, settings=ControlSettings(idle_timeout_ms=100))
    again.restore(control.checkpoint())
    assert again.declared_idle(BY_USER)
    control.set_declared_idle(BY_USER, False)
    assert control.checkpoint()["idleOutputs"] == []


def test_without_an_idle_timeout_a_silent_source_is_never_idle():
    clock = Clock()
    control, _ = make(ssps=(S0,), intermediate={}, clock=clock)
    clock.now += 10_000_000
    control.tick(None, None)
    assert not control.stream_idle(VIEWS)


def test_idle_upstream_tasks_survive_the_checkpoint():
    control, _ = make(ssps=(I0,), intermediate={I0: 2})
    control.on_envelope(control_env(I0, WatermarkMessage(10, "a", 2)), None, None)
    control.on_envelope(control_env(I0, WatermarkStatusMessage(IDLE, "b", 2)), None, None)
    assert control.watermark(BY_USER) == 10
    again, _ = make(ssps=(I0,), intermediate={I0: 2})
    again.restore(control.checkpoint())
    again.start(None, None)
    again.on_envelope(control_env(I0, WatermarkMessage(30, "a", 2)), None, None)
    assert again.watermark(BY_USER) == 30


def test_an_idle_source_partition_is_left_out_after_the_idle_timeout():
    src = SourceWatermarks([S0, S1], idle_timeout_ms=100, now_ms=0)
    src.clock(S0).observe(50)
    src.clock(S1).observe(10)
    assert src.stream_watermark(VIEWS, now_ms=10) == 9
    src.clock(S0).observe(400)
    assert src.stream_watermark(VIEWS, now_ms=60) == 9      # S1 quiet 50 ms: still counts
    src.clock(S0).observe(500)
    assert src.stream_watermark(VIEWS, now_ms=120) == 499   # S1 quiet since 10: left out
    assert src.idle(S1, now_ms=120)


def test_a_partition_that_never_delivered_counts_from_when_the_task_started():
    src = SourceWatermarks([S0, S1], idle_timeout_ms=100, now_ms=0)
    src.clock(S0).observe(50)
    assert src.stream_watermark(VIEWS, now_ms=50) == -1
    src.clock(S0).observe(60)
    assert src.stream_watermark(VIEWS, now_ms=100) == 59


def test_without_idle_timeout_a_silent_partition_holds_event_time():
    src = SourceWatermarks([S0, S1], now_ms=0)
    src.clock(S0).observe(10_000)
    assert src.stream_watermark(VIEWS, now_ms=1_000_000) == -1


def test_when_every_partition_is_idle_the_stream_watermark_stays():
    src = SourceWatermarks([S0], idle_timeout_ms=100, now_ms=0)
    src.clock(S0).observe(70)
    assert src.stream_watermark(VIEWS, now_ms=10) == 69
    assert src.stream_watermark(VIEWS, now_ms=500) == 69


def test_low_level_watermark_listeners_observe_envelope_timestamps():
    control, listener = make(ssps=(S0,), intermediate={})
    listener_only = type("L", (), {"process": lambda *a: None,
                                   "on_watermark": lambda s, wm, c, co: listener.calls.append(wm)})()
    control.bind(listener_only)
    assert control.observes_envelopes
    observe = control.observer()
    observe(IncomingMessageEnvelope(S0, 0, None, b"x", timestamp=41))
    observe(IncomingMessageEnvelope(S0, 1, None, b"x", timestamp=-1))   # no event time: skipped
    control.tick(None, None)
    assert listener.calls == [40]


# -- checkpoint ---------------------------------------------------------------------------------

def test_restored_bookkeeping_ends_and_announces_before_the_first_message():
    control, _ = make()
    control.on_envelope(control_env(I0, WatermarkMessage(7, "a", 2)), None, None)
    control.on_envelope(control_env(I0, WatermarkMessage(8, "b", 2)), None, None)
    control.on_envelope(control_env(I1, EndOfStreamMessage("a", 2)), None, None)
    control.on_envelope(control_env(I1, EndOfStreamMessage("b", 2)), None, None)
    saved = control.checkpoint()
    again, listener = make()
    again.restore(saved)
    started = again.start(None, None)
    assert started.ended == (I1,) and again.ended_ssps() == {I1}
    assert listener.calls[0] == ("wm", "by-user", 7)
    again.on_envelope(control_env(I0, WatermarkMessage(3, "a", 2)), None, None)
    assert again.watermark(BY_USER) == 7                    # never backwards


def test_a_crash_after_some_upstream_eos_still_ends_correctly_after_restore():
    control, _ = make(ssps=(I0,), intermediate={I0: 3})
    control.on_envelope(control_env(I0, EndOfStreamMessage("a", 3)), None, None)
    control.on_envelope(control_env(I0, EndOfStreamMessage("b", 3)), None, None)
    again, _ = make(ssps=(I0,), intermediate={I0: 3})
    again.restore(control.checkpoint())
    again.start(None, None)
    assert again.on_envelope(control_env(I0, EndOfStreamMessage("c", 3)), None, None).ended == (I0,)


def test_source_event_time_survives_the_checkpoint():
    control, _ = make(ssps=(S0,), intermediate={})
    control.clock(S0).observe(900)
    control.tick(None, None)
    again, listener = make(ssps=(S0,), intermediate={})
    again.restore(control.checkpoint())
    again.start(None, None)
    assert listener.calls[0] == ("wm", "views", 899)


# -- drain ----------------------------------------------------------------------------------------

def test_a_drain_request_drains_the_sources_and_transiently_runs_event_time_out(tmp_path):
    monitor = DrainMonitor(tmp_path / "drain.json", poll_ms=0)
    clock = Clock()
    control, listener = make(ssps=(S0, I0), intermediate={I0: 1}, monitor=monitor, clock=clock)
    control.clock(S0).observe(50)
    control.tick(None, None)
    request = write_drain_request(tmp_path / "drain.json")
    clock.now += 200
    out = control.tick(None, None)                  # the next tick sees the request
    assert out.ended == (S0,) and out.released == (S0,)
    assert ("drain", "views", request.run_id) in listener.calls
    assert control.draining
    control.on_envelope(control_env(I0, DrainMessage(request.run_id, "a", 1)), None, None)
    assert ("drain", "by-user", request.run_id) in listener.calls
    control.finish_drain(None, None)
    assert listener.calls[-1] == ("on_drain",)
    saved = control.checkpoint()
    assert saved["completedDrain"] == request.run_id
    assert saved["sources"]["streams"]["filelog.views"] == 49   # no drain-made watermark kept


def test_a_completed_drain_is_not_drained_again_after_a_restart(tmp_path):
    monitor = DrainMonitor(tmp_path / "drain.json", poll_ms=0)
    request = write_drain_request(tmp_path / "drain.json")
    control, _ = make(ssps=(S0,), intermediate={}, monitor=monitor)
    control.start(None, None)
    control.finish_drain(None, None)
    again, _ = make(ssps=(S0,), intermediate={}, monitor=monitor)
    again.restore(control.checkpoint())
    assert again.start(None, None).ended == () and not again.draining
    assert request.run_id == control.completed_drain


def test_a_drain_message_of_another_drain_is_discarded(tmp_path):
    monitor = DrainMonitor(tmp_path / "drain.json", poll_ms=0)
    control, listener = make(ssps=(I0,), intermediate={I0: 1}, monitor=monitor)
    assert control.on_envelope(control_env(I0, DrainMessage("old-run", "a", 1)), None, None).ended == ()
    assert control.discarded == 1 and not control.draining


def test_a_drain_message_starts_draining_when_it_matches_the_current_request(tmp_path):
    monitor = DrainMonitor(tmp_path / "drain.json", poll_ms=60_000)
    control, _ = make(ssps=(I0, S0), intermediate={I0: 2}, monitor=monitor)
    control.start(None, None)                                # no request yet
    request = write_drain_request(tmp_path / "drain.json")   # the monitor would see it in 60 s
    out = control.on_envelope(control_env(I0, DrainMessage(request.run_id, "a", 2)), None, None)
    assert control.draining and S0 in control.ended_ssps()
    control.on_envelope(control_env(I0, EndOfStreamMessage("b", 2)), None, None)
    assert I0 in control.ended_ssps()                        # drained by a, ended by b
    assert out.ended == (S0,) and out.released == (S0,)      # the run loop stops reading S0


def test_a_crash_during_a_drain_continues_it_after_restart(tmp_path):
    monitor = DrainMonitor(tmp_path / "drain.json", poll_ms=0)
    request = write_drain_request(tmp_path / "drain.json")
    control, _ = make(ssps=(I0, S0), intermediate={I0: 2}, monitor=monitor)
    control.start(None, None)
    control.on_envelope(control_env(I0, DrainMessage(request.run_id, "a", 2)), None, None)
    again, _ = make(ssps=(I0, S0), intermediate={I0: 2}, monitor=monitor)
    again.restore(control.checkpoint())
    assert again.start(None, None).ended == (S0,)
    out = again.on_envelope(control_env(I0, DrainMessage(request.run_id, "b", 2)), None, None)
    assert out.ended == (I0,)
