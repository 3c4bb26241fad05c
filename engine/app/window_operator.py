"""The window operator: keyed event-time windows in a Weir store, fired by watermarks.

State: the operator's store (``<app>-<id>-window-<name>``) maps ``(end, start, key)`` to
``[accumulator, fired]``; its key serde orders entries by ``end`` first, so the windows a
watermark ``W`` closes are one range scan (``end <= W + 1``). Session windows also keep a
per-key index ``<store>-sessions``: key -> ``[[start, end], ...]`` of the key's open sessions.
Both have changelogs, so a window survives a crash exactly as of the last checkpoint, and
the control bookkeeping restores the watermark it had reached.

An element of key ``k`` at event time ``t``:

1. is assigned its window (tumbling: ``[t - t % size, ... + size)``; session: ``[t, t + gap)``
   merged with every overlapping session of ``k``);
2. is dropped and counted (``late-dropped-<op id>``) if that window's end is more than the
   allowed lateness behind the watermark (``end - 1 + lateness <= watermark``);
3. else is folded into the window's accumulator; if the window already fired (late but
   within lateness), the window fires again at once with ``late=True``.

When the watermark advances to ``W``, every window with ``end - 1 <= W`` that has not fired
emits a :class:`~weir.engine.app.windows.WindowPane` (in order of end, start, key bytes), and
windows with ``end - 1 + lateness <= W`` are deleted. At the end of input (or a drain) the
watermark is the end of time: everything fires.
"""

from __future__ import annotations

from typing import Any

from weir.engine.app.errors import MissingEventTimeError
from weir.engine.app.graph import OpSpec
from weir.engine.app.operators import Operator, OperatorContext
from weir.engine.app.windows import WindowKind, WindowPane
from weir.engine.control.messages import WATERMARK_MAX

__all__ = ["WindowOperator"]

_LOWEST = -(1 << 63)


class WindowOperator(Operator):
    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        w = spec.window
        self.window = w
        self.kind = w.kind
        self.size = w.size_ms
        self.lateness = w.allowed_lateness_ms
        self.key_fn = w.key
        agg = w.aggregate
        self.initial, self.add, self.merge = agg.initial, agg.add, agg.merge
        self.result = agg.result or (lambda acc: acc)
        self.store: Any = None
        self.sessions: Any = None
        self.dropped = None
        # The smallest window end still in the store (a lower bound; unknown after a restart):
        # a watermark below it has nothing to fire or purge, and costs no range scan.
        self.next_end = _LOWEST

    def open(self) -> None:
        self.store = self.ctx.store(self.id)
        if self.kind is WindowKind.SESSION:
            self.sessions = self.ctx.store(f"{self.id}-sessions")
        else:
            self.on_message = self._on_tumbling
            self._get, self._put = self.store.get, self.store.put
        self.dropped = self.ctx.counter(f"late-dropped-{self.id}")

    # -- elements -----------------------------------------------------------------------------
    def on_message(self, value: Any, ts: int) -> None:
        if ts < 0:
            raise MissingEventTimeError(
                f"window {self.spec.name!r} got an element without an event time ({value!r}); "
                f"give the input a timestamp function (app.input(..., timestamp=fn)) or write "
                f"records with timestamps")
        key = self.key_fn(value)
        if self.kind is WindowKind.TUMBLING:
            start = ts - ts % self.size
            self._fold(start, start + self.size, key, value)
        else:
            self._fold_session(ts, key, value)

    def _on_tumbling(self, value: Any, ts: int) -> None:
        """``on_message`` of tumbling windows, in one function (the per-element path)."""
        if ts < 0:
            WindowOperator.on_message(self, value, ts)   # raises the clear error
            return
        size = self.size
        start = ts - ts % size
        end = start + size
        if end - 1 + self.lateness <= self.input_wm:
            self.dropped.count += 1
            return
        skey = (end, start, self.key_fn(value))
        entry = self._get(skey)
        if entry is None:
            self._put(skey, [self.add(self.initial(), value), False])
            if end < self.next_end:
                self.next_end = end
            return
        acc = self.add(entry[0], value)
        self._put(skey, [acc, entry[1]])
        if entry[1]:  # late, within the allowed lateness: a refinement of the fired pane
            self._emit(WindowPane(skey[2], start, end, self.result(acc), True))

    def _is_too_late(self, end: int) -> bool:
        return end - 1 + self.lateness <= self.input_wm

    def _fold(self, start: int, end: int, key: Any, value: Any) -> None:
        if self._is_too_late(end):
            self.dropped.count += 1
            return
        skey = (end, start, key)
        store = self.store
        entry = store.get(skey)
        if entry is None:
            acc, fired = self.add(self.initial(), value), False
        else:
            acc, fired = self.add(entry[0], value), entry[1]
        store.put(skey, [acc, fired])
        if not fired and end < self.next_end:
            self.next_end = end
        if fired:  # late, within the allowed lateness: a refinement of the fired pane
            self._emit(WindowPane(key, start, end, self.result(acc), True))

    def _fold_session(self, ts: int, key: Any, value: Any) -> None:
        start, end = ts, ts + self.size
        index = self.sessions.get(key) or []
        overlapping = [(s, e) for s, e in index if s < end and start < e]
        new_start = min([start, *(s for s, _ in overlapping)])
        new_end = max([end, *(e for _, e in overlapping)])
        if self._is_too_late(new_end):
            self.dropped.count += 1
            return
        store = self.store
        acc, fired = self.add(self.initial(), value), False
        for s, e in overlapping:
            entry = store.get((e, s, key))
            if entry is not None:
                acc = self.merge(entry[0], acc)
                fired = fired or entry[1]
                store.delete((e, s, key))
        store.put((new_end, new_start, key), [acc, fired])
        if new_end < self.next_end:
            self.next_end = new_end
        rest = [[s, e] for s, e in index if (s, e) not in overlapping]
        self.sessions.put(key, sorted([*rest, [new_start, new_end]]))
        if fired:
            self._emit(WindowPane(key, new_start, new_end, self.result(acc), True))

    def _emit(self, pane: WindowPane) -> None:
        ts = pane.end - 1
        for fn in self.emit:
            fn(pane, ts)

    # -- firing -------------------------------------------------------------------------------
    def handle_watermark(self, wm: int) -> None:
        if wm < self.next_end - 1:
            return   # no window ends by this watermark
        hi = (WATERMARK_MAX, _LOWEST) if wm >= WATERMARK_MAX - 1 else (wm + 2, _LOWEST)
        store = self.store
        with store.range(None, hi) as it:
            due = list(it)
        with store.range(hi, None) as it:
            first = next(iter(it), None)
        self.next_end = first[0][0] if first is not None else WATERMARK_MAX
        purge_limit = wm - self.lateness if wm < WATERMARK_MAX else WATERMARK_MAX
        for skey, (acc, fired) in due:
            end, start, key = skey
            if end - 1 > wm:
                continue
            if not fired:
                self._emit(WindowPane(key, start, end, self.result(acc), False))
            if end - 1 <= purge_limit:
                store.delete(skey)
                if self.sessions is not None:
                    self._forget_session(key, start, end)
            else:
                # kept for its allowed lateness: due again when that has passed
                self.next_end = min(self.next_end, end + self.lateness)
                if not fired:
                    store.put(skey, [acc, True])

    def _forget_session(self, key: Any, start: int, end: int) -> None:
        index = self.sessions.get(key) or []
        rest = [[s, e] for s, e in index if not (s == start and e == end)]
        if rest:
            self.sessions.put(key, rest)
        else:
            self.sessions.delete(key)
