"""The run loop's task thread pool (``job.container.thread.pool.size``), on daemon threads.

A call the loop has given up on -- a ``process`` past ``task.callback.timeout.ms``, or still
running after ``task.shutdown.ms`` -- may never return. ``concurrent.futures`` joins its
worker threads when the interpreter exits, so one stuck user call would keep a failed
``weir run`` (or a container process) alive for ever. These threads are daemons: once the
loop has stopped and reported, nothing waits for them.

The pool needs no futures: everything it runs (``run_sync``, ``run_callback``, ``run_op``)
reports back through the loop's completion queue.

Example::

    >>> import queue
    >>> done = queue.SimpleQueue()
    >>> pool = TaskPool(2, "weir-task-doc")
    >>> pool.submit(done.put, "ran")
    >>> done.get(timeout=5)
    'ran'
    >>> pool.shutdown()
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["TaskPool"]

log = logging.getLogger("weir.runloop")

_STOP = None


class TaskPool:
    """``size`` daemon threads named ``<prefix>_<i>`` running submitted calls in order."""

    def __init__(self, size: int, prefix: str):
        if size <= 0:
            raise ValueError("a task pool needs at least one thread")
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._stopped = False
        self._running = 0
        self._running_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._work, name=f"{prefix}_{i}", daemon=True)
                         for i in range(size)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on a pool thread. Calls submitted after :meth:`shutdown`, or
        still queued when it ran, are dropped."""
        self._calls.put((fn, args))

    @property
    def busy(self) -> int:
        """How many calls are running on pool threads right now (after :meth:`shutdown`: the
        calls that were abandoned there, e.g. stuck past ``task.callback.timeout.ms``)."""
        with self._running_lock:
            return self._running

    def shutdown(self) -> None:
        """Drop queued calls and let idle threads end; calls running now go on (on daemon
        threads, so they never block interpreter exit). Does not wait."""
        self._stopped = True
        for _ in self._threads:
            self._calls.put(_STOP)

    def _work(self) -> None:
        calls = self._calls
        while True:
            item = calls.get()
            if item is _STOP or self._stopped:
                return
            fn, args = item
            with self._running_lock:
                self._running += 1
            try:
                fn(*args)
            except BaseException:  # noqa: BLE001 - the pool functions report their own errors
                log.exception("run loop pool: %s failed outside the task's error reporting",
                              getattr(fn, "__qualname__", fn))
            finally:
                with self._running_lock:
                    self._running -= 1
