"""SIGKILL a running `weir run` mid-stream, restart it, let it finish: nothing is lost and the
state is exact.

A stateful count job (tests/e2e/_count_job.py) reads a bounded file-log stream and keeps its
counts in a logged RocksDB (or LMDB) store with a tiny cache, so changelog records of
uncommitted work exist at every kill. The test kills the real `weir run` process with SIGKILL
as soon as its checkpoints pass a chosen point (plus a random delay), several times, then runs
it to the end. It checks that every input message was processed at least once (the `seen`
output), that the final totals the job emitted equal the truth exactly, and that the store,
opened through the storage layer at the last checkpoint, equals the truth exactly.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("weir.engine.systems.filelog", reason="the file log system is not built yet")

from weir.engine.config.job import JobConfig, load_config  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402

from tests._processes import (committed_offsets, kill, produce, read_partitions,  # noqa: E402
                              start_weir, task_stores)
from tests.e2e._count_job import count_job_properties  # noqa: E402

pytestmark = pytest.mark.slow

PARTITIONS = 2
MESSAGES = 120_000
KEYS = 40

JOB = {"job.name": "sigkill-count", "task.class": "tests.e2e._count_job:CountJob",
       "task.commit.ms": "150"}


def make_input() -> list[str]:
    rng = random.Random(4242)
    return [f"k{rng.randrange(KEYS):02d}" for _ in range(MESSAGES)]


def truth_per_partition(items: list[str]) -> dict[int, Counter]:
    out = {p: Counter() for p in range(PARTITIONS)}
    for i, word in enumerate(items):
        out[i % PARTITIONS][word] += 1
    return out


def setup_job(tmp_path: Path, engine: str, items: list[str]):
    (tmp_path / "job.properties").write_text(count_job_properties(engine, JOB))
    config = load_config(tmp_path / "job.properties")
    registry = SystemRegistry(config)
    admin = registry.admin("filelog")
    admin.create_stream(StreamSpec("words", PARTITIONS, bounded=True))
    admin.create_stream(StreamSpec("seen", PARTITIONS))
    admin.create_stream(StreamSpec("totals", PARTITIONS))
    produce(registry, "words", items, partitions=PARTITIONS, end=True)
    return config, registry


def start_job(tmp_path: Path) -> subprocess.Popen:
    return start_weir(tmp_path)


def committed(tmp_path: Path) -> dict[int, int]:
    """The checkpointed offset of each input partition (-1 before any)."""
    job = JobConfig.from_config(load_config(tmp_path / "job.properties"), cwd=tmp_path)
    return committed_offsets(job.checkpoint_dir, PARTITIONS, "words")


def kill_after(tmp_path: Path, proc: subprocess.Popen, progress: int, delay: float) -> int:
    """SIGKILL ``proc`` once its checkpoints cover ``progress`` messages, after ``delay`` s.
    Returns the messages committed at the kill."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        done = sum(o + 1 for o in committed(tmp_path).values())
        if done >= progress:
            break
        time.sleep(0.005)
    time.sleep(delay)
    kill(proc)
    return sum(o + 1 for o in committed(tmp_path).values())


def store_contents(config, registry: SystemRegistry, tmp_path: Path) -> dict[int, dict]:
    """Each task's ``counts`` store, opened through the storage layer at its last checkpoint."""
    return {p: stores["counts"]
            for p, stores in task_stores(config, registry, tmp_path, PARTITIONS).items()}


@pytest.mark.parametrize("engine,kill_points", [
    ("rocksdb", [0.15, 0.45, 0.75]),
    ("lmdb", [0.3, 0.7]),
])
def test_killed_and_restarted_job_processes_everything_and_ends_with_exact_state(
        tmp_path, engine, kill_points, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths in the config, as `weir run` sees them
    items = make_input()
    config, registry = setup_job(tmp_path, engine, items)
    rng = random.Random(engine)

    at_kill = []
    for point in kill_points:
        at_kill.append(kill_after(tmp_path, start_job(tmp_path), int(point * MESSAGES),
                                  rng.uniform(0.0, 0.05)))
    assert all(n < MESSAGES for n in at_kill), at_kill
    resumed_from = committed(tmp_path)
    final = start_job(tmp_path)
    output, _ = final.communicate(timeout=60)
    assert final.returncode == 0, output
    # Each task says where it resumes and what of the killed run's work the restore reverted.
    for p in range(PARTITIONS):
        assert (f"task 'Partition {p}' resumes from its checkpoint: filelog.words#{p} at "
                f"offset {resumed_from[p] + 1}; ") in output, output
    assert output.count("resumes from its checkpoint") == PARTITIONS

    assert committed(tmp_path) == {p: MESSAGES // PARTITIONS - 1 for p in range(PARTITIONS)}
    # Every input message was processed at least once.
    seen = read_partitions(registry, "seen")
    processed = {env.message for envs in seen.values() for env in envs}
    assert processed == {f"{i % PARTITIONS}:{i // PARTITIONS}" for i in range(MESSAGES)}
    assert sum(len(v) for v in seen.values()) >= MESSAGES
    # The final totals and the stores equal the truth exactly.
    truth = truth_per_partition(items)
    totals = read_partitions(registry, "totals")
    emitted = {p: {} for p in range(PARTITIONS)}
    for p, envs in totals.items():
        for env in envs:
            emitted[p][env.key] = env.message  # a later emission replaces an earlier one
    assert emitted == {p: dict(c) for p, c in truth.items()}
    assert store_contents(config, registry, tmp_path) == {p: dict(c) for p, c in truth.items()}
