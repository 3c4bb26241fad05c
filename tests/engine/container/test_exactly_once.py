"""Exactly-once tasks: the key, one transaction per task tied to its checkpoint, recovery of an
interrupted commit at each crash point, fenced checkpoints, restore reading committed data,
and a whole job through the container."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from weir.engine.config.job import JobConfig
from weir.engine.container.container import Container, ProgressMode
from weir.engine.container.exactly_once import (ProcessingGuarantee, TaskTransaction,
                                                processing_guarantee, transactional_id)
from weir.engine.container.settings import JobSettings
from weir.engine.errors import (FencedCheckpointError, OpenTransactionError,
                                ProducerStateMissingError)
from weir.engine.jobmodel.model import build_job_model
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.changelog import SystemChangelogSink, SystemChangelogSource
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.checkpoint import Checkpoint, FileCheckpointManager
from weir.stores.config import Config, ConfigError

from tests.engine.container.test_container import job_config

_ids = itertools.count()
OUT = SystemStream("filelog", "out")


def _setup(tmp_path: Path, partitions: int = 1):
    config = Config({"job.name": "eo", "systems.filelog.root": str(tmp_path / "log"),
                     "systems.filelog.consumer.isolation.level": "read_uncommitted"})
    registry = SystemRegistry(config)
    registry.admin("filelog").create_stream(StreamSpec("out", partitions))
    checkpoints = FileCheckpointManager(tmp_path / "checkpoints")
    checkpoints.register("Partition 0")
    checkpoints.start()
    return config, registry, checkpoints


def _task(registry, checkpoints, config):
    job = JobConfig.from_config(config)
    return TaskTransaction.for_task("Partition 0", job, registry, ["filelog"],
                                    str(checkpoints.path_for("Partition 0")))


def _send(txn, *values):
    producer = txn.producers["filelog"]
    for value in values:
        producer.send("Partition 0", OutgoingMessageEnvelope(OUT, value, key=b"k", partition=0))


def _committed(registry) -> list[bytes]:
    consumer = registry.consumer("filelog")
    consumer.set_isolation_level("read_committed")   # the config says uncommitted
    ssp = SystemStreamPartition("filelog", "out", 0)
    consumer.register(ssp, 0)
    consumer.start()
    try:
        return [e.message for e in consumer.poll([ssp], 0.05).get(ssp, [])]
    finally:
        consumer.stop()


def _commit(txn, checkpoints, offset: int) -> Checkpoint:
    extras = txn.prepare()
    checkpoint = Checkpoint({("filelog", "in", 0): offset}, {}, extras)
    checkpoints.write("Partition 0", checkpoint)
    txn.commit()
    return checkpoint


def _sizes(tmp_path: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in (tmp_path / "log" / "out").rglob("*.log")}


def _crash(txn):
    """The process dies: locks gone, nothing aborted or completed."""
    from weir.engine.systems.filelog import _shared
    for producer in txn.producers.values():
        producer._owner.release()
        for writer in producer._writers.values():
            _shared.release(writer)
        producer._writers.clear()


def _words_job(registry, words: list[str], partitions: int) -> None:
    """The count-words job's input (bounded, word i in partition i % partitions) and output."""
    admin = registry.admin("filelog")
    admin.create_stream(StreamSpec("words", partitions, bounded=True))
    admin.create_stream(StreamSpec("counts-out", partitions))
    producer = registry.producer("filelog")
    producer.register("t")
    for i, word in enumerate(words):
        producer.send("t", OutgoingMessageEnvelope(SystemStream("filelog", "words"),
                                                   word.encode(), partition=i % partitions))
    producer.end_stream("words")
    producer.stop()


# -- the key ----------------------------------------------------------------------------------

def test_the_guarantee_defaults_to_at_least_once_and_accepts_kafkas_name(tmp_path):
    registry = SystemRegistry(Config({}))
    assert processing_guarantee(Config({}), registry) is ProcessingGuarantee.AT_LEAST_ONCE
    for value in ("exactly_once", "exactly_once_v2", "EXACTLY_ONCE"):
        config = Config({"task.processing.guarantee": value})
        assert processing_guarantee(config, registry) is ProcessingGuarantee.EXACTLY_ONCE
    with pytest.raises(ConfigError, match="task.processing.guarantee"):
        processing_guarantee(Config({"task.processing.guarantee": "twice"}), registry)


def test_exactly_once_needs_every_changelog_on_a_file_log(tmp_path):
    config = job_config(tmp_path, f"mem{next(_ids)}", **{"task.processing.guarantee":
                                                         "exactly_once"})
    with pytest.raises(ConfigError, match=r"stores\.counts\.changelog") as err:
        JobSettings.from_config(config, SystemRegistry(config))
    assert "file-log system" in str(err.value)


def test_a_tasks_transactional_id_names_job_and_task():
    job = JobConfig.from_config(Config({"job.name": "wc", "job.id": "2"}))
    assert transactional_id(job, "Partition 3") == "wc-2/Partition 3"


# -- the commit protocol and its crash points ---------------------------------------------------

def test_a_commit_names_its_transaction_in_the_checkpoint_and_makes_it_visible(tmp_path):
    config, registry, checkpoints = _setup(tmp_path)
    txn = _task(registry, checkpoints, config)
    txn.recover(None)
    _send(txn, b"a", b"b")
    checkpoint = _commit(txn, checkpoints, 7)
    [named] = checkpoint.extras["transactions"]
    assert named["transactional_id"] == "eo-1/Partition 0" and named["sequence"] == 1
    assert _committed(registry) == [b"a", b"b"]
    assert txn.prepare() == {}       # nothing sent since: nothing to name
    txn.close()


def test_a_crash_while_processing_aborts_the_interval_at_the_next_start(tmp_path):
    config, registry, checkpoints = _setup(tmp_path)
    txn = _task(registry, checkpoints, config)
    txn.recover(None)
    _send(txn, b"kept")
    _commit(txn, checkpoints, 1)
    _send(txn, b"lost")
    txn.producers["filelog"].flush()
    _crash(txn)
    again = _task(registry, checkpoints, config)
    [result] = again.recover(checkpoints.read_last("Partition 0"))
    assert result.resolved == "aborted"
    assert _committed(registry) == [b"kept"]
    again.close()


def test_a_crash_after_prepare_before_the_checkpoint_aborts_the_interval(tmp_path):
    config, registry, checkpoints = _setup(tmp_path)
    txn = _task(registry, checkpoints, config)
    txn.recover(None)
    _send(txn, b"t")
    txn.prepare()                     # durable and prepared, but no decision
    _crash(txn)
    again = _task(registry, checkpoints, config)
    [result] = again.recover(checkpoints.read_last("Partition 0"))
    assert result.resolved == "aborted"
    assert _committed(registry) == []
    again.close()


def test_a_crash_after_the_checkpoint_before_the_markers_rolls_the_interval_forward(tmp_path):
    config, registry, checkpoints = _setup(tmp_path)
    txn = _task(registry, checkpoints, config)
    txn.recover(None)
    _send(txn, b"t1", b"t2")
    extras = txn.prepare()
    checkpoints.write("Partition 0", Checkpoint({("filelog", "in", 0): 3}, {}, extras))
    _crash(txn)                       # the decision is durable; no marker yet
    assert _committed(registry) == []  # held back meanwhile
    again = _task(registry, checkpoints, config)
    [result] = again.recover(checkpoints.read_last("Partition 0"))
    assert result.resolved == "committed"
    assert _committed(registry) == [b"t1", b"t2"]
    again.close()


def test_a_clean_close_aborts_an_ongoing_transaction_and_leaves_a_prepared_one(tmp_path):
    config, registry, checkpoints = _setup(tmp_path)
    txn = _task(registry, checkpoints, config)
    txn.recover(None)
    _send(txn, b"x")
    txn.producers["filelog"].flush()
    txn.close()                        # a failed task: no final commit
    assert txn.producers["filelog"].state().transaction.state.value == "aborted"
    again = _task(registry, checkpoints, config)
    again.recover(None)
    _send(again, b"y")
    again.prepare()
    again.close()
    assert again.producers["filelog"].state().transaction.state.value == "prepared"


def test_a_checkpoint_naming_an_aborted_transaction_is_refused(tmp_path):
    config, registry, checkpoints = _setup(tmp_path)
    zombie = _task(registry, checkpoints, config)
    zombie.recover(None)
    _send(zombie, b"z")
    extras = zombie.prepare()
    zombie.producers["filelog"]._owner.release()
    replacement = _task(registry, checkpoints, config)
    replacement.recover(checkpoints.read_last("Partition 0"))   # aborts the zombie's
    replacement.close()
    # the zombie, resumed, still writes its checkpoint naming the aborted transaction
    checkpoints.write("Partition 0", Checkpoint({("filelog", "in", 0): 9}, {}, extras))
    third = _task(registry, checkpoints, config)
    with pytest.raises(FencedCheckpointError) as err:
        third.recover(checkpoints.read_last("Partition 0"), job_config="job.properties")
    assert "weir checkpoint use-previous job.properties --task 'Partition 0'" in str(err.value)
    assert _committed(registry) == []


def test_a_checkpoint_naming_a_transaction_whose_producer_state_is_gone_is_refused(tmp_path):
    """The log's .transactions directory is deleted after a crash between the checkpoint and
    the markers: which partitions need a commit marker is unknown. The start refuses with a
    typed error and changes nothing (the transaction is neither aborted nor guessed)."""
    import shutil
    config, registry, checkpoints = _setup(tmp_path)
    txn = _task(registry, checkpoints, config)
    txn.recover(None)
    _send(txn, b"t1")
    extras = txn.prepare()
    checkpoints.write("Partition 0", Checkpoint({("filelog", "in", 0): 3}, {}, extras))
    _crash(txn)
    shutil.rmtree(tmp_path / "log" / ".transactions")
    before = _sizes(tmp_path)
    again = _task(registry, checkpoints, config)
    with pytest.raises(ProducerStateMissingError) as err:
        again.recover(checkpoints.read_last("Partition 0"), job_config="job.properties")
    message = str(err.value)
    assert "task 'Partition 0'" in message and "eo-1/Partition 0" in message
    assert "weir checkpoint reset job.properties --yes" in message
    assert not (tmp_path / "log" / ".transactions").exists()      # no epoch claimed
    assert _sizes(tmp_path) == before                                # no marker written


# -- restore reads committed data ---------------------------------------------------------------

def test_the_changelog_source_reads_committed_data_whatever_the_consumer_key_says(tmp_path):
    config, registry, checkpoints = _setup(tmp_path)
    registry.admin("filelog").create_stream(StreamSpec("cl", 1))
    txn = _task(registry, checkpoints, config)
    txn.recover(None)
    ssp = SystemStreamPartition("filelog", "cl", 0)
    sink = SystemChangelogSink(txn.producers["filelog"], ssp, "Partition 0/store")
    sink.append(b"a", b"1")
    _commit(txn, checkpoints, 0)
    sink.append(b"a", b"2")
    sink.flush()
    txn.producers["filelog"].abort()
    sink.append(b"b", b"3")
    _commit(txn, checkpoints, 1)
    source = SystemChangelogSource(registry, ssp)
    assert [(k, v) for _, k, v in source.read(0, source.newest_offset())] == \
        [(b"a", b"1"), (b"b", b"3")]
    sink.append(b"c", b"open")
    sink.flush()                       # an open transaction before the end
    with pytest.raises(OpenTransactionError) as err:
        list(source.read(0, source.newest_offset()))
    assert err.value.producer_id == txn.producers["filelog"].producer_id
    txn.close()


# -- a whole job ---------------------------------------------------------------------------------

def test_a_job_with_exactly_once_commits_outputs_state_and_offsets_together(tmp_path):
    config = job_config(tmp_path, "filelog", **{"task.processing.guarantee": "exactly_once"})
    registry = SystemRegistry(config)
    words = ["a", "b", "a", "c", "a", "b"] * 50
    _words_job(registry, words, partitions=2)
    model = build_job_model(config, {SystemStream("filelog", "words"): 2})
    result = Container(config, model, "0", registry=registry,
                       progress=ProgressMode.QUIET).run()
    assert result.messages_in == len(words)
    assert result.outputs[SystemStream("filelog", "counts-out")] == 3
    consumer = registry.consumer("filelog")
    ssps = [SystemStreamPartition("filelog", "counts-out", p) for p in range(2)]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    got = consumer.poll(ssps, 0.1)
    consumer.stop()
    serdes = registry.serdes_for(SystemStream("filelog", "counts-out"))
    counts = [(serdes.deserialize(e).key, serdes.deserialize(e).message)
              for envs in got.values() for e in envs]
    assert sorted(counts) == [("a", 150), ("b", 100), ("c", 50)]  # partition 0 reads the a's
    manager = FileCheckpointManager(tmp_path / "checkpoints")
    last = manager.read_last("Partition 0")
    assert last.extras["transactions"][0]["transactional_id"] == "count-words-1/Partition 0"


def test_exactly_once_refuses_checkpoints_in_a_stream(tmp_path):
    """The checkpoint file is each transaction's decision record: checkpoints in a stream
    are refused with the guarantee, naming the key, before anything runs."""
    from weir.engine.container.settings import JobSettings
    config = job_config(tmp_path, "filelog", **{"task.processing.guarantee": "exactly_once",
                                                 "task.checkpoint.factory": "stream",
                                                 "task.checkpoint.system": "filelog"})
    with pytest.raises(ConfigError) as caught:
        JobSettings.from_config(config, SystemRegistry(config))
    assert caught.value.key == "task.checkpoint.factory"


def test_a_job_run_with_exactly_once_then_without_restores_its_committed_state(tmp_path):
    """Turning the guarantee off later: the restore (its bulk reader below the consumer) reads
    the transactional changelog committed. The local state is removed after the first run, so
    the second rebuilds it from the changelog, and resends the counts at end of stream."""
    import shutil
    words = ["a", "b", "a", "c", "a", "b"] * 50
    for run, guarantee in enumerate(("exactly_once", "at_least_once")):
        config = job_config(tmp_path, "filelog", **{"task.processing.guarantee": guarantee})
        registry = SystemRegistry(config)
        if run == 0:
            admin = registry.admin("filelog")
            admin.create_stream(StreamSpec("words", 1, bounded=True))
            admin.create_stream(StreamSpec("counts-out", 1))
            producer = registry.producer("filelog")
            producer.register("t")
            for word in words:
                producer.send("t", OutgoingMessageEnvelope(SystemStream("filelog", "words"),
                                                           word.encode(), partition=0))
            producer.end_stream("words")
            producer.stop()
        else:
            shutil.rmtree(tmp_path / "state")
        model = build_job_model(config, {SystemStream("filelog", "words"): 1})
        Container(config, model, "0", registry=registry, progress=ProgressMode.QUIET).run()
    consumer = registry.consumer("filelog")
    ssp = SystemStreamPartition("filelog", "counts-out", 0)
    consumer.register(ssp, 0)
    consumer.start()
    last = {}
    serdes = registry.serdes_for(SystemStream("filelog", "counts-out"))
    while True:
        batch = consumer.poll([ssp], 0.1).get(ssp, [])
        if not batch:
            break
        for env in batch:
            env = serdes.deserialize(env)
            last.setdefault(env.key, []).append(env.message)
    consumer.stop()
    assert last == {"a": [150, 150], "b": [100, 100], "c": [50, 50]}


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_restore_reads_the_changelog_in_bulk_and_records_its_identity_under_either_guarantee(
        tmp_path, caplog, guarantee):
    """Issue 25: the exactly-once changelog wrapper once lacked the optional capabilities, so
    restore silently read record by record and OFFSET files carried no changelog identity.
    Run a job, delete its local store, run again: the rebuild reads the changelog's files
    directly (the bulk reader, said in the restore's summary line) and the OFFSET file names
    the changelog partition's identity, with exactly-once as without."""
    import logging
    import shutil

    from weir.recovery.offset_file import read_offset_file
    from weir.recovery.restore import Action, ReadPath

    config = job_config(tmp_path, "filelog", **{"task.processing.guarantee": guarantee})
    registry = SystemRegistry(config)
    admin = registry.admin("filelog")
    _words_job(registry, ["a", "b", "a", "c", "a", "b"] * 50, partitions=1)
    model = build_job_model(config, {SystemStream("filelog", "words"): 1})
    Container(config, model, "0", registry=registry, progress=ProgressMode.QUIET).run()
    state = tmp_path / "state"
    (offset_file_dir,) = {p.parent for p in state.rglob("OFFSET")}
    changelog = SystemStreamPartition("filelog", "counts-changelog", 0)
    identity = admin.metadata([changelog])[changelog].identity
    assert identity is not None  # the file log knows its partitions' identities
    assert read_offset_file(offset_file_dir).identity == identity

    shutil.rmtree(state)
    caplog.set_level(logging.DEBUG, logger="weir.recovery.restore")
    registry = SystemRegistry(config)
    Container(config, model, "0", registry=registry, progress=ProgressMode.QUIET).run()
    summaries = [r.getMessage() for r in caplog.records
                 if r.getMessage().startswith("restored store 'counts'")]
    assert len(summaries) == 1, summaries
    assert f"({Action.REBUILD.value}, offsets 0.." in summaries[0]
    assert f"({ReadPath.BULK.value})" in summaries[0], summaries[0]
    assert read_offset_file(offset_file_dir).identity == identity
