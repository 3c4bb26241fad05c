"""Plain PySpark StatefulProcessors (nothing Weir-specific), shared by the tests that run them
under Spark's transformWithStateInPandas and under weir.spark.transform_with_state."""

from __future__ import annotations

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor


class Sessions(StatefulProcessor):
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

    def close(self):
        pass


class TtlCount(StatefulProcessor):
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

    def close(self):
        pass
