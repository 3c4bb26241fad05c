"""Transactions on the file log: batches and markers on disk, read_committed and
read_uncommitted, producer ids and epochs, fencing, recovery of the previous incarnation's
transaction, compaction (docs/EXACTLY-ONCE.md). Transactions abandoned by dead producers:
test_abandoned.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from weir.engine.errors import (ProducerFencedError, SystemError_, TransactionalIdInUseError)
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.filelog import FileLogConsumer, FileLogProducer
from weir.engine.systems.filelog._index import load_index
from weir.engine.systems.filelog._txn_format import ControlType, Marker
from weir.engine.systems.filelog._txn_view import Outcome
from weir.engine.systems.filelog.segment import list_segments
from weir.engine.systems.filelog.settings import IsolationLevel
from weir.engine.systems.filelog.stream import load_meta
from weir.engine.systems.filelog.producer_state import CHECKPOINT_EXTRAS_KEY, TxnState
from weir.engine.systems.filelog.transactions import TransactionalProducer
from weir.recovery.checkpoint import Checkpoint, FileCheckpointManager

from tests.engine.systems.filelog.conftest import SYSTEM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
OUT = SystemStream(SYSTEM, "s")
COMMITTED, UNCOMMITTED = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED


def _producer(log, name="job-1/Partition 0", decide=None) -> TransactionalProducer:
    producer = TransactionalProducer(log.settings, name)
    producer.init_transactions(decide)
    return producer


def _send(producer, *values, partition=0, key=b"k"):
    for value in values:
        producer.send("t", OutgoingMessageEnvelope(OUT, value, key=key, partition=partition))


def _die(producer):
    """The producer's process "dies": its locks are gone, its open transaction stays as it is
    on disk (what it flushed), nothing is aborted."""
    from weir.engine.systems.filelog import _shared
    producer._owner.release()
    for writer in producer._writers.values():
        _shared.release(writer)
    producer._writers.clear()
    producer._batches.clear()


def _commit(producer):
    txn = producer.prepare()
    producer.commit()
    return txn


def _plain(log, *values, partition=0):
    producer = FileLogProducer(log.settings)
    producer.register("p")
    for value in values:
        producer.send("p", OutgoingMessageEnvelope(OUT, value, key=None, partition=partition))
    producer.stop()


def _values(log, isolation=COMMITTED, offset=0, partition=0):
    reader = log.admin.reader("s", partition, offset, isolation=isolation)
    try:
        return [r.value for r in reader.read_records(10**6)]
    finally:
        reader.close()


def _frames(log, partition=0, isolation=UNCOMMITTED):
    reader = log.admin.reader("s", partition, 0, isolation=isolation, annotate=True)
    try:
        return reader.read_records(10**6)
    finally:
        reader.close()


def _child(log, body: str, timeout_ms: int = 300, killed: bool = False) -> None:
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {ROOT!r})
        from weir.stores.config import Config
        from weir.engine.model import OutgoingMessageEnvelope, SystemStream
        from weir.engine.systems.filelog import FileLogSettings
        from weir.engine.systems.filelog.transactions import TransactionalProducer
        settings = FileLogSettings.from_config("{SYSTEM}", Config({{
            "systems.{SYSTEM}.root": {log.root!r},
            "systems.{SYSTEM}.producer.transaction.timeout.ms": "{timeout_ms}"}}))
        p = TransactionalProducer(settings, "dead/Partition 0")
        p.init_transactions()
        out = SystemStream("{SYSTEM}", "s")
    """) + textwrap.dedent(body) + "\nos._exit(0)\n"
    done = subprocess.run([sys.executable, "-c", script], check=not killed, timeout=60)
    if killed:
        assert done.returncode == -signal.SIGKILL


# -- reading ------------------------------------------------------------------------------------

def test_read_committed_skips_aborted_batches_and_never_delivers_markers(log):
    log.create()
    producer = _producer(log)
    _send(producer, b"c1", b"c2")
    _commit(producer)
    _send(producer, b"a1", b"a2")
    producer.flush()
    producer.abort()
    _send(producer, b"c3")
    _commit(producer)
    assert _values(log) == [b"c1", b"c2", b"c3"]
    assert _values(log, UNCOMMITTED) == [b"c1", b"c2", b"a1", b"a2", b"c3"]
    frames = _frames(log)
    markers = [f.txn for f in frames if isinstance(f.txn, Marker)]
    assert [m.type for m in markers] == [ControlType.COMMIT, ControlType.ABORT,
                                         ControlType.COMMIT]
    assert [f.value for f in frames if f.txn is Outcome.ABORTED] == [b"a1", b"a2"]
    producer.stop()


def test_read_committed_holds_back_everything_after_an_open_transaction(log):
    log.create()
    producer = _producer(log)
    _plain(log, b"p1")
    _send(producer, b"t1")
    producer.flush()
    _plain(log, b"p2")          # after the open transaction's first batch: held back
    assert _values(log) == [b"p1"]
    assert _values(log, UNCOMMITTED) == [b"p1", b"t1", b"p2"]
    _commit(producer)
    assert _values(log) == [b"p1", b"t1", b"p2"]
    producer.stop()


def test_a_log_without_transactions_stays_format_1_and_reads_alike_in_both_levels(log):
    log.create()
    _plain(log, *[b"v%d" % i for i in range(50)])
    assert load_meta(log.root, "s", SYSTEM).format == 1
    assert _values(log) == _values(log, UNCOMMITTED) == [b"v%d" % i for i in range(50)]


def test_the_first_transactional_batch_marks_the_stream_format_2_which_older_weir_refuses(
        log, monkeypatch):
    log.create()
    producer = _producer(log)
    _send(producer, b"x")
    _commit(producer)
    producer.stop()
    assert load_meta(log.root, "s", SYSTEM).format == 2
    from weir.engine.systems.filelog import stream
    monkeypatch.setattr(stream, "FORMAT_VERSION", 1)  # a Weir that reads format 1 only
    with pytest.raises(SystemError_, match="format 2, this Weir reads up to 1; upgrade Weir"):
        load_meta(log.root, "s", SYSTEM)


def test_a_consumer_reads_committed_by_default_and_uncommitted_when_configured(make_log):
    for level, expected in (("read_committed", [b"c"]), ("read_uncommitted", [b"c", b"a"])):
        log = make_log(consumer_isolation_level=level)
        log.create(f"s-{level}")
        stream = SystemStream(SYSTEM, f"s-{level}")
        producer = _producer(log, f"job/{level}")
        producer.send("t", OutgoingMessageEnvelope(stream, b"c", key=b"k", partition=0))
        _commit(producer)
        producer.send("t", OutgoingMessageEnvelope(stream, b"a", key=b"k", partition=0))
        producer.flush()
        producer.abort()
        consumer = FileLogConsumer(log.settings)
        assert consumer.isolation_level is IsolationLevel(level)
        ssp = SystemStreamPartition(SYSTEM, stream.stream, 0)
        consumer.register(ssp, 0)
        consumer.start()
        got = consumer.poll([ssp], 0.05)[ssp]
        assert [e.message for e in got] == expected
        consumer.stop()
        producer.stop()


def test_batches_are_never_split_and_no_index_entry_points_inside_one(make_log):
    log = make_log(segment_bytes="4000", producer_batch_size="1500")
    log.create()
    producer = _producer(log)
    values = [b"v%03d" % i + b"." * 40 for i in range(400)]
    for i in range(0, 400, 40):
        _send(producer, *values[i:i + 40])
        _commit(producer)
    producer.stop()
    segments = list_segments(log.pdir())
    assert len(segments) > 5
    for segment in segments[:-1]:
        index = load_index(segment.index_path, os.path.getsize(segment.path))
        for ordinal, position in index.sparse:
            with open(segment.path, "rb") as f:
                f.seek(position + 16)
                tag = int.from_bytes(f.read(4), "little")
            inner = tag < 0x80000000 or tag == 0xFFFFFFFF
            # an entry is at a batch header, a marker, or a plain record: never a record
            # inside a batch (all records here are in batches)
            assert not inner, (segment.path, ordinal)
    assert _values(log) == values


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_reader_that_starts_inside_a_batch_applies_the_batch_outcome(make_log, compression):
    log = make_log(segment_bytes="3000", producer_batch_size="100000",
                   compression=compression)
    log.create()
    producer = _producer(log)
    committed = [b"c%02d" % i + b"." * 30 for i in range(30)]
    aborted = [b"a%02d" % i + b"." * 30 for i in range(30)]
    _send(producer, *committed)
    _commit(producer)                  # header at 0, records 1..30, marker 31
    _send(producer, *aborted)
    producer.flush()
    producer.abort()                   # header 32, records 33..62, marker 63
    _send(producer, *committed[:3])
    _commit(producer)                  # header 64, records 65..67, marker 68
    producer.stop()
    _plain(log, b"roll" * 800)         # seals the active segment
    assert _values(log, offset=10)[:21] == committed[9:30]
    assert _values(log, offset=40)[:3] == committed[:3]   # the rest of the aborted batch: none
    assert _values(log, UNCOMMITTED, offset=40)[:2] == aborted[7:9]


def test_an_incomplete_batch_at_the_end_is_never_read_and_is_cut_by_the_next_writer(log):
    log.create()
    producer = _producer(log)
    _send(producer, b"c1")
    _commit(producer)
    _send(producer, *[b"x%02d" % i for i in range(10)])
    producer.flush()
    _die(producer)  # with the batch on disk, no marker
    path = list_segments(log.pdir())[-1].path
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:-30])      # a crash in the middle of writing the batch
    assert _values(log, UNCOMMITTED) == [b"c1"]       # not whole: not there yet
    writer = log.writer()
    assert writer.upcoming == 3                       # header 0, record 1, marker 2
    writer.close()
    assert _values(log) == [b"c1"]


# -- producer ids, epochs, fencing, recovery ---------------------------------------------------

def test_each_init_claims_the_next_epoch_and_keeps_the_producer_id(log):
    log.create()
    first = _producer(log)
    pid, epoch = first.producer_id, first.epoch
    first.stop()
    second = _producer(log)
    assert (second.producer_id, second.epoch) == (pid, epoch + 1)
    assert _producer.__name__  # (another transactional id gets another producer id)
    other = _producer(log, "job-1/Partition 1")
    assert other.producer_id != pid
    second.stop()
    other.stop()


def test_init_aborts_the_ongoing_transaction_of_the_previous_incarnation(log):
    log.create()
    old = _producer(log)
    _send(old, b"lost")
    old.flush()
    old._owner.release()  # the process died
    new = _producer(log)
    assert _values(log) == []
    assert _values(log, UNCOMMITTED) == [b"lost"]
    state = new.state()
    assert state.transaction.state is TxnState.ABORTED
    assert (state.transaction.epoch, state.transaction.sequence) in state.aborted
    _send(new, b"kept")
    _commit(new)
    assert _values(log) == [b"kept"]
    new.stop()


@pytest.mark.parametrize("named", [True, False])
def test_init_rolls_a_prepared_transaction_forward_exactly_when_its_checkpoint_names_it(
        log, tmp_path, named):
    log.create()
    checkpoints = FileCheckpointManager(tmp_path / "checkpoints")
    checkpoints.register("Partition 0")
    checkpoints.start()
    old = _producer(log)
    _send(old, b"t1", b"t2")
    path = str(checkpoints.path_for("Partition 0"))
    txn = old.prepare({"kind": "weir-checkpoint", "path": path, "task": "Partition 0"})
    if named:  # the crash came after the checkpoint rename
        checkpoints.write("Partition 0", Checkpoint(
            {}, {}, {CHECKPOINT_EXTRAS_KEY: [txn.to_extras()]}))
    old._owner.release()  # died before writing the commit markers
    new = _producer(log)  # decides from the decision record the state names
    assert _values(log) == ([b"t1", b"t2"] if named else [])
    new.stop()


def test_a_second_live_incarnation_waits_for_the_first_then_fails(make_log):
    log = make_log(producer_init_timeout_ms="150")
    log.create()
    first = _producer(log)
    started = time.monotonic()
    with pytest.raises(TransactionalIdInUseError) as err:
        _producer(log)
    assert time.monotonic() - started >= 0.15
    assert f"pid {os.getpid()}" in str(err.value) and "Stop that process" in str(err.value)
    first.stop()


def test_a_fenced_producer_gets_a_typed_error_naming_it_and_both_epochs(log):
    log.create()
    zombie = _producer(log)
    _send(zombie, b"z1")
    _commit(zombie)
    zombie._owner.release()   # its lock is gone (another host, or removed by hand)
    successor = _producer(log)
    _send(zombie, b"z2")
    with pytest.raises(ProducerFencedError) as err:
        zombie.prepare()      # adding the partition to a new transaction
    assert (err.value.transactional_id, err.value.epoch, err.value.current) == \
        ("job-1/Partition 0", 0, 1)
    assert "job-1/Partition 0" in str(err.value) and "epoch 0" in str(err.value)
    with pytest.raises(ProducerFencedError):
        _send(zombie, b"z3")  # every later call
    successor.stop()
    zombie.stop()
    assert _values(log) == [b"z1"]


def test_a_zombies_batch_after_its_successors_batch_is_never_visible(log):
    log.create()
    zombie = _producer(log)
    _send(zombie, b"z1")
    zombie.flush()            # a transaction with the partition registered
    zombie._owner.release()
    successor = _producer(log)  # aborts z1's transaction
    _send(successor, b"s1")
    successor.flush()         # the successor's open transaction
    _send(zombie, b"z2")
    zombie.flush()            # lands after s1, inside s1's transaction's span
    _commit(successor)
    assert _values(log) == [b"s1"]
    for start in range(0, 6):  # also for readers that start after the abort marker
        assert b"z2" not in _values(log, offset=start)
    successor.stop()
    zombie.stop()


# -- compaction ----------------------------------------------------------------------------------

def test_compaction_drops_aborted_records_and_markers_and_keeps_committed_ones(make_log):
    log = make_log(segment_bytes="600", compaction_min_lag_ms="0",
                   compaction_tombstone_retention_ms="0")
    log.create(compact=True)
    producer = _producer(log)
    for i in range(6):
        _send(producer, b"committed-%d" % i, key=b"c%d" % (i % 2))
        _commit(producer)
        _send(producer, b"aborted-%d" % i, key=b"c%d" % (i % 2))
        producer.flush()
        producer.abort()
    producer.stop()
    before = _values(log)
    [report] = log.admin.compact("s")
    assert report.compaction.aborted_dropped > 0
    after = _frames(log)
    compacted = [f for f in after if f.offset < list_segments(log.pdir())[-1].base]
    assert all(f.txn is None for f in compacted)   # plain records only
    assert _values(log) == [v for v in before if v in {f.value for f in after}]
    assert set(_values(log)) >= {b"committed-4", b"committed-5"}  # the latest per key


def test_compaction_never_compacts_an_open_transaction_away(make_log):
    log = make_log(segment_bytes="400", compaction_min_lag_ms="0")
    log.create(compact=True)
    producer = _producer(log)
    _send(producer, *[b"open-%d" % i for i in range(20)])
    producer.flush()                  # open across several sealed segments
    _plain(log, *[b"later-%d" % i for i in range(20)])
    [report] = log.admin.compact("s")
    assert report.compaction.open_transactions == 1
    _commit(producer)
    producer.stop()
    assert _values(log)[:20] == [b"open-%d" % i for i in range(20)]


def test_a_zombie_is_fenced_however_many_incarnations_followed_it(log):
    log.create()
    zombie = _producer(log)
    zombie._owner.release()
    for _ in range(12):     # old epoch claims are pruned meanwhile
        successor = _producer(log)
        successor.stop()
    _send(zombie, b"late")
    with pytest.raises(ProducerFencedError) as err:
        zombie.prepare()
    assert (err.value.epoch, err.value.current) == (0, 12)
    zombie.stop()


def test_a_process_killed_between_its_commit_markers_is_rolled_forward_everywhere(
        log, tmp_path):
    """SIGKILL in the middle of a commit: the checkpoint (the decision) is durable, the commit
    marker reached partition 0 only. Partitions 1 and 2 are held back (never shown as aborted,
    never shown partly), and the next incarnation writes the missing markers."""
    log.create(partitions=3)
    checkpoints = FileCheckpointManager(tmp_path / "cp")
    checkpoints.register("T")
    checkpoints.start()
    path = str(checkpoints.path_for("T"))
    _child(log, f"""
        import signal
        from weir.engine.systems.filelog.writer import PartitionWriter
        from weir.recovery.checkpoint import Checkpoint, FileCheckpointManager
        for partition in range(3):
            p.send("t", OutgoingMessageEnvelope(out, b"v%d" % partition, key=b"k",
                                                partition=partition))
        txn = p.prepare({{"kind": "weir-checkpoint", "path": {path!r}, "task": "T"}})
        m = FileCheckpointManager({str(tmp_path / "cp")!r}); m.register("T"); m.start()
        m.write("T", Checkpoint({{}}, {{}}, {{"transactions": [txn.to_extras()]}}))
        markers = []
        append = PartitionWriter.append_marker
        def dying(self, *args, **kwargs):
            if markers:                    # the first marker is written and fsynced
                os.kill(os.getpid(), signal.SIGKILL)
            markers.append(args)
            return append(self, *args, **kwargs)
        PartitionWriter.append_marker = dying
        p.commit()
    """, timeout_ms=600_000, killed=True)
    assert [_values(log, partition=p) for p in range(3)] == [[b"v0"], [], []]
    assert [_values(log, UNCOMMITTED, partition=p) for p in range(3)] == [[b"v0"], [b"v1"],
                                                                          [b"v2"]]
    successor = TransactionalProducer(log.settings, "dead/Partition 0")
    result = successor.init_transactions()
    assert result.resolved == "committed"
    successor.stop()
    assert [_values(log, partition=p) for p in range(3)] == [[b"v0"], [b"v1"], [b"v2"]]


def test_retention_of_a_transactions_first_batches_leaves_the_rest_decided_by_its_marker(
        make_log):
    """Retention deletes whole segments from the front, also ones holding the first batches
    of a transaction: a reader from the oldest retained offset still sees the rest of a
    committed transaction (decided by its marker) and none of an aborted one."""
    writer_log = make_log(segment_bytes="600", producer_batch_size="200")
    writer_log.create()
    producer = _producer(writer_log)
    committed = [b"c%02d" % i + b"." * 24 for i in range(40)]
    aborted = [b"a%02d" % i + b"." * 24 for i in range(10)]
    _send(producer, *committed)
    _commit(producer)              # many batches of one transaction, over many segments
    _send(producer, *aborted)
    producer.flush()
    producer.abort()
    _send(producer, b"last")
    _commit(producer)
    producer.stop()
    before = list_segments(writer_log.pdir())
    assert len(before) > 6
    log = make_log(segment_bytes="600", retention_bytes="2000")
    report = log.admin.apply_retention("s")[0]
    assert report.deleted_segments > 0
    oldest = list_segments(log.pdir())[0].base
    assert oldest > 1                                   # the first batches are gone
    seen = _values(log, offset=oldest)
    assert len(seen) > 1 and seen[-1] == b"last"        # some of the commit is retained
    assert not any(v.startswith(b"a") for v in seen)    # the aborted transaction: none
    assert seen[:-1] == committed[len(committed) - len(seen) + 1:]   # a suffix of the commit


def test_restores_bulk_read_of_a_transactional_changelog_sees_committed_records_only(log):
    """bulk.read_changelog (restore's reader below the consumer) honours transactions: it
    reads committed records, skips aborted ones, and raises OpenTransactionError instead of
    returning a short range when an open transaction holds it back."""
    from weir.engine.errors import OpenTransactionError
    from weir.engine.systems.filelog.bulk import ChangelogLocation, read_changelog
    log.create()
    producer = _producer(log)
    _send(producer, b"1", key=b"a")
    _send(producer, b"1", key=b"b")
    _commit(producer)
    _send(producer, b"lost", key=b"a")
    producer.flush()
    producer.abort()
    _send(producer, b"2", key=b"b")
    _commit(producer)
    location = ChangelogLocation(log.root, "s", 0)
    pairs = {}
    for batch in read_changelog(location, 0, 10**6):
        pairs.update(batch.pairs)
    assert pairs == {b"a": b"1", b"b": b"2"}
    _send(producer, b"open", key=b"c")
    producer.flush()
    with pytest.raises(OpenTransactionError) as caught:
        for _ in read_changelog(location, 0, 10**6):
            pass
    assert caught.value.partition == 0 and "--resolve" in str(caught.value)
    producer.stop()


def test_a_flush_writes_out_without_fsync_and_prepare_and_commit_fsync_every_partition(
        log, monkeypatch):
    log.create(partitions=3)
    producer = _producer(log)
    for p in range(3):
        _send(producer, b"v%d" % p, partition=p)
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    producer.flush()                   # written out for read_uncommitted readers, not synced
    assert synced == []
    assert [_values(log, UNCOMMITTED, partition=p) for p in range(3)] == [[b"v0"], [b"v1"],
                                                                         [b"v2"]]
    producer.prepare()                 # every partition fsynced (together) before the decision
    assert len(set(synced)) == 3
    synced.clear()
    producer.commit()                  # the markers: fsynced in every partition
    assert len(set(synced)) == 3
    assert [_values(log, partition=p) for p in range(3)] == [[b"v0"], [b"v1"], [b"v2"]]
    producer.stop()
