"""A store engine defined in the tests: SQLite (the standard library's ``sqlite3``), added the
way docs/ENGINES.md says, as one module plus its registration.

Importing this module registers the engine as ``sqlite`` (``stores.<s>.factory=sqlite``).
``pytest -p tests.stores._sqlite_engine tests/stores/test_contract.py`` runs the whole store
contract and the capability checks on it (tests/stores/test_engine_registry.py does).

One file per store, ``<dir>/store.sqlite3``, a ``WITHOUT ROWID`` table keyed by ``BLOB`` (SQLite
compares blobs with ``memcmp``: the bytewise order every engine keeps). Writes go into an open
transaction that ``flush()`` commits together with the commit counter its marker names;
``close()`` commits too. The durability asked for maps to ``PRAGMA synchronous``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from weir.stores._iterators import IteratorRegistry, ListIterator
from weir.stores.api import FlushScope
from weir.stores.engines._base import BytesEngineBase, is_empty_range, null_argument
from weir.stores.engines.memory import MemorySnapshot
from weir.stores.engines.registry import Capability, Durability, StoreEngine, register_engine
from weir.stores.errors import NullKeyOrValueError, StoreClosedError
from weir.stores.locking import DirectoryLock
from weir.stores.offline import ReadOnlyFiles
from weir.stores.spec import StoreSpec

__all__ = ["SQLiteEngine", "SQLITE"]

FILE = "store.sqlite3"
_SYNCHRONOUS = {Durability.CHANGELOG: "OFF", Durability.LOCAL: "FULL",
                Durability.PROCESS: "OFF"}


class SQLiteEngine(BytesEngineBase):
    """A bytes engine over one SQLite file (see the module docstring)."""

    def __init__(self, name: str, directory: Path, durability: Durability = Durability.LOCAL):
        self.name = name
        self.path = Path(directory)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = DirectoryLock.acquire(self.path, store=name)
        self._db = sqlite3.connect(self.path / FILE, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute(f"PRAGMA synchronous={_SYNCHRONOUS[durability]}")
        self._db.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) "
                         "WITHOUT ROWID")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY, commits "
                         "INTEGER NOT NULL)")
        self._db.execute("INSERT OR IGNORE INTO meta VALUES (0, 0)")
        self._mutex = threading.RLock()
        self._dirty = False
        self._closed = False
        self._open = IteratorRegistry()

    # -- point operations ----------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        if key is None:
            raise null_argument(self.name, "get")
        with self._mutex:
            row = self._db.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def get_all(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        self._check_open()
        if keys is None:
            raise null_argument(self.name, "get_all", "list")
        out = {}
        for key in keys:
            if key is None:
                raise null_argument(self.name, "get_all")
            value = self.get(key)
            if value is not None:
                out[key] = value
        return out

    def put(self, key: bytes, value: bytes) -> None:
        self._apply("put", [(key, value)], deletes=False)

    def put_all(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        self._apply("put_all", items, deletes=False)

    def delete(self, key: bytes) -> None:
        if type(key) is not bytes:
            self._check_open()
            raise self._rejected("delete", key, None)
        self._apply("delete", [(key, None)], deletes=True)

    def delete_all(self, keys: Iterable[bytes]) -> None:
        if keys is None:
            self._check_open()
            raise null_argument(self.name, "delete_all", "list")
        self._apply("delete_all", [(k, None) for k in keys], deletes=True)

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        self._apply("write_batch", items, deletes=True)

    def load_sorted(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                    deletes: bool = True) -> int:
        """Restore's bulk load: the run in one statement batch of the open transaction."""
        if len(keys) != len(values):
            raise ValueError(f"store '{self.name}': load_sorted got {len(keys)} keys and "
                             f"{len(values)} values")
        self._apply("load_sorted", list(zip(keys, values)), deletes=deletes)
        return len(keys)

    def _apply(self, op: str, items: Iterable[tuple[bytes, bytes | None]], *,
               deletes: bool) -> None:
        self._check_open()
        if items is None:
            raise null_argument(self.name, op, "list")
        items = list(items)
        for key, value in items:  # check everything before writing anything
            if type(key) is not bytes or (type(value) is not bytes
                                          and (value is not None or not deletes)):
                raise self._rejected(op, key, value)
        with self._mutex:
            self._begin()
            for key, value in items:
                if value is None:
                    self._db.execute("DELETE FROM kv WHERE k = ?", (key,))
                else:
                    self._db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, value))

    def _begin(self) -> None:
        if not self._dirty:
            self._db.execute("BEGIN")
            self._dirty = True

    # -- ordered access ------------------------------------------------------------------
    def range(self, lo: bytes | None, hi: bytes | None) -> ListIterator:
        return self._open.track(ListIterator(self.name, self._copy(lo, hi)))

    def snapshot(self, lo: bytes | None, hi: bytes | None) -> MemorySnapshot:
        return self._open.track(MemorySnapshot(self.name, self._copy(lo, hi)))

    def _copy(self, lo: bytes | None, hi: bytes | None) -> list[tuple[bytes, bytes]]:
        self._check_open()
        if is_empty_range(lo, hi):
            return []
        with self._mutex:
            return _select(self._db, lo, hi)

    # -- lifecycle -----------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        self._check_open()
        if scope is FlushScope.CHANGELOG:
            return  # the open transaction's writes are visible to this connection
        with self._mutex:
            if self._dirty:
                self._db.execute("UPDATE meta SET commits = commits + 1 WHERE id = 0")
                self._db.execute("COMMIT")
                self._dirty = False

    def commit_marker(self) -> str | None:
        """``sqlite-commit:<n>``: the number of commits that changed something; None while
        writes are not committed."""
        self._check_open()
        if self._dirty:
            return None
        with self._mutex:
            return _marker(self._db)

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._open.close_all()
            self._db.close()
            self._lock.release()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("store used after close(); reopen it", store=self.name)

    def _rejected(self, op: str, key: object, value: object) -> Exception:
        if key is None or value is None:
            return NullKeyOrValueError(f"{op}: None is not a valid key or value; delete with "
                                       f"delete(), not put(k, None)", store=self.name)
        return TypeError(f"store '{self.name}': {op}: keys and values must be bytes, got key "
                         f"{type(key).__name__} and value {type(value).__name__}")

    def __repr__(self) -> str:
        return f"<SQLiteEngine {self.name!r} {'closed' if self._closed else self.path}>"


def _select(db: sqlite3.Connection, lo: bytes | None, hi: bytes | None
            ) -> list[tuple[bytes, bytes]]:
    where, args = [], []
    if lo is not None:
        where.append("k >= ?")
        args.append(lo)
    if hi is not None:
        where.append("k < ?")
        args.append(hi)
    sql = "SELECT k, v FROM kv" + (" WHERE " + " AND ".join(where) if where else "")
    return [(bytes(k), bytes(v)) for k, v in db.execute(sql + " ORDER BY k", args)]


def _marker(db: sqlite3.Connection) -> str:
    return f"sqlite-commit:{db.execute('SELECT commits FROM meta WHERE id = 0').fetchone()[0]}"


def _open(spec: StoreSpec, directory: Path, durability: Durability) -> SQLiteEngine:
    return SQLiteEngine(spec.name, directory, durability)


def _read_only(spec: StoreSpec, directory: Path) -> ReadOnlyFiles:
    db = sqlite3.connect(f"{(Path(directory) / FILE).resolve().as_uri()}?mode=ro", uri=True)

    @contextmanager
    def items(start: bytes | None) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        yield iter(_select(db, start, None))

    return ReadOnlyFiles(spec.name, spec.engine, items=items, marker=lambda: _marker(db),
                         close=db.close)


SQLITE = register_engine(StoreEngine(
    "sqlite", _open, aliases=("sqlite3",),
    capabilities=Capability.PERSISTENT | Capability.COMMIT_MARKER | Capability.BULK_LOAD,
    preload=(__name__,), file_patterns=(FILE,), open_read_only=_read_only,
    description="SQLite (the standard library's sqlite3), one file per store"))
