"""Event time across shuffles with skewed, idle and early-ending inputs: windows fire while the
job runs, not only at the end, and the counts stay exact."""

from __future__ import annotations

import threading
import time

import pytest

from tests.engine.app._apps import batch_window_counts, make_events
from tests.engine.app._pipeline import Pipeline
from weir.engine.container.runner import run_job
from weir.engine.container.status import StatusMode
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
