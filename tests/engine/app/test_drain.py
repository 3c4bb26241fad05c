"""Drain: a running pipeline stops cleanly for a redeploy (SAMZA-REFERENCE 2.9, as Weir does it).

Sources stop where they are, everything already read goes through every stage, windows fire,
every task commits and the job ends with exit 0; the next run continues after what was
processed and does not drain again."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from tests.engine.app._apps import make_events
from tests.engine.app._pipeline import Pipeline
from weir.engine.cli.drain import drained_tasks
from weir.engine.container.runner import ExitCode, run_job
from weir.engine.container.status import StatusMode
from weir.engine.control.drain import write_drain_request
from weir.recovery.checkpoint import FileCheckpointManager
from weir.recovery.storage import ProgressMode

pytestmark = pytest.mark.timeout(120)


def run_in_thread(config):
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault(
        "result", run_job(config, status=StatusMode.OFF, progress=ProgressMode.QUIET)),
        daemon=True)
    thread.start()
    return thread, box


def processed_events(p: Pipeline, events, partitions: int):
    mgr = FileCheckpointManager(p.root / "checkpoints")
    out = []
    for part in range(partitions):
        cp = mgr.read_last(f"Partition {part}")
        upto = cp.input_offsets.get(("filelog", "events", part), -1)
        out.extend([e for i, e in enumerate(events) if i % partitions == part][: upto + 1])
    return out


def window_totals(outputs):
    """Sum of pane values per (key, start): after a drain, a window that was open fires its
    partial count, and the same window fires again with the rest after the redeploy."""
    got = Counter()
    for _, pane, _ in outputs:
        got[(pane["key"], pane["start"])] += pane["value"]
    return dict(got)


def test_drain_stops_the_sources_fires_every_window_and_ends_the_job(tmp_path):
    events = make_events(41, 4000, span_ms=5)
    p = Pipeline(tmp_path, "WindowedCounts", task__drain__poll__interval__ms=20,
                 job__intermediate__stream__partitions=2)
    p.create("events", 2, bounded=True)
    first, rest = events[:2000], events[2000:]
    p.produce("events", first, lambda i, e: i % 2, end=False)
    thread, box = run_in_thread(p.job_config())
    deadline = time.monotonic() + 30
    while not p.outputs() and time.monotonic() < deadline:   # it is running
        time.sleep(0.02)
    from weir.engine.control import request_drain
    request = request_drain(p.config)          # the API call behind `weir drain`
    assert request.run_id
    thread.join(60)
    assert box["result"].exit_code is ExitCode.OK, "\n".join(box["result"].summary_lines())
    done = processed_events(p, events, 2)
    assert 0 < len(done) <= len(first)
    drained, pending = drained_tasks(p.root / "checkpoints", request.run_id)
    assert len(drained) == 2 and not pending
    # Every window holding a processed event fired with exactly those events.
    from tests.engine.app._apps import batch_window_counts
    assert window_totals(p.outputs()) == batch_window_counts(done)

    # Redeploy: the rest of the input, then the end. No second drain; nothing lost or repeated.
    p.produce("events", rest, lambda i, e: (i + len(first)) % 2, end=True)
    result = run_job(p.job_config(), status=StatusMode.OFF, progress=ProgressMode.QUIET)
    assert result.exit_code is ExitCode.OK
    assert result.reason.startswith("ended (end-of-stream")
    assert window_totals(p.outputs()) == batch_window_counts(events)


def test_a_stage_job_drains_through_its_downstream_stage_job(tmp_path):
    events = make_events(42, 3000, span_ms=5)
    p = Pipeline(tmp_path, "WindowedCounts", task__drain__poll__interval__ms=20,
                 job__intermediate__stream__partitions=2)
    p.create("events", 2)
    p.produce("events", events, lambda i, e: i % 2, end=False)
    up_thread, up = run_in_thread(p.job_config(stage=0))
    down_thread, down = run_in_thread(p.job_config(stage=1))
    deadline = time.monotonic() + 30
    while not p.outputs() and time.monotonic() < deadline:
        time.sleep(0.02)
    write_drain_request(p.root / "checkpoints" / "drain-request.json")
    up_thread.join(60)
    down_thread.join(60)
    assert up["result"].exit_code is ExitCode.OK and down["result"].exit_code is ExitCode.OK
    done = []
    mgr = FileCheckpointManager(p.root / "checkpoints" / "stage-0")
    for part in range(2):
        upto = mgr.read_last(f"Partition {part}").input_offsets.get(("filelog", "events", part), -1)
        done.extend([e for i, e in enumerate(events) if i % 2 == part][: upto + 1])
    from tests.engine.app._apps import batch_window_counts
    assert window_totals(p.outputs()) == batch_window_counts(done)
