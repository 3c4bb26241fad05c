"""A store's files read offline, without writing anything beside them (the ``weir state``
tools): :func:`engine_of_files` and :func:`open_read_only`.

Opening a store with its engine (:func:`~weir.stores.builder.open_engine`) takes the
directory's lock file and lets the library create what it misses: pointed at a directory
another engine wrote, RocksDB creates a new, empty database among LMDB's files (issue 23,
point 7: ``weir state list`` then reported 0 keys and left RocksDB files in an LMDB store).
A tool that only looks must neither create nor change a file there, and must say so when the
files are not the engine the config names:

* :func:`engine_of_files` tells which engine wrote a directory's files (LMDB's ``data.mdb``,
  RocksDB's ``CURRENT`` / ``MANIFEST-*``), None when it holds none;
* :func:`open_read_only` refuses files of another engine than the spec's with
  :class:`StoreFilesMismatchError`, and otherwise opens them read only: LMDB with
  ``readonly=True, lock=False`` (the tools hold the job lock: nothing writes meanwhile),
  RocksDB in its read-only mode through a temporary directory of links to the store's files
  (the ``rocksdict`` binding rewrites its ``rocksdict-config.json`` at every open, read-only
  ones included), so a read-only file system works too.

The reader gives ``all()``, ``prefix(p)`` (context managers over ``(key, value)`` in key
order) and the engine's :meth:`~ReadOnlyFiles.commit_marker`, the same string the engine
records in the store's ``OFFSET`` file.

Example::

    >>> import tempfile, pathlib
    >>> from weir.stores.builder import open_engine
    >>> from weir.stores.config import Config
    >>> from weir.stores.spec import StoreSpec
    >>> spec = StoreSpec.from_config(Config({"stores.s.factory": "lmdb",
    ...                                      "stores.s.key.serde": "bytes",
    ...                                      "stores.s.msg.serde": "bytes"}), "s")
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "s"
    >>> e = open_engine(spec, d, logged=False); e.put(b"k", b"v"); e.close()
    >>> before = sorted(p.name for p in d.iterdir())
    >>> engine_of_files(d)
    <EngineKind.LMDB: 'lmdb'>
    >>> with open_read_only(spec, d) as files, files.all() as items:
    ...     list(items)
    [(b'k', b'v')]
    >>> sorted(p.name for p in d.iterdir()) == before
    True
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from weir.stores.errors import StoreError
from weir.stores.spec import EngineKind, StoreSpec

__all__ = ["ReadOnlyFiles", "StoreFilesMismatchError", "engine_of_files", "open_read_only"]

_ROCKSDB_COPIED = ("rocksdict-config.json",)
"""Files the rocksdict binding rewrites at every open: copied into the temporary directory,
never linked (a link would let it write through to the store)."""
_NOT_ROCKSDB = ("LOCK", "WEIR.LOCK", "OFFSET")
"""Files of a RocksDB store directory the read-only view leaves out (locks, Weir's own)."""


class StoreFilesMismatchError(StoreError):
    """A store's files were written by another engine than the one the config names (after
    ``stores.<s>.factory`` changed): a tool reading them with the configured engine would see
    an empty store, or create files of that engine among them. Names the store, the
    directory and both engines; nothing was read or created."""

    def __init__(self, message: str, *, store: str, directory: str, configured: str,
                 found: str):
        super().__init__(message, store=store)
        self.directory, self.configured, self.found = directory, configured, found


def engine_of_files(directory: Path) -> EngineKind | None:
    """The engine whose files ``directory`` holds: LMDB (``data.mdb``), RocksDB (``CURRENT``
    or a ``MANIFEST-*``), None when it holds neither. Files of both: the one written last."""
    directory = Path(directory)
    try:
        names = {p.name: p for p in directory.iterdir()}
    except (FileNotFoundError, NotADirectoryError):
        return None
    lmdb = names.get("data.mdb")
    rocks = [p for n, p in names.items() if n == "CURRENT" or n.startswith("MANIFEST-")]
    if lmdb is None and not rocks:
        return None
    if lmdb is None:
        return EngineKind.ROCKSDB
    if not rocks:
        return EngineKind.LMDB
    newest_rocks = max(p.stat().st_mtime_ns for p in rocks)
    return EngineKind.LMDB if lmdb.stat().st_mtime_ns >= newest_rocks else EngineKind.ROCKSDB


class ReadOnlyFiles:
    """A store's files opened read only (see the module docstring); close it when done."""

    def __init__(self, name: str, kind: EngineKind, handle: Any, cleanup: Path | None = None):
        self.name, self.kind = name, kind
        self._handle = handle
        self._cleanup = cleanup

    @contextmanager
    def all(self) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        """Every ``(key, value)`` in key order."""
        with self._items(None) as items:
            yield items

    @contextmanager
    def prefix(self, prefix: bytes) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        """The ``(key, value)`` pairs whose key starts with ``prefix``, in key order."""
        with self._items(prefix) as items:
            yield items

    @contextmanager
    def _items(self, prefix: bytes | None) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        if self.kind is EngineKind.LMDB:
            with self._handle.begin(buffers=False) as txn:
                cursor = txn.cursor()
                if prefix is not None and not cursor.set_range(prefix):
                    yield iter(())
                    return
                yield _while_prefixed(iter(cursor), prefix)
            return
        yield _while_prefixed(iter(self._handle.items(from_key=prefix)), prefix)

    def commit_marker(self) -> str:
        """The engine's commit marker (what the store's ``OFFSET`` file records)."""
        if self.kind is EngineKind.LMDB:
            from weir.stores.engines.lmdb import lmdb_commit_marker
            return lmdb_commit_marker(self._handle)
        from weir.stores.engines.rocksdb import rocksdb_commit_marker
        return rocksdb_commit_marker(self._handle)

    def close(self) -> None:
        handle, self._handle = self._handle, None
        try:
            if handle is not None:
                handle.close()
        finally:
            if self._cleanup is not None:
                shutil.rmtree(self._cleanup, ignore_errors=True)
                self._cleanup = None

    def __enter__(self) -> "ReadOnlyFiles":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _while_prefixed(items: Iterator[tuple[bytes, bytes]], prefix: bytes | None
                    ) -> Iterator[tuple[bytes, bytes]]:
    for key, value in items:
        if prefix is not None and not key.startswith(prefix):
            return
        yield key, value


def open_read_only(spec: StoreSpec, directory: Path, *, origin: str | None = None
                   ) -> ReadOnlyFiles:
    """Open the files of ``spec``'s store in ``directory`` for reading, creating and changing
    nothing there. Raises :class:`StoreFilesMismatchError` when another engine wrote them
    (``origin`` says where the config set the store's engine), ``StoreError`` when there are
    none or the engine cannot read them."""
    directory = Path(directory)
    found = engine_of_files(directory)
    if found is None or spec.engine is EngineKind.MEMORY:
        raise StoreError(f"store '{spec.name}': {directory} holds no {spec.engine.value} "
                         f"files to read", store=spec.name)
    if found is not spec.engine:
        key = f"stores.{spec.name}.factory"
        where = f" (set at {origin})" if origin else ""
        raise StoreFilesMismatchError(
            f"store '{spec.name}': the files in {directory} were written by the "
            f"{found.value} engine, but the config read here says {key}={spec.engine.value}"
            f"{where}. Nothing was read or created. The job last ran with another engine than "
            f"this config names: the config a job last ran with is its coordinator stream's "
            f"(`weir coordinator show --job <job config>`); to read these files now, add `--set "
            f"{key}={found.value}`. The job's next start with {spec.engine.value} rebuilds "
            f"the store from its changelog",
            store=spec.name, directory=str(directory), configured=spec.engine.value,
            found=found.value)
    try:
        if found is EngineKind.LMDB:
            import lmdb
            env = lmdb.open(str(directory), subdir=True, readonly=True, lock=False,
                            create=False, max_dbs=0, readahead=False)
            return ReadOnlyFiles(spec.name, found, env)
        return _open_rocksdb(spec, directory)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - the library's error, named with the store
        raise StoreError(f"store '{spec.name}': cannot read the {found.value} files in "
                         f"{directory} ({type(exc).__name__}: {exc})", store=spec.name) from exc


def _open_rocksdb(spec: StoreSpec, directory: Path) -> ReadOnlyFiles:
    import rocksdict
    view = Path(tempfile.mkdtemp(prefix=f"weir-read-{spec.name}-"))
    try:
        for path in directory.iterdir():
            if path.name in _NOT_ROCKSDB or path.name.startswith("LOG") or not path.is_file():
                continue
            if path.name in _ROCKSDB_COPIED:
                shutil.copyfile(path, view / path.name)
            else:
                (view / path.name).symlink_to(path.resolve())
        options = rocksdict.Options(raw_mode=True)
        db = rocksdict.Rdict(str(view), options,
                             access_type=rocksdict.AccessType.read_only(False))
    except BaseException:
        shutil.rmtree(view, ignore_errors=True)
        raise
    return ReadOnlyFiles(spec.name, EngineKind.ROCKSDB, db, cleanup=view)
