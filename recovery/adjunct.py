"""Adjunct data stores on disk: their offset file, the recovery table, versions and pins.

An adjunct store (:mod:`weir.stores.adjunct`) has no changelog: its input stream is its
source, and the store is *idempotent* to replay (a put or delete of the latest value per key,
applied again in offset order, gives the same content). So its local files are usable at
start when they can say which input offset they hold; everything else is read again.

**Layout**: ``<dir>/ADJUNCT-OFFSETS`` (JSON with a CRC, written atomically) and one
sub-directory per version, ``<dir>/v<N>`` (a store that is not versioned has ``v0`` only).
The offset file records the input offset consumed per partition, the version served and the
version being built, and is written at every commit of the writing task and at every version
switch. An in-memory store has no directory.

**Validity** (:func:`check_adjunct_store`) -- a persistent store is

* *none* when its directory holds nothing;
* *invalid* when its offset file is missing, corrupt, names another engine, input or set
  of partitions, is older than ``stores.<s>.adstore.staleness.ms`` (the files' age), when a
  version it names is missing, or when the offset recorded beside the store is no longer in
  the stream (``offset + 1 < oldest``: records after it are gone; ``offset > newest``: the
  stream is shorter than the store, e.g. deleted and created again);
* *valid* otherwise.

**The recovery table** (:func:`decide_adjunct`, docs/ADJUNCT.md, "Recovery"), each cell tested by name in
``tests/recovery/test_adjunct_table.py``:

==============  ===========  ==================================  ==================================
store           found        bootstrap stream                    not bootstrap
==============  ===========  ==================================  ==================================
persistent      none         create, force bootstrap (oldest)    create, continue from checkpoint
persistent      invalid      re-create, force bootstrap          re-create, continue from checkpoint
persistent      valid        continue from the store's offset    continue from the store's offset
in-memory       --           bootstrap again (oldest)            continue from checkpoint
==============  ===========  ==================================  ==================================

*Force bootstrap*: read from the oldest offset to the head before any other input. With a
bootstrap stream every row reads to the head before processing starts; without, the store is
filled alongside processing.

**Versions and pins** (:class:`AdjunctStore`): a versioned store serves version ``N`` and
builds ``N + 1`` beside it; a seal marker makes ``N + 1`` the served version atomically and
drops ``N`` once no reader holds it. A seal that ends a version holding no record switches
nothing (a repeated seal: an operator retrying ``weir log produce --seal``; logged and counted
as ``duplicate_seals``) unless one of its partitions' seals is :attr:`SealKind.EMPTY` (an empty
dataset on purpose). A reader *pins* the served version for the length of one
``process`` call (:meth:`AdjunctStore.pinned`), on any thread, so a call sees one version from
start to end.

Example::

    >>> import tempfile, pathlib
    >>> from weir.stores.config import Config
    >>> from weir.stores.adjunct import AdjunctSpec
    >>> from weir.stores.spec import StoreSpec
    >>> cfg = Config({"stores.m.factory": "memory", "stores.m.key.serde": "string",
    ...               "stores.m.msg.serde": "string", "stores.m.adstore.input": "log.m",
    ...               "stores.m.adstore.versioned": "true"})
    >>> store = AdjunctStore(StoreSpec.from_config(cfg, "m"), AdjunctSpec.from_config(cfg, "m"),
    ...                      None, cfg, partitions=["0"])
    >>> store.open(None)
    >>> store.put("w", "1"); store.view().get("w") is None    # built, not served yet
    True
    >>> store.seal("0", 1); store.view().get("w"), store.serving
    ('1', 1)
    >>> store.close()
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

from weir.stores.adjunct import AdjunctSpec, SealKind
from weir.stores.api import FlushScope
from weir.stores.builder import open_engine, shared_store
from weir.stores.config import Config
from weir.stores.layers.cached import CachedLayer
from weir.stores.layers.readonly import ReadOnlyView
from weir.stores.layers.serialized import SerializedLayer
from weir.stores.serdes import serde_from_name
from weir.stores.spec import STORE_KEY_SERDE, STORE_MSG_SERDE, StoreSpec

from weir.stores.filesafety import atomic_write, fsync_dir
from weir.recovery.bulk import RunBuilder, load_run
from weir.recovery.errors import RecoveryError
from weir.recovery.validity import Found

__all__ = [
    "ADJUNCT_OFFSETS_FILE",
    "AdjunctCheck",
    "AdjunctDecision",
    "AdjunctOffsets",
    "AdjunctStart",
    "AdjunctStore",
    "AdjunctStoreError",
    "VersionedView",
    "check_adjunct_store",
    "decide_adjunct",
    "list_adjunct_stores",
    "pinned",
    "read_adjunct_offsets",
    "write_adjunct_offsets",
]

_log = logging.getLogger("weir.adjunct")

ADJUNCT_OFFSETS_FILE = "ADJUNCT-OFFSETS"
_FORMAT = 1


class AdjunctStoreError(RecoveryError):
    """An adjunct store's files cannot be used as they are (the message says why and what to
    do)."""


# ----------------------------------------------------------------------------------------
# the offset file beside the store
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AdjunctOffsets:
    """What ``ADJUNCT-OFFSETS`` records: the input offset consumed per partition (partition
    ids as strings), the version served (None: nothing sealed yet) and the one being built
    (None: not versioned), and when it was written."""

    store: str
    engine: str
    input: str
    offsets: Mapping[str, int]
    serving: int | None = 0
    building: int | None = None
    written_at_ms: int = 0
    sealed: tuple[str, ...] = ()
    """Partitions whose seal of the version being built was read already (a version is
    served once every partition sealed it)."""
    sealed_empty: tuple[str, ...] = ()
    """Those of ``sealed`` whose seal said the version is empty on purpose
    (:attr:`SealKind.EMPTY`)."""

    def to_bytes(self) -> bytes:
        body = {"format": _FORMAT, "store": self.store, "engine": self.engine,
                "input": self.input, "offsets": dict(self.offsets), "serving": self.serving,
                "building": self.building, "written_at_ms": self.written_at_ms,
                "sealed": list(self.sealed)}
        if self.sealed_empty:
            body["sealed_empty"] = list(self.sealed_empty)
        raw = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        return orjson.dumps({"crc32": zlib.crc32(raw), "body": body},
                            option=orjson.OPT_SORT_KEYS) + b"\n"


def write_adjunct_offsets(directory: Path, offsets: AdjunctOffsets) -> None:
    """Write ``<directory>/ADJUNCT-OFFSETS`` atomically (temp, fsync, rename, fsync dir)."""
    atomic_write(Path(directory) / ADJUNCT_OFFSETS_FILE, offsets.to_bytes())
    fsync_dir(Path(directory))


class _Unreadable(Enum):
    MISSING = "no ADJUNCT-OFFSETS file (never committed, or removed)"
    CORRUPT = "ADJUNCT-OFFSETS is corrupt (bad JSON or checksum)"


def read_adjunct_offsets(directory: Path) -> AdjunctOffsets | _Unreadable:
    """The offset file of the store in ``directory``, or why there is none. Raises
    :class:`AdjunctStoreError` when the path exists but cannot be read as a file (a directory
    in its place, no permission): that is not damage Weir may repair by re-creating the
    store, and nothing is changed."""
    path = Path(directory) / ADJUNCT_OFFSETS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return _Unreadable.MISSING
    except IsADirectoryError:
        raise AdjunctStoreError(
            f"the offset file of the adjunct store in {directory}, {path}, is a directory, not "
            f"the file Weir writes there: something other than Weir put it in the store's "
            f"directory. Nothing was changed. Move it out of {directory} (with the job "
            f"stopped); the store is then rebuilt from its input stream at the next start") \
            from None
    except OSError as exc:
        raise AdjunctStoreError(
            f"cannot read the offset file of the adjunct store in {directory}, {path} "
            f"({exc.strerror}); nothing was changed. Make it readable by the job's user, or "
            f"move it out of {directory} (the store is then rebuilt from its input stream at "
            f"the next start)") from None
    try:
        doc = orjson.loads(raw)
        body = doc["body"]
        if zlib.crc32(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)) != doc["crc32"]:
            return _Unreadable.CORRUPT
        if body.get("format") != _FORMAT:
            return _Unreadable.CORRUPT
        return AdjunctOffsets(body["store"], body["engine"], body["input"],
                              {str(k): int(v) for k, v in body["offsets"].items()},
                              body["serving"], body["building"], int(body["written_at_ms"]),
                              tuple(str(p) for p in body.get("sealed", ())),
                              tuple(str(p) for p in body.get("sealed_empty", ())))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return _Unreadable.CORRUPT


def list_adjunct_stores(base: Path) -> list[tuple[Path, AdjunctOffsets | str]]:
    """Every adjunct store under a store base directory (``<base>/<store>/<owner>``) with
    what its offset file records (versions served and built, offsets), or why it cannot be
    read: for tools that show a job's state."""
    out: list[tuple[Path, AdjunctOffsets | str]] = []
    base = Path(base)
    if not base.is_dir():
        return out
    for path in sorted(base.glob(f"*/*/{ADJUNCT_OFFSETS_FILE}")):
        try:
            recorded = read_adjunct_offsets(path.parent)
        except AdjunctStoreError as exc:
            out.append((path.parent, str(exc)))
            continue
        out.append((path.parent, recorded.value if isinstance(recorded, _Unreadable)
                    else recorded))
    return out


# ----------------------------------------------------------------------------------------
# validity and the recovery table
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AdjunctCheck:
    """What a start found of a persistent adjunct store: none / invalid / valid, why, and
    (valid only) the offsets and versions recorded beside it."""

    found: Found
    reason: str
    recorded: AdjunctOffsets | None = None


def check_adjunct_store(directory: Path, *, spec: StoreSpec, adjunct: AdjunctSpec,
                        partitions: Iterable[str], bounds: Mapping[str, tuple[int, int | None]],
                        now_ms: int | None = None) -> AdjunctCheck:
    """The validity of the persistent adjunct store in ``directory`` (see the module
    docstring). ``partitions`` are the input partitions the store is fed from (as strings);
    ``bounds`` each one's ``(oldest, newest)`` offsets (newest None: empty)."""
    directory = Path(directory)
    if not directory.is_dir() or not any(directory.iterdir()):
        return AdjunctCheck(Found.NONE, "no local store (a new store, or its directory is gone)")
    recorded = read_adjunct_offsets(directory)
    if isinstance(recorded, _Unreadable):
        return AdjunctCheck(Found.INVALID, recorded.value)
    input_name = ".".join(adjunct.input)
    if recorded.engine != spec.engine.name:
        return AdjunctCheck(Found.INVALID, f"its files were written by the {recorded.engine} "
                                           f"engine, the store now uses {spec.engine.name}")
    if recorded.input != input_name:
        return AdjunctCheck(Found.INVALID, f"it was filled from {recorded.input}, the store "
                                           f"now reads {input_name}")
    wanted = sorted(str(p) for p in partitions)
    if sorted(recorded.offsets) != wanted:
        return AdjunctCheck(Found.INVALID, f"it holds partitions {sorted(recorded.offsets)} of "
                                           f"{input_name}, the store now reads {wanted}")
    path = directory / ADJUNCT_OFFSETS_FILE
    now_ms = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    age = now_ms - int(path.stat().st_mtime * 1000)
    if age >= adjunct.staleness_ms:
        return AdjunctCheck(Found.INVALID, f"it is stale: ADJUNCT-OFFSETS written {age / 1000:.0f}"
                                           f" s ago, limit {adjunct.staleness_ms / 1000:.0f} s "
                                           f"(stores.{spec.name}.adstore.staleness.ms)")
    for version in (recorded.serving, recorded.building):
        if version is not None and spec.persistent and not (directory / f"v{version}").is_dir():
            return AdjunctCheck(Found.INVALID, f"version {version} it names is missing")
    for partition, offset in sorted(recorded.offsets.items()):
        oldest, newest = bounds.get(partition, (0, None))
        if offset + 1 < oldest:
            return AdjunctCheck(Found.INVALID,
                                f"it holds {input_name} partition {partition} up to offset "
                                f"{offset}, but the stream now starts at {oldest}: the records "
                                f"in between are gone")
        if offset >= 0 and (newest is None or offset > newest):
            return AdjunctCheck(Found.INVALID,
                                f"it holds {input_name} partition {partition} up to offset "
                                f"{offset}, past the stream's newest offset {newest} (the stream "
                                f"was deleted and created again, or cut)")
    return AdjunctCheck(Found.VALID, "offsets " + ", ".join(
        f"#{p}={o}" for p, o in sorted(recorded.offsets.items())), recorded)


class AdjunctStart(Enum):
    """Where an adjunct store's input is read from at start."""

    OLDEST = "oldest"
    """The partition's oldest offset: the store is (re-)built from the whole stream."""
    STORE_OFFSET = "store-offset"
    """One past the offset recorded beside the store."""
    CHECKPOINT = "checkpoint"
    """One past the task's checkpointed offset (else the stream's ``samza.offset.default``)."""


@dataclass(frozen=True)
class AdjunctDecision:
    """One cell of the recovery table: re-create the local files first, where to start
    reading, and whether the stream is read to its head before any other input."""

    recreate: bool
    start: AdjunctStart
    blocking: bool


def decide_adjunct(*, persistent: bool, found: Found | None, bootstrap: bool) -> AdjunctDecision:
    """The recovery table of the module docstring."""
    if not persistent:
        if bootstrap:
            return AdjunctDecision(False, AdjunctStart.OLDEST, True)
        return AdjunctDecision(False, AdjunctStart.CHECKPOINT, False)
    if found is Found.VALID:
        return AdjunctDecision(False, AdjunctStart.STORE_OFFSET, bootstrap)
    if found is Found.NONE:
        return AdjunctDecision(False, AdjunctStart.OLDEST if bootstrap else
                               AdjunctStart.CHECKPOINT, bootstrap)
    if found is Found.INVALID:
        return AdjunctDecision(True, AdjunctStart.OLDEST if bootstrap else
                               AdjunctStart.CHECKPOINT, bootstrap)
    raise ValueError(f"a persistent adjunct store needs what was found (none, invalid, valid), "
                     f"got {found!r}")


# ----------------------------------------------------------------------------------------
# the store: versions, pins, writes
# ----------------------------------------------------------------------------------------

class _Version:
    """One open version: its engine, the typed store over it, the readers holding it."""

    __slots__ = ("number", "engine", "typed", "directory", "refs", "retired")

    def __init__(self, number: int, engine: Any, typed: Any, directory: Path | None):
        self.number, self.engine, self.typed, self.directory = number, engine, typed, directory
        self.refs = 0
        self.retired = False


_PINS: ContextVar[dict[int, _Version] | None] = ContextVar("weir_adjunct_pins", default=None)
"""``{id(AdjunctStore): _Version}`` pinned by the running ``process`` call: per thread, and
per asyncio task (a coroutine task's calls interleave on one thread)."""


@dataclass
class _Counters:
    applied: int = 0
    deleted: int = 0
    seals: int = 0
    duplicate_seals: int = 0
    rejected: int = 0
    bulk_records: int = 0


class AdjunctStore:
    """One adjunct store (a task's, or a container's broadcast store): its versions, the
    input offsets applied to it, its offset file.

    Writes (:meth:`put`, :meth:`delete`, :meth:`load_bytes`, :meth:`seal`) come from one
    writer (the designated task). Readers use :meth:`view` (read-only; writes raise
    ``ReadOnlyStoreError``). ``concurrent``: readers and the writer may run on different
    threads at once (a task thread pool): the typed stores are then locked per operation.
    """

    def __init__(self, spec: StoreSpec, adjunct: AdjunctSpec, directory: Path | None,
                 config: Config, *, partitions: Iterable[str], concurrent: bool = False):
        self.spec = spec
        self.adjunct = adjunct
        self.name = spec.name
        self.directory = Path(directory) if directory is not None and spec.persistent else None
        self.config = config
        self.partitions = sorted(str(p) for p in partitions)
        self.concurrent = concurrent
        self.offsets: dict[str, int] = {}
        self.counters = _Counters()
        self._lock = threading.Lock()
        self._key_serde = serde_from_name(spec.key_serde, config,
                                          key=STORE_KEY_SERDE.key(store=spec.name))
        self._value_serde = serde_from_name(spec.value_serde, config,
                                            key=STORE_MSG_SERDE.key(store=spec.name))
        self._serving: _Version | None = None
        self._building: _Version | None = None
        self._closed = False
        self._dirty = False
        self._sealed: set[str] = set()
        self._sealed_empty: set[str] = set()

    # -- life ------------------------------------------------------------------------------
    def open(self, recorded: AdjunctOffsets | None, *, recreate: bool = False) -> None:
        """Open the versions ``recorded`` names (None: a new, empty store); ``recreate``
        removes the local files first (they were found invalid)."""
        if self.directory is not None:
            if recreate and self.directory.exists():
                _log.info("adjunct store '%s': removing its invalid files in %s", self.name,
                          self.directory)
                shutil.rmtree(self.directory)
            self.directory.mkdir(parents=True, exist_ok=True)
        if recorded is None:
            self.offsets = {}
            self._sealed, self._sealed_empty = set(), set()
            serving, building = (None, 1) if self.adjunct.versioned else (0, None)
        else:
            self.offsets = dict(recorded.offsets)
            self._sealed = set(recorded.sealed)
            self._sealed_empty = set(recorded.sealed_empty)
            serving, building = recorded.serving, recorded.building
        if self.directory is not None:  # versions the offset file does not name: leftovers
            keep = {f"v{v}" for v in (serving, building) if v is not None}
            for child in self.directory.iterdir():
                if child.is_dir() and child.name.startswith("v") and child.name not in keep:
                    shutil.rmtree(child)
        self._serving = self._open_version(serving) if serving is not None else None
        self._building = self._open_version(building) if building is not None else None
        if recorded is None:
            self.record()

    def _open_version(self, number: int) -> _Version:
        directory = self.directory / f"v{number}" if self.directory is not None else None
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        engine = open_engine(self.spec, directory or Path("."), logged=False)
        typed: Any = SerializedLayer(engine, self._key_serde, self._value_serde)
        if self.spec.object_cache_size > 0:
            typed = CachedLayer(typed, capacity=self.spec.object_cache_size,
                                write_batch_size=self.spec.write_batch_size)
        if self.concurrent:
            typed = shared_store(typed)
        return _Version(number, engine, typed, directory)

    def close(self) -> None:
        """Flush, record the offsets, close every version. Runs once."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            for version in (self._serving, self._building):
                if version is not None:
                    version.typed.close()

    # -- reading ---------------------------------------------------------------------------
    @property
    def serving(self) -> int | None:
        """The version served to readers (None: a versioned store before its first seal)."""
        version = self._serving
        return version.number if version is not None else None

    @property
    def building(self) -> int | None:
        version = self._building
        return version.number if version is not None else None

    def view(self) -> Any:
        """What a task gets through ``context.store(name)``: reads of the served version
        (the pinned one inside a ``process`` call), writes raise ``ReadOnlyStoreError``."""
        if self.adjunct.versioned:
            return VersionedView(self)
        assert self._serving is not None
        return _ServedView(self._serving.typed)

    def current(self) -> Any:
        """The typed store a read uses now: the version pinned by this thread, else the
        served one (an empty store before the first seal)."""
        pins = _PINS.get()
        if pins:
            version = pins.get(id(self))
            if version is not None:
                return version.typed
        version = self._serving
        if version is None:
            return _EMPTY
        return version.typed

    def pin(self) -> _Version | None:
        with self._lock:
            version = self._serving
            if version is not None:
                version.refs += 1
            return version

    def unpin(self, version: _Version | None) -> None:
        if version is None:
            return
        with self._lock:
            version.refs -= 1
            drop = version.retired and version.refs == 0
        if drop:
            self._drop(version)

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Hold the served version for this thread (or asyncio task) until the block ends
        (one ``process`` call): a switch meanwhile is seen by the next call."""
        with pinned(self):
            yield

    # -- writing ---------------------------------------------------------------------------
    def _target(self) -> Any:
        version = self._building if self.adjunct.versioned else self._serving
        assert version is not None
        return version.typed

    def put(self, key: Any, value: Any) -> None:
        self._target().put(key, value)
        self.counters.applied += 1
        self._dirty = True

    def delete(self, key: Any) -> None:
        self._target().delete(key)
        self.counters.deleted += 1
        self._dirty = True

    def applied(self, partition: str, offset: int) -> None:
        """Record that ``offset`` of ``partition`` is in the store (written at next flush)."""
        self.offsets[str(partition)] = offset
        self._dirty = True

    def load_bytes(self, builder: RunBuilder, *, empty: bool) -> None:
        """Bulk-load a de-duplicated run of serialized pairs (a bootstrap) into the version
        being written, below serdes and cache (SST ingest for RocksDB, ``putmulti`` for
        LMDB). Only before readers exist: the cache of the version must be empty."""
        version = self._building if self.adjunct.versioned else self._serving
        assert version is not None
        records = len(builder)
        keys, values, deletes = builder.take(drop_tombstones=empty)
        load_run(version.engine, keys, values, deletes=deletes)
        self.counters.bulk_records += records
        self._dirty = True

    def seal(self, partition: str, offset: int, kind: SealKind = SealKind.DATASET) -> None:
        """A seal marker of ``kind`` at ``offset`` of ``partition``. Once every partition of
        the store sealed the version being built: serve it, start the next one, record it, and
        drop the old version once no reader holds it -- unless the version holds no record
        and no partition's seal said :attr:`SealKind.EMPTY`: then it was a repeated seal (an
        operator's retry), the served version stays, and the next records keep building the
        next one. A store that is not versioned only records the offset."""
        self.applied(partition, offset)
        if not self.adjunct.versioned:
            return
        self._sealed.add(str(partition))
        if kind is SealKind.EMPTY:
            self._sealed_empty.add(str(partition))
        if not self._sealed.issuperset(self.partitions):
            self.record()  # this partition's seal must survive a restart
            return
        empty_on_purpose = bool(self._sealed_empty)
        self._sealed, self._sealed_empty = set(), set()
        new = self._building
        assert new is not None
        new.typed.flush()
        new.engine.flush()
        if not empty_on_purpose and _holds_nothing(new.engine):
            self.counters.duplicate_seals += 1
            self.record()
            served = (f"version {self.serving} stays served" if self.serving is not None
                      else "the store still serves nothing (no version sealed yet)")
            _log.warning("adjunct store '%s': the seal at %s#%s offset %d ends version %d, "
                         "which holds no record: taken for a repeated seal (a retried `weir log "
                         "produce --seal`), %s. To serve an empty dataset on purpose, seal it "
                         "with `weir log produce %s --seal-empty`", self.name,
                         ".".join(self.adjunct.input), partition, offset, new.number, served,
                         self.adjunct.input[1])
            return
        following = self._open_version(new.number + 1)
        with self._lock:
            old, self._serving, self._building = self._serving, new, following
            drop = old is not None and old.refs == 0
            if old is not None:
                old.retired = True
        self.counters.seals += 1
        self.record()  # the offset file names the new versions before the old one goes
        _log.info("adjunct store '%s': switched to version %d at %s#%s offset %d", self.name,
                  new.number, ".".join(self.adjunct.input), partition, offset)
        if drop:
            self._drop(old)

    def _drop(self, version: _Version) -> None:
        try:
            version.typed.close()
        finally:
            if version.directory is not None:
                shutil.rmtree(version.directory, ignore_errors=True)

    # -- durability ------------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        """Flush the versions and record the offsets beside them (the writer's commit); always
        durably, whatever ``scope`` asks (an adjunct store has no changelog to catch up from)."""
        if self._closed:
            return
        for version in (self._serving, self._building):
            if version is not None:
                version.typed.flush()
        if self._dirty:
            self.record()

    def record(self) -> None:
        """Write the offset file (persistent stores): offsets, served and built versions."""
        self._dirty = False
        if self.directory is None:
            return
        for version in (self._serving, self._building):
            if version is not None:
                version.engine.flush()
        write_adjunct_offsets(self.directory, AdjunctOffsets(
            self.name, self.spec.engine.name, ".".join(self.adjunct.input),
            {p: self.offsets.get(p, -1) for p in self.partitions}, self.serving, self.building,
            time.time_ns() // 1_000_000, tuple(sorted(self._sealed)),
            tuple(sorted(self._sealed_empty))))

    def describe(self) -> dict[str, Any]:
        """Plain data for status and tools: versions, offsets, counters."""
        return {"store": self.name, "input": ".".join(self.adjunct.input),
                "serving": self.serving, "building": self.building,
                "offsets": dict(self.offsets), "applied": self.counters.applied,
                "deleted": self.counters.deleted, "seals": self.counters.seals,
                "duplicate_seals": self.counters.duplicate_seals,
                "rejected": self.counters.rejected,
                "bulk_records": self.counters.bulk_records}

    def __repr__(self) -> str:
        return (f"<AdjunctStore {self.name!r} serving={self.serving} building={self.building} "
                f"dir={self.directory}>")


def _holds_nothing(engine: Any) -> bool:
    """Whether a version's engine holds no key."""
    with engine.all() as items:
        return next(iter(items), None) is None


@contextmanager
def pinned(stores: "AdjunctStore | Iterable[AdjunctStore]") -> Iterator[None]:
    """Pin the served version of each of ``stores`` until the block ends: every read of
    theirs in the block (on this thread or asyncio task) sees that version. Nested blocks
    keep the outer pins."""
    stores = (stores,) if isinstance(stores, AdjunctStore) else tuple(stores)
    outer = _PINS.get()
    held = [(s, s.pin()) for s in stores if not outer or id(s) not in outer]
    if not held:
        yield
        return
    pins = dict(outer) if outer else {}
    for store, version in held:
        pins[id(store)] = version
    token = _PINS.set(pins)
    try:
        yield
    finally:
        _PINS.reset(token)
        for store, version in held:
            store.unpin(version)


class _Empty:
    """The served content of a versioned store before its first seal: nothing."""

    name = "(no version yet)"
    closed = False

    def get(self, key: Any) -> Any:
        return None

    def get_all(self, keys: Iterable[Any]) -> dict:
        return {}

    def range(self, lo: Any, hi: Any) -> Any:
        return _EmptyIterator()

    def prefix(self, prefix: Any) -> Any:
        return _EmptyIterator()

    def all(self) -> Any:
        return _EmptyIterator()

    def snapshot(self, lo: Any = None, hi: Any = None) -> Any:
        return _EmptyIterator()


class _EmptyIterator:
    """Yields nothing; holds nothing, so closing only marks it ``closed``."""

    def __init__(self) -> None:
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __next__(self) -> Any:
        raise StopIteration

    def __enter__(self) -> "_EmptyIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def close(self) -> None:
        self.closed = True


_EMPTY = _Empty()


class _ServedView(ReadOnlyView):
    """The read-only view of a store that is not versioned, with ``get`` and ``get_all``
    bound straight to the store (one call less on the lookup path of a join); after
    :meth:`close` they go through the view's checks again."""

    def __init__(self, store: Any):
        super().__init__(store)
        self.get = store.get
        self.get_all = store.get_all

    def close(self) -> None:
        super().close()
        self.__dict__.pop("get", None)
        self.__dict__.pop("get_all", None)


class VersionedView(ReadOnlyView):
    """The read-only view of a versioned adjunct store: each read goes to the version this
    thread pinned (inside a ``process`` call), else to the served one."""

    def __init__(self, store: AdjunctStore):
        self.name = store.name
        self._adjunct = store
        self._closed = False

    @property
    def _store(self) -> Any:  # ReadOnlyView's reads go through this
        return self._adjunct.current()

    @property
    def version(self) -> int | None:
        """The version reads see now (pinned, else served)."""
        pins = _PINS.get() or {}
        held = pins.get(id(self._adjunct))
        return held.number if held is not None else self._adjunct.serving

