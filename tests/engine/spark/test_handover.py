"""What a StatefulProcessor receives under transform_with_state, without Spark: each key's rows
as PySpark 4.3's worker hands them over (a literal port of its loop is the reference here; the
comparison with Spark's own operator is in test_transform_spark.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools

import pandas as pd
import pyarrow as pa
import pytest

from weir.engine.spark.handover import HandOver, pandas_groups, row_groups

_T = dt.datetime(2024, 3, 10, 6, 30, 15, 123456, tzinfo=dt.timezone.utc)


def _table(keys=("a", "a", "b", "c", "d", "d", "e", "e", "e")):
    n = len(keys)

    def pick(values):
        return [values[i % len(values)] for i in range(n)]

    return pa.table({
        "k": pa.array(keys, pa.string()),
        "i": pa.array(pick([1, None, 3, 4, 5]), pa.int32()),
        "l": pa.array(pick([10, 20, 30]), pa.int64()),
        "f": pa.array(pick([1.5, None, 2.5, 3.5]), pa.float32()),
        "b": pa.array(pick([True, None, False, True, False]), pa.bool_()),
        "s": pa.array(pick(["x", None, "y"]), pa.string()),
        "ts": pa.array(pick([_T, None, _T]), pa.timestamp("us", tz="UTC")),
        "ntz": pa.array(pick([_T.replace(tzinfo=None)]), pa.timestamp("us")),
        "d": pa.array(pick([dt.date(2024, 1, 1), None]), pa.date32()),
        "dec": pa.array(pick([decimal.Decimal("1.25"), None]), pa.decimal128(10, 2)),
        "bin": pa.array(pick([b"\x00", None, b""]), pa.binary()),
        "arr": pa.array(pick([[1, None], None, []]), pa.list_(pa.int32())),
        "m": pa.array(pick([[("p", 1)], None]), pa.map_(pa.string(), pa.int32())),
        "st": pa.array(pick([{"a": 1, "b": "s"}, None, {"a": None, "b": None}]),
                       pa.struct([("a", pa.int32()), ("b", pa.string())])),
        "iv": pa.array(pick([None, None, None, dt.timedelta(seconds=5)]), pa.duration("us")),
    })


def _spark_reference(table, key, handover):
    """PySpark 4.3 worker, SQL_TRANSFORM_WITH_STATE_PANDAS_UDF: Arrow batches -> Spark's
    converter -> itertuples -> itertools.groupby -> pd.DataFrame(rows) chunks."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    from weir.engine.spark.handover import sorted_groups

    table, _ = sorted_groups(table, key)
    offsets = [table.schema.names.index(k) for k in key]
    size = handover.chunk

    def row_stream():
        for batch in table.to_batches(max_chunksize=size):
            frames = ArrowBatchTransformer.to_pandas(batch, timezone=handover.timezone)
            for row in pd.concat(frames, axis=1).itertuples(index=False):
                yield tuple(row[o] for o in offsets), row

    for batch_key, group_rows in itertools.groupby(row_stream(), key=lambda x: x[0]):
        frames, rows = [], []
        for _, row in group_rows:
            rows.append(row)
            if len(rows) >= size:
                frames.append(pd.DataFrame(rows))
                rows = []
        if rows:
            frames.append(pd.DataFrame(rows))
        yield batch_key, frames


def _describe(frame):
    return ([str(t) for t in frame.dtypes], list(frame.columns), type(frame.index).__name__,
            [[(type(v).__name__, repr(v)) for v in frame[c]] for c in frame.columns])


@pytest.mark.parametrize("max_records", [10_000, 3, 2, 1])
@pytest.mark.parametrize("timezone", ["UTC", "America/New_York"])
def test_each_key_gets_the_frames_sparks_worker_builds(max_records, timezone):
    handover = HandOver(timezone=timezone, max_records=max_records)
    table = _table().take(pa.array([8, 3, 0, 5, 1, 7, 2, 4, 6]))   # any order in
    ours = list(pandas_groups(table, ["k"], handover))
    theirs = list(_spark_reference(table, ["k"], handover))
    assert [k for k, _ in ours] == [k for k, _ in theirs]
    for (key, frames), (_, expected) in zip(ours, theirs):
        assert [_describe(f) for f in frames] == [_describe(f) for f in expected], key


def test_a_timestamp_reaches_a_pandas_processor_in_nanoseconds_of_the_session_zone():
    table = _table(["a"])                 # Spark sends timestamps zoned in the session's zone
    table = table.set_column(table.schema.get_field_index("ts"), "ts",
                             table.column("ts").cast(pa.timestamp("us", tz="Asia/Tokyo")))
    [(key, [frame])] = pandas_groups(table, ["k"], HandOver(timezone="Asia/Tokyo"))
    assert str(frame["ts"].dtype) == "datetime64[ns]"
    local = pd.Timestamp("2024-03-10 15:30:15.123456")
    assert frame["ts"][0] == local
    assert frame["ts"].astype("int64")[0] == local.value     # nanoseconds, not microseconds


def test_group_dependent_dtypes_follow_the_keys_values():
    groups = dict(pandas_groups(_table(), ["k"], HandOver(timezone="UTC")))
    assert str(groups[("a",)][0]["b"].dtype) == "object"         # True and None
    assert str(groups[("e",)][0]["b"].dtype) == "object"
    assert str(groups[("d",)][0]["iv"].dtype) == "datetime64[ns]"  # all null: pandas' guess
    assert str(groups[("e",)][0]["iv"].dtype) == "timedelta64[ns]"
    assert str(groups[("a",)][0]["i"].dtype) == "float64"        # the batch had a null
    assert str(groups[("a",)][0]["l"].dtype) == "int64"


def test_column_names_that_are_not_identifiers_are_renamed_as_itertuples_renames_them():
    table = pa.table({"key": ["a", "a"], "event time": [1, 2], "_x": [3, 4]})
    [(_, [frame])] = pandas_groups(table, ["key"], HandOver())
    [(_, [expected])] = _spark_reference(table, ["key"], HandOver())
    assert list(frame.columns) == list(expected.columns) == ["key", "_1", "_2"]


def test_rows_carry_arrow_values_with_aware_timestamps_and_maps_as_pairs():
    from pyspark.sql import Row

    groups = dict(row_groups(_table(), ["k"]))
    row = groups[("a",)][0]
    assert isinstance(row, Row) and row.__fields__ == tuple(_table().schema.names)
    assert row.ts == _T and row.ts.tzinfo is not None
    assert row.m == [("p", 1)] and row.st == {"a": 1, "b": "s"}
    assert row.dec == decimal.Decimal("1.25") and row.d == dt.date(2024, 1, 1)
    assert [len(v) for v in groups.values()] == [2, 1, 1, 2, 3]


def test_null_keys_group_together_and_come_first():
    table = pa.table({"k": pa.array(["b", None, "a", None], pa.string()), "v": [1, 2, 3, 4]})
    assert [k for k, _ in row_groups(table, ["k"])] == [(None,), ("a",), ("b",)]
    assert [len(f[0]) for _, f in pandas_groups(table, ["k"], HandOver())] == [2, 1, 1]
