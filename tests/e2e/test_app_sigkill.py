"""SIGKILL a running three-stage application at random points, restart it, let it finish: the
reconciliation bookkeeping, the window state and the outputs are exact.

The application (tests/engine/app/_apps.py:DistinctThreeStage) repartitions by user, keeps the
distinct events per user and window in RocksDB, repartitions the panes by window and keeps
the distinct users per window. A real `weir run` process is killed with SIGKILL several
times: while the source is being read, and while stages reconcile control messages (after
some but not all upstream end-of-stream messages reached an intermediate partition). Then it
runs to the end by itself.

The test runs the application at-least-once (applications default to exactly-once on the file
log; tests/e2e/test_pageviews_sigkill.py covers that): a task killed after sending records but
before its checkpoint sends them again after the restart.
The aggregates are idempotent (distinct sets), so state fed twice by the same record stays
exact; a plain count after a shuffle would count such a record twice (docs/CONTROL.md).
The test checks that every window of the batch computation was emitted, that **every**
emitted pane (duplicates included) carries exactly the batch value, that each task's
checkpoint records every intermediate partition as ended by all its upstream tasks, and that
the window stores are empty at the end (every window fired and was purged).
``WEIR_LONG_TESTS=1`` kills more often.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest

from tests.engine.app._apps import batch_three_stage, make_events
from tests._processes import committed_offsets, kill, start_weir, task_stores
from tests.engine.app._pipeline import Pipeline, read_stream
from weir.engine.model import SystemStream
from weir.recovery.checkpoint import FileCheckpointManager

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
LONG = bool(os.environ.get("WEIR_LONG_TESTS"))
PARTITIONS = 3
EVENTS = 15_000
INTERMEDIATE = ("t-1-partition_by-by-user", "t-1-partition_by-by-second")


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "app.properties"
    path.write_text(
        "job.name=t\n"
        "app.class=tests.engine.app._apps:DistinctThreeStage\n"
        "test.window.ms=100\n"
        f"systems.filelog.root={tmp_path / 'log'}\n"
        "systems.filelog.default.stream.samza.offset.default=oldest\n"
        f"task.checkpoint.path={tmp_path / 'checkpoints'}\n"
        f"job.logged.store.base.dir={tmp_path / 'state'}\n"
        f"job.non-logged.store.base.dir={tmp_path / 'state'}\n"
        "task.commit.ms=100\n"
        "task.processing.guarantee=at_least_once\n"
        "task.watermark.interval.ms=20\n"
        "job.intermediate.stream.partitions=3\n")
    return path


def start(tmp_path: Path) -> subprocess.Popen:
    return start_weir(tmp_path, "app.properties")


def source_committed(tmp_path: Path) -> int:
    return sum(o + 1 for o in committed_offsets(tmp_path / "checkpoints", PARTITIONS,
                                                "events").values())


def eos_written(registry, stream: str) -> int:
    """How many end-of-stream control records the intermediate stream holds."""
    return sum(1 for _, v, _, _ in read_stream(registry, SystemStream("filelog", stream))
               if v is not None and v[:1] == b"\x02")


def kill_when(proc: subprocess.Popen, ready, delay: float) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not ready():
        time.sleep(0.003)
    time.sleep(delay)
    kill(proc)


def window_stores_are_empty(config, registry, tmp_path: Path) -> bool:
    from weir.engine.app.runner import prepare_application
    _, job_config = prepare_application(config, registry=registry)
    stores = task_stores(job_config, registry, tmp_path, PARTITIONS)
    return not any(contents for task in stores.values() for contents in task.values())


def test_sigkill_during_reading_and_reconciliation_leaves_state_and_outputs_exact(tmp_path):
    rng = random.Random(7)
    events = make_events(77, EVENTS, users=13, span_ms=1)
    write_config(tmp_path)
    p = Pipeline(tmp_path, "DistinctThreeStage", test__window__ms=100, job__intermediate__stream__partitions=3)
    p.create("events", PARTITIONS)
    p.produce("events", events, lambda i, e: i % PARTITIONS)

    points = [0.2, 0.5, 0.8, 0.95] if LONG else [0.35]
    for point in points:   # while the source is read
        kill_when(start(tmp_path), lambda: source_committed(tmp_path) >= point * EVENTS,
                  rng.uniform(0, 0.03))
    # while an intermediate partition has some but not all upstream end-of-stream messages
    for stream, needed in ((INTERMEDIATE[0], 1), (INTERMEDIATE[1], 1))[: 2 if LONG else 1]:
        kill_when(start(tmp_path), lambda s=stream, n=needed: eos_written(p.registry, s) >= n,
                  rng.uniform(0, 0.01))
    final = start(tmp_path)
    output, _ = final.communicate(timeout=120)
    assert final.returncode == 0, output

    expected = batch_three_stage(events, 100)
    panes = [pane for _, pane, _ in p.outputs()]
    assert {pane["start"] for pane in panes} == set(expected)
    wrong = [pane for pane in panes if pane["value"] != expected[pane["start"]]]
    assert not wrong, wrong[:5]
    mgr = FileCheckpointManager(tmp_path / "checkpoints")
    for task in range(PARTITIONS):
        control = mgr.read_last(f"Partition {task}").extras["control"]
        for stream in INTERMEDIATE:
            state = control["endOfStream"][f"filelog.{stream}#{task}"]
            assert state["ended"] and len(state["tasks"]) == PARTITIONS, (task, stream, state)
    assert window_stores_are_empty(p.config, p.registry, tmp_path)
    json.dumps(control)  # the bookkeeping is plain JSON
