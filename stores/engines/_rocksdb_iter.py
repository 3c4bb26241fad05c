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

from collections.abc import Iterator
from typing import Any

from weir.stores._iterators import ClosingSnapshot, GeneratorIterator

__all__ = ["RocksIterator", "RocksSnapshot"]


class RocksIterator(GeneratorIterator):
    """A closeable iterator of ``(key, value)`` pairs from a RocksDB store.

    Iterating goes straight through a generator over rocksdict's own iterator (about 20 ns a
    pair of overhead). :meth:`close` releases the native iterator at once (a step running in
    another thread drops it when it ends), which lets the engine close RocksDB; a loop running
    over the iterator stops, and a later ``next()`` or ``iter()`` raises
    :class:`StoreClosedError`.
    """

    __slots__ = ()

    def __init__(self, store: str, items: Iterator[tuple[bytes, bytes]] | None,
                 pinned: object = None):
        super().__init__(store, _relay(items, pinned) if items is not None else None)


def _relay(items: Iterator[tuple[bytes, bytes]], pinned: object) -> Iterator[tuple[bytes, bytes]]:
    # ``pinned`` (read options and upper bound) lives in this frame exactly as long as ``items``.
    yield from items


class RocksSnapshot(ClosingSnapshot):
    """A stable view of ``[lo, hi)``: later writes to the store are not visible in it.

    It pins RocksDB files and memtables until closed; close it (or use ``with``) promptly.
    One snapshot may hand out several iterators; they share one native cursor and must be used
    from one thread at a time.
    """

    __slots__ = ("_cursor", "_pinned", "_lo", "_owner")

    def __init__(self, store: str, cursor: Any | None, lo: bytes | None, pinned: object = None):
        super().__init__(store)
        self._cursor = cursor  # rocksdict.RdictIter, or None for an empty range
        self._pinned = pinned  # the read options and upper bound the cursor points into
        self._lo = lo
        self._owner: object = None

    def _new_iterator(self) -> RocksIterator:
        if self._cursor is None:
            return RocksIterator(self._store, None)
        return RocksIterator(self._store, self._walk(object()))

    def _release(self) -> None:
        self._cursor = None  # releases the pinned RocksDB view
        self._pinned = None

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
