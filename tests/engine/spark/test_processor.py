"""PySpark StatefulProcessors on Weir stores, without Spark: state variables, timers, TTL with
an injected clock, compared with PySpark's own in-memory TwsTester where it has the feature."""

from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pytest
from pyspark.sql.streaming.tws_tester import TwsTester
from pyspark.sql.types import LongType, StringType, StructField, StructType

from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta
from weir.engine.spark.errors import SparkError
from weir.engine.spark.processor import (BatchTime, ProcessorDriver, TimeMode,
                                         WeirProcessorHandle)
from weir.engine.spark.statefile import VersionKind, encode_version
from weir.engine.spark.transform import batch_time, parse_delay_ms
from weir.stores.engines.memory import MemoryEngine

from tests.engine.spark.processors import Sessions, TtlCount

N_SCHEMA = StructType([StructField("n", LongType())])
V_SCHEMA = StructType([StructField("v", LongType())])
SCHEMAS = {"count": N_SCHEMA, "recent": V_SCHEMA, "buckets": N_SCHEMA,
           "buckets#key": StructType([StructField("bucket", StringType())])}


def ts(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(tzinfo=None)


def frame(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    return pd.DataFrame({"key": [r[0] for r in rows], "v": [r[1] for r in rows],
                         "ts": [pd.Timestamp(ts(r[2])) for r in rows]})


class Run:
    """A partition of one operator across batches: one engine, a new handle per batch."""

    def __init__(self, processor_cls, mode: TimeMode):
        self.engine = MemoryEngine("tws")
        self.cls, self.mode = processor_cls, mode

    def batch(self, time: BatchTime, groups: dict, initial: dict | None = None) -> list:
        out: list = []
        handle = WeirProcessorHandle(self.engine, time, SCHEMAS)
        driver = ProcessorDriver(self.cls(), handle, out.append)
        driver.start()
        for key, df in (initial or {}).items():
            driver.initial((key,), iter([df]))
        for key, df in groups.items():
            driver.rows((key,), iter([df]))
        driver.timers()
        driver.finish()
        return [tuple(r) for f in out for r in f.itertuples(index=False)]


def test_event_time_timers_and_state_match_pysparks_tws_tester():
    batches = [
        (0, {"a": frame([("a", 1, 1), ("a", 7, 3)]), "b": frame([("b", 2, 2)])}),
        (0, {"a": frame([("a", 9, 20)]), "c": frame([("c", 3, 25)])}),
        (15_000, {"c": frame([("c", 6, 50)])}),
        (40_000, {}),                                           # Spark's no-data batch
    ]
    ours = Run(Sessions, TimeMode.EVENT_TIME)
    tester = TwsTester(Sessions(), timeMode="EventTime",
                       eventTimeExtractor=lambda row: int(row["ts"].timestamp() * 1000),
                       initialStatePandas=[("a", pd.DataFrame({"seed": [100]}))])
    got, want = [], []
    late = 0
    for i, (watermark, groups) in enumerate(batches):
        initial = {"a": pd.DataFrame({"seed": [100]})} if i == 0 else None
        got += ours.batch(BatchTime(TimeMode.EVENT_TIME, 1000, watermark, late), groups, initial)
        late = watermark
        for key, df in groups.items():
            want += [tuple(r) for r in tester.testInPandas(key, df).itertuples(index=False)]
        if watermark > tester._currentWatermarkMs:
            want += [tuple(r) for r in tester.setWatermark(watermark).itertuples(index=False)]
    assert sorted(got) == sorted(want)
    assert ("a", "rows", 102, "1,7") in got                   # the initial state seeded a
    assert ("a", "timer", 103, "30000:[('high', 2), ('low', 1)]") in got  # the no-data batch


def test_processing_time_timers_fire_like_tws_tester():
    ours = Run(TtlCount, TimeMode.PROCESSING_TIME)
    tester = TwsTester(TtlCount(), timeMode="ProcessingTime")
    got, want = [], []
    for now, keys in [(1000, ["a", "b"]), (1000 + 0, []), (5000, ["a"])]:
        groups = {k: pd.DataFrame({"key": [k]}) for k in keys}
        got += ours.batch(BatchTime(TimeMode.PROCESSING_TIME, now), groups)
        if now > tester._currentProcessingTimeMs:
            # TwsTester fires timers when time moves, before the next rows
            want += _rows(tester.setProcessingTime(now))
        for k in keys:
            want += [tuple(r) for r in tester.testInPandas(k, groups[k]).itertuples(index=False)]
    # TwsTester does not implement TTL, so its counts keep growing where ours expired: compare
    # the timers only, and the counts against Spark's TTL rule below
    assert sorted(r for r in got if r[1] == -1) == sorted(r for r in want if r[1] == -1)


def _rows(result) -> list[tuple]:
    if isinstance(result, list):
        return [tuple(r) for r in result]
    return [tuple(r) for r in result.itertuples(index=False)]


def test_ttl_hides_and_evicts_values_at_batch_timestamp_plus_ttl():
    class Ttl100(TtlCount):
        ttl_ms = 100

    run = Run(Ttl100, TimeMode.PROCESSING_TIME)
    one = {"a": pd.DataFrame({"key": ["a"]})}
    assert run.batch(BatchTime(TimeMode.PROCESSING_TIME, 1_000), one) == [("a", 1)]
    assert run.batch(BatchTime(TimeMode.PROCESSING_TIME, 1_099), one) == [("a", 2)]
    # written at 1,099 with ttl 100: expired from batch timestamp 1,199 on (Spark: ts >= expiry)
    out = run.batch(BatchTime(TimeMode.PROCESSING_TIME, 1_199), one)
    assert ("a", 1) in out and ("a", -1) in out              # fresh count, timer of 1,199 fired
    run.batch(BatchTime(TimeMode.PROCESSING_TIME, 5_000), {})
    with run.engine.prefix(b"v\0") as it:
        assert list(it) == []                                  # evicted at that batch's end
    with run.engine.prefix(b"x\0") as it:
        assert list(it) == []


def test_list_and_map_state_keep_keys_apart():
    run = Run(Sessions, TimeMode.EVENT_TIME)
    t = BatchTime(TimeMode.EVENT_TIME, 0, 0, 0)
    out = run.batch(t, {"a": frame([("a", 1, 1), ("a", 2, 1), ("a", 3, 1), ("a", 8, 1)]),
                        "b": frame([("b", 5, 1)])})
    assert sorted(out) == [("a", "rows", 4, "2,3,8"), ("b", "rows", 1, "5")]
    out = run.batch(BatchTime(TimeMode.EVENT_TIME, 0, 20_000, 0), {})
    assert sorted(out) == [("a", "timer", 4, "11000:[('high', 1), ('low', 3)]"),
                           ("b", "timer", 1, "11000:[('high', 1)]")]


def test_timers_and_ttl_are_refused_in_the_modes_spark_refuses_them():
    none = WeirProcessorHandle(MemoryEngine("tws"), BatchTime(TimeMode.NONE))
    none.set_key(("a",))
    with pytest.raises(SparkError, match="time_mode='None'"):
        none.registerTimer(5)
    event = WeirProcessorHandle(MemoryEngine("tws"), BatchTime(TimeMode.EVENT_TIME, 0, 0, 0))
    with pytest.raises(SparkError, match="INCORRECT_TIME_MODE_TO_ASSIGN_TTL"):
        event.getValueState("c", "n long", 1000)


def test_delete_if_exists_removes_a_variable_for_every_key():
    handle = WeirProcessorHandle(MemoryEngine("tws"), BatchTime(TimeMode.NONE), SCHEMAS)
    count = handle.getValueState("count", N_SCHEMA)
    for key in "ab":
        handle.set_key((key,))
        count.update((1,))
    handle.deleteIfExists("count")
    count = handle.getValueState("count", N_SCHEMA)
    handle.set_key(("a",))
    assert not count.exists()


@pytest.mark.parametrize("kind", ["value", "list", "map"])
def test_a_state_variable_removed_with_delete_if_exists_raises_when_used_again(kind):
    from weir.engine.spark.errors import StateVariableError

    handle = WeirProcessorHandle(MemoryEngine("tws"), BatchTime(TimeMode.NONE), SCHEMAS)
    handle.set_key(("a",))
    var = {"value": lambda: handle.getValueState("count", N_SCHEMA),
           "list": lambda: handle.getListState("recent", V_SCHEMA),
           "map": lambda: handle.getMapState("buckets", SCHEMAS["buckets#key"], N_SCHEMA)}[kind]()
    handle.deleteIfExists(var.name)
    with pytest.raises(StateVariableError, match=f"'{var.name}' was removed") as raised:
        var.exists()
    from pyspark.errors import PySparkRuntimeError

    assert isinstance(raised.value, PySparkRuntimeError)   # what Spark raises


def _checkpoint_with_event_times(tmp_path, per_batch: list[list[int | None]]):
    cp = OperatorCheckpoint(tmp_path, "tws")
    meta = cp.ensure_meta(OperatorMeta("tws", "transform-with-state", len(per_batch[0]),
                                       {"tws": {"key.serde": "bytes", "msg.serde": "bytes"}}))
    for batch, maxes in enumerate(per_batch):
        for p, seen in enumerate(maxes):
            cp.partition(p).publish(batch, VersionKind.CHANGELOG, encode_version(
                VersionKind.CHANGELOG, "tws", p, batch, [], meta={"max_event_ms": seen}))
    return cp, meta


def test_the_watermark_follows_sparks_rules_and_is_published_once(tmp_path):
    cp, meta = _checkpoint_with_event_times(tmp_path, [[3_000, 2_000], [25_000, None],
                                                       [50_000, 4_000]])
    delay = parse_delay_ms("10 seconds")
    clocks = [batch_time(cp, meta, b, "eventtime", delay, lambda: 7) for b in range(4)]
    assert [(c["watermark_ms"], c["late_watermark_ms"]) for c in clocks] == [
        (0, 0), (0, 0), (15_000, 0), (40_000, 15_000)]
    again = batch_time(cp, meta, 3, "eventtime", delay, lambda: 999)
    assert again == clocks[3]                                 # every attempt sees one clock
