"""The Weir state provider in real Spark streaming queries (local mode, one session).

A running count per key over parquet files read one per micro-batch, written by a foreachBatch
sink that replaces each batch id's output directory (idempotent), so every scenario can compare
the emitted counts and the durable state with pandas:

* several micro-batches, then a restart from the checkpoint with more input;
* every local replica deleted before a restart;
* a batch replayed by Spark (its commit marker removed, as after a crash between our publish
  and Spark's commit);
* a real task retry: a task that fails once after the operator published its version;
* a Python worker killed with SIGKILL inside the operator's function, and one killed after the
  operator published (in the same task): Spark retries the task, the counts stay exact;
* the metrics of every batch in the query's observed metrics;
* the operator's state on an object store (``s3a://`` on a moto S3 server on loopback) while
  Spark's own checkpoint stays local: restarts, lost replicas, a replayed batch, a worker
  killed after publishing.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from weir.engine.spark.replica import release_replicas
from weir.engine.spark.settings import ProviderSettings
from weir.engine.spark.storage import StorageOptions

from tests.engine.spark._spark import (await_query, running_count, start_spark, stop_spark,
                                       write_parquet)

pytestmark = pytest.mark.spark

P = 2
RNG = np.random.default_rng(11)
FILES = [pd.DataFrame({"key": [f"k{i:02d}" for i in RNG.integers(0, 40, 300)],
                       "v": RNG.integers(0, 9, 300)}) for _ in range(6)]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("spark-scratch")
    session = start_spark(scratch, app="weir-operator-tests")
    yield session
    stop_spark(session, scratch)


def fail_once_after_publish(marker: str):
    """A mapInArrow after the operator, in the same task: fails the first attempt of the
    first task it sees (after the operator published its version), then never again."""

    def fn(batches):
        for batch in batches:
            if batch.num_rows and not os.path.exists(marker):
                with open(marker, "w") as f:
                    f.write("failed once")
                raise RuntimeError("injected task failure after the operator published")
            yield batch

    return fn


def kill_worker_once(marker: str, fn=None):
    """``fn`` (default: a pass-through mapInArrow) whose first call anywhere SIGKILLs its own
    Python worker process, as an OOM killer or a crashed executor would."""

    def kill_if_first():
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    if fn is not None:
        def inside(state, table):
            if table.num_rows:
                kill_if_first()
            return fn(state, table)
        return inside

    def after(batches):
        for batch in batches:
            if batch.num_rows:
                kill_if_first()
            yield batch
    return after


class Query:
    def __init__(self, spark, base: Path, provider: str = "rocksdb", placement="own-stage",
                 state_location: str | None = None, storage_conf: dict | None = None):
        from weir.spark import StateOperator

        self.spark, self.base = spark, base
        self.src, self.ckpt, self.out = base / "src", base / "ckpt", base / "out"
        self.state_location = state_location or str(self.ckpt)   # Weir's; Spark's is ckpt
        self.storage_conf = storage_conf or {}
        self.settings = ProviderSettings(provider=provider, snapshot_interval=2,
                                         local_dir=str(base / "local"),
                                         storage=StorageOptions.from_mapping(self.storage_conf))
        self.op = StateOperator("counts", checkpoint_location=self.state_location, key="key",
                                stores={"counts": {"key.serde": "string", "msg.serde": "int64"}},
                                partitions=P, settings=self.settings, placement=placement)
        self.fail_marker: str | None = None
        self.kill_after_publish: str | None = None
        self.fn = running_count
        self.progress: list[dict] = []

    def add(self, *indexes):
        for i in indexes:
            write_parquet(self.src, i, FILES[i])

    def run(self, timeout: float = 180.0) -> list[int]:
        out, op = self.out, self.op
        fail, kill = self.fail_marker, self.kill_after_publish

        def sink(df, batch_id):
            if fail is not None:
                df = df.mapInArrow(fail_once_after_publish(fail), df.schema)
            if kill is not None:
                df = df.mapInArrow(kill_worker_once(kill), df.schema)
            df.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))

        stream = (self.spark.readStream.schema("key string, v long")
                  .option("maxFilesPerTrigger", 1).parquet(str(self.src)))
        counted = op.apply(stream, self.fn, "key string, count long")
        query = (counted.writeStream.foreachBatch(sink)
                 .option("checkpointLocation", str(self.ckpt))
                 .trigger(availableNow=True).start())
        batches = await_query(query, timeout)
        self.progress.extend(query.recentProgress)
        return batches

    def emitted_last(self) -> dict[str, int]:
        frame = pd.read_parquet(self.out).sort_values("batch")
        return frame.groupby("key")["count"].last().to_dict()

    def emitted(self, batch: int) -> dict[str, int]:
        frame = pd.read_parquet(self.out / f"batch={batch}")
        return dict(zip(frame["key"], frame["count"]))

    def state(self) -> dict[str, int]:
        reader = self.spark.read.format("weirstate").option("operator", "counts")
        for key, value in self.storage_conf.items():   # Hadoop's S3A keys reach the store
            reader = reader.option(key, value)
        rows = reader.load(self.state_location).collect()
        return {r.key: r.value for r in rows}


def expected(upto: int) -> dict[str, int]:
    return pd.concat(FILES[:upto])["key"].value_counts().to_dict()


def test_running_count_survives_restarts_lost_replicas_and_replays(spark, tmp_path):
    q = Query(spark, tmp_path)
    q.add(0, 1, 2)
    assert q.run() == [0, 1, 2]
    assert q.state() == expected(3)
    assert q.emitted_last() == expected(3)
    for batch in range(3):   # each batch emits the running totals of its keys
        keys = set(FILES[batch]["key"])
        assert q.emitted(batch) == {k: v for k, v in expected(batch + 1).items() if k in keys}

    # stop, restart from the checkpoint with one more file
    q.add(3)
    assert q.run() == [3]
    assert q.state() == expected(4)

    # every local replica lost (all executors replaced), then a restart
    release_replicas()
    shutil.rmtree(q.base / "local")
    q.add(4)
    assert q.run() == [4]
    assert q.state() == expected(5)
    assert q.emitted_last() == expected(5)

    # Spark replays batch 4: its commit marker is gone (a crash after our publish)
    for name in ("4", ".4.crc"):
        os.remove(q.ckpt / "commits" / name)
    shutil.rmtree(q.out / "batch=4")
    q.add(5)
    assert q.run() == [4, 5]
    assert q.state() == expected(6)                      # batch 4 not counted twice
    assert q.emitted(4) == {k: v for k, v in expected(5).items() if k in set(FILES[4]["key"])}
    assert q.emitted_last() == expected(6)
    metrics = [p["observedMetrics"]["weir.counts"] for p in q.progress]
    assert sum(m["replayed"] for m in metrics) == P      # the replayed batch adopted its versions
    assert all(m["tasks"] == P for m in metrics)
    assert metrics[-1]["state_rows"] == len(expected(6))


def test_a_task_retried_after_publishing_emits_the_published_rows(spark, tmp_path):
    # in-stage: the failing function after the operator runs in the operator's own task
    q = Query(spark, tmp_path, provider="lmdb", placement="in-stage")
    q.fail_marker = str(tmp_path / "failed-once")
    q.add(0, 1)
    assert q.run() == [0, 1]
    assert os.path.exists(q.fail_marker)                 # a task really failed once
    assert q.state() == expected(2)
    assert q.emitted_last() == expected(2)
    assert q.emitted(0) == {k: v for k, v in expected(1).items()}
    metrics = [p["observedMetrics"]["weir.counts"] for p in q.progress]
    assert sum(m["replayed"] for m in metrics) >= 1      # the retry found its version published


def test_a_python_worker_killed_inside_the_function_is_retried_and_counts_stay_exact(
        spark, tmp_path):
    q = Query(spark, tmp_path)
    marker = str(tmp_path / "killed-inside")
    q.fn = kill_worker_once(marker, running_count)
    q.add(0, 1)
    assert q.run() == [0, 1]
    assert os.path.exists(marker)                    # a worker really died mid-function
    assert q.state() == expected(2)
    assert q.emitted_last() == expected(2)
    assert q.emitted(0) == expected(1)


def test_a_python_worker_killed_after_the_operator_published_replays_the_version(spark, tmp_path):
    q = Query(spark, tmp_path, placement="in-stage")     # the killer runs in the operator's task
    q.kill_after_publish = str(tmp_path / "killed-after")
    q.add(0, 1)
    assert q.run() == [0, 1]
    assert os.path.exists(q.kill_after_publish)
    assert q.state() == expected(2)
    assert q.emitted_last() == expected(2)
    metrics = [p["observedMetrics"]["weir.counts"] for p in q.progress]
    assert sum(m["replayed"] for m in metrics) >= 1    # the retry emitted the published rows


def test_foreach_batch_runs_the_operator_with_the_callbacks_batch_id(spark, tmp_path):
    from weir.spark import StateOperator

    src, ckpt, out = tmp_path / "src", tmp_path / "ckpt", tmp_path / "out"
    for i in range(3):
        write_parquet(src, i, FILES[i])
    op = StateOperator("counts", checkpoint_location=str(ckpt), key="key", stores=["counts"],
                       partitions=P, settings=ProviderSettings(provider="memory",
                                                               local_dir=str(tmp_path / "l")))

    def bytes_count(state, table):
        counts = state.store("counts")             # a bytes store: we encode ourselves
        grouped = table.group_by("key").aggregate([("key", "count")])
        keys = [k.encode() for k in grouped.column("key").to_pylist()]
        old = counts.get_all(keys)
        new = [int(old.get(k, b"0")) + n
               for k, n in zip(keys, grouped.column("key_count").to_pylist())]
        counts.put_all([(k, str(n).encode()) for k, n in zip(keys, new)])
        return pa.table({"key": [k.decode() for k in keys], "count": new})

    def sink(df, batch_id):
        df.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))

    query = (spark.readStream.schema("key string, v long").option("maxFilesPerTrigger", 1)
             .parquet(str(src)).writeStream
             .foreachBatch(op.foreach_batch(bytes_count, "key string, count long", sink))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    assert await_query(query) == [0, 1, 2]
    last = pd.read_parquet(out).sort_values("batch").groupby("key")["count"].last().to_dict()
    assert last == expected(3)
    assert sorted(op.checkpoint.partition(0).listing().changelogs) == [0, 1, 2]


def test_a_changed_partition_count_is_refused_until_weir_spark_repartition(spark, tmp_path):
    from weir.engine.cli import main
    from weir.spark import PartitionCountChangedError, StateOperator

    q = Query(spark, tmp_path)
    q.add(0, 1)
    assert q.run() == [0, 1]
    wider = StateOperator("counts", checkpoint_location=str(q.ckpt), key="key",
                          stores={"counts": {"key.serde": "string", "msg.serde": "int64"}},
                          partitions=3, settings=q.settings)
    stream = spark.readStream.schema("key string, v long").parquet(str(q.src))
    with pytest.raises(PartitionCountChangedError, match="weir spark repartition"):
        wider.apply(stream, running_count, "key string, count long")
    assert main(["spark", "repartition", str(q.ckpt), "--operator", "counts",
                 "--partitions", "3"]) == 0               # key types come from the metadata
    q.op = wider
    q.add(2)
    assert q.run() == [2]
    assert q.state() == expected(3)
    assert q.emitted_last() == expected(3)


# -- the operator's state on an object store -------------------------------------------------

@pytest.fixture
def s3_state(s3_server, spark):
    """An s3a:// location for Weir's state; the session conf carries the S3A keys a Spark team
    sets for such a checkpoint (Spark's own checkpoint stays local: the pyspark wheel has no
    S3A connector, hadoop-aws, and this machine cannot fetch it from Maven)."""
    import uuid

    bucket = s3_server.bucket(f"weir-q-{uuid.uuid4().hex[:10]}")
    conf = s3_server.spark_conf()
    for key, value in conf.items():
        spark.conf.set(key, value)
    yield f"s3a://{bucket}/checkpoints/counts-query", conf
    for key in conf:
        spark.conf.unset(key)


def test_a_query_keeps_its_state_on_an_object_store_across_restarts_and_replays(
        spark, tmp_path, s3_state, s3_server):
    location, conf = s3_state
    assert ProviderSettings.from_spark(spark).storage == s3_server.options()
    q = Query(spark, tmp_path, state_location=location, storage_conf=conf)
    q.add(0, 1)
    s3_server.reset()
    assert q.run() == [0, 1]
    requests = s3_server.requests()
    assert q.state() == expected(2)
    assert q.emitted_last() == expected(2)
    assert not (tmp_path / "ckpt" / "weir").exists()          # nothing of Weir's on local disk
    assert requests.get("PUT", 0) >= 2 * P                    # a changelog per task and batch

    release_replicas()                                         # every executor replaced
    shutil.rmtree(q.base / "local")
    q.add(2)
    assert q.run() == [2]                                      # restored from the bucket
    assert q.state() == expected(3)

    for name in ("2", ".2.crc"):                               # a crash after publish
        os.remove(q.ckpt / "commits" / name)
    shutil.rmtree(q.out / "batch=2")
    q.add(3)
    assert q.run() == [2, 3]
    assert q.state() == expected(4)                            # batch 2 not counted twice
    assert q.emitted_last() == expected(4)
    metrics = [p["observedMetrics"]["weir.counts"] for p in q.progress]
    assert metrics[-2]["replayed"] == P


def test_a_worker_killed_after_publishing_to_the_object_store_replays_the_version(
        spark, tmp_path, s3_state):
    location, conf = s3_state
    q = Query(spark, tmp_path, placement="in-stage", state_location=location,
              storage_conf=conf)
    q.kill_after_publish = str(tmp_path / "killed-after")
    q.add(0, 1)
    assert q.run() == [0, 1]
    assert os.path.exists(q.kill_after_publish)
    assert q.state() == expected(2)
    assert q.emitted_last() == expected(2)
    metrics = [p["observedMetrics"]["weir.counts"] for p in q.progress]
    assert sum(m["replayed"] for m in metrics) >= 1
