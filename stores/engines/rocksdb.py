"""The RocksDB bytes engine (rocksdict in raw bytes mode).

FlushScope: a *logged* store (one with a changelog) writes with the WAL off, because the
changelog already holds every change; :meth:`RocksDBEngine.flush` then flushes the memtable to
an SST file, which RocksDB fsyncs together with its MANIFEST before returning. An unlogged store
keeps the WAL on and ``flush()`` fsyncs the WAL. Either way, once ``flush()`` returns a SIGKILL
(or a power cut) loses nothing written before it; writes after the last flush of a logged store
are lost on a crash and come back from the changelog. ``close()`` flushes the memtable too, so
a clean shutdown needs no replay.

The directory is locked (``WEIR.LOCK``, see :mod:`weir.stores.locking`) for the engine's life.

Example::

    >>> import tempfile, pathlib
    >>> engine = RocksDBEngine("counts", pathlib.Path(tempfile.mkdtemp()), logged=True)
    >>> engine.put(b"k", b"v")
    >>> engine.get(b"k")
    b'v'
    >>> engine.close()
"""

from __future__ import annotations

import collections
import functools
import operator
import os
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path

import rocksdict

from weir.stores.api import FlushScope
from weir.stores.errors import NullKeyOrValueError, StoreClosedError, StoreError, StoreLockedError
from weir.stores.engines._base import BytesEngineBase, is_empty_range, null_argument
from weir.stores.locking import DirectoryLock, read_lock_holder
from weir.stores.engines._rocksdb_iter import RocksIterator, RocksSnapshot
from weir.stores.engines._rocksdb_options import (
    ROCKSDB_KEYS,
    CompactionStyle,
    Compression,
    RocksDBOptions,
)

__all__ = ["RocksDBEngine", "RocksDBOptions", "write_sst_file", "Compression", "CompactionStyle", "ROCKSDB_KEYS",
           "RocksIterator", "RocksSnapshot", "rocksdb_commit_marker"]

_DEFAULT_OPTIONS = RocksDBOptions()


def rocksdb_commit_marker(db: "rocksdict.Rdict") -> str:
    """The commit marker of an open RocksDB database (its last sequence number): what
    :meth:`RocksDBEngine.commit_marker` returns and offline readers compare with."""
    return f"rocksdb-seq:{db.latest_sequence_number()}"
_IS_NONE = functools.partial(operator.is_, None)
_consume = functools.partial(collections.deque, maxlen=0)
"""Run an iterator to its end in C, keeping nothing."""
_INGEST_FILE = ".weir-ingest.sst"
_SORT_BATCH_FROM = 32
"""Put batches of at least this many entries reach the memtable in key order."""


def _sorted_last_wins(keys: Sequence[bytes], values: Sequence[bytes]
                      ) -> tuple[list[bytes], list[bytes]]:
    """The puts of one batch in ascending key order, each key once with its last value: what
    applying them in the given order leaves (a batch is atomic, so nothing sees the
    difference). RocksDB's memtable (a skip list that remembers where the previous insert
    went) takes ascending keys ~30% faster than keys in arrival order (bench/RESULTS.md); the
    sort runs in C (a dict, ``sorted``, ``map``)."""
    last = dict(zip(keys, values))
    ordered = sorted(last)
    return ordered, list(map(last.__getitem__, ordered))


def write_sst_file(path: Path | str, keys: Sequence[bytes], values: Sequence[bytes | None],
                   options: RocksDBOptions = _DEFAULT_OPTIONS, *, deletes: bool = True) -> int:
    """Write strictly ascending ``keys`` with their ``values`` (``None``: a delete entry;
    ``deletes=False`` promises none) to a new SST file at ``path``, in the format of a store
    with ``options``, for :meth:`RocksDBEngine.ingest_files`. Needs no open store, so a restore
    worker process can build files for a store another process has open. Returns the count.
    Raises :class:`StoreError` when the keys are not strictly ascending (the file is removed)."""
    if len(keys) != len(values):
        raise ValueError(f"write_sst_file got {len(keys)} keys and {len(values)} values")
    writer = rocksdict.SstFileWriter(options.to_rocksdict_options())
    key = None
    try:
        writer.open(str(path))
        if not deletes or not any(map(_IS_NONE, values)):
            _consume(map(writer.__setitem__, keys, values))
        else:
            for key, value in zip(keys, values):
                if value is None:
                    del writer[key]
                else:
                    writer[key] = value
        writer.finish()
    except Exception as exc:
        del writer
        Path(path).unlink(missing_ok=True)
        if "ascending order" in str(exc):
            near = f" (near {key!r})" if key is not None else ""
            raise StoreError(f"SST file {path}: keys are not in strictly ascending "
                             f"order{near}; sort and de-duplicate them first") from exc
        raise StoreError(f"cannot write SST file {path}: {exc}") from exc
    del writer
    return len(keys)


class RocksDBEngine(BytesEngineBase):
    """A key-value engine over bytes on one RocksDB directory. See the module docstring.

    Thread-safety: reads and writes may run concurrently from several threads (RocksDB is
    thread-safe); ``close()`` must not race with other calls, and one snapshot's iterators
    must be used from one thread at a time.
    """

    __slots__ = ("name", "path", "options", "logged", "_db", "_native", "_wopts", "_get",
                 "_put", "_delete", "_closed", "_lock", "_views", "__weakref__")

    def __init__(self, name: str, path: Path | str, options: RocksDBOptions = _DEFAULT_OPTIONS,
                 *, logged: bool):
        self.name = name
        self.path = Path(path)
        self.options = options
        self.logged = logged
        self._closed = True  # until fully open
        self._views: weakref.WeakSet = weakref.WeakSet()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store directory {self.path}: {exc}",
                             store=name) from exc
        self._lock = DirectoryLock.acquire(self.path, store=name)
        try:
            self._native = options.to_rocksdict_options()
            self._db = rocksdict.Rdict(str(self.path), self._native)
        except Exception as exc:
            self._lock.release()
            raise self._open_error(exc) from exc
        self._wopts = rocksdict.WriteOptions()
        # The changelog is the durability of a logged store; the WAL would only double writes.
        self._wopts.disable_wal = logged
        self._db.set_write_options(self._wopts)
        self._get = self._db.get
        self._put = self._db.put
        self._delete = self._db.delete
        self._closed = False

    # -- reads ---------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        if self._closed:
            raise self._closed_error()
        try:
            return self._get(key)
        except Exception as exc:
            raise self._error("get", exc, key) from exc

    def get_all(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        if self._closed:
            raise self._closed_error()
        if keys is None:
            raise null_argument(self.name, "get_all", "list")
        keys = keys if isinstance(keys, list) else list(keys)
        if not keys:
            return {}
        try:
            values = self._get(keys)
        except Exception as exc:
            raise self._error("get_all", exc) from exc
        return {k: v for k, v in zip(keys, values) if v is not None}

    def range(self, lo: bytes | None, hi: bytes | None) -> RocksIterator:
        if self._closed:
            raise self._closed_error()
        if is_empty_range(lo, hi):
            empty = RocksIterator(self.name, None)  # RocksDB must never see lo >= hi
            self._views.add(empty)  # closed with the store, like any other view
            return empty
        ro = rocksdict.ReadOptions()
        if hi is not None:
            ro.set_iterate_upper_bound(hi)
        it = RocksIterator(self.name, self._db.items(from_key=lo or None, read_opt=ro), (ro, hi))
        self._views.add(it)
        return it

    def snapshot(self, lo: bytes | None, hi: bytes | None) -> RocksSnapshot:
        if self._closed:
            raise self._closed_error()
        if is_empty_range(lo, hi):
            empty_snap = RocksSnapshot(self.name, None, lo)
            self._views.add(empty_snap)
            return empty_snap
        ro = rocksdict.ReadOptions()
        if hi is not None:
            ro.set_iterate_upper_bound(hi)
        snap = RocksSnapshot(self.name, self._db.iter(ro), lo, (ro, hi))
        self._views.add(snap)
        return snap

    # -- writes --------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes) -> None:
        if self._closed:
            raise self._closed_error()
        try:
            self._put(key, value)
        except Exception as exc:
            raise self._error("put", exc, key, value) from exc

    def delete(self, key: bytes) -> None:
        if self._closed:
            raise self._closed_error()
        try:
            self._delete(key)
        except Exception as exc:
            raise self._error("delete", exc, key) from exc

    def put_all(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        self._apply(items, allow_deletes=False)

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply ``(key, value)`` pairs in order, atomically; ``value is None`` deletes."""
        self._apply(items, allow_deletes=True)

    def write_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                      deletes: bool = True) -> None:
        """``write_batch(zip(keys, values))`` from two parallel lists, atomically; ``None``
        deletes. ``deletes=False`` promises no ``None`` value. Without deletes the batch is
        filled by a loop in C (``map`` over ``WriteBatch.put``), no Python step per entry:
        the layers above hand their write-downs over this way (``weir.stores.layers._columns``)."""
        if self._closed:
            raise self._closed_error()
        if len(keys) != len(values):
            raise ValueError(f"store '{self.name}': write_columns got {len(keys)} keys and "
                             f"{len(values)} values")
        if deletes and any(map(_IS_NONE, values)):
            self._apply(zip(keys, values), allow_deletes=True)
            return
        if len(keys) >= _SORT_BATCH_FROM:
            try:
                keys, values = _sorted_last_wins(keys, values)
            except TypeError:
                pass  # an unhashable or unorderable key: wb.put below names it
        wb = rocksdict.WriteBatch(raw_mode=True)
        try:
            _consume(map(wb.put, keys, values))
        except Exception:
            # Nothing was written: redo entry by entry, for an error naming the bad entry.
            self._apply(zip(keys, values), allow_deletes=deletes)
            return
        self._write(wb, "write_batch")

    def delete_all(self, keys: Iterable[bytes]) -> None:
        if self._closed:
            raise self._closed_error()
        if keys is None:
            raise null_argument(self.name, "delete_all", "list")
        wb = rocksdict.WriteBatch(raw_mode=True)
        delete = wb.delete
        key = None
        try:
            for key in keys:
                delete(key)
        except Exception as exc:
            raise self._error("delete_all", exc, key) from exc
        self._write(wb, "delete_all")

    def ingest_sorted(self, pairs: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Bulk-load strictly ascending ``(key, value)`` pairs (``None`` deletes) through an SST
        file and ``ingest_external_file``: the fastest way to fill a store (~3M pairs/s).

        The ingested pairs override what the store held for the same keys. Returns the number of
        pairs. Keys out of order raise :class:`StoreError` naming the key; nothing is ingested.
        """
        if self._closed:
            raise self._closed_error()
        tmp = self.path / _INGEST_FILE
        writer = rocksdict.SstFileWriter(self._native)
        count, key = 0, None
        try:
            writer.open(str(tmp))
            for key, value in pairs:
                if value is None:
                    del writer[key]
                else:
                    writer[key] = value
                count += 1
            if count == 0:
                return 0
            writer.finish()
            opts = rocksdict.IngestExternalFileOptions()
            opts.set_move_files(True)
            self._db.ingest_external_file([str(tmp)], opts)
        except Exception as exc:
            if "ascending order" in str(exc):
                raise StoreError(f"ingest_sorted: key {key!r} (pair {count}) is not greater than "
                                 f"the key before it; sort and de-duplicate the pairs first",
                                 store=self.name) from exc
            raise self._error("ingest_sorted", exc, key) from exc
        finally:
            del writer
            tmp.unlink(missing_ok=True)
        return count

    def load_sorted(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                    deletes: bool = True) -> int:
        """Bulk-load parallel lists of strictly ascending keys and their values (``None``
        deletes; ``deletes=False`` promises none) through one SST file and
        ``ingest_external_file``; the pairs override what the store held. Restore's bulk
        path: the file is filled by a loop in C when there are no deletes. Returns the count.
        Keys out of order raise :class:`StoreError`; nothing is ingested."""
        if self._closed:
            raise self._closed_error()
        if not keys:
            return 0
        tmp = self.path / _INGEST_FILE
        try:
            try:
                write_sst_file(tmp, keys, values, self.options, deletes=deletes)
            except StoreError as exc:
                raise StoreError(f"load_sorted: {exc}", store=self.name) from exc
            self.ingest_files([tmp])
        finally:
            tmp.unlink(missing_ok=True)
        return len(keys)

    def ingest_files(self, paths: Sequence[Path | str]) -> None:
        """Ingest SST files built by :func:`write_sst_file` (moved, not copied, when they are
        on the store's file system), in order: a later file's pairs override an earlier
        one's and everything the store held before."""
        if self._closed:
            raise self._closed_error()
        opts = rocksdict.IngestExternalFileOptions()
        opts.set_move_files(True)
        try:
            for path in paths:
                self._db.ingest_external_file([str(path)], opts)
        except Exception as exc:
            raise self._error("ingest", exc) from exc

    # -- lifecycle -----------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        """Make every write so far survive a crash: with the WAL off, flush the memtable to a
        synced SST file; with the WAL on, fsync the WAL. ``FlushScope.CHANGELOG`` does
        neither (reads already see every write; the changelog holds them)."""
        if self._closed:
            raise self._closed_error()
        if scope is FlushScope.CHANGELOG:
            return
        try:
            if self.logged:
                self._db.flush(True)
            else:
                self._db.flush_wal(True)
        except Exception as exc:
            raise self._error("flush", exc) from exc

    def commit_marker(self) -> str:
        """A short string that changes with every write that reached the engine (RocksDB's
        last sequence number, kept in the MANIFEST). Recovery records it in the store's
        ``OFFSET`` file and reuses the files only while it is unchanged, so a directory whose
        files were replaced or lost (a deleted ``CURRENT`` makes RocksDB start a new, empty
        database) is never taken for the one the file vouched for."""
        if self._closed:
            raise self._closed_error()
        return rocksdb_commit_marker(self._db)

    def compact(self) -> None:
        """Compact the whole key range (e.g. after a bulk load); blocks until done."""
        if self._closed:
            raise self._closed_error()
        self._db.compact_range(None, None)

    def close(self) -> None:
        """Close open iterators and snapshots, flush the memtable, close RocksDB and release the
        directory lock. Closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        for view in list(self._views):
            view.close()
        self._views = weakref.WeakSet()
        db = self._db
        self._db = self._get = self._put = self._delete = None
        try:
            db.close()
        finally:
            del db
            self._lock.release()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- tooling -------------------------------------------------------------------------
    def approximate_size(self) -> int:
        """Bytes in SST files plus memtables (an estimate, cheap)."""
        if self._closed:
            raise self._closed_error()
        return (self._db.property_int_value("rocksdb.total-sst-files-size")
                + self._db.property_int_value("rocksdb.cur-size-all-mem-tables"))

    def count_estimate(self) -> int:
        """RocksDB's estimate of the number of keys (cheap; may be off after deletes)."""
        if self._closed:
            raise self._closed_error()
        return self._db.property_int_value("rocksdb.estimate-num-keys")

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"RocksDBEngine({self.name!r}, {str(self.path)!r}, logged={self.logged}, {state})"

    # -- internals -----------------------------------------------------------------------
    def _apply(self, items: Iterable[tuple[bytes, bytes | None]], *, allow_deletes: bool) -> None:
        if self._closed:
            raise self._closed_error()
        if items is None:
            raise null_argument(self.name, "write_batch" if allow_deletes else "put_all", "list")
        wb = rocksdict.WriteBatch(raw_mode=True)
        put, delete = wb.put, wb.delete
        key = value = None
        try:
            for key, value in items:
                if value is None and allow_deletes:
                    delete(key)
                else:
                    put(key, value)
        except Exception as exc:
            raise self._error("write_batch" if allow_deletes else "put_all", exc, key,
                              value) from exc
        self._write(wb, "write_batch" if allow_deletes else "put_all")

    def _write(self, wb: rocksdict.WriteBatch, op: str) -> None:
        try:
            self._db.write(wb, self._wopts)
        except Exception as exc:
            raise self._error(op, exc) from exc

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"RocksDB store at {self.path} is closed", store=self.name)

    def _error(self, op: str, exc: Exception, key: object = None,
               value: object = b"") -> Exception:
        """Translate a rocksdict exception into a Weir one."""
        if isinstance(exc, rocksdict.DbClosedError):
            return self._closed_error()
        if isinstance(exc, (KeyError, ValueError)) and "only support bytes" in str(exc):
            if key is None or (value is None and op != "write_batch"):
                return NullKeyOrValueError(f"{op}: None is not a valid key or value; delete with "
                                           f"delete(), not put(k, None)", store=self.name)
            return TypeError(f"store '{self.name}': {op}: keys and values must be bytes, got "
                             f"key {type(key).__name__} and value {type(value).__name__}")
        return StoreError(f"RocksDB {op} failed at {self.path}: {exc}", store=self.name)

    def _open_error(self, exc: Exception) -> StoreError:
        text = str(exc)
        if "lock" in text.lower() and ("LOCK" in text or "lock hold" in text):
            holder = read_lock_holder(self.path)
            return StoreLockedError(
                f"RocksDB refused to open {self.path} because its own LOCK file is held ({text});"
                f" another process (or an unclosed engine in this one, pid {os.getpid()}) still "
                f"has the database open: close it, or stop that process",
                store=self.name, path=str(self.path), holder=holder.as_dict() if holder else None)
        return StoreError(f"cannot open RocksDB at {self.path}: {text}; if the directory is "
                          f"corrupt, delete it and let the store be restored from its changelog",
                          store=self.name)
