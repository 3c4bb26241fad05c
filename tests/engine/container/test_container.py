"""Container: start order, end of bounded inputs, restart after a checkpoint, restore from the
changelog, task failures and shutdown -- on real RocksDB/LMDB stores, real checkpoint files,
the memory system and the file log."""

from __future__ import annotations

import itertools
import logging
import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from weir.engine.container.container import Container, ContainerState, ProgressMode
from weir.engine.errors import TaskError
from weir.engine.jobmodel.model import build_job_model
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.memory import reset_memory_systems
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.checkpoint import FileCheckpointManager
from weir.stores.config import Config

_ids = itertools.count()
PARTITIONS = 2


def job_config(tmp_path: Path, system: str, task: str = "CountWords", engine: str = "rocksdb",
               **extra: str) -> Config:
    values = {
        "job.name": "count-words",
        "task.class": f"tests.engine._jobs:{task}",
        "task.inputs": f"{system}.words",
        "task.checkpoint.path": str(tmp_path / "checkpoints"),
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "job.non-logged.store.base.dir": str(tmp_path / "state"),
        f"systems.{system}.samza.key.serde": "string",
        f"systems.{system}.samza.msg.serde": "string",
        f"systems.{system}.streams.counts-out.samza.msg.serde": "int64",
        f"systems.{system}.default.stream.samza.offset.default": "oldest",
        "stores.counts.factory": engine,
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "int64",
        "stores.counts.changelog": f"{system}.counts-changelog",
        "stores.counts.object.cache.size": "8",
        "stores.counts.write.batch.size": "4",
        "job.container.count": "1",  # these tests run container "0" alone
    }
    if system.startswith("mem"):
        values[f"systems.{system}.factory"] = "memory"
    else:
        values[f"systems.{system}.factory"] = "filelog"
        values[f"systems.{system}.root"] = str(tmp_path / "log")
    values.update(extra)
    return Config(values)


@pytest.fixture(params=["memory", "filelog"])
def system(request):
    if request.param == "filelog":
        pytest.importorskip("weir.engine.systems.filelog")
        yield f"fl{next(_ids)}"
        return
    name = f"mem-container-{next(_ids)}"
    yield name
    reset_memory_systems(name)


def words(n: int) -> list[str]:
    return [f"w{(i * 7) % 11}" for i in range(n)]


def write_words(registry: SystemRegistry, system: str, items: list[str], *, create: bool = True,
                end: bool = True, first: int = 0) -> None:
    admin = registry.admin(system)
    if create:
        admin.create_stream(StreamSpec("words", PARTITIONS, bounded=True))
        admin.create_stream(StreamSpec("counts-out", PARTITIONS))
    producer = registry.producer(system)
    producer.register("test")
    producer.start()
    serdes = registry.serdes_for(SystemStream(system, "words"))
    for i, word in enumerate(items, start=first):
        producer.send("test", OutgoingMessageEnvelope(
            SystemStream(system, "words"), serdes.serialize_message(word),
            partition=i % PARTITIONS))
    if end:
        producer.end_stream("words")
    producer.flush("test")
    producer.stop()


def run_container(cfg: Config, **kwargs) -> tuple[Container, object]:
    registry = SystemRegistry(cfg)
    model = build_job_model(cfg, registry.partition_counts([SystemStream(
        cfg["task.inputs"].split(".")[0], "words")]))
    container = Container(cfg, model, "0", registry=registry, progress=ProgressMode.QUIET,
                          **kwargs)
    return container, container.run()


def emitted_counts(registry: SystemRegistry, system: str) -> Counter:
    """The counts the tasks sent at their last end-of-stream, summed over tasks (each task
    counts its own partition; a later message of a word replaces an earlier one)."""
    consumer = registry.consumer(system)
    serdes = registry.serdes_for(SystemStream(system, "counts-out"))
    ssps = [SystemStreamPartition(system, "counts-out", p) for p in range(PARTITIONS)]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    out: dict[int, list[tuple[str, int]]] = {p: [] for p in range(PARTITIONS)}
    try:
        while True:
            got = consumer.poll(ssps, 0.2)
            if not any(got.values()):
                break
            for ssp, envs in got.items():
                for env in envs:
                    typed = serdes.deserialize(env)
                    out[ssp.partition].append((typed.key, typed.message))
    finally:
        consumer.stop()
    total: Counter = Counter()
    for pairs in out.values():
        total.update(dict(pairs))
    return total


def checkpoint_offsets(cfg: Config, system: str) -> dict[int, int]:
    mgr = FileCheckpointManager(cfg["task.checkpoint.path"])
    out = {}
    for p in range(PARTITIONS):
        mgr.register(f"Partition {p}")
    mgr.start()
    for p in range(PARTITIONS):
        cp = mgr.read_last(f"Partition {p}")
        if cp is not None:
            out[p] = cp.input_offsets[(system, "words", p)]
    return out


def test_bounded_inputs_run_to_the_end_and_every_task_commits(tmp_path, system):
    cfg = job_config(tmp_path, system)
    items = words(500)
    write_words(SystemRegistry(cfg), system, items)

    container, result = run_container(cfg)

    assert container.state is ContainerState.STOPPED
    assert result.reason == "end-of-stream"
    assert result.inputs == {SystemStream(system, "words"): 500}
    assert result.processed == {"Partition 0": 250, "Partition 1": 250}
    assert emitted_counts(SystemRegistry(cfg), system) == Counter(items)
    assert checkpoint_offsets(cfg, system) == {0: 249, 1: 249}


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_a_restart_resumes_after_the_checkpoint_without_counting_twice(tmp_path, system, engine):
    cfg = job_config(tmp_path, system, task="ShutdownAt", engine=engine)
    first = words(300) + ["stop"] + words(99)
    write_words(SystemRegistry(cfg), system, first, end=False)

    _, stopped = run_container(cfg)
    assert stopped.reason == "shutdown-requested"
    committed = checkpoint_offsets(cfg, system)
    assert committed[0] == 150  # "stop" is message 300: partition 0, offset 150

    second = words(201)
    write_words(SystemRegistry(cfg), system, second, create=False, first=len(first))
    _, result = run_container(cfg)

    assert result.reason == "end-of-stream"
    assert emitted_counts(SystemRegistry(cfg), system) == Counter(first + second)
    assert sum(result.inputs.values()) + sum(stopped.inputs.values()) == len(first + second)


def test_a_restart_logs_each_tasks_resume_offset_and_the_uncommitted_changes_it_reverted(
        tmp_path, system, caplog):
    from weir.stores.serdes import Int64Serde

    cfg = job_config(tmp_path, system, task="ShutdownAt")
    first = words(300) + ["stop"] + words(99)
    write_words(SystemRegistry(cfg), system, first, end=False)
    run_container(cfg)
    assert checkpoint_offsets(cfg, system) == {0: 150, 1: 149}
    # What a run that crashed before its next commit leaves in the changelog: changes of
    # partition 0's store after the checkpoint (5 records, 2 keys).
    registry = SystemRegistry(cfg)
    producer = registry.producer(system)
    producer.register("crashed-run")
    producer.start()
    for word, n in [("w1", 1000), ("w2", 1001), ("w1", 1002), ("w2", 1003), ("w1", 1004)]:
        producer.send("crashed-run", OutgoingMessageEnvelope(
            SystemStream(system, "counts-changelog"), Int64Serde().to_bytes(n),
            key=word.encode(), partition=0))
    producer.flush("crashed-run")
    producer.stop()
    write_words(SystemRegistry(cfg), system, [], create=False, first=len(first))

    with caplog.at_level(logging.INFO, logger="weir.container"):
        _, result = run_container(cfg)

    lines = [r.getMessage() for r in caplog.records if "resumes from its checkpoint" in r.getMessage()]
    assert lines == [
        f"task 'Partition 0' resumes from its checkpoint: {system}.words#0 at offset 151; "
        f"restore reverted 5 uncommitted changelog record(s) of store 'counts' (2 key(s))",
        f"task 'Partition 1' resumes from its checkpoint: {system}.words#1 at offset 150; "
        f"no uncommitted changelog records to revert"]
    assert result.reason == "end-of-stream"
    assert emitted_counts(SystemRegistry(cfg), system) == Counter(first)  # 1000s reverted


def test_stores_are_rebuilt_from_the_changelog_when_local_state_is_lost(tmp_path, system):
    cfg = job_config(tmp_path, system, task="ShutdownAt")
    first = words(120) + ["stop"]
    write_words(SystemRegistry(cfg), system, first, end=False)
    run_container(cfg)
    shutil.rmtree(tmp_path / "state")

    second = words(81)
    write_words(SystemRegistry(cfg), system, second, create=False, first=len(first))
    container, result = run_container(cfg)

    assert emitted_counts(SystemRegistry(cfg), system) == Counter(first + second)
    restored = [s for inst in container.instances for s in inst._storage.restore_stats()]
    assert sum(s.records for s in restored) > 0


def test_a_failing_task_stops_the_container_naming_task_ssp_and_offset(tmp_path, system):
    cfg = job_config(tmp_path, system, task="FailAt")
    items = words(40) + ["boom"] + words(10)
    write_words(SystemRegistry(cfg), system, items)

    registry = SystemRegistry(cfg)
    model = build_job_model(cfg, registry.partition_counts([SystemStream(system, "words")]))
    container = Container(cfg, model, "0", registry=registry, progress=ProgressMode.QUIET)
    with pytest.raises(TaskError) as err:
        container.run()

    message = str(err.value)
    assert "task 'Partition 0'" in message and f"{system}.words#0 offset 20" in message
    assert "ValueError: the message was boom" in message
    assert container.state is ContainerState.FAILED
    # Everything was closed: the stores open again (no lock held), and the failed message
    # is processed again after the last checkpoint.
    cfg2 = job_config(tmp_path, system, task="CountWords")
    _, result = run_container(cfg2)
    assert emitted_counts(SystemRegistry(cfg), system) == Counter(items)


def test_shutdown_from_another_thread_commits_what_was_processed(tmp_path, system):
    cfg = job_config(tmp_path, system, **{"task.commit.ms": "-1"})
    items = words(200)
    write_words(SystemRegistry(cfg), system, items, end=False)  # unbounded: never ends
    registry = SystemRegistry(cfg)
    model = build_job_model(cfg, registry.partition_counts([SystemStream(system, "words")]))
    container = Container(cfg, model, "0", registry=registry, progress=ProgressMode.QUIET)

    def stop_when_idle():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if container.progress_snapshot().processed == len(items):
                break
            time.sleep(0.01)
        container.shutdown()

    stopper = threading.Thread(target=stop_when_idle)
    stopper.start()
    result = container.run()
    stopper.join()

    assert result.reason == "external-shutdown"
    assert checkpoint_offsets(cfg, system) == {0: 99, 1: 99}


def test_shutdown_requested_before_the_loop_starts_still_stops_cleanly(tmp_path, system):
    cfg = job_config(tmp_path, system)
    write_words(SystemRegistry(cfg), system, words(10), end=False)
    registry = SystemRegistry(cfg)
    model = build_job_model(cfg, registry.partition_counts([SystemStream(system, "words")]))
    container = Container(cfg, model, "0", registry=registry, progress=ProgressMode.QUIET)
    container.shutdown()

    result = container.run()

    assert result.reason == "external-shutdown"
    assert container.state is ContainerState.STOPPED


def test_progress_snapshot_reports_positions_of_every_input_partition(tmp_path, system):
    cfg = job_config(tmp_path, system)
    write_words(SystemRegistry(cfg), system, words(30))
    container, _ = run_container(cfg)

    snap = container.progress_snapshot()

    assert snap.processed == 30
    assert snap.positions == {SystemStreamPartition(system, "words", 0): 15,
                              SystemStreamPartition(system, "words", 1): 15}
    assert snap.last_commit_ms > 0


def test_stores_stay_open_under_a_call_abandoned_after_a_callback_timeout(tmp_path, caplog):
    """A sync process() stuck on the pool past task.callback.timeout.ms fails the container,
    but still runs: its stores are left open (closing an LMDB store under a running read can
    crash the process) and the next start restores them and counts exactly."""
    from tests.engine import _jobs

    system = f"mem-container-{next(_ids)}"
    _jobs.STUCK_RELEASE.clear()
    try:
        cfg = job_config(tmp_path, system, task="StuckAt", engine="lmdb",
                         **{"job.container.thread.pool.size": "1",
                            "task.callback.timeout.ms": "300", "task.shutdown.ms": "300"})
        items = words(10) + ["stuck"] + words(6)
        write_words(SystemRegistry(cfg), system, items)
        registry = SystemRegistry(cfg)
        model = build_job_model(cfg, registry.partition_counts([SystemStream(system, "words")]))
        container = Container(cfg, model, "0", registry=registry, progress=ProgressMode.QUIET)
        with caplog.at_level("WARNING", logger="weir.container"):
            with pytest.raises(TaskError, match="task.callback.timeout.ms"):
                container.run()
        assert container.loop.abandoned_calls == 1
        assert caplog.text.count("leaving the stores open") == 1
        stuck_task = next(i for i in container.instances if i.task_name == "Partition 0")
        assert not stuck_task._storage.stores()["counts"].closed
        _jobs.STUCK_RELEASE.set()  # the abandoned call finishes on an open store
        deadline = time.monotonic() + 10
        while container.loop.abandoned_calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert container.loop.abandoned_calls == 0
        for inst in container.instances:  # what process exit would do: frees the store locks
            inst._storage.close()
        _, result = run_container(job_config(tmp_path, system, task="CountWords",
                                             engine="lmdb"))
        assert emitted_counts(SystemRegistry(cfg), system) == Counter(items)
    finally:
        _jobs.STUCK_RELEASE.set()
        reset_memory_systems(system)


def test_store_sizes_left_unset_come_from_the_container_memory_budget(tmp_path, caplog):
    system = f"mem-container-{next(_ids)}"
    cfg = Config({k: v for k, v in job_config(tmp_path, system).items()
                  if "cache.size" not in k and "batch.size" not in k}
                 | {"job.container.memory.mb": "320"})
    write_words(SystemRegistry(cfg), system, words(200))
    try:
        with caplog.at_level(logging.INFO, logger="weir.container"):
            container, _ = run_container(cfg)
        # (320 - 64) MiB over 1 store x 2 tasks: 128 MiB a task, half of it object cache.
        assert "object cache 262,144" in caplog.text and "write batch 65,536" in caplog.text
        stats = container.metrics_snapshot()["stores"]
        assert set(stats) == {"Partition 0", "Partition 1"}
        counts = stats["Partition 0"]["counts"]
        assert counts["capacity"] == 262_144 and counts["write-batch-size"] == 65_536
        assert counts["misses"] == 11 and counts["full"] is False  # one read per word
    finally:
        reset_memory_systems(system)
