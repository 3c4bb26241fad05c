"""Linger: what a producer buffers is written out ``linger.ms`` after the first of it was sent
(Kafka's ``linger.ms``), by one timer thread per process.

A producer that buffers records -- the file log's partition writers, its transactional
producer's open batches -- calls :meth:`Linger.arm` when its buffer goes from empty to not
empty. ``linger.ms`` later the timer thread calls the item's
:meth:`~Lingering.write_lingering`, which writes what is buffered out to the files *without*
fsync, under the item's own lock: readers in any process see the records at once, and a record
is never cut in half nor mixed into a flush (appends and flushes hold the same lock). The size
trigger stays the producer's own (a full buffer is written out at once), and durability stays
the flush's: a commit still flushes and fsyncs in the same order as before, so what a crash
can lose or repeat does not change.

The run loop calls :meth:`Linger.write_out` when it goes idle (no message to process): what the
tasks sent is written out then, without waiting for the rest of ``linger.ms``. A job under
load writes at most every ``linger.ms``; a job that keeps up writes every time it has caught
up.

Threads and locks: :meth:`Linger.arm` is called with the item's lock held and takes the
Linger's lock; the timer thread never holds the Linger's lock while it calls an item, so the
only order is item -> Linger. The timer thread starts with the first record armed. While
records keep coming it wakes once per linger (an arm does not wake it when it will wake before
the new deadline anyway: a run loop that writes out at every idle moment would otherwise wake
it twice per record); 20 ms after the last arm it waits without a timeout (an idle process has
no wake-ups). After ``fork`` the child starts with an empty Linger (the parent's thread does
not exist there).

Example::

    >>> class Buffer:
    ...     def __init__(self): self.written = []
    ...     def write_lingering(self): self.written.append("out")
    >>> b = Buffer()
    >>> LINGER.arm(b, 0)
    >>> LINGER.write_out()        # the run loop went idle: written at once
    >>> b.written
    ['out']
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from typing import Protocol

__all__ = ["Lingering", "Linger", "LINGER"]

_log = logging.getLogger(__name__)
_now_ns = time.monotonic_ns
_KEEP_AWAKE_NS = 20_000_000   # the timer keeps its cadence this long after the last arm
_NEVER = 1 << 62


class Lingering(Protocol):
    """What :class:`Linger` calls when an armed item's ``linger.ms`` has passed."""

    def write_lingering(self) -> None:
        """Under the item's own lock: forget the arm (the next record buffered arms again),
        and write what is buffered out to the files, without fsync. Raises what the write
        raises (the records then stay buffered for the next flush)."""
        ...


class Linger:
    """The write-out timer of one process (use :data:`LINGER`); see the module docstring."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[int, int, Lingering]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._failing: set[tuple[str, str]] = set()  # (item type, error type) logged once
        self._wake_at = _NEVER        # when the timer thread wakes next (its own clock)
        self._step = 0                # the last armed linger (ns): the cadence while active
        self._awake_until = 0         # keep the cadence until then (_KEEP_AWAKE_NS after arm)

    @property
    def armed(self) -> bool:
        """Whether some item waits for its write-out (read without the lock: a hint)."""
        return bool(self._heap)

    def arm(self, item: Lingering, linger_ms: int) -> None:
        """Write ``item`` out ``linger_ms`` from now. The item arms once per buffer that went
        from empty to not empty (it keeps its own flag) and holds its lock here."""
        now = _now_ns()
        step = linger_ms * 1_000_000
        deadline = now + step
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._seq), item))
            self._step = step
            self._awake_until = now + _KEEP_AWAKE_NS
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="weir-linger",
                                                daemon=True)
                self._thread.start()
            elif deadline < self._wake_at:
                self._cond.notify()

    def write_out(self) -> None:
        """Write out every armed item now, on the calling thread (the run loop going idle)."""
        with self._cond:
            if not self._heap:
                return
            items = [entry[2] for entry in self._heap]
            self._heap.clear()
        for item in items:
            self._write(item)

    def _run(self) -> None:
        cond, heap = self._cond, self._heap
        while True:
            with cond:
                while True:
                    now = _now_ns()
                    if heap:
                        if heap[0][0] <= now:
                            break
                        self._wake_at = heap[0][0]
                    elif now < self._awake_until:
                        self._wake_at = now + self._step   # records keep coming: keep pace
                    else:
                        self._wake_at = _NEVER
                        cond.wait()
                        continue
                    cond.wait((self._wake_at - now) / 1e9)
                self._wake_at = now
                due = []
                while heap and heap[0][0] <= now:
                    due.append(heapq.heappop(heap)[2])
            for item in due:
                self._write(item)

    def _write(self, item: Lingering) -> None:
        try:
            item.write_lingering()
        except Exception as exc:  # noqa: BLE001 - the records stay buffered; flush raises
            key = (type(item).__name__, type(exc).__name__)
            if key not in self._failing:
                self._failing.add(key)
                _log.warning("writing out what %r buffered failed (%s); the records stay "
                             "buffered and the next flush (the commit) writes them or "
                             "reports the error", item, exc)


LINGER = Linger()
"""The process's :class:`Linger`."""

os.register_at_fork(after_in_child=LINGER._reset)
