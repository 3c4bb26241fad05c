"""A store's files read offline, without writing anything beside them (the ``weir state``
tools): :func:`engine_of_files` and :func:`open_read_only`.

Opening a store with its engine (:func:`~weir.stores.builder.open_engine`) takes the
directory's lock file and lets the library create what it misses: pointed at a directory
another engine wrote, RocksDB creates a new, empty database among LMDB's files (issue 23,
point 7: ``weir state list`` then reported 0 keys and left RocksDB files in an LMDB store).
A tool that only looks must neither create nor change a file there, and must say so when the
files are not the engine the config names:

* :func:`engine_of_files` tells which registered engine wrote a directory's files (its
  :attr:`~weir.stores.engines.registry.StoreEngine.file_patterns`: LMDB's ``data.mdb``,
  RocksDB's ``CURRENT`` / ``MANIFEST-*``), None when it holds none;
* :func:`open_read_only` refuses files of another engine than the spec's with
  :class:`StoreFilesMismatchError`, and otherwise opens them read only: LMDB with
  ``readonly=True, lock=False`` (the tools hold the job lock: nothing writes meanwhile),
  RocksDB in its read-only mode through a temporary directory of links to the store's files
  (the ``rocksdict`` binding rewrites its ``rocksdict-config.json`` at every open, read-only
  ones included), so a read-only file system works too. Each engine's reader is its
  :attr:`~weir.stores.engines.registry.StoreEngine.open_read_only` (docs/ENGINES.md).

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
    <StoreEngine lmdb>
    >>> with open_read_only(spec, d) as files, files.all() as items:
    ...     list(items)
    [(b'k', b'v')]
    >>> sorted(p.name for p in d.iterdir()) == before
    True
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from weir.stores.engines.registry import StoreEngine, store_engines
from weir.stores.errors import StoreError
from weir.stores.spec import StoreSpec

__all__ = ["ReadOnlyFiles", "StoreFilesMismatchError", "engine_of_files", "open_read_only",
           "lmdb_read_only", "rocksdb_read_only"]

_ROCKSDB_COPIED = ("rocksdict-config.json",)
"""Files the rocksdict binding rewrites at every open: copied into the temporary directory,
never linked (a link would let it write through to the store)."""
_NOT_ROCKSDB = ("LOCK", "WEIR.LOCK", "OFFSET")
"""Files of a RocksDB store directory the read-only view leaves out (locks, Weir's own)."""

Items = Callable[[bytes | None], AbstractContextManager[Iterator[tuple[bytes, bytes]]]]


class StoreFilesMismatchError(StoreError):
    """A store's files were written by another engine than the one the config names (after
    ``stores.<s>.factory`` changed): a tool reading them with the configured engine would see
    an empty store, or create files of that engine among them. Names the store, the
    directory and both engines; nothing was read or created."""

    def __init__(self, message: str, *, store: str, directory: str, configured: str,
                 found: str):
        super().__init__(message, store=store)
        self.directory, self.configured, self.found = directory, configured, found


def engine_of_files(directory: Path) -> StoreEngine | None:
    """The registered engine whose files ``directory`` holds (its ``file_patterns``), None
    when it holds none. Files of several engines: the one written last (a tie goes to the
    engine registered later)."""
    try:
        entries = list(Path(directory).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return None
    found: StoreEngine | None = None
    newest = -1
    for engine in store_engines():
        mine = [p for p in entries if engine.owns_file(p.name)]
        if mine and (written := max(p.stat().st_mtime_ns for p in mine)) >= newest:
            found, newest = engine, written
    return found


class ReadOnlyFiles:
    """A store's files opened read only (see the module docstring); close it when done.
    An engine's reader builds it from three functions over its library handle: ``items(prefix)``
    (a context manager over ``(key, value)`` from ``prefix`` on, or every pair when None, in key
    order), ``marker()`` (the engine's commit marker) and ``close()``."""

    def __init__(self, name: str, engine: StoreEngine, *, items: Items,
                 marker: Callable[[], str], close: Callable[[], None],
                 cleanup: Path | None = None):
        self.name, self.engine = name, engine
        self._items_from, self._marker, self._close = items, marker, close
        self._cleanup = cleanup

    @contextmanager
    def all(self) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        """Every ``(key, value)`` in key order."""
        with self._items_from(None) as items:
            yield items

    @contextmanager
    def prefix(self, prefix: bytes) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        """The ``(key, value)`` pairs whose key starts with ``prefix``, in key order."""
        with self._items_from(prefix) as items:
            yield _while_prefixed(items, prefix)

    def commit_marker(self) -> str:
        """The engine's commit marker (what the store's ``OFFSET`` file records)."""
        return self._marker()

    def close(self) -> None:
        close, self._close = self._close, None
        try:
            if close is not None:
                close()
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
    if found is None or spec.engine.open_read_only is None:
        raise StoreError(f"store '{spec.name}': {directory} holds no {spec.engine.name} "
                         f"files to read", store=spec.name)
    if found is not spec.engine:
        key = f"stores.{spec.name}.factory"
        where = f" (set at {origin})" if origin else ""
        raise StoreFilesMismatchError(
            f"store '{spec.name}': the files in {directory} were written by the "
            f"{found.name} engine, but the config read here says {key}={spec.engine.name}"
            f"{where}. Nothing was read or created. The job last ran with another engine than "
            f"this config names: the config a job last ran with is its coordinator stream's "
            f"(`weir coordinator show --job <job config>`); to read these files now, add `--set "
            f"{key}={found.name}`. The job's next start with {spec.engine.name} rebuilds "
            f"the store from its changelog",
            store=spec.name, directory=str(directory), configured=spec.engine.name,
            found=found.name)
    try:
        return spec.engine.open_read_only(spec, directory)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - the library's error, named with the store
        raise StoreError(f"store '{spec.name}': cannot read the {found.name} files in "
                         f"{directory} ({type(exc).__name__}: {exc})", store=spec.name) from exc


def lmdb_read_only(spec: StoreSpec, directory: Path) -> ReadOnlyFiles:
    """LMDB's reader: ``readonly=True, lock=False`` (the tools hold the job lock)."""
    import lmdb

    from weir.stores.engines.lmdb import lmdb_commit_marker
    env = lmdb.open(str(directory), subdir=True, readonly=True, lock=False,
                    create=False, max_dbs=0, readahead=False)

    @contextmanager
    def items(start: bytes | None) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        with env.begin(buffers=False) as txn:
            cursor = txn.cursor()
            if start is not None and not cursor.set_range(start):
                yield iter(())
                return
            yield iter(cursor)

    return ReadOnlyFiles(spec.name, spec.engine, items=items,
                         marker=lambda: lmdb_commit_marker(env), close=env.close)


def rocksdb_read_only(spec: StoreSpec, directory: Path) -> ReadOnlyFiles:
    """RocksDB's reader: its read-only mode over a temporary directory of links."""
    import rocksdict

    from weir.stores.engines.rocksdb import rocksdb_commit_marker
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

    @contextmanager
    def items(start: bytes | None) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        yield iter(db.items(from_key=start))

    return ReadOnlyFiles(spec.name, spec.engine, items=items,
                         marker=lambda: rocksdb_commit_marker(db), close=db.close,
                         cleanup=view)
