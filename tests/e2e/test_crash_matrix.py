"""The crash matrix: a job with two containers and both engines, SIGKILLed at many points
(start-up, restore, processing, flush, checkpoint write), restarted each time, with checkpoint
files and with a checkpoint stream.

Every kill takes the whole process group down at once (runner and both container processes:
a machine losing power), at a point armed inside the processes (tests/e2e/_crash_job.py) or
after a random delay from the start. After every kill the test checks that no checkpoint
points past a change that is not in the changelog (each store's checkpointed changelog offset
is inside its changelog). After the last kill the job runs to the end of its bounded input,
and each task's RocksDB and LMDB store must equal the word counts computed directly from the
input: nothing lost, nothing counted twice.

CI runs five kills in all (three with checkpoint files, two with a checkpoint stream); ``WEIR_CRASH_MATRIX_FULL=1`` runs 20 random kills
per checkpoint manager (``WEIR_CRASH_MATRIX_SEED`` picks another schedule).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from weir.engine.config.job import JobConfig, StoreBase, load_config
from weir.engine.container.checkpoints import CheckpointSettings, open_checkpoint_manager
from weir.engine.container.container import store_specs
from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.changelog import SystemChangelogSource
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.storage import task_directory_name
from weir.stores.builder import open_engine
from weir.stores.serdes import Int64Serde

from tests._processes import produce, weir_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4
MESSAGES = 12_000
KEYS = 50
STORES = ("counts_r", "counts_l")
FULL = os.environ.get("WEIR_CRASH_MATRIX_FULL") == "1"

JOB = """\
job.name=crash-matrix
task.class=tests.e2e._crash_job:CrashCountJob
task.inputs=filelog.words
task.commit.ms=100
job.container.count=2
job.data.dir=.
systems.filelog.factory=filelog
systems.filelog.root=log
systems.filelog.samza.key.serde=string
systems.filelog.samza.msg.serde=string
systems.filelog.default.stream.samza.offset.default=oldest
stores.counts_r.factory=rocksdb
stores.counts_r.key.serde=string
stores.counts_r.msg.serde=int64
stores.counts_r.changelog=filelog.counts-r-changelog
stores.counts_r.object.cache.size=16
stores.counts_r.write.batch.size=8
stores.counts_l.factory=lmdb
stores.counts_l.key.serde=string
stores.counts_l.msg.serde=int64
stores.counts_l.changelog=filelog.counts-l-changelog
stores.counts_l.object.cache.size=16
stores.counts_l.write.batch.size=8
"""

CHECKPOINTS = {"files": "", "stream": "task.checkpoint.system=filelog\n"}

# CI: a few kills that reach every phase between the two managers.
CI_SCHEDULES = {
    "files": [("process", 0.4, ""), ("restore", 3, ""), ("checkpoint", 8, "torn")],
    "stream": [("flush", 8, "after"), ("checkpoint", 10, "torn")],
}
PHASES = ("start-up", "restore", "process", "flush", "checkpoint")


def random_schedule(rng: random.Random, kills: int) -> list[tuple[str, int, str]]:
    out = []
    for _ in range(kills):
        phase = rng.choice(PHASES)
        if phase == "process":
            out.append((phase, rng.uniform(0.05, 0.6), ""))  # of what is left
        elif phase == "restore":
            out.append((phase, rng.randrange(1, 5), ""))
        elif phase == "flush":
            out.append((phase, rng.randrange(1, 12), rng.choice(["before", "after"])))
        elif phase == "checkpoint":
            out.append((phase, rng.randrange(1, 16), rng.choice(["before", "torn", "after"])))
        else:
            out.append((phase, 0, ""))
    return out


def make_input() -> list[str]:
    rng = random.Random(77)
    return [f"k{rng.randrange(KEYS):02d}" for _ in range(MESSAGES)]


def setup(base: Path, kind: str) -> list[str]:
    (base / "job.properties").write_text(JOB + CHECKPOINTS[kind])
    config = load_config(base / "job.properties")
    registry = SystemRegistry(config)
    registry.admin("filelog").create_stream(StreamSpec("words", PARTITIONS, bounded=True))
    items = make_input()
    produce(registry, "words", items, partitions=PARTITIONS, end=True)
    return items


def run(base: Path, point: tuple[str, int, str] | None, fallback: int,
        delay: float | None = None) -> int:
    env = weir_env()
    env.pop("WEIR_CRASH_POINT", None)
    if point is not None and point[0] != "start-up":
        env["WEIR_CRASH_POINT"] = ":".join(str(p) for p in point)
    if fallback:
        env["WEIR_CRASH_FALLBACK"] = str(fallback)
    proc = subprocess.Popen([sys.executable, "-m", "weir", "run", "job.properties",
                             "--status", "off"], cwd=base, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        if delay is not None:
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _wait_for_group(proc.pid)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"weir run failed ({proc.returncode}):\n{output}")
    return proc.returncode


def _wait_for_group(pgid: int) -> None:
    """Container processes of a killed group are gone before the next run starts."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def _job(base: Path):
    config = load_config(base / "job.properties")
    return config, JobConfig.from_config(config, cwd=base)


def check_checkpoints_inside_changelogs(base: Path) -> dict[str, int]:
    """No checkpoint points past a change that is not in the changelog; returns each task's
    committed input offset (-1: none yet)."""
    config, job = _job(base)
    registry = SystemRegistry(config)
    tasks = {f"Partition {p}": p for p in range(PARTITIONS)}
    manager = open_checkpoint_manager(CheckpointSettings.from_config(config, job), job,
                                      registry, tasks)
    for task in tasks:
        manager.register(task)
    manager.start()
    committed = {}
    try:
        for task, p in tasks.items():
            cp = manager.read_last(task)
            committed[task] = cp.input_offsets.get(("filelog", "words", p), -1) if cp else -1
            if cp is None:
                continue
            for store, stream in (("counts_r", "counts-r-changelog"),
                                  ("counts_l", "counts-l-changelog")):
                offset = cp.changelog_offsets[store]
                newest = SystemChangelogSource(
                    registry, SystemStreamPartition("filelog", stream, p)).newest_offset()
                assert offset <= newest, (
                    f"the checkpoint of {task} points at changelog offset {offset} of store "
                    f"{store}, past the changelog's end {newest}")
    finally:
        manager.stop()
    return committed


def final_stores(base: Path) -> dict[str, dict[int, dict[str, int]]]:
    config, job = _job(base)
    out: dict[str, dict[int, dict[str, int]]] = {}
    for spec in store_specs(config, job):
        out[spec.name] = {}
        for p in range(PARTITIONS):
            directory = (job.base_dir(StoreBase.LOGGED) / spec.name /
                         task_directory_name(f"Partition {p}"))
            engine = open_engine(spec, directory, logged=True)
            try:
                with engine.all() as entries:
                    out[spec.name][p] = {k.decode(): Int64Serde().from_bytes(v)
                                         for k, v in entries}
            finally:
                engine.close()
    return out


def truth(items: list[str]) -> dict[int, dict[str, int]]:
    per = {p: Counter() for p in range(PARTITIONS)}
    for i, word in enumerate(items):
        per[i % PARTITIONS][word] += 1
    return {p: dict(c) for p, c in per.items()}


@pytest.mark.parametrize("kind", ["files", "stream"])
def test_sigkills_at_every_phase_never_lose_or_double_count_state(tmp_path, kind, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths in the config, as `weir run` sees them
    items = setup(tmp_path, kind)
    seed = int(os.environ.get("WEIR_CRASH_MATRIX_SEED", "2026"))
    rng = random.Random(f"{seed}-{kind}")
    schedule = random_schedule(rng, 20) if FULL else CI_SCHEDULES[kind]
    kills = []
    done = 0
    for point in schedule:
        # Kill points in messages are fractions of what each container has left to do.
        left = max(1, (MESSAGES - done) // 2)
        if point[0] == "process":
            point = ("process", max(1, int(point[1] * left)), "")
        delay = rng.uniform(0.5, 4.0) if point[0] == "start-up" else None
        fallback = 0 if point[0] == "process" else max(1, int(rng.uniform(0.1, 0.6) * left))
        started = time.monotonic()
        code = run(tmp_path, point, fallback=fallback, delay=delay)
        committed = check_checkpoints_inside_changelogs(tmp_path)
        done = sum(o + 1 for o in committed.values())
        kills.append((point, code, done))
        print(f"{point} -> {code} in {time.monotonic() - started:.1f} s, {done} committed")
        if code == 0:
            break  # the input ran out before the kill point: nothing left to crash
    assert any(code == -signal.SIGKILL for _, code, _ in kills), kills
    started = time.monotonic()
    assert run(tmp_path, None, fallback=0) == 0
    print(f"final run in {time.monotonic() - started:.1f} s")
    check_checkpoints_inside_changelogs(tmp_path)
    expected = truth(items)
    stores = final_stores(tmp_path)
    assert stores["counts_r"] == expected
    assert stores["counts_l"] == expected
    print(f"crash matrix ({kind}): {len([k for k in kills if k[1] != 0])} kills: " +
          ", ".join(f"{p[0]}:{p[1]}{':' + p[2] if p[2] else ''} -> {n} committed"
                    for p, _, n in kills))
