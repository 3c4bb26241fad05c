"""How Spark hands a ``StatefulProcessor`` each key's rows, reproduced for Weir's operator.

A processor written for Spark must see, under ``transform_with_state``, the very objects Spark's
``transformWithStateInPandas`` / ``transformWithState`` give it: the same pandas dtypes (a
timestamp is ``datetime64[ns]``, an ``int`` column with a null in its Arrow batch is
``float64``, a ``float`` column is ``float64``), the same Python values (a timestamp of the
rows flavour is an aware ``datetime`` in the session time zone, a map is a ``dict`` in pandas
and a list of pairs in a Row), the same chunking of a key's rows and the same key tuple.
PySpark 4.3's worker (``pyspark/worker.py``, ``SQL_TRANSFORM_WITH_STATE_*``) does this:

* **pandas** -- the key-sorted rows arrive as Arrow batches of at most
  ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows; each batch goes through Spark's Arrow
  -> pandas converter (``ArrowBatchTransformer.to_pandas`` with the session time zone), then row
  by row through ``DataFrame.itertuples``; consecutive rows of one key are gathered and rebuilt
  as ``pd.DataFrame(rows)`` chunks of at most ``maxRecordsPerBatch`` rows, so pandas infers
  every column's dtype again from Python objects. The key is the tuple of the key columns'
  values of those rows.
* **rows** -- each value is ``arrow_scalar.as_py()``; a Row is ``Row(*column_names)(*values)``.

:func:`pandas_groups` does the same: exactly (the rows rebuilt as Spark rebuilds them) where
the result could depend on the rows, and by slicing one converted frame where it provably cannot
(numeric, boolean, timestamp and interval columns, whose re-inferred dtype is fixed -- except
an interval column that is all null in a key, which pandas infers as ``datetime64[ns]``; object
columns holding only strings, bytes, decimals, dates, dicts, lists and arrays), which is 5-20x
cheaper per key. The tests compare both paths with each other and with Spark's own operator,
one column type at a time (docs/SPARK.md, "What a processor receives").
"""

from __future__ import annotations

import collections
import datetime as _dt
import decimal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["HandOver", "pandas_groups", "row_groups", "sorted_groups"]

_DEFAULT_MAX_RECORDS = 10_000


@dataclass(frozen=True)
class HandOver:
    """The session settings that shape what a processor receives.

    ``timezone``: ``spark.sql.session.timeZone``; ``max_records``:
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` (rows per Arrow batch and per pandas
    chunk of one key; 0 or less means unbounded, as in Spark); ``prefer_int_ext_dtype``:
    ``spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype``.
    """

    timezone: str | None = None
    max_records: int = _DEFAULT_MAX_RECORDS
    prefer_int_ext_dtype: bool = False

    @classmethod
    def from_spark(cls, spark: Any) -> "HandOver":
        conf = spark.conf
        records = int(conf.get("spark.sql.execution.arrow.maxRecordsPerBatch",
                               str(_DEFAULT_MAX_RECORDS)))
        prefer = conf.get("spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype",
                          "false")
        return cls(conf.get("spark.sql.session.timeZone", None), records,
                   str(prefer).lower() == "true")

    @property
    def chunk(self) -> int:
        return self.max_records if self.max_records > 0 else 2**31 - 1


def sorted_groups(table: Any, key: Sequence[str]) -> tuple[Any, list[int]]:
    """``table`` sorted by ``key`` as Spark sorts the input of its operator (ascending, nulls
    first) and the row index where each key's rows start (plus the row count at the end)."""
    import pyarrow.compute as pc

    n = table.num_rows
    if n == 0:
        return table, [0]
    try:       # pyarrow 20+: null placement per sort key
        order = pc.sort_indices(table, [(k, "ascending", "at_start") for k in key])
    except (TypeError, ValueError):
        order = pc.sort_indices(table, [(k, "ascending") for k in key],
                                null_placement="at_start")
    table = table.take(order)
    changed = None
    for k in key:
        column = table.column(k).combine_chunks()
        after, before = column.slice(1), column.slice(0, n - 1)
        step = pc.not_equal(after, before)
        if step.null_count:  # nulls group together, as in Spark's groupBy
            both_null = pc.and_(pc.is_null(after), pc.is_null(before))
            step = pc.if_else(both_null, False, pc.fill_null(step, True))
        changed = step if changed is None else pc.or_(changed, step)
    if changed is None:
        return table, [0, n]
    return table, [0] + [i + 1 for i in pc.indices_nonzero(changed).to_pylist()] + [n]


def row_groups(table: Any, key: Sequence[str]) -> Iterator[tuple[tuple, list[Any]]]:
    """``(key tuple, that key's Rows)`` in key order, as ``transformWithState`` builds them."""
    from pyspark.sql import Row

    table, starts = sorted_groups(table, key)
    if table.num_rows == 0:
        return
    names = table.schema.names
    data_row = Row(*names)
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    rows = [data_row(*values) for values in zip(*columns)]
    positions = [names.index(k) for k in key]
    for a, b in zip(starts, starts[1:]):
        first = rows[a]
        yield tuple(first[p] for p in positions), rows[a:b]


def _to_pandas(batch: Any, handover: HandOver) -> Any:
    """One Arrow batch through Spark's Arrow -> pandas converter, as the worker calls it."""
    import pandas as pd
    from pyspark.sql.conversion import ArrowBatchTransformer

    series = ArrowBatchTransformer.to_pandas(batch, timezone=handover.timezone,
                                             prefer_int_ext_dtype=handover.prefer_int_ext_dtype)
    return pd.concat(series, axis=1)


# object columns holding only these (or None) stay ``object`` when pandas infers again
_STAYS_OBJECT = (bytes, bytearray, decimal.Decimal, dict, list, tuple)


def _stays_object(values: Any, strings_stay: bool) -> bool:
    import numpy as np

    for v in values:
        if v is None:
            continue
        t = type(v)
        if t is str:
            if not strings_stay:
                return False
        elif t is _dt.date or t is np.ndarray or isinstance(v, _STAYS_OBJECT):
            continue
        else:
            return False
    return True


class _Chunk:
    """One converted Arrow batch: the frame Spark's converter made, the dtypes pandas infers
    again for its fixed-dtype columns, and its object columns (checked per key)."""

    def __init__(self, frame: Any, start: int, key_positions: Sequence[int]):
        import numpy as np

        self.frame = frame
        self.start = start
        self.stop = start + len(frame)
        fields = collections.namedtuple("Pandas", list(frame.columns), rename=True)._fields
        self.fields = list(fields)
        self.object_columns: list[Any] = []
        self.interval_columns: list[Any] = []   # all NaT in a key: pandas infers datetime64
        self.fixed = True
        cast: dict[Any, str] = {}
        for i, dtype in enumerate(frame.dtypes):
            kind = getattr(dtype, "kind", None) if isinstance(dtype, np.dtype) else None
            if kind in ("i", "u"):
                cast[frame.columns[i]] = "int64"
            elif kind == "f":
                cast[frame.columns[i]] = "float64"
            elif kind == "M":
                cast[frame.columns[i]] = "datetime64[ns]"
            elif kind == "m":
                cast[frame.columns[i]] = "timedelta64[ns]"
                self.interval_columns.append(frame.iloc[:, i].isna().to_numpy())
            elif kind == "b":
                continue
            elif kind == "O":
                self.object_columns.append(frame.iloc[:, i].to_numpy())
            else:            # an extension dtype (preferIntExtensionDtype): rebuild per key
                self.fixed = False
        self.sliced = None
        if self.fixed:
            sliced = frame.astype(cast) if cast else frame
            if not frame.columns.is_unique or list(frame.columns) != self.fields:
                sliced = sliced.set_axis(self.fields, axis=1)
            self.sliced = sliced
        self.keys = [list(frame.iloc[:, p]) for p in key_positions]

    def rows(self, a: int, b: int) -> Iterator[Any]:
        return self.frame.iloc[a - self.start:b - self.start].itertuples(index=False)

    def key(self, a: int) -> tuple:
        return tuple(k[a - self.start] for k in self.keys)

    def can_slice(self, a: int, b: int, strings_stay: bool) -> bool:
        if not self.fixed:
            return False
        lo, hi = a - self.start, b - self.start
        if any(nat[lo:hi].all() for nat in self.interval_columns):
            return False
        return all(_stays_object(column[lo:hi], strings_stay) for column in self.object_columns)

    def slice(self, a: int, b: int) -> Any:
        import pandas as pd

        group = self.sliced.iloc[a - self.start:b - self.start].copy(deep=False)
        group.index = pd.RangeIndex(b - a)
        return group


def pandas_groups(table: Any, key: Sequence[str],
                  handover: HandOver) -> Iterator[tuple[tuple, list[Any]]]:
    """``(key tuple, that key's pandas DataFrames)`` in key order, as
    ``transformWithStateInPandas`` hands them over (see the module docstring)."""
    import pandas as pd

    table, starts = sorted_groups(table, key)
    n = table.num_rows
    if n == 0:
        return
    size = handover.chunk
    strings_stay = not bool(pd.get_option("future.infer_string"))
    positions = [table.schema.names.index(k) for k in key]
    chunks: list[_Chunk] = []
    for begin in range(0, n, size):
        batch = table.slice(begin, size).combine_chunks().to_batches()[0]
        chunks.append(_Chunk(_to_pandas(batch, handover), begin, positions))
    c = 0
    for a, b in zip(starts, starts[1:]):
        while chunks[c].stop <= a:
            c += 1
        chunk = chunks[c]
        if b <= chunk.stop and chunk.can_slice(a, b, strings_stay):
            yield chunk.key(a), [chunk.slice(a, b)]
            continue
        # the rows rebuilt as Spark rebuilds them: over every Arrow batch they span
        frames, rows, key_tuple = [], [], None
        i = c
        while i < len(chunks) and chunks[i].start < b:
            part = chunks[i]
            lo, hi = max(a, part.start), min(b, part.stop)
            if key_tuple is None:
                key_tuple = part.key(lo)
            for row in part.rows(lo, hi):
                rows.append(row)
                if len(rows) >= size:
                    frames.append(pd.DataFrame(rows))
                    rows = []
            i += 1
        if rows:
            frames.append(pd.DataFrame(rows))
        yield key_tuple, frames

