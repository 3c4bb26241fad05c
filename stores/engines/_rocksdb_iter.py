"""Iterators and snapshots of the RocksDB engine.

A RocksDB iterator sees the database as it was when the iterator was created (an implicit
snapshot), so a range iterator is a consistent view by construction.

Snapshots are built on that property rather than on ``Rdict.snapshot()``: in rocksdict 0.3.29
``Snapshot.iter``/``Snapshot.items`` lose the snapshot when they copy their read options and
read the live database (only ``snapshot[key]`` honours it). A :class:`RocksSnapshot` therefore
pins one raw ``RdictIter`` created at snapshot time; each :meth:`RocksSnapshot.iterator` walks
that cursor and re-seeks to its own position whenever another iterator of the same snapshot
moved it in between.

Two more rocksdict 0.3.29 traps handled here:

- ``ReadOptions.set_iterate_lower_bound`` sets the *upper* bound; never call it. Lower bounds
  are applied by seeking (``from_key``).
- ``ReadOptions.set_iterate_upper_bound`` does not copy the bound: the native iterator points
  into the Python ``bytes`` object, so that object must outlive the iterator (else the bound
  reads freed memory and iteration stops early or runs past it). Iterators and snapshots
  therefore hold ``pinned`` references to their read options and bound.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from ..errors import StoreClosedError

__all__ = ["RocksIterator", "RocksSnapshot"]

_EMPTY: tuple = ()


class RocksIterator:
    """A closeable iterator of ``(key, value)`` pairs from a RocksDB store.

    Iterating goes straight through a generator over rocksdict's own iterator (about 20 ns a
    pair of overhead). :meth:`close` releases the native iterator at once, which lets the
    engine close RocksDB; a loop running over the iterator stops, and a later ``next()`` or
    ``iter()`` raises :class:`StoreClosedError`.
    """

    __slots__ = ("_store", "_gen", "_closed", "__weakref__")

    def __init__(self, store: str, items: Iterator[tuple[bytes, bytes]] | None,
                 pinned: object = None):
        self._store = store
        self._closed = False
        self._gen = _relay(items, pinned) if items is not None else iter(_EMPTY)

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        if self._closed:
            raise self._closed_error()
        return self._gen

    def __next__(self) -> tuple[bytes, bytes]:
        if self._closed:
            raise self._closed_error()
        return next(self._gen)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        gen, self._gen = self._gen, iter(_EMPTY)
        close = getattr(gen, "close", None)
        if close is not None:
            try:
                close()  # drops the native iterator, and with it rocksdict's hold on the DB
            except ValueError:
                pass  # running right now in another thread; it is dropped when that step ends

    def __enter__(self) -> "RocksIterator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError("iterator is closed; open a new one with range(), prefix() or "
                                "all()", store=self._store)


def _relay(items: Iterator[tuple[bytes, bytes]], pinned: object) -> Iterator[tuple[bytes, bytes]]:
    # ``pinned`` (read options and upper bound) lives in this frame exactly as long as ``items``.
    yield from items


class RocksSnapshot:
    """A stable view of ``[lo, hi)``: later writes to the store are not visible in it.

    It pins RocksDB files and memtables until closed; close it (or use ``with``) promptly.
    One snapshot may hand out several iterators; they share one native cursor and must be used
    from one thread at a time.
    """

    __slots__ = ("_store", "_cursor", "_pinned", "_lo", "_owner", "_closed", "_iterators",
                 "__weakref__")

    def __init__(self, store: str, cursor: Any | None, lo: bytes | None, pinned: object = None):
        self._store = store
        self._cursor = cursor  # rocksdict.RdictIter, or None for an empty range
        self._pinned = pinned  # the read options and upper bound the cursor points into
        self._lo = lo
        self._owner: object = None
        self._closed = False
        self._iterators: weakref.WeakSet[RocksIterator] = weakref.WeakSet()

    def iterator(self) -> RocksIterator:
        """A new iterator over the whole snapshot, from its first key."""
        if self._closed:
            raise StoreClosedError("snapshot is closed; take a new one with snapshot()",
                                   store=self._store)
        if self._cursor is None:
            return RocksIterator(self._store, None)
        it = RocksIterator(self._store, self._walk(object()))
        self._iterators.add(it)
        return it

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for it in list(self._iterators):
            it.close()
        self._cursor = None  # releases the pinned RocksDB view
        self._pinned = None

    def __enter__(self) -> "RocksSnapshot":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _walk(self, token: object) -> Iterator[tuple[bytes, bytes]]:
        cur, pinned = self._cursor, self._pinned  # noqa: F841 - pinned lives as long as cur
        valid, key, value, step = cur.valid, cur.key, cur.value, cur.next
        last: bytes | None = None
        while True:
            if self._owner is not token:  # first step, or another iterator moved the cursor
                if last is not None:
                    cur.seek(last)
                    if valid() and key() == last:
                        step()
                elif self._lo:
                    cur.seek(self._lo)
                else:
                    cur.seek_to_first()
                self._owner = token
            if not valid():
                return
            k = key()
            v = value()
            step()
            last = k
            yield (k, v)
