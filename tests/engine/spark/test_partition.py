"""The Weir state provider without Spark: versions, replicas, retries, damage, retention."""

from __future__ import annotations

import os
import shutil

import pytest

from weir.engine.spark.durable import OperatorMeta
from weir.engine.spark.errors import (PartitionCountChangedError, StateFileDamagedError,
                                      StateHistoryError, StateOwnershipError)
from weir.engine.spark.partition import load_version
from weir.engine.spark.replica import release_replicas
from weir.engine.spark.statefile import VersionKind

from tests.engine.spark._state import Operator

PROVIDERS = ["rocksdb", "lmdb", "memory"]
BATCHES = [["a", "b", "a"], ["b", "c"], ["a"], ["c", "c", "d"], ["e"], ["a", "e"], ["f"]]


def expected(upto: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for words in BATCHES[:upto]:
        for w in words:
            out[w] = out.get(w, 0) + 1
    return out


def durable_counts(op: Operator, version: int) -> dict[str, int]:
    state = load_version(op.checkpoint, 0, version, ["counts"])["counts"]
    return {k.decode(): int.from_bytes(v, "big") - (1 << 63) for k, v in state.items()}


@pytest.fixture
def op_factory(tmp_path):
    made = []

    def make(**kw):
        op = Operator(tmp_path / "ckpt", tmp_path / "local", **kw)
        made.append(op)
        return op

    yield make
    release_replicas()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_running_count_over_batches_equals_a_direct_count(op_factory, provider):
    op = op_factory(provider=provider)
    for batch, words in enumerate(BATCHES):
        outcome, emitted = op.run(0, batch, words)
        assert outcome == "published"
        assert emitted == {w: expected(batch + 1)[w] for w in set(words)}
    assert op.replica_counts(0) == expected(len(BATCHES))
    assert durable_counts(op, len(BATCHES) - 1) == expected(len(BATCHES))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_retry_after_publishing_adopts_the_published_version(op_factory, provider):
    op = op_factory(provider=provider)
    op.run(0, 0, BATCHES[0])
    with pytest.raises(RuntimeError, match="injected"):
        op.run(0, 1, BATCHES[1], fail_after_publish=True)
    outcome, emitted = op.run(0, 1, BATCHES[1])          # the retry
    assert outcome == "replayed"
    assert emitted == {"b": 2, "c": 1}
    op.run(0, 2, BATCHES[2])
    assert op.replica_counts(0) == expected(3)


def test_a_losing_attempt_adopts_the_winners_changelog_and_outputs(op_factory):
    op = op_factory()
    op.run(0, 0, BATCHES[0])
    loser = op.state(0, 1)
    loser.open()
    counts = loser.store("counts")
    counts.put("zzz", 99)                                  # what only the loser computed
    winner_outcome, winner_out = op.run(0, 1, BATCHES[1])  # another attempt publishes first
    assert winner_outcome == "published"
    assert loser.commit(outputs=[(b"zzz", b"99")]) == "adopted"
    keys, values = loser.outputs()
    assert dict(zip(keys, values)) == {b"b": b"2", b"c": b"1"}
    loser.close()
    assert "zzz" not in op.replica_counts(0)
    assert op.replica_counts(0) == expected(2)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replicas_deleted_or_of_a_dead_worker_are_rebuilt_exactly(op_factory, tmp_path, provider):
    op = op_factory(provider=provider)
    for batch in range(4):
        op.run(0, batch, BATCHES[batch])
    release_replicas()                                     # the worker died
    shutil.rmtree(tmp_path / "local", ignore_errors=True)  # and its disk is gone
    op.run(0, 4, BATCHES[4])
    assert op.replica_counts(0) == expected(5)


@pytest.mark.parametrize("provider", ["rocksdb", "lmdb"])
def test_a_new_worker_adopts_a_dead_workers_replica_and_catches_up(op_factory, provider):
    op = op_factory(provider=provider, interval=100)
    for batch in range(3):
        op.run(0, batch, BATCHES[batch])
    release_replicas()                                     # the worker died, its slot stays
    state = op.state(0, 3)
    state.open()
    assert state.metrics.replica == "adopted"
    assert state.metrics.changelogs_replayed == 0
    state.close()
    release_replicas()
    op.run(0, 3, BATCHES[3])
    assert op.replica_counts(0) == expected(4)


def test_a_replica_whose_engine_changed_after_its_mark_is_not_adopted(op_factory, tmp_path):
    op = op_factory(provider="rocksdb", interval=100)
    for batch in range(3):
        op.run(0, batch, BATCHES[batch])
    from weir.engine.spark.replica import _OPEN
    replica = _OPEN[(str(op.checkpoint.root), 0)]
    replica.engines["counts"].put(b"stray", b"\x80" + bytes(7))  # written after the mark
    release_replicas()
    state = op.state(0, 3)
    state.open()
    assert state.metrics.replica == "rebuilt" or state.metrics.replica == "new"
    assert state.metrics.changelogs_replayed == 3
    state.close()
    assert "stray" not in op.replica_counts(0)


def test_a_replayed_batch_rebuilds_a_replica_that_is_ahead(op_factory):
    op = op_factory()
    for batch in range(5):
        op.run(0, batch, BATCHES[batch])
    # Spark replays batch 3 (its commit marker was lost): the version is published already.
    outcome, emitted = op.run(0, 3, BATCHES[3])
    assert outcome == "replayed"
    assert emitted == {"c": expected(4)["c"], "d": 1}
    # a replay of batch 5 after a lost batch 5 never published: state must be 4, not ahead
    outcome, _ = op.run(0, 5, BATCHES[5])
    assert outcome == "published"
    assert op.replica_counts(0) == expected(6)


def test_every_batch_publishes_a_version_even_without_changes(op_factory):
    op = op_factory()
    op.run(0, 0, BATCHES[0])
    op.run(0, 1, [])
    listing = op.checkpoint.partition(0).listing()
    assert listing.changelogs == (0, 1)


def test_a_damaged_snapshot_is_rebuilt_from_the_changelogs(op_factory, tmp_path):
    op = op_factory(interval=2)
    for batch in range(5):
        op.run(0, batch, BATCHES[batch])
    files = op.checkpoint.partition(0)
    assert 3 in files.listing().snapshots
    path = files.path(3, VersionKind.SNAPSHOT)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    release_replicas()
    shutil.rmtree(tmp_path / "local")
    op.run(0, 5, BATCHES[5])
    assert op.replica_counts(0) == expected(6)
    assert 3 in files.listing().snapshots                 # written again
    assert files.read(3, VersionKind.SNAPSHOT).meta["rewritten"] is True
    assert list(files.directory.glob("*.snapshot.zst.damaged-*"))


def test_a_damaged_changelog_is_a_typed_error_naming_the_file(op_factory, tmp_path):
    op = op_factory(interval=100)
    for batch in range(4):
        op.run(0, batch, BATCHES[batch])
    path = op.checkpoint.partition(0).path(2, VersionKind.CHANGELOG)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01
    path.write_bytes(bytes(data))
    release_replicas()
    shutil.rmtree(tmp_path / "local")
    with pytest.raises(StateFileDamagedError) as info:
        op.run(0, 4, BATCHES[4])
    assert info.value.path == path
    assert str(path) in str(info.value)
    assert info.value.version == 2


def test_a_missing_changelog_is_a_typed_error_not_an_empty_version(op_factory, tmp_path):
    op = op_factory(interval=100)
    for batch in range(4):
        op.run(0, batch, BATCHES[batch])
    os.unlink(op.checkpoint.partition(0).path(1, VersionKind.CHANGELOG))
    release_replicas()
    shutil.rmtree(tmp_path / "local")
    with pytest.raises(StateHistoryError, match="version.s. 1 are missing"):
        op.run(0, 4, BATCHES[4])


def test_retention_keeps_every_version_it_promises_and_a_fallback_snapshot(op_factory):
    op = op_factory(interval=2, retain=3)
    for batch in range(len(BATCHES)):
        op.run(0, batch, BATCHES[batch])
    listing = op.checkpoint.partition(0).listing()
    latest = len(BATCHES) - 1
    for version in range(latest - 3 + 1, latest + 1):
        assert durable_counts(op, version) == expected(version + 1)
    assert listing.changelogs[0] > 0                       # old ones were retired
    assert len([s for s in listing.snapshots if s <= latest - 2]) >= 2


def test_a_changed_partition_count_is_refused(op_factory):
    op = op_factory(partitions=2)
    op.run(0, 0, BATCHES[0])
    other = op_factory(partitions=3)
    with pytest.raises(PartitionCountChangedError, match="keeps its state in 2 partitions"):
        other.meta()


def test_state_of_another_query_is_refused(op_factory):
    op = op_factory(query="q-1")
    op.run(0, 0, BATCHES[0])
    other = op_factory(query="q-2")
    with pytest.raises(StateOwnershipError, match="q-1"):
        other.meta()


def test_orphan_temp_files_of_dead_attempts_are_removed(op_factory):
    op = op_factory()
    op.run(0, 0, BATCHES[0])
    files = op.checkpoint.partition(0)
    import socket
    host = socket.gethostname().replace(".", "_")
    orphan = files.directory / f".{files.path(1, VersionKind.CHANGELOG).name}.{host}.999999.0123456789ab.tmp"
    orphan.write_bytes(b"half a version")
    op.run(0, 1, BATCHES[1])
    assert not orphan.exists()


def test_operator_meta_round_trips_and_detects_damage(tmp_path):
    op = Operator(tmp_path / "c", tmp_path / "l")
    meta = op.meta(created=5)
    assert meta.created_at_version == 5 and meta.partitions == 2
    raw = op.checkpoint.meta_path.read_bytes().replace(b'"partitions": 2', b'"partitions": 3')
    op.checkpoint.meta_path.write_bytes(raw)
    with pytest.raises(StateFileDamagedError, match="checksum"):
        op.checkpoint.read_meta()


def test_batches_before_the_operators_first_version_are_refused(op_factory):
    op = op_factory()
    op.checkpoint.ensure_meta(OperatorMeta("counts", "state-operator", 2,
                                           {s.name: s.describe() for s in op.stores}, "q-1", 5))
    with pytest.raises(StateHistoryError, match="before the operator's first version 5"):
        op.run(0, 3, ["a"])
    outcome, emitted = op.run(0, 5, ["a"])
    assert outcome == "published" and emitted == {"a": 1}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_state_rows_are_exact_through_deletes_replays_and_snapshots(op_factory, tmp_path,
                                                                    provider):
    op = op_factory(provider=provider, interval=2)
    for batch in range(3):
        op.run(0, batch, BATCHES[batch])
    state = op.state(0, 3)
    state.open()
    counts = state.store("counts")
    counts.delete("a")                                    # read never, present: -1
    counts.delete("nope")                                 # absent: 0
    counts.put("new", 1)                                  # absent: +1
    assert counts.get("b") == 2
    counts.put("b", 3)                                    # present: 0
    state.commit()
    state.close()
    assert state.metrics.state_rows == len(expected(3))
    release_replicas()
    shutil.rmtree(tmp_path / "local", ignore_errors=True)
    rebuilt = op.state(0, 4)
    rebuilt.open()
    rebuilt.commit()
    rebuilt.close()
    assert rebuilt.metrics.state_rows == len(expected(3))


def test_rows_for_a_version_an_empty_attempt_published_are_refused_not_dropped(op_factory):
    import pyarrow as pa

    from weir.engine.spark.errors import StatePartitioningError
    from weir.engine.spark.operator import check_replayed_input

    op = op_factory()
    op.run(0, 0, [])          # an attempt that got no rows (a renumbered task) published 0
    state = op.state(0, 0)
    state.open()
    try:
        assert state.published is not None
        check_replayed_input(state, iter([]), "counts")            # a replay with no rows: fine
        rows = [pa.record_batch({"key": ["a"]})]
        with pytest.raises(StatePartitioningError, match="received no rows"):
            check_replayed_input(state, iter(rows), "counts")
    finally:
        state.close()
