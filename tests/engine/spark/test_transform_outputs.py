"""transform_with_state's per-key plumbing without Spark: each key's rows as Spark hands them to
a pandas processor, and the processor's output frames as one Arrow table."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from weir.engine.spark.errors import SparkError
from weir.engine.spark.transform import _frames_table, _outputs_table


def _reference(frames, schema):
    frame = pd.concat(frames, ignore_index=True)
    return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)


def test_output_frames_convert_as_from_pandas_does():
    schema = pa.schema([("key", pa.string()), ("n", pa.int64()), ("x", pa.float64()),
                        ("ok", pa.bool_())])
    frames = [pd.DataFrame({"key": ["a"], "n": [1], "x": [0.5], "ok": [True]}),
              pd.DataFrame({"ok": [False, True], "x": [np.nan, 2.0], "n": [2, 3],
                            "key": [None, "c"]}),                     # other column order
              pd.DataFrame({"key": ["d"], "n": [np.int64(4)], "x": [1], "ok": [False],
                            "extra": ["ignored"]})]
    fast = _frames_table(frames, schema)
    assert fast is not None and fast.equals(_reference(frames, schema))
    assert fast.column("x").null_count == 1 and fast.column("key").null_count == 1
    assert _outputs_table(frames, schema, "pandas").equals(fast)


def test_output_types_the_fast_path_does_not_cover_go_through_concat():
    schema = pa.schema([("key", pa.string()), ("at", pa.timestamp("us"))])
    frames = [pd.DataFrame({"key": ["a"], "at": [pd.Timestamp("2024-03-01 12:00")]})]
    assert _frames_table(frames, schema) is None
    assert _outputs_table(frames, schema, "pandas").equals(_reference(frames, schema))
    ints = pa.schema([("n", pa.int64())])
    assert _frames_table([pd.DataFrame({"n": ["not a number"]})], ints) is None


def test_a_frame_without_an_output_column_is_a_clear_error():
    schema = pa.schema([("key", pa.string()), ("n", pa.int64())])
    with pytest.raises(SparkError, match=r"lacks column\(s\) \['n'\]"):
        _outputs_table([pd.DataFrame({"key": ["a"]})], schema, "pandas")


def test_each_key_gets_its_own_rows_indexed_from_zero_and_may_edit_them():
    from weir.engine.spark.handover import HandOver, pandas_groups

    table = pa.table({"key": ["b", "a", "b", "c", "a"], "v": [1, 2, 3, 4, 5]})
    seen = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no SettingWithCopyWarning
        for key, [group] in pandas_groups(table, ["key"], HandOver()):
            assert list(group.index) == list(range(len(group)))
            group["v2"] = group["v"] * 10
            group.loc[0, "v"] = -1
            seen[key] = sorted(group["v2"].tolist())
    assert seen == {("a",): [20, 50], ("b",): [10, 30], ("c",): [40]}


def test_default_operator_names_are_stable_and_differ_by_processor_and_key(tmp_path):
    from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta
    from weir.engine.spark.transform import default_name

    from tests.engine.spark.processors import MapOps, Sessions

    name = default_name(Sessions(), ["key"], str(tmp_path))
    assert name == default_name(Sessions(), ["key"], str(tmp_path))   # same on a restart
    assert name.startswith("tws-Sessions-")
    assert len({name, default_name(MapOps(), ["key"], str(tmp_path)),
                default_name(Sessions(), ["key", "day"], str(tmp_path))}) == 3
    # a checkpoint written under the old fixed default keeps its state folder
    OperatorCheckpoint(tmp_path, "transformWithState").ensure_meta(
        OperatorMeta("transformWithState", "transform-with-state", 2, {}))
    assert default_name(Sessions(), ["key"], str(tmp_path)) == "transformWithState"
