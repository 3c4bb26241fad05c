"""Drain: a running pipeline stops cleanly for a redeploy (SAMZA-REFERENCE 2.9, as Weir does it).

Sources stop where they are, everything already read goes through every stage, windows fire,
every task commits and the job ends with exit 0; the next run continues after what was
processed and does not drain again."""

from __future__ import annotations

import threading
import time
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
    """The value of the latest pane (highest index) per (key, start): after a drain, a window
    that was open emits its partial count as an early pane and keeps its state; after the
    redeploy it closes with an on-time pane of the next index that carries the whole count
    (accumulating), so a consumer keeping the latest pane per window is right."""
    latest = {}
    for _, pane, _ in outputs:
        k = (pane["key"], pane["start"])
        if k not in latest or pane["index"] > latest[k]["index"]:
            latest[k] = pane
    return {k: pane["value"] for k, pane in latest.items()}


def pane_histories(outputs):
    """(key, start) -> [(timing, index), ...] in the order written."""
    out = {}
    for _, pane, _ in outputs:
        out.setdefault((pane["key"], pane["start"]), []).append((pane["timing"], pane["index"]))
    return out


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
    drained_panes = pane_histories(p.outputs())
    # a window the drain closed before its time says so: an early pane, to be refined
    assert ("early", 0) in {h[0] for h in drained_panes.values()}

    # Redeploy: the rest of the input, then the end. No second drain; nothing lost or repeated.
    p.produce("events", rest, lambda i, e: (i + len(first)) % 2, end=True)
    result = run_job(p.job_config(), status=StatusMode.OFF, progress=ProgressMode.QUIET)
    assert result.exit_code is ExitCode.OK
    assert result.reason.startswith("ended (end-of-stream")
    assert window_totals(p.outputs()) == batch_window_counts(events)
    for window, history in pane_histories(p.outputs()).items():
        # every window ends with one on-time pane; before it at most the drain's early pane
        assert history in ([("on_time", 0)], [("early", 0), ("on_time", 1)]), (window, history)
        assert (history[0][0] == "early") == (drained_panes.get(window, [("on_time", 0)])[0][0]
                                              == "early")


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
