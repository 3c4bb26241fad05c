"""One Spark session per test module, made the way Weir makes it, small and quiet.

``local[2,2]``: two task slots and up to two attempts per task, so a task that fails once is
retried (Spark's local mode gives up at the first failure otherwise). Two shuffle partitions,
no UI, Spark's scratch files inside the test's own temporary directory.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pandas as pd

__all__ = ["start_spark", "stop_spark", "write_parquet", "await_query", "running_count"]


def start_spark(scratch: Path, *, app: str, master: str = "local[2,2]", extra: dict | None = None):
    from weir.engine.spark.session import spark_session

    scratch.mkdir(parents=True, exist_ok=True)
    conf = {
        "spark.master": master,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.local.dir": str(scratch),
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch}",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        # replicas of the module's operators live and die with its scratch directory
        "spark.weir.state.local.dir": str(scratch / "weir-state"),
        **(extra or {}),
    }
    repo = str(Path(__file__).resolve().parents[3])   # test modules pickled by reference
    spark = spark_session(conf, app_name=app, python_path=(repo,))
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop_spark(spark, scratch: Path) -> None:
    spark.stop()
    # SparkContext._gateway stays up for the next module (one JVM per test process)
    shutil.rmtree(scratch, ignore_errors=True)


def write_parquet(directory: Path, index: int, frame: pd.DataFrame) -> Path:
    """One input file of a file-stream source; its mtime orders it (SPARK-NOTES trap 8)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"part-{index:04d}.parquet"
    frame.to_parquet(path, index=False)
    os.utime(path, (1_700_000_000 + index,) * 2)
    return path


def await_query(query, timeout: float = 180.0) -> list[int]:
    """Wait for an availableNow query; the batch ids it ran."""
    deadline = time.monotonic() + timeout
    while query.isActive and time.monotonic() < deadline:
        query.awaitTermination(1)
    if query.isActive:
        query.stop()
        raise AssertionError(f"query still running after {timeout} s")
    if query.exception() is not None:
        raise query.exception()
    return [p["batchId"] for p in query.recentProgress]


def running_count(state, table):
    """A StateOperator function: vectorised running count per key (one Arrow group_by, one
    get_all, one put_all) in the store ``counts``."""
    import pyarrow as pa

    counts = state.store("counts")
    if table.num_rows == 0:
        return None
    grouped = table.group_by("key").aggregate([("key", "count")])
    keys = grouped.column("key").to_pylist()
    old = counts.get_all(keys)
    new = [old.get(k, 0) + n for k, n in zip(keys, grouped.column("key_count").to_pylist())]
    counts.put_all(list(zip(keys, new)))
    return pa.table({"key": keys, "count": pa.array(new, pa.int64())})
