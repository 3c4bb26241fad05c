"""Damaged or lost checkpoints and a second runner, on a real `weir run` job (RocksDB, LMDB).

* A damaged checkpoint file (a flipped offset digit, a flipped format digit) stops the job
  with CheckpointCorruptError; following its advice literally (`weir checkpoint
  use-previous`) finishes with exact counts.
* A deleted checkpoint directory (or file) while the store's changelog and files hold state is
  refused (StateWithoutCheckpointError) instead of restoring the state and re-reading the input
  from the start; following the advice (`weir checkpoint reset --yes`, or `use-previous` when
  the previous file is still there) finishes with exact counts, and nothing is deleted.
* A second `weir run` of a running job fails fast (JobLockedError naming the holder) and
  touches nothing of the first, not even its in-flight checkpoint temp file.
"""

from __future__ import annotations

import re
import shlex
import signal
import time

import pytest

from tests.reliability._input_job import InputJob, words

N1, N2, N3 = 1200, 900, 700


def advised(output: str, action: str) -> list[str]:
    """The ``weir checkpoint <action> ...`` command an error message advises, as argv
    (without the leading ``weir``)."""
    found = re.search(r"`(weir checkpoint " + re.escape(action) + r"[^`]*)`", output)
    assert found, f"no `weir checkpoint {action}` advice in:\n{output}"
    return shlex.split(found.group(1))[1:]


def two_checkpoints(tmp_path, engine: str) -> InputJob:
    """A job that ran twice (so its checkpoint has a previous one) and has more input and
    the end of its stream waiting."""
    job = InputJob(tmp_path, engine)
    job.produce(words(N1), stop=True)
    job.produce(words(N2, seed=2), stop=True)
    job.produce(words(N3, seed=3), end=True)
    for expected in (N1, N1 + 1 + N2):
        result = job.run()
        assert result.returncode == 0, result.stdout
        assert job.input_offset() == expected
    return job


@pytest.mark.parametrize("engine, damage", [("rocksdb", "offset digit"),
                                            ("lmdb", "format digit")])
def test_a_damaged_checkpoint_stops_the_job_and_its_advice_keeps_counts_exact(
        tmp_path, engine, damage):
    job = two_checkpoints(tmp_path, engine)
    path = job.checkpoint_path()
    data = path.read_bytes()
    if damage == "offset digit":
        last = str(N1 + 1 + N2).encode()
        assert b'"offset": ' + last in data
        data = data.replace(b'"offset": ' + last, b'"offset": ' + last[:-1] + b"9", 1)
    else:
        assert b'"format": 2' in data
        data = data.replace(b'"format": 2', b'"format": 3', 1)  # not a newer Weir's file
    path.write_bytes(data)
    before = job.files()

    result = job.run()

    assert result.returncode == 1, result.stdout
    assert "CheckpointCorruptError" in result.stdout and str(path) in result.stdout
    assert "fails its checksum" in result.stdout and "newer" not in result.stdout
    assert job.files() == before
    use_previous = job.weir(*advised(result.stdout, "use-previous"))
    assert use_previous.returncode == 0, use_previous.stdout
    assert any(p.name.startswith(path.name + ".replaced-") for p in path.parent.iterdir())
    assert job.input_offset() == N1  # the previous checkpoint
    result = job.run_to_end()
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()


@pytest.mark.parametrize("engine, lost, way_out", [("rocksdb", "directory", "reset"),
                                                   ("lmdb", "file", "use-previous")])
def test_a_lost_checkpoint_is_refused_instead_of_counting_twice(tmp_path, engine, lost,
                                                                way_out):
    job = two_checkpoints(tmp_path, engine)
    if lost == "directory":
        for path in sorted((tmp_path / "checkpoints").iterdir()):
            if "LOCK" not in path.name:
                path.unlink()
        (tmp_path / "checkpoints").rmdir()
    else:
        job.checkpoint_path().unlink()
    before = job.files()

    result = job.run()

    assert result.returncode == 1, result.stdout
    assert "StateWithoutCheckpointError" in result.stdout, result.stdout
    assert "counting-changelog" not in result.stdout
    assert "its changelog" in result.stdout and "count every message twice" in result.stdout
    assert job.files() == before  # nothing restored, trimmed or deleted
    assert job.checkpoint() is None

    fix = job.weir(*advised(result.stdout, way_out))
    assert fix.returncode == 0, fix.stdout
    result = job.run_to_end()
    assert result.returncode == 0, result.stdout
    if way_out == "reset":
        # State and input start over together: every word is counted exactly once; the old
        # state was moved aside, not deleted (there were no checkpoint files left to move).
        names = {p.name for p in tmp_path.rglob("*reset-*")}
        assert any(n.startswith("counts.reset-") for n in names)
        assert any(n.startswith("counts-changelog.reset-") for n in names)
    assert job.totals() == job.truth()


def test_a_second_run_fails_fast_and_leaves_the_running_job_alone(tmp_path):
    job = InputJob(tmp_path, "rocksdb")
    job.produce(words(N1))  # no STOP, no end: the job keeps running
    first = job.start("task.commit.ms=200")
    try:
        deadline = time.monotonic() + 30
        while job.input_offset() < N1 - 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert job.input_offset() == N1 - 1
        # Stands for the temp file of a commit in flight at this moment (named for another
        # pid, so the job's own next commit does not replace it).
        in_flight = job.checkpoint_path().with_name(
            f"{job.checkpoint_path().name}.{first.pid + 1_000_000}.tmp")
        in_flight.write_bytes(b'{"format": 2, "crc32c": "0000')

        second = job.run(timeout=30)

        assert second.returncode == 2, second.stdout
        assert "JobLockedError" in second.stdout or "is locked by" in second.stdout
        assert f"pid {first.pid}" in second.stdout and "JOB.LOCK" in second.stdout
        assert in_flight.exists()
        assert first.poll() is None  # still running
        job.produce(words(N2, seed=2), end=True)
        output, _ = first.communicate(timeout=60)
        assert first.returncode == 0, output
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGKILL)
            first.communicate()
    assert job.totals() == job.truth()
    third = job.run()  # holds the lock: now the leftover is a stray, and it goes
    assert third.returncode == 0, third.stdout
    assert not in_flight.exists()
