"""Weir's operators through a Spark Connect session (a local Connect server in this process):
transform_with_state reads the grouping columns and the watermark from the Connect plan, since
a Connect client has no JVM, and gives the rows Spark's own operator gives for the input."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.engine.spark.processors import ViolationCount

pytestmark = pytest.mark.spark

VIOLATIONS = "id string, seen long, violations int, dropped_fails string"


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    from pyspark.sql import SparkSession

    scratch = tmp_path_factory.mktemp("connect-scratch")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    repo = str(Path(__file__).resolve().parents[3])      # processors pickled by reference
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [repo] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    session = (SparkSession.builder.remote("local[2]").appName("weir-connect-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.local.dir", str(scratch))
               .config("spark.weir.state.local.dir", str(scratch / "weir-state"))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state."
                       "RocksDBStateStoreProvider")
               .getOrCreate())
    yield session
    session.stop()


def test_transform_with_state_runs_on_a_connect_session_like_sparks_operator(connect, tmp_path):
    from weir.spark import transform_with_state

    src = tmp_path / "src"
    frame = pd.DataFrame({"id": ["0", "0", "1", "2"],
                          "temperature": pd.array([123, 46, 20, None], dtype="Int32")})
    connect.createDataFrame(frame).write.parquet(str(src))
    stream = connect.readStream.schema("id string, temperature int").parquet(str(src))
    ckpt = str(tmp_path / "ckpt")
    query = (transform_with_state(stream.groupBy("id"), ViolationCount(), VIOLATIONS,
                                  checkpoint_location=ckpt)
             .writeStream.format("memory").queryName("weir_op")
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert not query.isActive and query.exception() is None
    rows = sorted(tuple(r) for r in connect.sql("select * from weir_op").collect())
    # the rows Spark's transformWithStateInPandas gives for this input (the same processor and
    # input run through both operators in test_transform_spark.py's value-state scenario)
    assert rows == [("0", 2, 1, "yes"), ("1", 1, 0, "yes"), ("2", 0, 0, "yes")]


def test_the_watermark_is_read_from_a_connect_plan(connect):
    from weir.engine.spark.transform import _watermark, grouping_columns

    df = (connect.range(3).selectExpr("cast(id as string) as k", "current_timestamp() as ts")
          .withWatermark("ts", "10 seconds"))
    assert _watermark(df) == ("ts", 10_000)
    assert grouping_columns(df.groupBy("k")) == ["k"]
