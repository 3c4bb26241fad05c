"""Read handles, iterators and snapshots of the LMDB engine.

Every iterator and snapshot owns (or shares) one read-only transaction: LMDB's MVCC gives it
the committed state of the moment it began. Writes not yet committed live in the engine's
pending dict; an iterator copies the pending entries of its range when it is created (``None``
marks a delete) and merges them with the committed keys, pending entries winning. So an
iterator or snapshot shows exactly the store as it was when it was created.

Read transactions are opened with ``MDB_NOTLS`` (py-lmdb always does), so they may be used
from any thread, one thread at a time.

Closing from another thread: py-lmdb releases the GIL while a cursor reads, so aborting a read
transaction (closing an iterator, its snapshot or the engine) while another thread's loop is
inside a cursor step frees the cursor under it (a segfault). Cursors are therefore read in
chunks under the handle's lock, and :meth:`ReadHandle.release` takes that lock: it waits for
the chunk being read (a few microseconds), and the loop, once its chunk is used up, finds the
handle released and raises :class:`~weir.stores.errors.StoreClosedError`. Chunks start small (one
``next()`` reads a few pairs, not hundreds) and double up to ``_MAX_CHUNK``.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import Any

import lmdb

from weir.stores.errors import StoreClosedError, StoreError
from weir.stores._iterators import EMPTY, ClosingSnapshot, GeneratorIterator

__all__ = ["ReadHandle", "LMDBIterator", "LMDBSnapshot", "walk"]

Pending = Sequence[tuple[bytes, "bytes | None"]]
_END: tuple[None, None] = (None, None)
_FIRST_CHUNK = 4
_MAX_CHUNK = 512


class ReadHandle:
    """One read transaction, registered with its engine while open; released at most once.

    ``lock`` is held while a cursor of the transaction reads (see the module docstring)."""

    __slots__ = ("txn", "released", "lock", "_registry", "__weakref__")

    def __init__(self, txn: lmdb.Transaction, registry: weakref.WeakSet):
        self.txn: Any = txn
        self.released = False
        self.lock = threading.Lock()
        self._registry = registry
        registry.add(self)

    def release(self) -> None:
        with self.lock:  # never while another thread's cursor reads
            if self.released:
                return
            self.released = True
            txn, self.txn = self.txn, None
            try:
                txn.abort()
            except lmdb.Error:
                pass  # already invalidated by env.close()
        self._registry.discard(self)


def _chunks(store: str, handle: ReadHandle,
            lo: bytes | None) -> Iterator[list[tuple[bytes, bytes]]]:
    """The committed pairs from ``lo`` on, as growing lists read under ``handle.lock``."""
    lock = handle.lock
    with lock:
        if handle.released:
            raise _closed_in_use(store)
        cur = handle.txn.cursor()
        # An unpositioned cursor's iternext() would restart from the first key.
        if not (cur.set_range(lo) if lo else cur.first()):
            return
        pairs = cur.iternext()
        size = _FIRST_CHUNK
        chunk = list(islice(pairs, size))
    while chunk:
        yield chunk
        if len(chunk) < size:
            return
        size = min(size * 2, _MAX_CHUNK)
        with lock:
            if handle.released:
                raise _closed_in_use(store)
            chunk = list(islice(pairs, size))


def _closed_in_use(store: str) -> StoreClosedError:
    return StoreClosedError("iterator or snapshot was closed while in use (by another thread, "
                            "or with its store); open a new one", store=store)


def walk(store: str, handle: ReadHandle, lo: bytes | None, hi: bytes | None, pending: Pending,
         *, release_at_end: bool) -> Iterator[tuple[bytes, bytes]]:
    """Committed pairs of ``[lo, hi)`` in ``handle``'s transaction merged with ``pending``
    (sorted, already restricted to the range)."""
    try:
        chunks = _chunks(store, handle, lo)
        if pending:
            yield from _merge(chain.from_iterable(chunks), pending, hi)
            return
        for chunk in chunks:
            if hi is not None and chunk[-1][0] >= hi:
                # (hi,) sorts before every (hi, value): the cut is at the first key >= hi.
                yield from chunk[:bisect_left(chunk, (hi,))]
                return
            yield from chunk
    except lmdb.Error as exc:
        if handle.released:
            raise _closed_in_use(store) from None
        raise StoreError(f"LMDB read failed: {exc}; if this repeats, the store's directory may "
                         f"be damaged: delete it and let the store be restored from its "
                         f"changelog", store=store) from exc
    finally:
        if release_at_end:
            handle.release()


def _merge(committed: Iterator[tuple[bytes, bytes]], pending: Pending,
           hi: bytes | None) -> Iterator[tuple[bytes, bytes]]:
    pit = iter(pending)
    pk, pv = next(pit, _END)
    for k, v in committed:
        if hi is not None and k >= hi:
            break
        while pk is not None and pk < k:
            if pv is not None:
                yield (pk, pv)
            pk, pv = next(pit, _END)
        if pk == k:  # the pending write (or delete) replaces the committed value
            if pv is not None:
                yield (pk, pv)
            pk, pv = next(pit, _END)
            continue
        yield (k, v)
    while pk is not None:  # pending keys past the last committed key (all < hi)
        if pv is not None:
            yield (pk, pv)
        pk, pv = next(pit, _END)


class LMDBIterator(GeneratorIterator):
    """A closeable iterator of ``(key, value)`` pairs from an LMDB store.

    ``for`` loops run directly on the underlying generator. :meth:`close` ends the read
    transaction (unless a snapshot owns it); a loop running over the iterator stops, and a
    later ``next()`` or ``iter()`` raises :class:`StoreClosedError`.
    """

    __slots__ = ("_handle",)

    def __init__(self, store: str, gen: Iterator[tuple[bytes, bytes]] | None,
                 handle: ReadHandle | None):
        super().__init__(store, gen)
        self._handle = handle  # released on close; None when a snapshot owns the transaction

    def _release(self) -> None:
        if self._handle is not None:
            self._handle.release()  # also stops a walk running in another thread


class LMDBSnapshot(ClosingSnapshot):
    """A stable view of ``[lo, hi)``: later writes (committed or not) are not visible in it.

    It holds a read transaction, which keeps LMDB from reusing the pages it sees and keeps the
    map from growing (see ``docs/ENGINES.md``); close it promptly.
    """

    __slots__ = ("_handle", "_lo", "_hi", "_pending")

    def __init__(self, store: str, handle: ReadHandle | None, lo: bytes | None,
                 hi: bytes | None, pending: Pending):
        super().__init__(store)
        self._handle = handle  # None for an empty range
        self._lo = lo
        self._hi = hi
        self._pending = pending

    def _new_iterator(self) -> LMDBIterator:
        if self._handle is None:
            return LMDBIterator(self._store, None, None)
        gen = walk(self._store, self._handle, self._lo, self._hi, self._pending,
                   release_at_end=False)
        return LMDBIterator(self._store, gen, None)

    def _release(self) -> None:
        self._pending = EMPTY
        if self._handle is not None:
            self._handle.release()
