"""The lock layer: one lock per store, held by every operation, for stores used from several
threads at once.

The other layers and the engines are built for one caller at a time (the object cache's LRU
map and dirty map, LMDB's write buffer and read transaction, a changelog's tracked offset).
When the run loop lets several calls of one task run at the same time on different threads
(``task.max.concurrency`` > 1 on the thread pool, callbacks completed from other threads,
coroutines that hand store calls to executor threads), the task instance puts this layer on
top of each store it hands the task. Then:

- every operation (``get``, ``put``, ``delete``, the ``*_all`` forms, ``write_batch``,
  ``flush``, ``close``) is atomic: it runs whole, under the store's lock, and no write is
  lost whatever the threads do;
- iterators and snapshots take the lock for each step (each ``next()``, each ``iterator()``,
  ``close()``), never across steps, so a task iterating a store does not stop the others from
  writing. An iterator sees what the engine's iterators see of writes made while it is open
  (the same as a single-threaded task that writes while it iterates).

A read-modify-write in user code (``get``, then ``put``) is two operations: two calls of the
task that update the same key at the same time can still interleave between them. That is the
user's to order (see docs/TASKS.md); the lock only promises that each operation is whole.

Stores used by one call at a time (the default ``task.max.concurrency=1``, or sync tasks run
on the loop thread) never get this layer: they pay nothing for it.

Example::

    >>> import threading
    >>> from weir.stores.engines.memory import MemoryEngine
    >>> from weir.stores.layers.cached import CachedLayer
    >>> store = LockedLayer(CachedLayer(MemoryEngine("s"), capacity=8, write_batch_size=4))
    >>> def writer(n):
    ...     for i in range(200):
    ...         store.put(b"%d-%03d" % (n, i), b"x")
    >>> threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    >>> for t in threads: t.start()
    >>> for t in threads: t.join()
    >>> with store.all() as it:
    ...     sum(1 for _ in it)
    800
    >>> store.close()
"""

from __future__ import annotations

from weir.stores.api import FlushScope

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

__all__ = ["LockedLayer", "LockedIterator", "LockedSnapshot"]


class LockedIterator:
    """An inner iterator whose every step holds ``lock``. ``for`` loops call ``__next__`` (no
    fast path that would step the inner iterator outside the lock)."""

    __slots__ = ("_inner", "_lock", "__weakref__")

    def __init__(self, inner: Any, lock: Any):
        self._inner = inner
        self._lock = lock

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> tuple[Any, Any]:
        with self._lock:
            return self._inner.__next__()

    def close(self) -> None:
        with self._lock:
            self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LockedSnapshot:
    """A snapshot whose ``iterator()`` and ``close()`` hold ``lock``; its iterators are
    :class:`LockedIterator`."""

    __slots__ = ("_inner", "_lock", "__weakref__")

    def __init__(self, inner: Any, lock: Any):
        self._inner = inner
        self._lock = lock

    def iterator(self) -> LockedIterator:
        with self._lock:
            return LockedIterator(self._inner.iterator(), self._lock)

    def close(self) -> None:
        with self._lock:
            self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LockedLayer:
    """Every operation of ``inner`` under one re-entrant lock (see the module docstring).

    ``lock`` is the store's lock (a new ``threading.RLock`` by default); :attr:`lock` gives it
    to whoever must hold it across several operations, as a commit does around a flush.
    """

    __slots__ = ("name", "_inner", "_lock", "get", "put")

    get: Callable[[Any], Any]
    """The value of ``key``, or None when absent, under the lock (bound per instance)."""
    put: Callable[[Any, Any], None]
    """Insert or replace, under the lock (bound per instance)."""

    def __init__(self, inner: Any, lock: Any = None):
        self.name: str = inner.name
        self._inner = inner
        self._lock = lock if lock is not None else threading.RLock()
        self.get, self.put = self._bind_point_ops()

    def _bind_point_ops(self) -> tuple[Callable[[Any], Any], Callable[[Any, Any], None]]:
        """``get`` and ``put`` as closures (cells, not attribute lookups: they are the hot
        path of a read-modify-write). The inner store's own ``get``/``put`` are looked up per
        call: the object cache rebinds its ``get`` once it fills."""
        lock, inner = self._lock, self._inner

        def get(key: Any) -> Any:
            with lock:
                return inner.get(key)

        def put(key: Any, value: Any) -> None:
            with lock:
                inner.put(key, value)

        return get, put

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def lock(self) -> Any:
        return self._lock

    # -- reads -----------------------------------------------------------------------------
    def get_all(self, keys: Iterable[Any]) -> dict[Any, Any]:
        with self._lock:
            return self._inner.get_all(keys)

    def range(self, lo: Any, hi: Any) -> LockedIterator:
        with self._lock:
            return LockedIterator(self._inner.range(lo, hi), self._lock)

    def prefix(self, prefix: Any) -> LockedIterator:
        with self._lock:
            return LockedIterator(self._inner.prefix(prefix), self._lock)

    def all(self) -> LockedIterator:
        with self._lock:
            return LockedIterator(self._inner.all(), self._lock)

    def snapshot(self, lo: Any, hi: Any) -> LockedSnapshot:
        with self._lock:
            return LockedSnapshot(self._inner.snapshot(lo, hi), self._lock)

    # -- writes ----------------------------------------------------------------------------
    def put_all(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        with self._lock:
            self._inner.put_all(items)

    def delete(self, key: Any) -> None:
        with self._lock:
            self._inner.delete(key)

    def delete_all(self, keys: Iterable[Any]) -> None:
        with self._lock:
            self._inner.delete_all(keys)

    def write_batch(self, items: Iterable[tuple[Any, Any]]) -> None:
        with self._lock:
            self._inner.write_batch(items)

    # -- lifecycle -------------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        with self._lock:
            self._inner.flush(scope)

    def close(self) -> None:
        with self._lock:
            self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def __repr__(self) -> str:
        return f"<LockedLayer {self.name!r} over {self._inner!r}>"
