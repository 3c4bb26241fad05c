"""Concurrency > 1 loses nothing: a real job, killed with SIGKILL and restarted, ends with
exactly the state a direct computation gives, in its stores and in their changelogs.

The job (``tests/reliability/_concurrency_job.py``) runs with ``task.max.concurrency=8`` in
each of the three ways the run loop overlaps calls of a task: sync ``process`` on the thread
pool, ``process_async`` finishing on executor threads, ``async def process`` handing half of
its store calls to threads. Every task writes a logged RocksDB store and a logged LMDB store
(tiny caches and write batches, so write-downs and evictions happen in almost every call):
one unique key per message, and a per-word count (a read-modify-write ordered per key, as
docs/TASKS.md tells users to do under concurrency > 1).

Each mode is run by `weir run` in a subprocess, killed with SIGKILL once its checkpoints pass
a fifth of the input, restarted and run to the end of its bounded input. Then:

* every unique key is in each store (opened through the storage layer at the last
  checkpoint) and in each changelog;
* each changelog, replayed from its first record, equals its store;
* the counts equal the direct computation exactly (no write lost, none counted twice).

Before the lock layer, the thread-pool mode lost unique keys from store and changelog.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from weir.engine.config.job import load_config
from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.serdes import Int64Serde

from tests._processes import committed_messages, kill, produce, start_weir, task_stores
from tests.reliability._concurrency_job import ENGINES

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PARTITIONS = 2
MESSAGES = 8_000
WORDS = 12

JOB = """\
job.name=concurrency-{mode}
job.data.dir=.
task.class=tests.reliability._concurrency_job:{task}
task.inputs=filelog.events
task.max.concurrency=8
job.container.thread.pool.size={pool}
task.commit.ms=200
task.shutdown.ms=5000
systems.filelog.factory=filelog
systems.filelog.root=log
systems.filelog.samza.key.serde=string
systems.filelog.samza.msg.serde=string
systems.filelog.default.stream.samza.offset.default=oldest
"""
STORE = """\
stores.{name}.factory={engine}
stores.{name}.key.serde=string
stores.{name}.msg.serde=int64
stores.{name}.changelog=filelog.{name}-changelog
stores.{name}.object.cache.size=16
stores.{name}.write.batch.size=4
"""
MODES = {"thread-pool": ("PoolTask", 4), "callback": ("CallbackTask", 0),
         "coroutine": ("CoroutineTask", 0)}
ENGINE_FACTORY = {"rocks": "rocksdb", "lmdb": "lmdb"}


def _messages() -> list[str]:
    rng = random.Random(20240917)
    return [f"w{rng.randrange(WORDS):02d} id{i:06d}" for i in range(MESSAGES)]


def _truth(messages: list[str]) -> tuple[dict[int, dict], dict[int, Counter]]:
    """Per partition (task): the unique keys with their offsets, and the word counts."""
    uniq: dict[int, dict] = {p: {} for p in range(PARTITIONS)}
    counts: dict[int, Counter] = {p: Counter() for p in range(PARTITIONS)}
    for i, text in enumerate(messages):
        word, uid = text.split(" ")
        p = i % PARTITIONS
        uniq[p][uid] = i // PARTITIONS
        counts[p][word] += 1
    return uniq, counts


def _setup(tmp_path: Path, mode: str, messages: list[str]):
    task, pool = MODES[mode]
    text = JOB.format(mode=mode, task=task, pool=pool)
    for engine in ENGINES:
        for kind in ("uniq", "counts"):
            text += STORE.format(name=f"{kind}_{engine}", engine=ENGINE_FACTORY[engine])
    (tmp_path / "job.properties").write_text(text)
    config = load_config(tmp_path / "job.properties")
    registry = SystemRegistry(config)
    registry.admin("filelog").create_stream(StreamSpec("events", PARTITIONS, bounded=True))
    produce(registry, "events", messages, partitions=PARTITIONS, end=True)
    return config, registry


def _start(tmp_path: Path) -> subprocess.Popen:
    return start_weir(tmp_path)


def _committed(tmp_path: Path) -> int:
    """Messages covered by the tasks' checkpoints (0 before any)."""
    return committed_messages(tmp_path / "checkpoints", PARTITIONS, ["events"])


def _kill_mid_run(tmp_path: Path, proc: subprocess.Popen, progress: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if _committed(tmp_path) >= progress:
            break
        time.sleep(0.005)
    kill(proc)
    return _committed(tmp_path)


def _stores(config, registry: SystemRegistry, tmp_path: Path) -> dict[int, dict[str, dict]]:
    """Every store of every task, opened through the storage layer at its last checkpoint."""
    return task_stores(config, registry, tmp_path, PARTITIONS)


def _changelogs(registry: SystemRegistry) -> dict[int, dict[str, dict]]:
    """Every changelog partition replayed from its first record (string keys, int64 values;
    a tombstone removes the key)."""
    values = Int64Serde()
    out: dict[int, dict[str, dict]] = {p: {} for p in range(PARTITIONS)}
    consumer = registry.consumer("filelog")
    ssps = [SystemStreamPartition("filelog", f"{kind}_{engine}-changelog", p)
            for kind in ("uniq", "counts") for engine in ENGINES for p in range(PARTITIONS)]
    for ssp in ssps:
        consumer.register(ssp, 0)
        out[ssp.partition][ssp.stream.removesuffix("-changelog")] = {}
    consumer.start()
    try:
        while True:
            got = consumer.poll(ssps, 0.05)
            if not any(got.values()):
                return out
            for ssp, envelopes in got.items():
                state = out[ssp.partition][ssp.stream.removesuffix("-changelog")]
                for env in envelopes:
                    key = bytes(env.key).decode()
                    if env.message is None:
                        state.pop(key, None)
                    else:
                        state[key] = values.from_bytes(bytes(env.message))
    finally:
        consumer.stop()


@pytest.mark.parametrize("mode", list(MODES))
def test_a_killed_job_with_concurrent_calls_ends_with_exact_stores_and_changelogs(
        tmp_path, monkeypatch, mode):
    monkeypatch.chdir(tmp_path)
    messages = _messages()
    config, registry = _setup(tmp_path, mode, messages)

    at_kill = _kill_mid_run(tmp_path, _start(tmp_path), MESSAGES // 5)
    assert at_kill < MESSAGES, "the kill came after the last commit: nothing was tested"
    final = _start(tmp_path)
    output, _ = final.communicate(timeout=120)
    assert final.returncode == 0, output
    assert _committed(tmp_path) == MESSAGES

    uniq, counts = _truth(messages)
    stores = _stores(config, registry, tmp_path)
    changelogs = _changelogs(registry)
    for p in range(PARTITIONS):
        for engine in ENGINES:
            store_uniq, store_counts = stores[p][f"uniq_{engine}"], stores[p][f"counts_{engine}"]
            missing = set(uniq[p]) - set(store_uniq)
            assert not missing, (f"{engine} partition {p}: {len(missing)} unique keys missing "
                                 f"from the store, e.g. {sorted(missing)[:5]}")
            assert store_uniq == uniq[p]
            assert store_counts == dict(counts[p])
            assert changelogs[p][f"uniq_{engine}"] == store_uniq
            assert changelogs[p][f"counts_{engine}"] == store_counts
