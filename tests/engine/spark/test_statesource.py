"""State as a data source: the readers' logic without Spark, then one Spark session reading
``weirstate`` (time travel, one partition, the change feed) and ``weirstate-metadata``."""

from __future__ import annotations

import pytest

from weir.engine.spark.errors import SparkError, StateHistoryError
from weir.engine.spark.replica import release_replicas
from weir.engine.spark.statesource import _metadata_rows, _Plan, _read_changes, _read_state

from tests.engine.spark._spark import start_spark, stop_spark
from tests.engine.spark._state import Operator

BATCHES = [["a", "b"], ["b", "c"], ["a", "d"], ["e"]]


def expected(upto: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for words in BATCHES[:upto]:
        for w in words:
            out[w] = out.get(w, 0) + 1
    return out


@pytest.fixture
def checkpoint(tmp_path):
    op = Operator(tmp_path / "ckpt", tmp_path / "local", partitions=2, interval=2, retain=100)
    for batch, words in enumerate(BATCHES):
        op.run(0, batch, words)
        op.run(1, batch, [w.upper() for w in words])
    release_replicas()
    yield tmp_path / "ckpt"


def rows(plan: _Plan, partition: int) -> dict:
    return {r[2]: r[3] for r in _read_state(str(plan.checkpoint), plan.op.operator, partition,
                                            plan.version, plan.stores,
                                            {s: (plan.meta.stores[s]["key.serde"],
                                                 plan.meta.stores[s]["msg.serde"])
                                             for s in plan.stores}, len(plan.stores) == 1)}


def test_the_newest_version_is_read_by_default_typed_by_the_stores_serdes(checkpoint):
    plan = _Plan({"path": str(checkpoint)})
    assert plan.version == len(BATCHES) - 1
    assert plan.schema().startswith("partition int, store string, key string, value bigint")
    assert rows(plan, 0) == expected(4)
    assert rows(plan, 1) == {k.upper(): v for k, v in expected(4).items()}


def test_time_travel_reads_any_retained_version(checkpoint):
    for version in range(len(BATCHES)):
        plan = _Plan({"path": str(checkpoint), "operator": "counts", "version": str(version)})
        assert rows(plan, 0) == expected(version + 1)


def test_sparks_statestore_option_names_are_accepted(checkpoint):
    plan = _Plan({"path": str(checkpoint), "batchId": "1"})
    assert plan.version == 1 and rows(plan, 0) == expected(2)
    feed = _Plan({"path": str(checkpoint), "readChangeFeed": "true",
                  "changeStartBatchId": "1", "changeEndBatchId": "2"})
    assert (feed.start, feed.end) == (1, 2)
    with pytest.raises(SparkError, match="name the same thing"):
        _Plan({"path": str(checkpoint), "version": "1", "batchId": "2"})


def test_a_version_never_published_is_a_typed_error(checkpoint):
    plan = _Plan({"path": str(checkpoint), "version": "9"})
    with pytest.raises(StateHistoryError, match="never published"):
        rows(plan, 0)


def test_the_change_feed_lists_puts_and_deletes_per_version(checkpoint):
    plan = _Plan({"path": str(checkpoint), "readChangeFeed": "true", "startVersion": "1",
                  "endVersion": "2"})
    assert plan.schema().startswith("version bigint, partition int, store string, change_type")
    changes = list(_read_changes(str(checkpoint), "counts", 0, plan.start, plan.end,
                                 plan.stores, {"counts": ("string", "int64")}, True))
    assert [(c[0], c[3], c[4], c[5]) for c in changes] == [
        (1, "put", "b", 2), (1, "put", "c", 1), (2, "put", "a", 2), (2, "put", "d", 1)]


def test_the_change_feed_needs_a_start_version(checkpoint):
    with pytest.raises(SparkError, match="startVersion"):
        _Plan({"path": str(checkpoint), "readChangeFeed": "true"})


def test_metadata_lists_partitions_versions_and_sizes(checkpoint):
    got = list(_metadata_rows(str(checkpoint), ["counts"]))
    assert [(r[0], r[2], r[4], r[5], r[6], r[7]) for r in got] == [
        ("counts", 2, 0, 0, 3, 4), ("counts", 2, 1, 0, 3, 4)]
    assert all(r[8] == 2 and r[9] == 3 and r[10] > 0 for r in got)


def test_unknown_operator_or_store_or_partition_are_refused(checkpoint):
    with pytest.raises(SparkError, match="no operator 'nope'"):
        _Plan({"path": str(checkpoint), "operator": "nope"})
    with pytest.raises(SparkError, match="no store 'nope'"):
        _Plan({"path": str(checkpoint), "store": "nope"})
    with pytest.raises(SparkError, match="outside"):
        _Plan({"path": str(checkpoint), "partition": "5"})


@pytest.mark.spark
def test_spark_reads_state_changes_and_metadata(checkpoint, tmp_path):
    spark = start_spark(tmp_path / "scratch", app="weir-statesource-tests", master="local[2]")
    try:
        reader = spark.read.format("weirstate").option("operator", "counts")
        now = {r.key: r.value for r in reader.load(str(checkpoint)).collect()}
        assert now == {**expected(4), **{k.upper(): v for k, v in expected(4).items()}}
        old = reader.option("version", 1).option("partition", 0).load(str(checkpoint))
        assert {r.key: r.value for r in old.collect()} == expected(2)
        feed = (spark.read.format("weirstate").option("readChangeFeed", "true")
                .option("startVersion", 3).load(str(checkpoint)))
        assert sorted((r.partition, r.change_type, r.key, r.value) for r in feed.collect()) == [
            (0, "put", "e", 1), (1, "put", "E", 1)]
        meta = spark.read.format("weirstate-metadata").load(str(checkpoint)).collect()
        assert [(m.partition, m.latest_version) for m in meta] == [(0, 3), (1, 3)]
    finally:
        stop_spark(spark, tmp_path / "scratch")
