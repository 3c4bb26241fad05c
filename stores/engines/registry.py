"""The one registry of store engines: every place that picks, opens or reasons about an engine
reads it.

A :class:`StoreEngine` describes one engine once: its name (the value of
``stores.<store>.factory``) and aliases (Samza's factory class names), how its options are
parsed from ``stores.<store>.<engine>.*``, how it is opened, what it can do
(:class:`Capability`, :class:`WorkerRestore`), which modules a container process should import
ahead of time, and which files in a store directory are its own. The builder
(:func:`~weir.stores.builder.open_engine`), :class:`~weir.stores.spec.StoreSpec`, restore
(``weir.recovery``), adjunct stores, the Spark state providers, the container starter and the
contract tests (``tests/stores``) all read it; nothing else switches on engine names.

The built-in engines are registered here, without importing their libraries: an opener imports
its engine module when a store of that engine is opened (LMDB's library only for an LMDB store).
Adding an engine is one module (the engine) plus one :func:`register_engine` call
(docs/ENGINES.md).

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> scratch = register_engine(StoreEngine(
    ...     "scratch", lambda spec, directory, durability: MemoryEngine(spec.name),
    ...     aliases=("com.example.ScratchStorageEngineFactory",), description="a test engine"))
    >>> store_engine("com.example.scratchstorageenginefactory") is scratch
    True
    >>> store_engine("rocksdb").persistent, scratch.persistent
    (True, False)
    >>> try:
    ...     store_engine("scrach", key="stores.s.factory")
    ... except UnknownEngineError as exc:
    ...     print(exc)
    config key 'stores.s.factory': unknown store engine 'scrach'; did you mean scratch? Expected one of rocksdb, lmdb, memory, scratch (or Samza's RocksDbKeyValueStorageEngineFactory / InMemoryKeyValueStorageEngineFactory class names); register others with weir.stores.engines.registry.register_engine
    >>> unregister_engine("scratch")
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, Flag, auto
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.stores.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - types only
    from weir.stores.config import Config
    from weir.stores.engines._base import BytesEngine
    from weir.stores.offline import ReadOnlyFiles
    from weir.stores.spec import StoreSpec

__all__ = ["Capability", "Durability", "WorkerRestore", "StoreEngine", "UnknownEngineError",
           "EngineRegistrationError", "register_engine", "unregister_engine", "store_engine",
           "store_engines", "engine_names", "engine_choices", "preload_modules", "declare_engine_keys"]


class Durability(Enum):
    """What the opener of an engine is asked to survive (each engine maps it to its settings)."""

    CHANGELOG = "changelog"
    """A changelog holds every change: the engine may skip its own log (RocksDB turns its
    write-ahead log off); a crash loses only what the changelog brings back."""
    LOCAL = "local"
    """The store's files are its only copy: the engine keeps its own log and syncs as its
    options say."""
    PROCESS = "process"
    """The files must survive the kill of the process, not of the machine (a Spark replica:
    the checkpoint's versions are the durable copy). RocksDB keeps its write-ahead log, LMDB
    commits without fsync."""


class Capability(Flag):
    """What an engine offers beyond the :class:`~weir.stores.engines._base.BytesEngine`
    contract; the contract tests check every capability an engine declares."""

    NONE = 0
    PERSISTENT = auto()
    """Its files outlive the process: restore may keep them, offset files are written."""
    COMMIT_MARKER = auto()
    """``engine.commit_marker()`` names its last durable commit (recorded in ``OFFSET``, so a
    copy the engine did not commit is never taken for the checkpointed state)."""
    BULK_LOAD = auto()
    """``engine.load_sorted(keys, values, deletes=...)`` writes a sorted run in one
    transaction (restore's fast path)."""
    WRITE_AHEAD_LOG = auto()
    """Opened with :attr:`Durability.PROCESS` or :attr:`Durability.LOCAL`, a write is in the
    engine's log once the call returns: another process that opens the files after a kill
    sees it without ``flush()`` (RocksDB's WAL; a Spark replica then skips the flush)."""


class WorkerRestore(Enum):
    """How a restore worker process helps replay a large changelog into the engine."""

    NONE = "none"
    """Only the restore thread writes the engine."""
    SORTED_FILES = "sorted-files"
    """Workers write sorted runs as files (:attr:`StoreEngine.write_sorted_file`); the open
    engine ingests them in order (``engine.ingest_files(paths)``). A large range is split over
    every worker."""
    SORTED_RUNS = "sorted-runs"
    """Workers write de-duplicated sorted runs as staging files in Weir's own run format
    (:mod:`weir.recovery.bulk`); the restore thread loads them in order into the open engine
    with its bulk load (``engine.load_sorted``). A large range is split over every worker:
    the per-record work (parsing, de-duplicating, sorting) runs on every core, the load
    itself is the engine's loop in C."""
    FILL_BEFORE_OPEN = "fill-before-open"
    """A worker opens the empty directory of a store being rebuilt, bulk-loads it and closes
    it; the restore thread opens the filled store afterwards (rebuilds only)."""


Opener = Callable[["StoreSpec", Path, Durability], "BytesEngine"]
OptionsParser = Callable[["Config", str], Any]
ReadOnlyOpener = Callable[["StoreSpec", Path], "ReadOnlyFiles"]


@dataclass(frozen=True, eq=False)
class StoreEngine:
    """One store engine, registered once with :func:`register_engine`.

    ``open(spec, directory, durability)`` returns the open bytes engine of ``spec``'s store in
    ``directory``; ``spec.options`` holds what ``parse_options(config, store)`` returned (None
    for an engine without options, or a spec built in code: the engine's defaults then).
    ``config_module`` declares the engine's ``stores.<store>.<engine>.*`` keys (imported before
    any store's keys are checked). ``file_patterns`` are the names (``fnmatch``) that mark the
    engine's files in a store directory; ``open_read_only(spec, directory)`` reads them for the
    ``weir state`` tools without creating or changing a file
    (:class:`~weir.stores.offline.ReadOnlyFiles`). ``write_sorted_file(path, keys, values,
    options, *, deletes)`` must be a module-level function (it runs in a spawned restore
    worker).

    Engines are compared by identity and pickle by name (a Spark or restore worker resolves
    the name in its own registry, so the module that registers an engine must be imported
    there too).
    """

    name: str
    open: Opener
    aliases: tuple[str, ...] = ()
    capabilities: Capability = Capability.NONE
    parse_options: OptionsParser | None = None
    config_module: str | None = None
    worker_restore: WorkerRestore = WorkerRestore.NONE
    write_sorted_file: Callable[..., None] | None = None
    preload: tuple[str, ...] = ()
    file_patterns: tuple[str, ...] = ()
    open_read_only: ReadOnlyOpener | None = None
    samza_factory: str | None = None
    """The Samza storage engine factory class this engine stands in for (accepted as an
    alias, so a ported Samza config keeps its ``stores.<store>.factory``)."""
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip().lower():
            raise EngineRegistrationError(
                f"engine name {self.name!r} must be non-empty, lower case, without spaces")
        if self.worker_restore is WorkerRestore.SORTED_FILES and self.write_sorted_file is None:
            raise EngineRegistrationError(
                f"engine {self.name!r}: WorkerRestore.SORTED_FILES needs write_sorted_file")
        if self.worker_restore is not WorkerRestore.NONE and not self.persistent:
            raise EngineRegistrationError(
                f"engine {self.name!r}: a restore worker needs a persistent engine")

    @property
    def persistent(self) -> bool:
        """Whether its files outlive the process (:attr:`Capability.PERSISTENT`)."""
        return Capability.PERSISTENT in self.capabilities

    def options(self, config: "Config", store: str) -> Any:
        """The engine's options of ``store`` parsed from ``config`` (None: it has none)."""
        return None if self.parse_options is None else self.parse_options(config, store)

    def names(self) -> tuple[str, ...]:
        """Its name, aliases and Samza factory class: every accepted spelling."""
        return (self.name, *self.aliases,
                *((self.samza_factory,) if self.samza_factory else ()))

    def owns_file(self, name: str) -> bool:
        """Whether a file called ``name`` in a store directory marks this engine's files."""
        return any(fnmatch.fnmatchcase(name, p) for p in self.file_patterns)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return store_engine, (self.name,)

    def __repr__(self) -> str:
        return f"<StoreEngine {self.name}>"


class UnknownEngineError(ConfigError):
    """``stores.<store>.factory`` (or a Spark store's provider) names no registered engine.
    ``name`` is what was asked for, ``suggestion`` the closest registered name or None."""

    def __init__(self, message: str, *, name: str, suggestion: str | None,
                 key: str | None = None, origin: str | None = None):
        super().__init__(message, key=key, origin=origin)
        self.name, self.suggestion = name, suggestion


class EngineRegistrationError(ConfigError):
    """An engine cannot be registered (its name or an alias is taken, or it is built in)."""


_lock = threading.Lock()
_ENGINES: dict[str, StoreEngine] = {}
_BY_NAME: dict[str, StoreEngine] = {}  # names and aliases, lower case
_BUILTIN: frozenset[str] = frozenset()


def register_engine(engine: StoreEngine) -> StoreEngine:
    """Register ``engine`` under its name and aliases (case-insensitive) and return it.
    Registering the same object again is harmless; another engine under a taken name or
    alias raises :class:`EngineRegistrationError`."""
    with _lock:
        if _ENGINES.get(engine.name) is engine:
            return engine
        for alias in engine.names():
            taken = _BY_NAME.get(alias.lower())
            if taken is not None:
                what = "built in" if taken.name in _BUILTIN else "registered"
                raise EngineRegistrationError(
                    f"cannot register store engine {engine.name!r}: {alias!r} already names "
                    f"the {what} engine {taken.name!r}; choose another name"
                    + ("" if what == "built in" else " or unregister_engine() it first"))
        _ENGINES[engine.name] = engine
        for alias in engine.names():
            _BY_NAME[alias.lower()] = engine
    return engine


def unregister_engine(name: str) -> None:
    """Remove the engine called ``name`` (built-in engines stay)."""
    key = name.strip().lower()
    with _lock:
        if key in _BUILTIN:
            raise EngineRegistrationError(f"store engine {key!r} is built in and stays registered")
        engine = _ENGINES.pop(key, None)
        if engine is not None:
            for alias in engine.names():
                _BY_NAME.pop(alias.lower(), None)


def store_engines() -> tuple[StoreEngine, ...]:
    """Every registered engine, built-ins first (in registration order)."""
    with _lock:
        return tuple(_ENGINES.values())


def engine_names() -> str:
    """The registered engines' names for a short hint: ``"rocksdb, lmdb or memory"``."""
    names = [e.name for e in store_engines()]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def engine_choices() -> str:
    """The accepted values of ``stores.<store>.factory``, for messages."""
    engines = store_engines()
    names = ", ".join(e.name for e in engines)
    samza = [e.samza_factory.rsplit(".", 1)[-1] for e in engines if e.samza_factory]
    return f"{names} (or Samza's {' / '.join(samza)} class names)" if samza else names


def store_engine(name: str, *, key: str | None = None, origin: str | None = None,
                 what: str = "store engine") -> StoreEngine:
    """The engine registered as ``name`` or one of its aliases (case-insensitive). Raises
    :class:`UnknownEngineError` naming ``key`` (and ``origin``) with the closest name."""
    low = str(name).strip().lower()
    with _lock:
        engine = _BY_NAME.get(low)
        candidates = list(_BY_NAME)
    if engine is not None:
        return engine
    close = difflib.get_close_matches(low, candidates, n=1, cutoff=0.6)
    suggestion = None
    if close:
        suggestion = _BY_NAME[close[0]].name if close[0] in _BY_NAME else close[0]
        if close[0] != suggestion:  # an alias: name it as written in the registration
            suggestion = next((a for a in _BY_NAME[close[0]].names() if a.lower() == close[0]),
                              suggestion)
    hint = f"; did you mean {suggestion}?" if suggestion else ";"
    raise UnknownEngineError(
        f"unknown {what} {name!r}{hint} Expected one of {engine_choices()}; register others "
        f"with weir.stores.engines.registry.register_engine", name=str(name),
        suggestion=suggestion, key=key, origin=origin)


def preload_modules() -> tuple[str, ...]:
    """The modules a container process should import ahead of time for the registered
    engines (the fork server imports them once)."""
    out: list[str] = []
    for engine in store_engines():
        out.extend(m for m in engine.preload if m not in out)
    return tuple(out)


def declare_engine_keys() -> None:
    """Import every registered engine's ``config_module`` so its keys are declared."""
    for engine in store_engines():
        if engine.config_module is not None:
            importlib.import_module(engine.config_module)


# -- the built-in engines ---------------------------------------------------------------------
# Openers and parsers import their engine module on first use.

def _open_rocksdb(spec: "StoreSpec", directory: Path, durability: Durability) -> "BytesEngine":
    from weir.stores.engines.rocksdb import RocksDBEngine, RocksDBOptions
    options = spec.options if spec.options is not None else RocksDBOptions()
    return RocksDBEngine(spec.name, Path(directory), options,
                         logged=durability is Durability.CHANGELOG)


def _rocksdb_options(config: "Config", store: str) -> Any:
    from weir.stores.engines._rocksdb_options import RocksDBOptions
    return RocksDBOptions.from_config(config, store)


def _write_sst_file(path: str, keys: Any, values: Any, options: Any, *, deletes: bool) -> None:
    from weir.stores.engines.rocksdb import RocksDBOptions, write_sst_file
    write_sst_file(path, keys, values, options if options is not None else RocksDBOptions(),
                   deletes=deletes)


def _rocksdb_read_only(spec: "StoreSpec", directory: Path) -> "ReadOnlyFiles":
    from weir.stores.offline import rocksdb_read_only
    return rocksdb_read_only(spec, directory)


def _lmdb_read_only(spec: "StoreSpec", directory: Path) -> "ReadOnlyFiles":
    from weir.stores.offline import lmdb_read_only
    return lmdb_read_only(spec, directory)


def _open_lmdb(spec: "StoreSpec", directory: Path, durability: Durability) -> "BytesEngine":
    import dataclasses

    from weir.stores.engines.lmdb import LMDBEngine, LMDBOptions
    options = spec.options if spec.options is not None else LMDBOptions()
    if durability is Durability.PROCESS:
        options = dataclasses.replace(options, sync=False)
    return LMDBEngine(spec.name, Path(directory), options)


def _lmdb_options(config: "Config", store: str) -> Any:
    from weir.stores.engines._lmdb_options import LMDBOptions
    return LMDBOptions.from_config(config, store)


def _open_memory(spec: "StoreSpec", directory: Path, durability: Durability) -> "BytesEngine":
    from weir.stores.engines.memory import MemoryEngine
    return MemoryEngine(spec.name)


ROCKSDB = register_engine(StoreEngine(
    "rocksdb", _open_rocksdb,
    samza_factory="org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
    capabilities=(Capability.PERSISTENT | Capability.COMMIT_MARKER | Capability.BULK_LOAD
                  | Capability.WRITE_AHEAD_LOG),
    parse_options=_rocksdb_options, config_module="weir.stores.engines._rocksdb_options",
    worker_restore=WorkerRestore.SORTED_FILES, write_sorted_file=_write_sst_file,
    preload=("weir.stores.engines.rocksdb",), file_patterns=("CURRENT", "MANIFEST-*"),
    open_read_only=_rocksdb_read_only,
    description="RocksDB (rocksdict): LSM tree, compressed, the default for large state"))
LMDB = register_engine(StoreEngine(
    "lmdb", _open_lmdb,
    capabilities=Capability.PERSISTENT | Capability.COMMIT_MARKER | Capability.BULK_LOAD,
    parse_options=_lmdb_options, config_module="weir.stores.engines._lmdb_options",
    worker_restore=WorkerRestore.SORTED_RUNS,
    preload=("weir.stores.engines.lmdb",), file_patterns=("data.mdb",),
    open_read_only=_lmdb_read_only,
    description="LMDB: memory-mapped B+tree, fast point reads"))
MEMORY = register_engine(StoreEngine(
    "memory", _open_memory,
    aliases=("inmemory", "in-memory"),
    samza_factory="org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory",
    description="a sorted dict; its data dies with the process"))
_BUILTIN = frozenset(_ENGINES)
