"""SIGKILL tests: a counting job killed at arbitrary points never double-counts after restore.

Each scenario runs the job (tests/recovery/_counting_job.py) in child processes that are killed
with SIGKILL (by themselves at a chosen message, or by the parent at a random moment), then
restarts and stops the job once (a commit without processing: a crashed run's records after its
checkpoint would now count as committed unless restore reverted them), finishes the input in
this process from the last checkpoint on a "new machine" (local state deleted), and checks the final counts against the truth exactly,
and that the changelog describes exactly the store.
"""

from __future__ import annotations

import random
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.recovery import _counting_job as job
from tests.recovery.conftest import changelog_state

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 6000
COMMIT_EVERY = 500
_rng = random.Random(20240607)
# Increasing kill points: each killed run must get past the checkpoint the previous one left.
RANDOM_POINTS = [_rng.randrange(0, 2000), _rng.randrange(2000, 4000), _rng.randrange(4000, 6000)]


def _child(base: Path, engine: str, messages: int, *, phase: str = "none",
           at: int = -1) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.recovery._counting_job", "--base", str(base),
         "--engine", engine, "--messages", str(messages), "--commit-every", str(COMMIT_EVERY),
         "--kill-phase", phase, "--kill-at", str(at)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _killed_run(base: Path, engine: str, phase: str, at: int) -> None:
    proc = _child(base, engine, MESSAGES, phase=phase, at=at)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err


def _finish_and_check(base: Path, engine: str, messages: int) -> None:
    job.restart_and_stop(base, engine)
    shutil.rmtree(base / "state")  # the task moves to another machine: only the changelog
    job.run(base, engine, messages, COMMIT_EVERY)
    tsm, counts, log, checkpoint = job.open_counts(base, engine)
    try:
        assert checkpoint.input_offsets[job.INPUT] == messages - 1
        with counts.all() as it:
            final = {key: job.count_of(value) for key, value in it}
        assert final == job.truth(messages)
        logged = {k.decode(): job.count_of(orjson.loads(v)) for k, v in changelog_state(log).items()}
        assert logged == final
    finally:
        tsm.close()
        log.close()


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
@pytest.mark.parametrize("kills", [
    [("process", 1234)],
    [("after-flush", 2999)],
    [("process", RANDOM_POINTS[0]), ("after-flush", RANDOM_POINTS[1]),
     ("process", RANDOM_POINTS[2])],
], ids=["mid-interval", "flushed-not-checkpointed", "three-crashes"])
def test_counts_are_exact_after_sigkill_and_restore(tmp_path, engine, kills):
    for phase, at in kills:
        _killed_run(tmp_path, engine, phase, at)
    _finish_and_check(tmp_path, engine, MESSAGES)


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_counts_are_exact_after_a_sigkill_from_outside_at_a_random_moment(tmp_path, engine):
    messages = 10_000  # 20 commits; the parent kills the child after a random 3..8 of them
    rng = random.Random(f"outside-{engine}")
    commits_before_kill = rng.randrange(3, 9)
    proc = _child(tmp_path, engine, messages)
    try:
        for _ in range(commits_before_kill):
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            assert ready, "the job stopped committing"
            assert proc.stdout.readline().startswith("committed")
        time.sleep(rng.uniform(0.0, 0.02))
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, "the job finished before it could be killed"
    _finish_and_check(tmp_path, engine, messages)
