"""The container's start-up safety checks (engine/container/safety.py) and config refusals:
recreated streams, state without a checkpoint, a reset on purpose, changelogs on unknown
systems or without compaction, a misspelt samza.* key -- in process on the memory system and
the file log, and as a real `weir run`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.engine.container.test_container import (checkpoint_offsets, emitted_counts,
                                                   job_config, run_container, words,
                                                   write_words)
from weir.engine.errors import ChangelogNotCompactedError, StreamIdentityMismatchError
from weir.engine.systems.api import CleanupPolicy, StreamSpec
from weir.engine.systems.memory import reset_memory_systems
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.checkpoint import FileCheckpointManager
from weir.recovery.errors import StateWithoutCheckpointError
from weir.stores.config import Config, ConfigError

ROOT = Path(__file__).resolve().parents[3]


def memory_job(tmp_path, name: str, **extra: str) -> Config:
    reset_memory_systems(name)
    return job_config(tmp_path, name, task="ShutdownAt", **extra)


def test_a_recreated_memory_input_stream_is_refused_naming_stream_and_checkpoint(tmp_path):
    system = "mem-safety-input"
    cfg = memory_job(tmp_path, system)
    write_words(SystemRegistry(cfg), system, words(40) + ["stop"], end=False)
    run_container(cfg)
    reset_memory_systems(system)  # the streams are gone; the checkpoints stay
    write_words(SystemRegistry(cfg), system, words(90))
    before = {p: FileCheckpointManager(tmp_path / "checkpoints").path_for(f"Partition {p}")
              .read_bytes() for p in range(2)}

    with pytest.raises(StreamIdentityMismatchError) as err:
        run_container(cfg)

    message = str(err.value)
    assert f"input stream '{system}.words' partition" in message
    assert str(tmp_path / "checkpoints") in message and "weir checkpoint reset" in message
    assert {p: FileCheckpointManager(tmp_path / "checkpoints").path_for(f"Partition {p}")
            .read_bytes() for p in range(2)} == before
    reset_memory_systems(system)


def test_a_task_without_checkpoint_whose_changelog_holds_state_is_refused(tmp_path):
    system = "mem-safety-lost"
    cfg = memory_job(tmp_path, system)
    write_words(SystemRegistry(cfg), system, words(40) + ["stop"], end=False)
    run_container(cfg)
    for path in (tmp_path / "checkpoints").iterdir():
        path.unlink()

    with pytest.raises(StateWithoutCheckpointError) as err:
        run_container(cfg)

    message = str(err.value)
    assert "has no checkpoint" in message and "store 'counts'" in message
    assert "its changelog" in message and "OFFSET file" in message
    assert "weir checkpoint reset" in message and "use-previous" not in message
    assert err.value.stores == ("counts",)
    reset_memory_systems(system)


def test_local_keys_nothing_vouches_for_are_refused_without_a_checkpoint(tmp_path):
    """An engine holding keys beside an empty changelog: state the changelog cannot back."""
    system = "fl-safety-unvouched"
    cfg = job_config(tmp_path, system)
    write_words(SystemRegistry(cfg), system, [])  # nothing to count: changelogs stay empty
    run_container(cfg)
    for path in (tmp_path / "checkpoints").iterdir():
        path.unlink()
    directory = tmp_path / "state" / "counts" / "Partition_0"
    assert not (directory / "OFFSET").exists()  # an empty changelog vouches for nothing
    from weir.stores.builder import open_engine
    from weir.stores.spec import StoreSpec
    engine = open_engine(StoreSpec.from_config(cfg, "counts"), directory, logged=True)
    engine.put(b"stray", b"\x00")
    engine.close()
    with pytest.raises(StateWithoutCheckpointError, match="may hold state that nothing vouches"):
        run_container(cfg)
    assert any(directory.iterdir())  # not wiped


def test_empty_local_files_without_a_checkpoint_are_no_state(tmp_path):
    """A first run killed before its first commit leaves an empty store and no OFFSET file:
    the next start must not be refused (there is nothing to count twice)."""
    system = "fl-safety-empty"
    cfg = job_config(tmp_path, system)
    write_words(SystemRegistry(cfg), system, [])
    run_container(cfg)
    for path in (tmp_path / "checkpoints").iterdir():
        path.unlink()
    assert any((tmp_path / "state" / "counts" / "Partition_0").iterdir())
    _, result = run_container(cfg)
    assert result.reason == "end-of-stream"


def test_a_first_run_with_empty_changelogs_is_not_refused(tmp_path):
    system = "mem-safety-first"
    cfg = memory_job(tmp_path, system)
    write_words(SystemRegistry(cfg), system, words(20))
    _, result = run_container(cfg)
    assert result.reason == "end-of-stream"
    reset_memory_systems(system)


def test_samza_reset_offset_may_move_the_checkpoint_back_once(tmp_path):
    system = "mem-safety-reset"
    cfg = memory_job(tmp_path, system)
    items = words(60) + ["stop"] + words(20)
    write_words(SystemRegistry(cfg), system, items)
    run_container(cfg)
    assert checkpoint_offsets(cfg, system)[0] == 30
    again = cfg.merged({f"systems.{system}.streams.words.samza.reset.offset": "true"},
                       origin="--set")
    run_container(again)  # starts from the oldest offset again and stops at "stop" again
    assert checkpoint_offsets(cfg, system)[0] == 30
    _, result = run_container(cfg)
    assert result.reason == "end-of-stream"
    reset_memory_systems(system)


def test_a_changelog_on_an_unknown_system_names_the_store_key_and_its_line(tmp_path):
    cfg = job_config(tmp_path, "fl-safety").merged(
        {"stores.counts.changelog": "nosuch.counts-changelog"}, origin="job.properties:14")
    write_words(SystemRegistry(cfg), "fl-safety", words(4))
    with pytest.raises(ConfigError) as err:
        run_container(cfg)
    assert err.value.key == "stores.counts.changelog"
    assert err.value.origin == "job.properties:14"
    assert "system 'nosuch'" in str(err.value) and "systems.nosuch.factory" in str(err.value)


@pytest.mark.parametrize("system", ["fl-safety-policy", "mem-safety-policy"])
def test_an_existing_changelog_that_is_not_compacted_is_refused(tmp_path, system):
    cfg = job_config(tmp_path, system)
    registry = SystemRegistry(cfg)
    write_words(registry, system, words(4))
    registry.admin(system).create_stream(StreamSpec("counts-changelog", 2, CleanupPolicy.DELETE))
    with pytest.raises(ChangelogNotCompactedError) as err:
        run_container(cfg)
    message = str(err.value)
    assert f"'{system}.counts-changelog' of store 'counts'" in message
    assert "cleanup policy 'delete'" in message and "stores.counts.changelog" in message
    if system.startswith("fl"):
        assert "stream.json" in message
    reset_memory_systems(system)


def test_the_compacted_changelog_weir_creates_is_accepted_on_every_later_run(tmp_path):
    system = "fl-safety-again"
    cfg = job_config(tmp_path, system, task="ShutdownAt")
    items = words(30) + ["stop"] + words(10)
    write_words(SystemRegistry(cfg), system, items)
    run_container(cfg)
    _, result = run_container(cfg)
    assert result.reason == "end-of-stream"
    assert emitted_counts(SystemRegistry(cfg), system) == Counter(items)


def test_weir_run_refuses_a_misspelt_offset_default_before_creating_anything(tmp_path):
    (tmp_path / "job.properties").write_text(
        "job.name=typo\n"
        "task.class=tests.e2e._count_job:CountJob\n"
        "task.inputs=filelog.words\n"
        "systems.filelog.factory=filelog\n"
        "systems.filelog.root=log\n"
        "systems.filelog.default.stream.samza.offset.defualt=oldest\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "weir", "log", "create", "words", "--root", "log"],
                   cwd=tmp_path, env=env, check=True, capture_output=True)
    result = subprocess.run([sys.executable, "-m", "weir", "run", "job.properties",
                             "--status", "off"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "systems.filelog.default.stream.samza.offset.defualt" in result.stderr
    assert "job.properties:6" in result.stderr
    assert "did you mean 'systems.filelog.default.stream.samza.offset.default'?" in result.stderr
    assert not (tmp_path / "checkpoints").exists()


def test_containers_of_a_killed_runner_keep_a_new_run_out_until_they_exit(tmp_path):
    """Container processes are spawned: they do not share the runner's job lock, so each
    holds its own; a new run refuses while one of them still works (e.g. its final commit
    after the runner died) and starts once they are gone."""
    import signal
    import time

    from tests.reliability._input_job import InputJob
    from weir.recovery.errors import JobLockedError
    from weir.recovery.job_lock import JobLock, container_lock_path
    from weir.stores.locking import read_holder

    job = InputJob(tmp_path, "rocksdb", partitions=2, extra="job.container.count=2\n")
    job.produce(words(200))  # not ended: the containers keep running
    runner = job.start()
    locks = [container_lock_path(tmp_path / "checkpoints", c) for c in ("0", "1")]
    try:
        deadline = time.monotonic() + 60
        while not all(read_holder(p) for p in locks) and time.monotonic() < deadline:
            time.sleep(0.05)
        children = [read_holder(p).pid for p in locks]
        for pid in children:
            os.kill(pid, signal.SIGSTOP)  # hold them mid-work, deterministically
        runner.kill()
        runner.wait(timeout=30)  # (its output pipe stays open while the children live)
        with pytest.raises(JobLockedError) as err:
            JobLock.acquire(tmp_path / "checkpoints", job="reliability-count")
        assert "a container of an earlier run" in str(err.value)
        assert any(f"pid {pid}" in str(err.value) for pid in children)
    finally:
        for pid in [read_holder(p).pid for p in locks if read_holder(p)]:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # they notice the runner is gone, commit and exit
        try:
            JobLock.acquire(tmp_path / "checkpoints", job="reliability-count").release()
            break
        except JobLockedError:
            time.sleep(0.1)
    else:
        pytest.fail("the container processes did not exit after their runner died")
    runner.communicate(timeout=30)


# -- transaction markers are never state (issue 23, point 9) -----------------------------------

def _changelog_with(tmp_path, outcome: str):
    """A compacted file-log changelog partition whose only record went through a transaction
    that ``outcome`` (committed, aborted, open) says; then the stream moved aside and created
    again, and the same transactional id started once more (what a reset used to leave)."""
    from weir.engine.container.task_storage import LoggedStore
    from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
    from weir.engine.systems.changelog import SystemChangelogSource
    from weir.engine.systems.filelog.transactions import TransactionalProducer

    cfg = Config({"systems.fl.factory": "filelog", "systems.fl.root": str(tmp_path / "log")})
    registry = SystemRegistry(cfg)
    admin = registry.admin("fl")
    admin.create_stream(StreamSpec("cl", 1, CleanupPolicy.COMPACT))
    producer = TransactionalProducer(admin.settings, "job-1/Partition 0")
    producer.init_transactions()
    producer.send("t", OutgoingMessageEnvelope(SystemStream("fl", "cl"), b"1", key=b"k",
                                               partition=0))
    producer.prepare()
    if outcome == "committed":
        producer.commit()
    elif outcome == "aborted":
        producer.abort()
    if outcome != "open":
        producer.stop()
        if outcome == "committed":  # the old reset: the stream moved, the producer left
            admin.rename_stream("cl", "cl.reset-1")
            admin.create_stream(StreamSpec("cl", 1, CleanupPolicy.COMPACT))
            again = TransactionalProducer(admin.settings, "job-1/Partition 0")
            again.init_transactions()  # writes its last transaction's commit marker again
            again.stop()
    ssp = SystemStreamPartition("fl", "cl", 0)
    store = LoggedStore("counts", ssp, SystemChangelogSource(registry, ssp), None)
    return store, producer


@pytest.mark.parametrize("outcome", ["committed", "aborted"])
def test_a_changelog_holding_only_markers_or_aborted_records_is_no_state(tmp_path, outcome):
    from weir.engine.container.safety import check_state_without_checkpoint
    store, _ = _changelog_with(tmp_path, outcome)
    assert store.source.newest_offset() >= 0  # the offsets are taken
    check_state_without_checkpoint("Partition 0", [store], checkpoint_path="cp",
                                   previous_exists=False, job_config="job.properties")


def test_a_changelog_holding_an_open_transaction_is_state(tmp_path):
    from weir.engine.container.safety import check_state_without_checkpoint
    store, producer = _changelog_with(tmp_path, "open")
    try:
        with pytest.raises(StateWithoutCheckpointError, match="holds records up to offset"):
            check_state_without_checkpoint("Partition 0", [store], checkpoint_path="cp",
                                           previous_exists=False, job_config="job.properties")
    finally:
        producer.stop()


# -- the changelog partition a checkpoint was written against (issue 23, point 2) --------------

def test_a_checkpoint_of_another_changelog_partition_is_refused_naming_both():
    from weir.engine.container.safety import check_identities
    from weir.engine.model import SystemStreamPartition
    from weir.recovery.checkpoint import Checkpoint
    from weir.recovery.errors import ChangelogPartitionMismatchError
    checkpoint = Checkpoint({}, {"counts": 7},
                            changelog_partitions={"counts": ("fl", "counts-log", 0)})
    now = SystemStreamPartition("fl", "counts-log", 1)
    with pytest.raises(ChangelogPartitionMismatchError) as err:
        check_identities("Partition 0", checkpoint, {}, {"counts": (now, None)},
                         checkpoint_path="cp.json", job_config="job.properties")
    assert err.value.recorded == ("fl", "counts-log", 0) and err.value.current == now
    assert "fl.counts-log#1" in str(err.value) and "fl.counts-log#0" in str(err.value)
    assert "weir coordinator show --job job.properties" in str(err.value)
    # the same partition, or a checkpoint that recorded none (an older Weir's), passes
    check_identities("Partition 0", checkpoint, {},
                     {"counts": (SystemStreamPartition("fl", "counts-log", 0), None)},
                     checkpoint_path="cp.json", job_config="job.properties")
    check_identities("Partition 0", Checkpoint({}, {"counts": 7}), {}, {"counts": (now, None)},
                     checkpoint_path="cp.json", job_config="job.properties")
