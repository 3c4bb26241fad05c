"""``weir spark repartition`` and Spark's hash, without Spark."""

from __future__ import annotations

import datetime
import json

import pytest

from weir.engine.cli import main
from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta
from weir.engine.spark.errors import SparkError
from weir.engine.spark.partition import load_version
from weir.engine.spark.processor import encode_key
from weir.engine.spark.replica import acquire_replica, release_replicas
from weir.engine.spark.repartition import _tws_key, repartition
from weir.engine.spark.sparkhash import partition_of, spark_hash

from tests.engine.spark._state import Operator

WORDS = [f"w{i:03d}" for i in range(60)]


def test_spark_hash_matches_what_spark_4_3_computes():
    # hash(...) of these values, computed by Spark 4.3.0's SQL engine
    cases = [
        (["a"], ["string"], 1485273170), ([""], ["string"], 142593372),
        (["abcde"], ["string"], 814637928), (["héllo wörld"], ["string"], -281075962),
        ([1], ["int"], -559580957), ([1], ["long"], -1712319331), ([-7], ["long"], 222034016),
        ([True], ["boolean"], -559580957), ([1.5], ["double"], 1290763749),
        ([1.5], ["float"], -221251528), ([-0.0], ["double"], -1670924195),
        ([datetime.date(2024, 3, 1)], ["date"], 260758936),
        ([datetime.datetime(2024, 3, 1, 12)], ["timestamp"], -1546728945),
        ([b"\x00\xff\x10"], ["binary"], -339173231), (["a", 1], ["string", "int"], 532252686),
        ([None], ["string"], 42)]
    for values, kinds, expected in cases:
        assert spark_hash(values, kinds) == expected, (values, kinds)
    assert partition_of(["a"], ["string"], 4) == 2


@pytest.fixture
def counts(tmp_path):
    op = Operator(tmp_path / "ckpt", tmp_path / "local", partitions=2, interval=2)
    for batch in range(3):
        for p in range(2):
            mine = [w for w in WORDS if partition_of([w], ["string"], 2) == p]
            op.run(p, batch, mine[batch::3] + mine[:batch])
    release_replicas()
    yield op
    release_replicas()


def _state(op: OperatorCheckpoint, partitions: int, version: int) -> dict[int, dict[bytes, bytes]]:
    return {p: load_version(op, p, version, ["counts"])["counts"] for p in range(partitions)}


def test_repartition_places_every_key_where_spark_would_and_loses_nothing(counts, tmp_path):
    op = counts.checkpoint
    before = _state(op, 2, 2)
    result = repartition(tmp_path / "ckpt", "counts", 5, key_types=["string"])
    assert (result.version, len(result.before), len(result.after)) == (2, 2, 5)
    after = _state(OperatorCheckpoint(tmp_path / "ckpt", "counts"), 5, 2)
    merged = {k: v for part in after.values() for k, v in part.items()}
    assert merged == {k: v for part in before.values() for k, v in part.items()}
    for p, part in after.items():
        assert all(partition_of([k.decode()], ["string"], 5) == p for k in part)
    assert result.kept.is_dir()
    meta = OperatorCheckpoint(tmp_path / "ckpt", "counts").read_meta()
    assert meta.partitions == 5 and meta.created_at_version == 2


def test_a_batch_published_but_not_committed_by_spark_is_left_to_be_replayed(counts, tmp_path):
    commits = tmp_path / "ckpt" / "commits"
    commits.mkdir()
    for batch in (0, 1):                    # Spark committed 0 and 1; batch 2 was published only
        (commits / str(batch)).write_text("v1\n{}")
    before = _state(counts.checkpoint, 2, 1)
    result = repartition(tmp_path / "ckpt", "counts", 3, key_types=["string"])
    assert result.version == 1
    op = OperatorCheckpoint(tmp_path / "ckpt", "counts")
    assert [op.partition(p).listing().latest for p in range(3)] == [1, 1, 1]
    merged = {k: v for part in _state(op, 3, 1).values() for k, v in part.items()}
    assert merged == {k: v for part in before.values() for k, v in part.items()}


def test_the_next_batch_continues_on_the_new_partitions(counts, tmp_path):
    repartition(tmp_path / "ckpt", "counts", 3, key_types=["string"])
    op = Operator(tmp_path / "ckpt", tmp_path / "local", partitions=3, interval=2)
    word = WORDS[7]
    p = partition_of([word], ["string"], 3)
    old = _state(OperatorCheckpoint(tmp_path / "ckpt", "counts"), 3, 2)[p]
    before = int.from_bytes(old[word.encode()], "big") ^ (1 << 63) if word.encode() in old else 0
    outcome, emitted = op.run(p, 3, [word])
    assert outcome == "published" and emitted == {word: before + 1}


def test_replicas_of_the_state_before_are_never_adopted(counts, tmp_path):
    old_meta = counts.checkpoint.read_meta()
    replica = acquire_replica(counts.checkpoint.root, 0, counts.stores,
                              tmp_path / "local", old_meta.incarnation)
    replica.mark(2)
    release_replicas()
    repartition(tmp_path / "ckpt", "counts", 3, key_types=["string"])
    new_meta = OperatorCheckpoint(tmp_path / "ckpt", "counts").read_meta()
    assert new_meta.incarnation != old_meta.incarnation
    again = acquire_replica(counts.checkpoint.root, 0, counts.stores, tmp_path / "local",
                            new_meta.incarnation)
    assert again.version is None


def test_the_cli_repartitions_and_shows_the_state(counts, tmp_path, capsys):
    assert main(["spark", "repartition", str(tmp_path / "ckpt"), "--operator", "counts",
                 "--partitions", "4", "--key-types", "string", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["after"]) == 4 and sum(result["after"]) == sum(result["before"])
    assert main(["spark", "show", str(tmp_path / "ckpt"), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["partition"] for r in rows] == [0, 1, 2, 3]
    assert sum(r["rows"] for r in rows) == sum(result["after"])


def test_jobs_and_unhashable_stores_are_refused(tmp_path):
    op = OperatorCheckpoint(tmp_path, "job-1")
    op.ensure_meta(OperatorMeta("job-1", "job", 2, {"s": {"key.serde": "string",
                                                          "msg.serde": "json"}}))
    with pytest.raises(SparkError, match="cannot be repartitioned"):
        repartition(tmp_path, "job-1", 3, key_types=["string"])
    with pytest.raises(SparkError, match="key column types"):
        repartition(tmp_path, "job-1", 3)


def test_transform_with_state_entries_all_carry_their_grouping_key():
    kb = encode_key(("k1", 7))
    for entry in (b"v\0count\0" + kb, b"l\0recent\0" + kb + bytes(8), b"L\0recent\0" + kb,
                  b"m\0buckets\0" + kb + b"userkey", b"t\0" + kb + bytes(8),
                  b"T\0" + bytes(8) + kb, b"x\0" + bytes(8) + b"v\0count\0" + kb):
        assert _tws_key(entry) == kb
