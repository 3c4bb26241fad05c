"""Periodic timers for the run loop, on one daemon thread.

Timers only flip flags and wake the loop (as Samza's window and commit timers do), so a
timer never runs user code and several due periods collapse into one operation. The loop
reads the flags on its own thread; its hot path checks a single attribute.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

__all__ = ["Ticker"]


class Ticker:
    """Calls each registered action every ``period_ms`` on a daemon thread.

    Actions must be quick and must not block (set a flag, put into a queue). A period that
    was missed (the thread was starved) fires once, not once per missed period.
    """

    def __init__(self, name: str = "weir-ticker", clock: Callable[[], int] = time.monotonic_ns):
        self._name = name
        self._clock = clock
        self._cond = threading.Condition()
        self._heap: list[tuple[int, int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def every(self, period_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` every ``period_ms`` (first time one period from now)."""
        if period_ms <= 0:
            raise ValueError("period_ms must be positive")
        period = period_ms * 1_000_000
        with self._cond:
            heapq.heappush(self._heap, (self._clock() + period, next(self._seq), period, action))
            self._cond.notify()

    def start(self) -> None:
        if self._thread is None and self._heap:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _run(self) -> None:
        heap, cond = self._heap, self._cond
        while True:
            due: list[Callable[[], None]] = []
            with cond:
                while not self._stopped:
                    now = self._clock()
                    deadline = heap[0][0]
                    if deadline <= now:
                        break
                    cond.wait((deadline - now) / 1e9)
                if self._stopped:
                    return
                now = self._clock()
                while heap and heap[0][0] <= now:
                    deadline, seq, period, action = heapq.heappop(heap)
                    nxt = deadline + period
                    if nxt <= now:  # fell behind: collapse the missed periods
                        nxt = now + period
                    heapq.heappush(heap, (nxt, seq, period, action))
                    due.append(action)
            for action in due:
                action()
