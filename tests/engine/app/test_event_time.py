"""Event time across shuffles with skewed, idle and early-ending inputs: windows fire while the
job runs, not only at the end, and the counts stay exact."""

from __future__ import annotations

import threading
import time

import pytest

from tests.engine.app._apps import batch_three_stage, batch_window_counts, make_events
from tests.engine.app._pipeline import Pipeline, read_stream
from weir.engine.control import WatermarkStatus, decode_control
from weir.engine.container.runner import run_job
from weir.engine.container.status import StatusMode
from weir.engine.model import SystemStream
from weir.recovery.storage import ProgressMode

pytestmark = pytest.mark.timeout(120)


class Running:
    """A job running in a thread; ``stop`` ends it and returns its result."""

    def __init__(self, p: Pipeline, config):
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(config,), daemon=True)
        self.thread.start()

    def _run(self, config):
        self.result = run_job(config, status=StatusMode.OFF, progress=ProgressMode.QUIET)

    def wait(self, timeout=60):
        self.thread.join(timeout)
        assert self.result is not None, "the job did not end"
        assert self.result.exit_code == 0, "\n".join(self.result.summary_lines())


def wait_for(condition, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def latest(outputs):
    return {(pane["key"], pane["start"]): pane["value"] for _, pane, _ in outputs}


def test_skewed_partitions_still_count_exactly(tmp_path):
    # partition 0: 900 events over 0..9 s; partition 1: 90 events over the same span
    dense = make_events(21, 900, span_ms=10, users=4)
    sparse = [dict(e, i=1000 + i) for i, e in enumerate(make_events(22, 90, span_ms=100, users=4))]
    p = Pipeline(tmp_path, "WindowedCounts")
    p.create("events", 2)
    p.produce("events", [*dense, *sparse], lambda i, e: 0 if i < len(dense) else 1)
    p.run()
    assert latest(p.outputs()) == batch_window_counts([*dense, *sparse])


def test_an_idle_partition_does_not_stall_windows_after_the_idle_timeout(tmp_path):
    events = make_events(23, 300, span_ms=20)          # event time 0 .. 6 s, partition 0 only
    p = Pipeline(tmp_path, "WindowedCounts", task__watermark__idle__timeout__ms=200)
    p.create("events", 2)                              # partition 1 stays empty and open
    p.produce("events", events, lambda i, e: 0, end=False)
    job = Running(p, p.job_config())
    # Windows up to the watermark fire while partition 1 is still silent and open.
    wait_for(lambda: any(pane["end"] <= 5000 for _, pane, _ in p.outputs()),
             "windows closed by partition 0 alone")
    before_end = latest(p.outputs())
    p.end("events")
    job.wait()
    expected = batch_window_counts(events)
    assert all(expected[k] == v for k, v in before_end.items())
    assert latest(p.outputs()) == expected
    # The task of the silent partition said so itself, in-band, on every partition of the
    # shuffle: the next stage left it out because it declared idle, not because it was quiet.
    shuffle = SystemStream("filelog", "t-1-partition_by-by-user")
    statuses = [decode_control(v) for _, v, _, _ in read_stream(p.registry, shuffle)
                if v is not None and v[:1] == b"\x04"]
    assert ("Partition 1", WatermarkStatus.IDLE) in {(m.task_name, m.status) for m in statuses}


def test_a_slow_upstream_task_loses_nothing_however_long_it_pauses(tmp_path):
    # Two containers: the upstream task of partition 1 stalls for 1.5 s (five idle timeouts)
    # mid-input while the other runs to its end. It is busy, not idle, so the next stage keeps
    # waiting for it instead of leaving it out and dropping what it sends afterwards as late.
    fast = make_events(28, 300, span_ms=20)                                  # 0 .. 6 s
    slow = [dict(e, i=1000 + e["i"]) for e in make_events(29, 300, span_ms=20)]
    slow[100]["pause"] = 1500
    p = Pipeline(tmp_path, "SlowUpstreamCounts", task__watermark__idle__timeout__ms=300,
                 job__container__count=2)
    p.create("events", 2)
    p.produce("events", [*fast, *slow], lambda i, e: 0 if i < len(fast) else 1)
    p.run()
    assert latest(p.outputs()) == batch_window_counts([*fast, *slow])


def test_an_input_that_ended_early_does_not_hold_event_time_back(tmp_path):
    early = make_events(24, 50, span_ms=20)                       # 0 .. 1 s, then ends
    late = [dict(e, i=100 + e["i"]) for e in make_events(25, 300, span_ms=20)]   # 0 .. 6 s
    p = Pipeline(tmp_path, "MergedCounts")
    p.create("a", 1)
    p.create("b", 1)
    p.produce("a", early, lambda i, e: 0, end=True)
    p.produce("b", late, lambda i, e: 0, end=False)
    job = Running(p, p.job_config())
    wait_for(lambda: any(pane["end"] >= 4000 for _, pane, _ in p.outputs()),
             "windows past the end of the early input")
    p.end("b")
    job.wait()
    assert latest(p.outputs()) == batch_window_counts([*early, *late])


def test_a_watermark_crosses_a_partition_by_of_a_later_stage_without_waiting_for_the_interval(
        tmp_path):
    # The watermark interval is an hour, so no timer tick comes while the test runs: stage 2
    # hears each advance only because stage 1's partition_by sends it as soon as the loop has
    # nothing else to do (before: it waited for the hour).
    first = make_events(26, 100, span_ms=20)                                  # 0 .. 2 s
    second = [dict(e, i=100 + e["i"], ts=2000 + e["ts"]) for e in make_events(27, 100, span_ms=20)]
    p = Pipeline(tmp_path, "ThreeStage", task__watermark__interval__ms=3_600_000)
    p.create("events", 1)
    p.produce("events", first, lambda i, e: 0, end=False)
    job = Running(p, p.job_config())
    starts = lambda: {pane["start"] for _, pane, _ in p.outputs()}  # noqa: E731
    wait_for(lambda: 0 in starts(), "the stage 2 pane of the first second")
    p.produce("events", second, lambda i, e: 0, end=False)
    wait_for(lambda: 2000 in starts(), "the stage 2 pane of the third second", timeout=60)
    p.end("events")
    job.wait()
    got = {pane["start"]: pane["value"] for _, pane, _ in p.outputs()}
    assert got == batch_three_stage([*first, *second])
