"""Plain PySpark StatefulProcessors (nothing Weir-specific), shared by the tests that run them
under Spark's transformWithStateInPandas and under weir.spark.transform_with_state."""

from __future__ import annotations

import datetime as dt
import decimal

import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor


class _NoResources(StatefulProcessor):
    """What these processors share: nothing to release in close()."""

    def close(self):
        pass


class Sessions(_NoResources):
    """Per key: a running count (value state), the last three values (list state), a count per
    value bucket (map state), an event-time timer 10 s after the newest event that emits a
    summary and clears the key. Initial state seeds the count."""

    def init(self, handle):
        self.handle = handle
        self.count = handle.getValueState("count", "n long")
        self.recent = handle.getListState("recent", "v long")
        self.buckets = handle.getMapState("buckets", "bucket string", "n long")

    def handleInitialState(self, key, initialState, timerValues):
        self.count.update((int(initialState["seed"].sum()),))

    def handleInputRows(self, key, rows, timerValues):
        n = self.count.get()[0] if self.count.exists() else 0
        newest = -1
        for pdf in rows:
            n += len(pdf)
            for v in pdf["v"].tolist():
                self.recent.appendValue((int(v),))
                bucket = "high" if v >= 5 else "low"
                old = self.buckets.getValue((bucket,))
                self.buckets.updateValue((bucket,), ((old[0] if old else 0) + 1,))
            newest = max(newest, int(pdf["ts"].max().timestamp() * 1000))
        kept = list(self.recent.get())[-3:]
        self.recent.put(kept)
        self.count.update((n,))
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        self.handle.registerTimer(newest + 10_000)
        yield pd.DataFrame({"key": [key[0]], "kind": ["rows"], "n": [n],
                            "detail": [",".join(str(v[0]) for v in kept)]})

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        buckets = sorted((b[0], c[0]) for b, c in self.buckets.iterator())
        n = self.count.get()[0] if self.count.exists() else 0
        self.count.clear()
        self.recent.clear()
        self.buckets.clear()
        yield pd.DataFrame({"key": [key[0]], "kind": ["timer"], "n": [n],
                            "detail": [f"{expiredTimerInfo.getExpiryTimeInMs()}:{buckets}"]})


class TtlCount(_NoResources):
    """A count that forgets a key ttl_ms after its last update (ProcessingTime), and a
    processing-time timer 'ttl_ms' after each update."""

    ttl_ms = 1

    def init(self, handle):
        self.handle = handle
        self.count = handle.getValueState("count", "n long", self.ttl_ms)

    def handleInputRows(self, key, rows, timerValues):
        n = self.count.get()[0] if self.count.exists() else 0
        for pdf in rows:
            n += len(pdf)
        self.count.update((n,))
        self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + self.ttl_ms)
        yield pd.DataFrame({"key": [key[0]], "n": [n]})

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        yield pd.DataFrame({"key": [key[0]], "n": [-1]})


# -- what a processor receives, one column type at a time ------------------------------------
PROBE_OUT = "key string, chunk long, col string, dtype string, vals string"
PROBE_SCHEMA = ("k string, i int, l long, by byte, sh short, f float, db double, b boolean, "
                "s string, ts timestamp, ntz timestamp_ntz, d date, dec decimal(10,2), "
                "big decimal(38,18), bin binary, arr array<int>, m map<string,int>, "
                "st struct<a:int,b:string>, arrst array<struct<x:double>>, "
                "nest map<int,array<string>>, iv interval day to second")
_T = dt.datetime(2024, 3, 10, 6, 30, 15, 123456)
_NULLS = (None,) * 20
PROBE_ROWS = [
    # key a: every type, then a row of nulls (so the Arrow batch has nulls in every column)
    ("a", 1, 10, 1, 2, 1.5, 2.5, True, "x", _T, _T, dt.date(2024, 3, 10), decimal.Decimal("1.25"),
     decimal.Decimal("12345678901234567890.123456789012345678"), b"\x00\x01", [1, None],
     {"p": 1, "q": None}, (1, "s"), [(0.5,), None], {7: ["u", None]}, dt.timedelta(seconds=5)),
    ("a",) + _NULLS,
    # key b: other values, empty collections, a struct of nulls
    ("b", 3, 30, 3, 4, 3.5, 4.5, False, "y", _T - dt.timedelta(days=400),
     dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.date(1900, 1, 1),
     decimal.Decimal("-3.00"), decimal.Decimal("0"), b"", [], {}, (None, None), [], {},
     dt.timedelta(days=-1, microseconds=1)),
    # key c: nulls only
    ("c",) + _NULLS,
    # key d: no null in this key (pandas infers the boolean column again as bool)
    ("d", 4, 40, 4, 5, 4.5, 5.5, True, "z", _T, _T, dt.date(2024, 3, 11), decimal.Decimal("4.5"),
     decimal.Decimal("4.5"), b"d", [4], {"d": 4}, (4, "d"), [(4.0,)], {4: []},
     dt.timedelta(hours=4)),
    ("d", 5, 50, 5, 6, 5.5, 6.5, False, "w", _T, _T, dt.date(2024, 3, 12), decimal.Decimal("5.5"),
     decimal.Decimal("5.5"), b"e", [5], {"e": 5}, (5, "e"), [(5.0,)], {5: ["v"]},
     dt.timedelta(hours=5)),
]


def _desc(v):
    """A value as the processor sees it: its type and repr."""
    return f"{type(v).__module__}.{type(v).__name__}:{v!r}"


class PandasProbe(_NoResources):
    """Emits what it receives: per chunk and column the dtype and every value with its type."""
    def init(self, handle):
        pass

    def handleInputRows(self, key, rows, timerValues):
        out = []
        out.append((str(key[0]), -1, "<key>", type(key).__name__, ";".join(_desc(x) for x in key)))
        for n, pdf in enumerate(rows):
            out.append((str(key[0]), n, "<index>", type(pdf.index).__name__, repr(list(pdf.columns))))
            for c in pdf.columns:
                out.append((str(key[0]), n, c, str(pdf[c].dtype), ";".join(_desc(v) for v in pdf[c].tolist())))
                out.append((str(key[0]), n, c + "#iter", str(pdf[c].dtype), ";".join(_desc(v) for v in pdf[c])))
        yield pd.DataFrame(out, columns=["key", "chunk", "col", "dtype", "vals"])


class RowProbe(_NoResources):
    """Emits what it receives: the key and every Row value with its type."""
    def init(self, handle):
        pass

    def handleInputRows(self, key, rows, timerValues):
        yield Row(key=str(key[0]), chunk=-1, col="<key>", dtype=type(key).__name__,
                  vals=";".join(_desc(x) for x in key))
        for n, row in enumerate(rows):
            yield Row(key=str(key[0]), chunk=n, col="<row>", dtype=type(row).__name__,
                      vals=repr(row.__fields__))
            for c in row.__fields__:
                yield Row(key=str(key[0]), chunk=n, col=c, dtype="", vals=_desc(row[c]))


# -- scenarios of Spark's own transformWithState tests, written again --------------------------
class ViolationCount(_NoResources):
    """Per id: rows seen in this batch, and a running count of temperatures above 100 kept in
    value state (Spark's 'simple' scenario). A second variable is dropped in init with
    deleteIfExists; using it afterwards must fail as on Spark."""

    def init(self, handle):
        self.violations = handle.getValueState("violations", "value int")
        self.hot = handle.getListState("hot", "temperature int")
        self.buckets = handle.getMapState("buckets", "bucket string", "n long")
        self.dropped = handle.getValueState("dropped", "value int")
        handle.deleteIfExists("dropped")

    def _count(self, chunks):
        """Counts the temperatures of the batch (``chunks``: lists of them, a pandas chunk's
        column or one Row's value; None and NaN are nulls) into the state; returns rows seen,
        the running violation count and whether using the dropped variable failed."""
        from pyspark.errors import PySparkRuntimeError

        try:
            self.dropped.exists()
            failed = "no"
        except PySparkRuntimeError:
            failed = "yes"
        before = self.violations.get()[0] if self.violations.exists() else 0
        seen = hot = 0
        for temperatures in chunks:
            for t in temperatures:
                if t is None or t != t:
                    continue
                seen += 1
                if t > 100:
                    hot += 1
                    self.hot.appendValue((int(t),))
                bucket = ("hot" if t > 100 else "cold",)
                old = self.buckets.getValue(bucket)
                self.buckets.updateValue(bucket, ((old[0] if old else 0) + 1,))
        self.violations.update((before + hot,))
        return seen, before + hot, failed

    def handleInputRows(self, key, rows, timerValues):
        seen, violations, failed = self._count(pdf["temperature"].tolist() for pdf in rows)
        yield pd.DataFrame({"id": [key[0]], "seen": [seen], "violations": [violations],
                            "dropped_fails": [failed]})


class RowViolationCount(ViolationCount):
    """ViolationCount for transformWithState (Rows)."""

    def handleInputRows(self, key, rows, timerValues):
        seen, violations, failed = self._count([row.temperature] for row in rows)
        yield Row(id=key[0], seen=seen, violations=violations, dropped_fails=failed)


class FirstEventTime(_NoResources):
    """Emits each id's first event time of the batch as its output event time (Spark's
    'chaining' scenario: a downstream event-time aggregation uses that column)."""

    def init(self, handle):
        pass

    def handleInputRows(self, key, rows, timerValues):
        first = None
        for pdf in rows:
            first = pdf["eventTime"].tolist()[0] if first is None else first
        yield pd.DataFrame({"id": [key[0]], "outputTimestamp": [first]})


class MaxEventTimeTimer(_NoResources):
    """Spark's event-time timer scenario: per id the largest event time seen, in seconds (from
    the pandas timestamp as int64 nanoseconds), a timer at the current watermark that clears it
    and emits '<id>-expired'."""

    def init(self, handle):
        self.handle = handle
        self.largest = handle.getValueState("largest", "value string")

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        self.largest.clear()
        self.handle.deleteTimer(expiredTimerInfo.getExpiryTimeInMs())
        yield pd.DataFrame({"id": [f"{key[0]}-expired"],
                            "timestamp": [str(expiredTimerInfo.getExpiryTimeInMs())]})

    def handleInputRows(self, key, rows, timerValues):
        seconds = []
        for pdf in rows:
            seconds.extend((pdf["eventTime"].astype("int64") // 10**9).tolist())
        before = int(self.largest.get()[0]) if self.largest.exists() else 0
        largest = str(max(before, max(seconds)))
        self.largest.update((largest,))
        self.handle.registerTimer(timerValues.getCurrentWatermarkInMs())
        yield pd.DataFrame({"id": [key[0]], "timestamp": [largest]})


class ListOps(_NoResources):
    """List state: put, appendValue, appendList, two iterators read in turns, an element of
    timestamp type; emits the count and both lists as text."""

    def init(self, handle):
        self.first = handle.getListState("first", "t int")
        self.second = handle.getListState("second", "t int")
        self.times = handle.getListState("times", "at timestamp")

    def handleInputRows(self, key, rows, timerValues):
        import datetime as _dt

        count = 0
        for pdf in rows:
            count += int(pdf["temperature"].count())
            self.first.put([(7,), (8,)])
            self.second.put([(9,)])
            self.first.appendValue((count,))
            self.second.appendList([(1,), (2,)])
        a, b = self.first.get(), self.second.get()
        interleaved = [next(a)[0], next(b)[0], next(a)[0], next(b)[0]]
        self.times.put([(_dt.datetime(2024, 1, 1, 12, count),)])
        yield pd.DataFrame({"id": [key[0]], "count": [count],
                            "lists": [f"{interleaved}|{[v[0] for v in self.first.get()]}|"
                                      f"{[v[0] for v in self.second.get()]}|"
                                      f"{[str(v[0]) for v in self.times.get()]}"]})


class LargeList(_NoResources):
    """A list of 100 two-field elements (one field null) on the first batch, then 90 more by put
    (id '0') or appendList (the others); emits the list before and after."""

    def init(self, handle):
        self.items = handle.getListState("items", "v int, none int")
        self.size = handle.getValueState("size", "n int")

    def handleInputRows(self, key, rows, timerValues):
        for _ in rows:
            pass
        before = [e[0] for e in self.items.get()]
        if not before:
            new = [(i, None) for i in range(100)]
            (self.items.put if key[0] == "0" else self.items.appendList)(new)
            self.size.update((100,))
        else:
            n = self.size.get()[0]
            if key[0] == "0":
                self.items.put([(i, None) for i in range(n + 90)])
            else:
                self.items.appendList([(i, None) for i in range(n, n + 90)])
            self.size.update((n + 90,))
        after = [e[0] for e in self.items.get()]
        yield pd.DataFrame({"id": [key[0]], "before": [len(before)], "after": [len(after)],
                            "check": [sum(after) + sum(1 for e in self.items.get()
                                                       if e[1] is None)]})


class MapOps(_NoResources):
    """Map state with DDL schemas: containsKey, getValue, updateValue, keys/values/iterator
    order, removeKey, clear; emits what it saw."""

    def init(self, handle):
        self.counts = handle.getMapState("counts", "name string", "count int")

    def handleInputRows(self, key, rows, timerValues):
        count = sum(int(pdf["temperature"].count()) for pdf in rows)
        seen = []
        for name in ("one", "two"):
            if self.counts.containsKey((name,)):
                seen.append(self.counts.getValue((name,))[0])
            self.counts.updateValue((name,), (count + len(seen),))
        order = ([k[0] for k in self.counts.keys()], [v[0] for v in self.counts.values()],
                 [(k[0], v[0]) for k, v in self.counts.iterator()])
        self.counts.removeKey(("one",))
        after_remove = (self.counts.containsKey(("one",)), self.counts.exists())
        if key[0] == "1":
            self.counts.clear()
        yield pd.DataFrame({"id": [key[0]], "seen": [str(seen)], "order": [str(order)],
                            "after": [str(after_remove) + str(self.counts.exists())]})


class MissingValue(_NoResources):
    """A value state never written: exists() is false, get() is None, clear() is harmless."""

    def init(self, handle):
        self.never = handle.getValueState("never", "n int")

    def handleInputRows(self, key, rows, timerValues):
        for _ in rows:
            pass
        before = (self.never.exists(), self.never.get())
        self.never.clear()
        yield pd.DataFrame({"id": [key[0]], "state": [str(before)]})


class NestedValue(_NoResources):
    """Nested types in value, list and map state: arrays of arrays, arrays of structs, maps of
    arrays, maps of maps; written on the first batch, read back and extended on the next."""

    SCHEMA = ("ids array<int>, tags array<array<string>>, "
              "meta array<struct<k:string,v:string>>, attrs map<string,array<int>>, "
              "confs map<string,map<string,int>>")

    def init(self, handle):
        self.value = handle.getValueState("value", self.SCHEMA)
        self.items = handle.getListState("items", self.SCHEMA)
        self.by_name = handle.getMapState("by_name", "name string", self.SCHEMA)

    def handleInputRows(self, key, rows, timerValues):
        n = sum(len(pdf) for pdf in rows)
        if self.value.exists():
            ids, tags, meta, attrs, confs = self.value.get()
            ids = list(ids) + [n]
        else:
            ids, tags = [n], [["a", "b"], ["c"]]
            meta = [("env", "prod"), ("region", "west")]
            attrs, confs = {"x": [1], "y": [10, 20]}, {"e": {"f": 5, "g": 10}}
        row = (ids, tags, meta, attrs, confs)
        self.value.update(row)
        self.items.appendValue(row)
        self.by_name.updateValue((key[0],), row)

        def show(r):
            ids, tags, meta, attrs, confs = r
            return (list(ids), [list(t) for t in tags], [tuple(m) for m in meta],
                    sorted((k, list(v)) for k, v in attrs.items()),
                    sorted((k, sorted(v.items())) for k, v in confs.items()))

        yield pd.DataFrame({"id": [key[0]], "value": [str(show(self.value.get()))],
                            "items": [len(list(self.items.get()))],
                            "mapped": [str(show(self.by_name.getValue((key[0],))))]})


class StructOutput(_NoResources):
    """A struct output column (a dict in a pandas cell) and a struct value state."""

    def init(self, handle):
        self.state = handle.getValueState("state", "id int, name string")

    def _next_id(self, key, rows) -> int:
        for _ in rows:
            pass
        before = self.state.get()
        ident = int(key[0]) + (before[0] + 1 if before else 0)
        self.state.update((ident, f"name-{ident}"))
        return ident

    def handleInputRows(self, key, rows, timerValues):
        ident = self._next_id(key, rows)
        yield pd.DataFrame({"id": [key[0]], "value": [{"id": ident, "name": f"name-{ident}"}]})


class RowStructOutput(StructOutput):
    """StructOutput for transformWithState (Rows)."""

    def handleInputRows(self, key, rows, timerValues):
        ident = self._next_id(key, rows)
        yield Row(id=key[0], value={"id": ident, "name": f"name-{ident}"})
