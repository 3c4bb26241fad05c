"""Join operators: stream-stream within a time bound, stream-table, and filling a table.

**Stream-stream join** (``left.join(right, key=..., other_key=..., fn=..., within_ms=W)``):
an interval join on event time. An element of one side at ``t`` joins every element of the
other side with the same key and an event time in ``[t - W, t + W]``, in arrival order;
the result's event time is the later of the two. State is the operator's store
``(side, key) -> [[t, element], ...]`` plus an expiry index ``<store>-expiry`` ordered by
time: when the watermark reaches ``W'``, elements with ``t + W < W'`` can match nothing that is
still to come and are removed (not at a drain: its end of time is not the data's, and the
elements must still meet their partners after the restart). An element that arrives behind
the watermark is dropped, counted (``late-dropped-<op id>``) and logged (rate-limited,
:mod:`weir.engine.app.late`), as in Flink's interval join.

**Stream-table join** (``stream.join_table(table, key=..., fn=..., how=...)``): looks the
element's key up in the task's table store; ``inner`` drops elements without a row, ``left``
joins them with ``None``. **send_to(table)** puts ``KV`` elements (a ``None`` value deletes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.engine.app.api import KV
from weir.engine.app.errors import MissingEventTimeError
from weir.engine.app.graph import OpSpec
from weir.engine.app.late import LateDrops, late_log_interval_ms
from weir.engine.app.operators import Operator, OperatorContext
from weir.engine.control.messages import WATERMARK_MAX

__all__ = ["StreamJoinOperator", "TableJoinOperator", "SendToTableOperator"]

_LOWEST = -(1 << 63)


class StreamJoinOperator(Operator):
    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        self.within = spec.within_ms
        self.keys = (spec.key, spec.other_key)
        self.fn = spec.fn
        self.store: Any = None
        self.expiry: Any = None
        self.dropped = None
        self.drops: LateDrops | None = None

    def open(self) -> None:
        self.store = self.ctx.store(self.id)
        self.expiry = self.ctx.store(f"{self.id}-expiry")
        self.dropped = self.ctx.counter(f"late-dropped-{self.id}")
        self.drops = LateDrops(
            f"join {self.spec.name!r}", self.ctx.task_name,
            interval_ms=late_log_interval_ms(self.ctx.config),
            hint="Raise task.watermark.max.out.of.orderness.ms (docs/APPLICATIONS.md, 'Late "
                 "elements')")

    def entry(self, port: int) -> Callable[[Any, int], None]:
        if port == 0:
            return lambda value, ts: self._arrive(0, value, ts)
        return lambda value, ts: self._arrive(1, value, ts)

    def on_message(self, value: Any, ts: int) -> None:  # pragma: no cover - entry() routes
        self._arrive(0, value, ts)

    def _arrive(self, side: int, value: Any, ts: int) -> None:
        if ts < 0:
            raise MissingEventTimeError(
                f"join {self.spec.name!r} got an element without an event time ({value!r}); "
                f"give the input a timestamp function (app.input(..., timestamp=fn))")
        if ts < self.input_wm:
            self.dropped.count += 1
            self.drops.dropped(ts, self.input_wm)
            return
        key = self.keys[side](value)
        store, within = self.store, self.within
        other = store.get((1 - side, key))
        if other:
            emit, fn = self.emit, self.fn
            for other_ts, other_value in other:
                if abs(ts - other_ts) <= within:
                    out = fn(value, other_value) if side == 0 else fn(other_value, value)
                    out_ts = ts if ts > other_ts else other_ts
                    for e in emit:
                        e(out, out_ts)
        mine = store.get((side, key))
        store.put((side, key), [*mine, [ts, value]] if mine else [[ts, value]])
        self.expiry.put((ts + within + 1, side, key), 1)

    def handle_end(self, drain_id: str | None) -> None:
        if self.drops is not None:
            self.drops.flush()

    def handle_watermark(self, wm: int) -> None:
        if self.ctx.draining:
            return   # a drain's end of time: keep every element for the next run
        hi = (WATERMARK_MAX, _LOWEST) if wm >= WATERMARK_MAX - 1 else (wm + 1, _LOWEST)
        with self.expiry.range(None, hi) as it:
            due = [k for k, _ in it]
        store, within = self.store, self.within
        touched = set()
        for ekey in due:
            self.expiry.delete(ekey)
            _, side, key = ekey
            if (side, key) in touched:
                continue
            touched.add((side, key))
            kept = [e for e in (store.get((side, key)) or ()) if e[0] + within >= wm]
            if kept:
                store.put((side, key), kept)
            else:
                store.delete((side, key))


class TableJoinOperator(Operator):
    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        self.key, self.fn, self.inner = spec.key, spec.fn, spec.how == "inner"
        self.table: Any = None

    def open(self) -> None:
        self.table = self.ctx.store(self.spec.table.name)

    def on_message(self, value: Any, ts: int) -> None:
        row = self.table.get(self.key(value))
        if row is None and self.inner:
            return
        out = self.fn(value, row)
        for e in self.emit:
            e(out, ts)


class SendToTableOperator(Operator):
    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        self.key_fn, self.value_fn = spec.key, spec.value
        self.table: Any = None

    def open(self) -> None:
        self.table = self.ctx.store(self.spec.table.name)

    def on_message(self, value: Any, ts: int) -> None:
        if self.key_fn is not None:
            key = self.key_fn(value)
            row = self.value_fn(value) if self.value_fn is not None else value
        elif isinstance(value, KV):
            key = value.key
            row = self.value_fn(value) if self.value_fn is not None else value.value
        else:
            raise TypeError(f"send_to(table {self.spec.table.name!r}) needs KV elements or "
                            f"key=/value= functions, got {value!r}")
        if row is None:
            self.table.delete(key)
        else:
            self.table.put(key, row)
