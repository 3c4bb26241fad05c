"""One unchanged PySpark StatefulProcessor under Spark's transformWithStateInPandas (Spark's
RocksDB provider) and under weir.spark.transform_with_state (Weir stores): the same rows come
out -- value, list and map state, initial state, event-time timers including the ones Spark
fires in its final batch without data -- and a ProcessingTime + TTL smoke run."""

from __future__ import annotations

import functools
from datetime import datetime, timezone

import pandas as pd
import pytest

from tests.engine.spark._spark import await_query, start_spark, stop_spark, write_parquet
from tests.engine.spark.processors import (PROBE_OUT, PROBE_ROWS, PROBE_SCHEMA,
                                          FirstEventTime, LargeList, ListOps, MapOps,
                                          MaxEventTimeTimer, MissingValue, NestedValue,
                                          PandasProbe, RowProbe, RowStructOutput,
                                          RowViolationCount, Sessions, StructOutput, TtlCount,
                                          ViolationCount)

pytestmark = pytest.mark.spark

OUT = "key string, kind string, n long, detail string"


def _ts(seconds: int):
    return pd.Timestamp(datetime.fromtimestamp(seconds, tz=timezone.utc).replace(tzinfo=None))


def _frame(rows):
    frame = pd.DataFrame({"key": [r[0] for r in rows], "v": [r[1] for r in rows],
                          "ts": [_ts(r[2]) for r in rows]})
    frame["ts"] = frame["ts"].astype("datetime64[us]")        # SPARK-NOTES trap 3
    return frame


FILES = [
    _frame([("a", 1, 1), ("a", 7, 3), ("b", 2, 2)]),
    _frame([("a", 9, 20), ("c", 3, 25)]),
    _frame([("c", 6, 50), ("a", 4, 4)]),                     # a@4 is not late yet (watermark 0)
    _frame([("b", 5, 30), ("a", 8, 10), ("d", 1, 70)]),      # a@10 is late (watermark 15 s)
]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("spark-scratch")
    session = start_spark(scratch, app="weir-transform-tests",
                          extra={"spark.sql.session.timeZone": "UTC"})
    yield session
    stop_spark(session, scratch)


def _run(spark, src, ckpt, build) -> tuple[list[tuple], list[int]]:
    rows: list[tuple] = []

    def collect(df, batch_id):
        rows.extend(tuple(r) for r in df.collect())

    stream = (spark.readStream.schema("key string, v long, ts timestamp")
              .option("maxFilesPerTrigger", 1).parquet(str(src))
              .withWatermark("ts", "10 seconds"))
    query = (build(stream).writeStream.outputMode("append").foreachBatch(collect)
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    await_query(query)
    return rows, [p["numInputRows"] for p in query.recentProgress]


def test_the_same_processor_gives_the_same_rows_as_sparks_transform_with_state(spark, tmp_path):
    from weir.spark import transform_with_state

    src = tmp_path / "src"
    for i, f in enumerate(FILES):
        write_parquet(src, i, f)
    initial = spark.createDataFrame([("a", 100), ("e", 7)], "key string, seed long")

    spark_rows, spark_inputs = _run(spark, src, tmp_path / "ckpt-spark", lambda s: (
        s.groupBy("key").transformWithStateInPandas(
            Sessions(), OUT, "Append", "EventTime", initialState=initial.groupBy("key"))))
    weir_rows, weir_inputs = _run(spark, src, tmp_path / "ckpt-weir", lambda s: (
        transform_with_state(s.groupBy("key"), Sessions(), OUT, time_mode="EventTime",
                             output_mode="Append", initial_state=initial.groupBy("key"),
                             checkpoint_location=str(tmp_path / "ckpt-weir"),
                             name="sessions")))
    assert sorted(weir_rows) == sorted(spark_rows)
    assert any(kind == "timer" for _, kind, _, _ in weir_rows)
    assert spark_inputs[-1] == 0 and weir_inputs[-1] == 0     # both ran the no-data batch
    assert len(weir_inputs) == len(spark_inputs)


def test_processing_time_timers_and_ttl_run_on_spark(spark, tmp_path):
    from weir.spark import transform_with_state

    src = tmp_path / "src"
    for i in range(3):
        write_parquet(src, i, pd.DataFrame({"key": ["a", "a", "b"][: i + 1]}))
    rows: list[tuple] = []

    def collect(df, batch_id):
        rows.extend(tuple(r) for r in df.collect())

    stream = spark.readStream.schema("key string").option("maxFilesPerTrigger", 1).parquet(str(src))
    out = transform_with_state(stream.groupBy("key"), TtlCount(), "key string, n long",
                               time_mode="ProcessingTime",
                               checkpoint_location=str(tmp_path / "ckpt"), name="ttl")
    query = (out.writeStream.foreachBatch(collect).option("checkpointLocation",
                                                         str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert await_query(query) == [0, 1, 2]
    # a 1 ms TTL: every batch starts from nothing, and each earlier timer has expired
    assert sorted(r for r in rows if r[1] != -1) == [("a", 1), ("a", 2), ("a", 2), ("b", 1)]
    assert sorted(r for r in rows if r[1] == -1) == [("a", -1), ("a", -1)]


@pytest.fixture
def session_conf(spark):
    """Set runtime SQL confs for one test, restored after it."""
    saved: dict[str, str | None] = {}

    def set_conf(key: str, value: str) -> None:
        saved.setdefault(key, spark.conf.get(key, None))
        spark.conf.set(key, value)

    yield set_conf
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def _probe(spark, tmp_path, processor, flavour):
    from weir.spark import transform_with_state

    src = tmp_path / "src"
    spark.createDataFrame(PROBE_ROWS, PROBE_SCHEMA).coalesce(1).write.parquet(str(src))

    def run(build, ckpt):
        rows: list[tuple] = []
        stream = spark.readStream.schema(PROBE_SCHEMA).parquet(str(src))
        query = (build(stream).writeStream
                 .foreachBatch(lambda df, _: rows.extend(tuple(r) for r in df.collect()))
                 .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        await_query(query)
        return sorted(rows)

    spark_api = ("transformWithStateInPandas" if flavour == "pandas" else "transformWithState")
    theirs = run(lambda s: getattr(s.groupBy("k"), spark_api)(processor, PROBE_OUT, "Update",
                                                              "None"), tmp_path / "c-spark")
    ours = run(lambda s: transform_with_state(
        s.groupBy("k"), processor, PROBE_OUT, flavour=flavour, name="probe",
        checkpoint_location=str(tmp_path / "c-weir")), tmp_path / "c-weir")
    return ours, theirs


def test_a_pandas_processor_receives_every_column_type_as_spark_hands_it_over(
        spark, tmp_path, session_conf):
    session_conf("spark.sql.session.timeZone", "America/New_York")
    session_conf("spark.sql.execution.arrow.maxRecordsPerBatch", "3")  # keys across batches
    ours, theirs = _probe(spark, tmp_path, PandasProbe(), "pandas")
    assert ours == theirs
    dtypes = {(r[0], r[2]): r[3] for r in theirs}
    assert dtypes[("a", "ts")] == dtypes[("a", "ntz")] == "datetime64[ns]"
    assert dtypes[("d", "b")] == "bool" and dtypes[("a", "b")] == "object"


def test_a_row_processor_receives_every_column_type_as_spark_hands_it_over(
        spark, tmp_path, session_conf):
    session_conf("spark.sql.session.timeZone", "America/New_York")
    ours, theirs = _probe(spark, tmp_path, RowProbe(), "rows")
    assert ours == theirs
    assert any("ZoneInfo(key='America/New_York')" in r[4] for r in theirs if r[2] == "ts")


# -- Spark's own scenarios, through Spark's operator and through Weir's -------------------------
TEMPS = [pd.DataFrame({"id": ["0", "0", "1", "1", "2"],
                       "temperature": pd.array([123, 46, 20, 130, None], dtype="Int32")}),
         pd.DataFrame({"id": ["0", "1", "1", "3"],
                       "temperature": pd.array([150, 200, 5, 101], dtype="Int32")})]
EVENTS = [pd.DataFrame({"id": ["a", "a", "b"], "eventTime": [_ts(10), _ts(20), _ts(5)]}),
          pd.DataFrame({"id": ["a", "c"], "eventTime": [_ts(4), _ts(70)]}),
          pd.DataFrame({"id": ["a", "b"], "eventTime": [_ts(15), _ts(150)]})]
VIOLATIONS = "id string, seen long, violations int, dropped_fails string"


def _files(directory, frames):
    for i, frame in enumerate(frames):
        frame = frame.copy()
        for column in frame.columns:
            if str(frame[column].dtype).startswith("datetime64"):
                frame[column] = frame[column].astype("datetime64[us]")     # trap 3
        write_parquet(directory, i, frame)
    return directory


def _both(spark, tmp_path, schema, frames, spark_build, weir_build, *, watermark=None,
          mode="update"):
    """Run one scenario through Spark's operator and Weir's (same input, one file a batch)."""
    src = _files(tmp_path / "src", frames)

    def run(build, ckpt):
        rows: list[tuple] = []
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
        if watermark is not None:
            stream = stream.withWatermark(*watermark)
        query = (build(stream, str(ckpt)).writeStream.outputMode(mode)
                 .foreachBatch(lambda df, _: rows.extend(tuple(r) for r in df.collect()))
                 .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        await_query(query)
        return sorted(rows, key=repr), query

    theirs, _ = run(spark_build, tmp_path / "c-spark")
    ours, query = run(weir_build, tmp_path / "c-weir")
    return ours, theirs, query


def test_scenario_value_state_and_delete_if_exists(spark, tmp_path):
    from weir.spark import transform_with_state

    ours, theirs, _ = _both(
        spark, tmp_path, "id string, temperature int", TEMPS,
        lambda s, c: s.groupBy("id").transformWithStateInPandas(ViolationCount(), VIOLATIONS,
                                                                "Update", "None"),
        lambda s, c: transform_with_state(s.groupBy("id"), ViolationCount(), VIOLATIONS,
                                          checkpoint_location=c))
    assert ours == theirs
    assert {r[3] for r in ours} == {"yes"}            # the deleted variable failed on both
    assert ("0", 1, 2, "yes") in ours                  # batch 1: 1 + the 123 of batch 0
    # the state itself, per variable, through Spark's statestore reader and weirstate
    for variable in ("violations", "hot", "buckets"):
        def read(fmt, ckpt):
            rows = (spark.read.format(fmt).option("stateVarName", variable)
                    .option("batchId", 1).load(str(ckpt)).drop("partition_id").collect())
            return sorted(tuple(tuple(c) if isinstance(c, tuple) else c for c in r) for r in rows)

        theirs_state = read("statestore", tmp_path / "c-spark")
        assert read("weirstate", tmp_path / "c-weir") == theirs_state and theirs_state


def test_scenario_two_default_named_operators_one_a_unions_second_child(spark, tmp_path):
    from weir.spark import transform_with_state

    def spark_plan(s, c):
        return (s.groupBy("id").transformWithStateInPandas(ViolationCount(), VIOLATIONS,
                                                           "Update", "None")
                .union(s.groupBy("id").transformWithState(RowViolationCount(), VIOLATIONS,
                                                          "Update", "None")))

    def weir_plan(s, c):
        first = transform_with_state(s.groupBy("id"), ViolationCount(), VIOLATIONS,
                                     checkpoint_location=c)
        second = transform_with_state(s.groupBy("id"), RowViolationCount(), VIOLATIONS,
                                      checkpoint_location=c, flavour="rows")
        return first.union(second)                 # second's partitions are renumbered 2, 3

    ours, theirs, query = _both(spark, tmp_path, "id string, temperature int", TEMPS,
                                spark_plan, weir_plan)
    assert ours == theirs and len(ours) == 2 * (3 + 3)
    names = set(query.lastProgress["observedMetrics"])
    assert len(names) == 2 and all(n.startswith("weir.tws-") for n in names)


def test_scenario_a_batch_dataframe(spark, tmp_path):
    from weir.spark import transform_with_state

    batch = spark.createDataFrame(pd.concat(TEMPS, ignore_index=True))
    theirs = batch.groupBy("id").transformWithStateInPandas(ViolationCount(), VIOLATIONS,
                                                            "Update", "None").collect()
    ours = transform_with_state(batch.groupBy("id"), ViolationCount(), VIOLATIONS).collect()
    assert sorted(map(tuple, ours)) == sorted(map(tuple, theirs))
    assert ("0", 3, 2, "yes") in map(tuple, ours)
    again = transform_with_state(batch.groupBy("id"), ViolationCount(), VIOLATIONS).collect()
    assert sorted(map(tuple, again)) == sorted(map(tuple, ours))   # no state left behind


def test_scenario_event_time_timers(spark, tmp_path):
    from weir.spark import transform_with_state

    out = "id string, timestamp string"
    ours, theirs, _ = _both(
        spark, tmp_path, "id string, eventTime timestamp", EVENTS,
        lambda s, c: s.groupBy("id").transformWithStateInPandas(MaxEventTimeTimer(), out,
                                                                "Update", "EventTime"),
        lambda s, c: transform_with_state(s.groupBy("id"), MaxEventTimeTimer(), out,
                                          time_mode="EventTime", checkpoint_location=c),
        watermark=("eventTime", "10 seconds"))
    assert ours == theirs
    assert ("a", "20") in ours and ("a", "4") in ours      # seconds, not 1000x too small


def test_scenario_chaining_an_event_time_aggregation_after_the_operator(spark, tmp_path):
    from pyspark.sql import functions as F

    from weir.spark import transform_with_state

    out = "id string, outputTimestamp timestamp"

    def windows(df):
        return (df.groupBy(F.window("outputTimestamp", "1 minute")).count()
                .select(F.col("window.start").cast("long"), "count"))

    ours, theirs, _ = _both(
        spark, tmp_path, "id string, eventTime timestamp", EVENTS,
        lambda s, c: windows(s.groupBy("id").transformWithStateInPandas(
            FirstEventTime(), out, "Append", "None", eventTimeColumnName="outputTimestamp")),
        lambda s, c: windows(transform_with_state(
            s.groupBy("id"), FirstEventTime(), out, output_mode="Append",
            event_time_column_name="outputTimestamp", checkpoint_location=c)),
        watermark=("eventTime", "10 seconds"), mode="append")
    assert ours == theirs and ours == [(0, 4), (60, 1)]


STATE_SCENARIOS = [  # (processor, output schema, flavour)
    (ListOps, "id string, count long, lists string", "pandas"),
    (LargeList, "id string, before long, after long, check long", "pandas"),
    (MapOps, "id string, seen string, order string, after string", "pandas"),
    (MissingValue, "id string, state string", "pandas"),
    (NestedValue, "id string, value string, items long, mapped string", "pandas"),
    (StructOutput, "id string, value struct<id:int,name:string>", "pandas"),
    (RowStructOutput, "id string, value struct<id:int,name:string>", "rows"),
]


@pytest.mark.parametrize("group", [STATE_SCENARIOS[i:i + 2] for i in range(0, 7, 2)],
                         ids=lambda g: "+".join(cls.__name__ for cls, _, _ in g))
def test_scenarios_of_list_map_nested_and_struct_state(spark, tmp_path, group):
    """Spark's processors two at a time (Spark's own operator fails a streaming union of seven
    with 'Python worker failed to connect back' here): each operator's rows as JSON, unioned
    (the Weir side composes default-named operators in one plan)."""
    from pyspark.sql import functions as F

    from weir.spark import transform_with_state

    def wrap(name, df):
        return df.select(F.lit(name).alias("scenario"),
                         F.to_json(F.struct(*df.columns)).alias("row"))

    def spark_plan(s, c):
        outs = [wrap(cls.__name__, getattr(s.groupBy("id"), "transformWithStateInPandas"
                                           if flavour == "pandas" else "transformWithState")(
                    cls(), schema, "Update", "None"))
                for cls, schema, flavour in group]
        return functools.reduce(lambda a, b: a.union(b), outs)

    def weir_plan(s, c):
        outs = [wrap(cls.__name__, transform_with_state(s.groupBy("id"), cls(), schema,
                                                        flavour=flavour, checkpoint_location=c))
                for cls, schema, flavour in group]
        return functools.reduce(lambda a, b: a.union(b), outs)

    ours, theirs, _ = _both(spark, tmp_path, "id string, temperature int", TEMPS,
                            spark_plan, weir_plan)
    assert ours == theirs
    assert {r[0] for r in ours} == {cls.__name__ for cls, _, _ in group}
