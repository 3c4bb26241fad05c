"""The LMDB bytes engine: one LMDB environment per store directory.

Writes are buffered in a Python dict (``None`` = delete) that every read consults first, and
committed in ONE write transaction per :meth:`LMDBEngine.flush`, or earlier when the buffer
reaches ``write.batch.size`` distinct keys. No write transaction stays open across calls: py-lmdb
binds a write transaction to the thread that began it, and the run loop may call a task's
stores from different threads. Point reads go through one long-lived read transaction that is
renewed after every commit.

FlushScope: once ``flush()`` returns, everything written before it is committed; with
``sync=true`` (the default) it is on disk and survives a power cut, with ``sync=false`` it
survives a process crash. ``close()`` commits what is buffered.

The map grows by itself: when a commit finds it full, it doubles (up to
``max.map.size.bytes``) and the commit is retried; after every commit that leaves the map more
than half used it doubles ahead of time. Growing invalidates every open read transaction in the
process (py-lmdb), so it waits while iterators or snapshots are open: buffered writes stay
buffered (reads still see them), and an explicit ``flush()`` that cannot grow raises
:class:`StoreError` saying to close them.

Keys must be 1 to 511 bytes (LMDB's limit); anything else raises :class:`StoreError` at
``put`` time, so one bad key can never poison a commit.

Example::

    >>> import tempfile, pathlib
    >>> engine = LMDBEngine("counts", pathlib.Path(tempfile.mkdtemp()))
    >>> engine.put(b"k", b"v")
    >>> engine.get(b"k")
    b'v'
    >>> engine.close()
"""

from __future__ import annotations

import functools
import operator
import weakref
from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import lmdb

from weir.stores.api import FlushScope
from weir.stores.errors import NullKeyOrValueError, StoreClosedError, StoreError
from weir.stores.engines._base import BytesEngineBase, is_empty_range, null_argument
from weir.stores.engines._lmdb_commit import CommitAndGrow
from weir.stores.engines._lmdb_iter import LMDBIterator, LMDBSnapshot, ReadHandle, walk
from weir.stores.engines._lmdb_options import LMDB_KEYS, MAX_READERS, LMDBOptions
from weir.stores.locking import DirectoryLock

__all__ = ["LMDBEngine", "LMDBOptions", "LMDB_KEYS", "LMDBIterator", "LMDBSnapshot",
           "lmdb_commit_marker"]

_DEFAULT_OPTIONS = LMDBOptions()


def lmdb_commit_marker(env: "lmdb.Environment") -> str:
    """The commit marker of an open LMDB environment (its last transaction id and entry
    count): what :meth:`LMDBEngine.commit_marker` returns and offline readers compare with."""
    return f"lmdb-txn:{env.info()['last_txnid']}:{env.stat()['entries']}"
_IS_NONE = functools.partial(operator.is_, None)


class _OutOfOrder(Exception):
    """A bulk load met a key not greater than the one before it (the transaction aborts)."""
_ABSENT: Any = object()  # "not buffered", distinct from a buffered delete (None)
_INGEST_CHUNK = 100_000


class LMDBEngine(BytesEngineBase, CommitAndGrow):
    """A key-value engine over bytes on one LMDB environment. See the module docstring.

    Not safe for overlapping calls from several threads at once (the run loop never makes
    them for one task's stores); successive calls from different threads are fine.
    """

    __slots__ = ("name", "path", "options", "_env", "_rtxn", "_rget", "_pending", "_index",
                 "_pget", "_limit", "_max_key", "_map_size", "_page_size", "_commit_deferred",
                 "_closed", "_lock", "_readers", "_views", "__weakref__")

    def __init__(self, name: str, path: Path | str, options: LMDBOptions = _DEFAULT_OPTIONS):
        self.name = name
        self.path = Path(path)
        self.options = options
        self._closed = True  # until fully open
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store directory {self.path}: {exc}",
                             store=name) from exc
        self._lock = DirectoryLock.acquire(self.path, store=name)
        try:
            self._env = self._open_env()
        except lmdb.Error as exc:
            self._lock.release()
            raise StoreError(f"cannot open LMDB at {self.path}: {exc}; if the directory is "
                             f"corrupt, delete it and let the store be restored from its "
                             f"changelog", store=name) from exc
        self._map_size = self._env.info()["map_size"]
        self._page_size = self._env.stat()["psize"]
        self._max_key = self._env.max_key_size()
        # Buffered writes; the dict object never changes (cleared on commit) so that its bound
        # ``get`` can be kept for the hot read path.
        self._pending: dict[bytes, bytes | None] = {}
        self._pget = self._pending.get
        self._index: list[bytes] | None = None  # sorted pending keys, built by the first range
        self._limit = options.write_batch_size
        self._commit_deferred = False
        self._readers: weakref.WeakSet[ReadHandle] = weakref.WeakSet()
        self._views: weakref.WeakSet = weakref.WeakSet()
        self._rtxn: Any = self._env.begin()
        self._rget = self._rtxn.get
        self._closed = False
        try:
            self._grow_ahead()
        except BaseException:
            self.close()
            raise

    def _open_env(self) -> lmdb.Environment:
        data = self.path / "data.mdb"
        existing = data.stat().st_size if data.exists() else 0
        return lmdb.open(
            str(self.path), subdir=True,
            # Never shrink a map that an earlier run grew.
            map_size=max(self.options.map_size_bytes, existing),
            # writemap: commits write pages in place through the shared map instead of one
            # write() per dirty page; 2x faster for txn-per-batch writes (docs/ENGINES.md). The
            # data file becomes as large as the map, but sparse.
            writemap=True,
            # sync/metasync: fsync data and meta page on commit, so flush() is power-safe; both
            # off keeps commits crash-safe (the page cache survives a process crash).
            sync=self.options.sync, metasync=self.options.sync, map_async=False,
            # Point reads are random; OS readahead only pollutes the page cache.
            readahead=False,
            max_readers=self.options.max_readers, max_dbs=0,
            # LMDB's own reader table is what makes snapshots safe against page reuse.
            lock=True, create=True)

    @property
    def key_size_limits(self) -> tuple[int, int]:
        """``(min, max)`` key length LMDB can hold (1 to 511 bytes by default). Layers above
        (the changelog layer) check keys against it before logging a change, so a change the
        engine refuses never reaches the changelog and so can never break a restore."""
        return 1, self._max_key

    # -- reads ---------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        if self._closed:
            raise self._closed_error()
        value = self._pget(key, _ABSENT)
        if value is _ABSENT:
            try:
                return self._rget(key)
            except lmdb.BadValsizeError:
                return None  # b"" or an over-long key: LMDB cannot hold it, so it is absent
            except TypeError:
                if key is None:
                    raise null_argument(self.name, "get") from None
                raise
        return value

    def get_all(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        if self._closed:
            raise self._closed_error()
        if keys is None:
            raise null_argument(self.name, "get_all", "list")
        pending, rget, out = self._pending, self._rget, {}
        for key in keys:
            value = pending.get(key, _ABSENT)
            if value is _ABSENT:
                try:
                    value = rget(key)
                except lmdb.BadValsizeError:
                    continue
                except TypeError:
                    if key is None:
                        raise null_argument(self.name, "get_all") from None
                    raise
            if value is not None:
                out[key] = value
        return out

    def range(self, lo: bytes | None, hi: bytes | None) -> LMDBIterator:
        if self._closed:
            raise self._closed_error()
        if is_empty_range(lo, hi):
            empty = LMDBIterator(self.name, None, None)
            self._views.add(empty)  # closed with the engine like any other iterator
            return empty
        pending = self._pending_slice(lo, hi) if self._pending else ()
        handle = self._begin_read()
        gen = walk(self.name, handle, lo, hi, pending, release_at_end=True)
        it = LMDBIterator(self.name, gen, handle)
        self._views.add(it)
        return it

    def snapshot(self, lo: bytes | None, hi: bytes | None) -> LMDBSnapshot:
        """A stable view of ``[lo, hi)``: an MVCC read transaction plus a copy of the buffered
        writes in the range (no commit is forced)."""
        if self._closed:
            raise self._closed_error()
        if is_empty_range(lo, hi):
            empty = LMDBSnapshot(self.name, None, lo, hi, ())
            self._views.add(empty)
            return empty
        pending = self._pending_slice(lo, hi) if self._pending else ()
        snap = LMDBSnapshot(self.name, self._begin_read(), lo, hi, pending)
        self._views.add(snap)
        return snap

    # -- writes --------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes) -> None:
        if self._closed:
            raise self._closed_error()
        if type(key) is not bytes or type(value) is not bytes or not 0 < len(key) <= self._max_key:
            raise self._rejected("put", key, value)
        pending = self._pending
        if self._index is not None and key not in pending:
            insort(self._index, key)
        pending[key] = value
        if len(pending) >= self._limit:
            self._auto_commit()

    def delete(self, key: bytes) -> None:
        if self._closed:
            raise self._closed_error()
        if type(key) is not bytes:
            raise self._rejected("delete", key, None)
        if not 0 < len(key) <= self._max_key:
            return  # a key LMDB cannot hold is never present
        pending = self._pending
        if self._index is not None and key not in pending:
            insort(self._index, key)
        pending[key] = None
        if len(pending) >= self._limit:
            self._auto_commit()

    def put_all(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        self._stage("put_all", items, deletes=False)

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Buffer ``(key, value)`` pairs in order (``None`` deletes); they are committed
        together, in one transaction."""
        self._stage("write_batch", items, deletes=True)

    def delete_all(self, keys: Iterable[bytes]) -> None:
        if keys is None:
            raise null_argument(self.name, "delete_all", "list")
        self._stage("delete_all", [(k, None) for k in keys], deletes=True)

    def ingest_sorted(self, pairs: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Bulk-load strictly ascending ``(key, value)`` pairs (``None`` deletes), committing
        every 100,000 pairs; into an empty store this uses LMDB's append mode (~4M pairs/s).

        Buffered writes are committed first; the pairs override them. Returns the count.
        """
        if self._closed:
            raise self._closed_error()
        self._commit(explicit=True)
        append = self._env.stat()["entries"] == 0
        chunk: list[tuple[bytes, bytes | None]] = []
        count, last, max_key = 0, None, self._max_key
        for key, value in pairs:
            if type(key) is not bytes or not 0 < len(key) <= max_key or (
                    value is not None and type(value) is not bytes):
                raise self._rejected("ingest_sorted", key, value)
            if last is not None and key <= last:
                raise StoreError(f"ingest_sorted: key {key!r} (pair {count}) is not greater than "
                                 f"the key before it; sort and de-duplicate the pairs first "
                                 f"({count - len(chunk)} pairs were already committed)",
                                 store=self.name)
            chunk.append((key, value))
            last = key
            count += 1
            if len(chunk) >= _INGEST_CHUNK:
                self._write_with_growth(chunk, append=append)
                chunk = []
        if chunk:
            self._write_with_growth(chunk, append=append)
        self._renew_reader()
        self._grow_ahead()
        return count

    def load_sorted(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                    deletes: bool = True) -> int:
        """Bulk-load parallel lists of strictly ascending keys and their values (``None``
        deletes; ``deletes=False`` promises none) in ONE write transaction; into an empty
        store with no deletes this is LMDB's append mode (~4M pairs/s), otherwise sorted
        ``putmulti``. The map is grown beforehand for the data. Buffered writes are committed
        first; the pairs override them. Restore's bulk path. Returns the count."""
        if self._closed:
            raise self._closed_error()
        if len(keys) != len(values):
            raise ValueError(f"store '{self.name}': load_sorted got {len(keys)} keys and "
                             f"{len(values)} values")
        if not keys:
            return 0
        self._commit(explicit=True)
        lengths = list(map(len, keys))
        if min(lengths) < 1 or max(lengths) > self._max_key:
            bad = next(k for k in keys if not 0 < len(k) <= self._max_key)
            raise self._rejected("load_sorted", bad, b"")
        has_deletes = deletes and any(map(_IS_NONE, values))
        append = not has_deletes and self._env.stat()["entries"] == 0
        # Room for the new pairs (~1.7x their bytes once in pages) before the transaction, so
        # that a full map rarely makes the whole load run twice.
        need = int(1.7 * (sum(lengths) + sum(map(len, filter(None, values)))))
        used = (self._env.info()["last_pgno"] + 1) * self._page_size
        cap = self.options.max_map_size_bytes
        if used + need > self._map_size and self._map_size < cap and not self._readers:
            target = self._map_size
            while used + need > target and target < cap:
                target = min(target * 2, cap)
            self._resize(target)
        while True:
            try:
                with self._env.begin(write=True) as txn:
                    if has_deletes:
                        cursor, delete = txn.cursor(), txn.delete
                        for key, value in zip(keys, values):
                            if value is None:
                                delete(key)
                            else:
                                cursor.put(key, value)
                    else:
                        _, added = txn.cursor().putmulti(zip(keys, values), append=append)
                        if added != len(keys):  # py-lmdb skips a refused put silently
                            raise _OutOfOrder()
                break
            except _OutOfOrder:
                raise StoreError("load_sorted: keys are not in strictly ascending order; sort "
                                 "and de-duplicate them first; nothing was written",
                                 store=self.name) from None
            except lmdb.MapFullError:
                if not self._grow(explicit=True):  # raises when it cannot grow
                    raise
            except lmdb.Error as exc:
                raise StoreError(f"LMDB load_sorted of {len(keys)} pairs failed at "
                                 f"{self.path}: {exc}; nothing was written",
                                 store=self.name) from exc
        self._renew_reader()
        self._grow_ahead()
        return len(keys)

    # -- lifecycle -----------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        """Commit every buffered write in one transaction (fsynced when ``sync``).
        ``FlushScope.CHANGELOG`` leaves them buffered (reads see them; the buffer still
        commits by itself at ``write.batch.size`` keys)."""
        if self._closed:
            raise self._closed_error()
        if scope is FlushScope.CHANGELOG:
            return
        self._commit(explicit=True)

    def close(self) -> None:
        """Close open iterators and snapshots, commit buffered writes, close the environment
        and release the directory lock. Closing twice is harmless. If the final commit fails,
        everything is still closed and the error is raised."""
        if self._closed:
            return
        self._closed = True
        try:
            for view in list(self._views):
                view.close()
            self._commit(explicit=True)
        finally:
            self._pending.clear()
            self._index = None
            try:
                self._rtxn.abort()
            except lmdb.Error:
                pass
            self._rtxn = self._rget = None
            self._env.close()
            self._lock.release()

    @property
    def closed(self) -> bool:
        return self._closed

    def commit_marker(self) -> str | None:
        """A short string that changes with every commit (LMDB's last transaction id and entry
        count, kept in the data file's meta pages); None while writes are buffered. Recovery
        records it in the store's ``OFFSET`` file and reuses the files only while it is
        unchanged: a deleted ``data.mdb`` is silently recreated empty by LMDB, and this is how
        it is noticed."""
        if self._closed:
            raise self._closed_error()
        if self._pending:
            return None
        return lmdb_commit_marker(self._env)

    # -- tooling -------------------------------------------------------------------------
    @property
    def map_size(self) -> int:
        """The current map size in bytes."""
        return self._map_size

    @property
    def pending_count(self) -> int:
        """Buffered writes not yet committed."""
        return len(self._pending)

    def approximate_size(self) -> int:
        """Bytes of the data file in use (pages up to the high-water mark)."""
        if self._closed:
            raise self._closed_error()
        return (self._env.info()["last_pgno"] + 1) * self._page_size

    def count_estimate(self) -> int:
        """Committed entries plus buffered puts (overwrites counted twice)."""
        if self._closed:
            raise self._closed_error()
        buffered = sum(1 for v in self._pending.values() if v is not None)
        return self._env.stat()["entries"] + buffered

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"LMDBEngine({self.name!r}, {str(self.path)!r}, {state})"

    # -- internals: buffering and reading ---------------------------------------------------
    def _stage(self, op: str, items: Iterable[tuple[bytes, bytes | None]], *,
               deletes: bool) -> None:
        if self._closed:
            raise self._closed_error()
        if items is None:
            raise null_argument(self.name, op, "list")
        batch = items if isinstance(items, list) else list(items)
        max_key, skip = self._max_key, False
        for key, value in batch:  # validate everything before buffering anything
            if type(key) is not bytes or not 0 < len(key) <= max_key or type(value) is not bytes:
                if value is None and deletes and type(key) is bytes:
                    skip = skip or not 0 < len(key) <= max_key
                    continue
                raise self._rejected(op, key, value)
        if skip:  # deletes of keys LMDB cannot hold are no-ops
            batch = [(k, v) for k, v in batch if v is not None or 0 < len(k) <= max_key]
        pending = self._pending
        if self._index is not None:
            new = {k for k, _ in batch if k not in pending}
            if new:
                self._index.extend(new)
                self._index.sort()  # timsort: a sorted run plus a short tail is cheap
        pending.update(batch)
        if len(pending) >= self._limit:
            self._auto_commit()

    def _pending_slice(self, lo: bytes | None,
                       hi: bytes | None) -> list[tuple[bytes, bytes | None]]:
        index = self._index
        if index is None:
            index = self._index = sorted(self._pending)
        i = bisect_left(index, lo) if lo else 0
        j = bisect_left(index, hi) if hi is not None else len(index)
        pending = self._pending
        return [(k, pending[k]) for k in index[i:j]]

    def _begin_read(self) -> ReadHandle:
        try:
            return ReadHandle(self._env.begin(), self._readers)
        except lmdb.ReadersFullError as exc:
            key = MAX_READERS.key(store=self.name)
            raise StoreError(f"too many open iterators and snapshots ({len(self._readers)}); "
                             f"close some, or raise {key}", store=self.name) from exc

    # -- internals: errors ---------------------------------------------------------------
    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"LMDB store at {self.path} used after close(); a task must not "
                                f"keep store references past its close() (reopen the store "
                                f"through its storage manager)", store=self.name)

    def _rejected(self, op: str, key: object, value: object) -> Exception:
        if key is None or (value is None and op in ("put", "put_all")):
            return NullKeyOrValueError(f"{op}: None is not a valid key or value; delete with "
                                       f"delete(), not put(k, None)", store=self.name)
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            return TypeError(f"store '{self.name}': {op}: keys and values must be bytes, got key "
                             f"{type(key).__name__} and value {type(value).__name__}")
        return StoreError(f"{op}: LMDB keys must be 1 to {self._max_key} bytes, got "
                          f"{len(key)} bytes (starting {bytes(key[:16])!r}); hash long keys or "
                          f"use the rocksdb engine", store=self.name)
