"""Local replicas of state partitions, kept open in reused Python workers.

A replica is one engine per store of one partition of one operator, at a known version. The
checkpoint's versions are the durable state; a replica is a cache of them on an executor's
disk (or in memory), so losing one loses nothing: the next task rebuilds it.

**One replica per worker process.** Spark runs a task on any Python worker of the pool, and
RocksDB allows one open handle per directory, so each worker process keeps its own replica of
each partition it has seen, in its own *slot*::

    <local root>/<operator>-<hash of the checkpoint path>/p<partition>/<slot>/
        SLOT.LOCK        flock of the owning process (released when it dies, however it dies)
        REPLICA.json     the version the engines hold, with each engine's commit marker
        <store>/...      the engines' files

(LMDB allows several processes on one environment, but two workers running attempts of the same
batch at the same time -- a retry next to a speculative copy -- would interleave their writes,
so LMDB replicas use slots too.)

**Adoption.** A worker that has no replica of a partition yet locks the first slot whose owner
is gone (the lock is free) and adopts it when its ``REPLICA.json`` still matches the engines
(every engine shows the commit marker recorded with the version); otherwise it empties the slot.
Slots of dead workers beyond the one adopted are removed. So after a query restart (all-new
Python workers) a partition catches up from its old replica instead of restoring everything.

``REPLICA.json`` is renamed into place without fsync: after a power cut it may be older than
the engines or missing, and the markers catch that (an older file names a marker the engine no
longer shows). RocksDB replicas keep the write-ahead log on (a killed worker's writes survive in
the page cache), LMDB commits without fsync; neither pays a sync per batch.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from weir.stores.filesafety import atomic_write
from weir.stores.engines._base import BytesEngine
from weir.stores.engines.registry import Capability
from weir.stores.errors import StoreLockedError
from weir.stores.layers._columns import columns_writer
from weir.stores.locking import FileLock, acquire_lock

from weir.engine.spark.locations import Location
from weir.engine.spark.providers import StateStoreSpec, state_provider

__all__ = ["Replica", "acquire_replica", "release_replicas", "discard_replicas", "open_replicas",
           "replica_key"]

log = logging.getLogger("weir.spark.replica")

_REPLICA_FILE = "REPLICA.json"
_SLOT_LOCK = "SLOT.LOCK"
_FORMAT = 1
_OPEN: dict[tuple[str, int], "Replica"] = {}
"""This process's replicas: (operator root, partition) -> Replica. Kept across tasks."""


def replica_key(operator_root: Location) -> str:
    """The local directory name of an operator: its name and a hash of its checkpoint path
    (or object store URI)."""
    path = str(operator_root.resolve()) if isinstance(operator_root, Path) else str(operator_root)
    return f"{operator_root.name}-{hashlib.sha1(path.encode()).hexdigest()[:12]}"


class _SlotBusy(Exception):
    pass


def _slot_busy(path: Path, holder: Any) -> Exception:
    return _SlotBusy(str(path))


class Replica:
    """The engines of one partition's stores, at :attr:`version` (see the module docstring).

    ``version`` None means "empty, version unknown": the state of any version before the
    operator's first.
    """

    def __init__(self, operator_root: Location, partition: int,
                 stores: Sequence[StateStoreSpec],
                 directory: Path | None, lock: FileLock | None, incarnation: str = ""):
        self.operator_root = operator_root
        self.partition = partition
        self.incarnation = incarnation
        self.stores = tuple(stores)
        self.directory = directory
        self._lock = lock
        self.engines: dict[str, BytesEngine] = {}
        self.version: int | None = None
        self.rows: dict[str, int] = {s.name: 0 for s in self.stores}
        """Keys per store at :attr:`version` (exact: every version records its counts)."""
        self.meta: dict[str, Any] = {}
        """The header ``meta`` of the version the engines hold (a job task's bookkeeping)."""
        self.adopted = False
        self.closed = False
        self._open_engines()

    @property
    def persistent(self) -> bool:
        return self.directory is not None

    def __repr__(self) -> str:
        return (f"<Replica {self.operator_root.name}#{self.partition} v={self.version} "
                f"{self.directory or 'in memory'}>")

    def _store_dir(self, store: str) -> Path:
        assert self.directory is not None
        return self.directory / "stores" / store

    def _open_engines(self) -> None:
        for spec in self.stores:
            provider = state_provider(spec.provider)
            directory = self._store_dir(spec.name) if self.directory is not None else Path(".")
            if self.directory is not None:
                directory.mkdir(parents=True, exist_ok=True)
            self.engines[spec.name] = provider.open(spec.name, directory, spec.spec)

    # -- the version on disk -----------------------------------------------------------------
    def _markers(self) -> dict[str, str | None]:
        out = {}
        for name, engine in self.engines.items():
            out[name] = engine.commit_marker()
        return out

    def _settle(self) -> None:
        """Make what the engines hold readable by a process that adopts the slot: LMDB
        commits its buffer (no fsync); an engine with a write-ahead log (RocksDB's,
        :attr:`Capability.WRITE_AHEAD_LOG`) already holds it."""
        for spec in self.stores:
            if Capability.WRITE_AHEAD_LOG not in spec.spec.engine.capabilities:
                self.engines[spec.name].flush()

    def mark(self, version: int, rows: Mapping[str, int] | None = None,
             meta: Mapping[str, Any] | None = None) -> None:
        """Record that the engines hold ``version`` (with ``rows`` keys per store and the
        version's ``meta``)."""
        self.version = version
        if rows is not None:
            self.rows = {s.name: int(rows.get(s.name, 0)) for s in self.stores}
        self.meta = dict(meta or {})
        if self.directory is None:
            return
        self._settle()
        body = {"format": _FORMAT, "operator_root": str(self.operator_root),
                "incarnation": self.incarnation,
                "partition": self.partition, "version": version, "rows": self.rows,
                "meta": self.meta,
                "stores": {s.name: {"provider": s.provider, "marker": m}
                           for s, m in zip(self.stores, self._markers().values())}}
        atomic_write(self.directory / _REPLICA_FILE, orjson.dumps(body))

    def _forget_mark(self) -> None:
        if self.directory is not None:
            (self.directory / _REPLICA_FILE).unlink(missing_ok=True)

    def _adoptable_version(self) -> int | None:
        """The version recorded in the slot when the engines still match it, else None."""
        assert self.directory is not None
        try:
            body = orjson.loads((self.directory / _REPLICA_FILE).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return None
        if (body.get("format") != _FORMAT or body.get("operator_root") != str(self.operator_root)
                or body.get("partition") != self.partition
                or body.get("incarnation", "") != self.incarnation):
            return None
        recorded = body.get("stores") or {}
        if set(recorded) != {s.name for s in self.stores}:
            return None
        markers = self._markers()
        for spec in self.stores:
            entry = recorded[spec.name]
            if entry.get("provider") != spec.provider or entry.get("marker") is None:
                return None
            if entry.get("marker") != markers[spec.name]:
                return None
        rows = body.get("rows") or {}
        self.rows = {s.name: int(rows.get(s.name, 0)) for s in self.stores}
        self.meta = dict(body.get("meta") or {})
        return int(body["version"])

    # -- contents ----------------------------------------------------------------------------
    def wipe(self) -> None:
        """Empty every engine (version unknown)."""
        self._forget_mark()
        for engine in self.engines.values():
            engine.close()
        self.engines = {}
        if self.directory is not None:
            shutil.rmtree(self.directory / "stores", ignore_errors=True)
        self._open_engines()
        self.version = None
        self.rows = {s.name: 0 for s in self.stores}
        self.meta = {}

    def apply(self, changes: Mapping[str, tuple[Sequence[bytes], Sequence[bytes | None]]]) -> None:
        """Apply one version's changes (``None`` value = delete) to the engines."""
        for name, (keys, values) in changes.items():
            if keys:
                engine = self.engines[name]
                columns_writer(engine)(list(keys), list(values), deletes=True)

    def load_snapshot(self, contents: Mapping[str, tuple[Sequence[bytes], Sequence[bytes]]]) -> None:
        """Fill the (empty) engines with a snapshot's sorted contents, bulk-loading where the
        engine can."""
        for name, (keys, values) in contents.items():
            if not keys:
                continue
            engine = self.engines[name]
            engine.ingest_sorted(zip(keys, values))

    def export(self) -> dict[str, tuple[list[bytes], list[bytes]]]:
        """Every key and value of every store, in key order (what a snapshot holds)."""
        out = {}
        for name, engine in self.engines.items():
            keys: list[bytes] = []
            values: list[bytes] = []
            with engine.all() as it:
                for k, v in it:
                    keys.append(k)
                    values.append(v)
            out[name] = (keys, values)
        return out

    def stats(self) -> dict[str, int]:
        """Keys (exact) and approximate bytes on disk over every store (metrics)."""
        out = {"rows": sum(self.rows.values()), "bytes": 0}
        for engine in self.engines.values():
            size = engine.approximate_size()
            if size is not None:
                out["bytes"] += int(size)
        return out

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for engine in self.engines.values():
            try:
                engine.close()
            except Exception as exc:  # noqa: BLE001 - closing must release the others and the lock
                log.warning("closing replica engine %s failed (its files were removed?): %s",
                            engine, exc)
        self.engines = {}
        if self._lock is not None:
            self._lock.release()


def _same_stores(a: Sequence[StateStoreSpec], b: Sequence[StateStoreSpec]) -> bool:
    return [(s.name, s.provider) for s in a] == [(s.name, s.provider) for s in b]


def acquire_replica(operator_root: Location, partition: int, stores: Sequence[StateStoreSpec],
                    local_root: str | os.PathLike[str], incarnation: str = "") -> Replica:
    """This process's replica of ``partition``: the one already open, else an adopted slot of
    a dead worker, else a new empty slot. Removes the other dead slots it finds. A replica of
    another ``incarnation`` of the operator's state (rewritten since) is never used."""
    key = (str(operator_root), partition)
    replica = _OPEN.get(key)
    if replica is not None and not replica.closed:
        gone = replica.directory is not None and not (replica.directory / _SLOT_LOCK).exists()
        if (_same_stores(replica.stores, stores) and not gone
                and replica.incarnation == incarnation):
            return replica
        # Another store set, or the slot was deleted under us (the local disk was wiped):
        # this copy is no longer anything the next worker could adopt; start a new one.
        replica.close()
        del _OPEN[key]
        if replica.directory is not None:
            shutil.rmtree(replica.directory, ignore_errors=True)
    persistent = any(state_provider(s.provider).persistent for s in stores)
    if not persistent:
        replica = Replica(operator_root, partition, stores, None, None, incarnation)
        _OPEN[key] = replica
        return replica
    pdir = Path(local_root) / replica_key(operator_root) / f"p{partition}"
    pdir.mkdir(parents=True, exist_ok=True)
    _write_owner(pdir.parent, operator_root)
    adopted: Replica | None = None
    for slot in sorted(p for p in pdir.iterdir() if p.is_dir()):
        try:
            lock = acquire_lock(slot / _SLOT_LOCK, error=_slot_busy,
                                details={"role": "weir-spark-replica"})
        except (_SlotBusy, StoreLockedError):
            continue  # a live worker's replica
        except OSError:
            continue  # removed under us by another cleaner
        if adopted is None:
            try:
                candidate = Replica(operator_root, partition, stores, slot, lock, incarnation)
            except Exception as exc:  # noqa: BLE001 - unreadable leftovers: start afresh
                log.warning("replica slot %s cannot be opened (%s); removing it", slot, exc)
                lock.release()
                shutil.rmtree(slot, ignore_errors=True)
                continue
            version = candidate._adoptable_version()
            if version is None:
                candidate.wipe()
            else:
                candidate.version = version
                candidate.adopted = True
            adopted = candidate
            continue
        shutil.rmtree(slot, ignore_errors=True)  # a dead worker's slot we do not need
        lock.release()
    if adopted is None:
        slot = pdir / f"slot-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        slot.mkdir()
        lock = acquire_lock(slot / _SLOT_LOCK, error=_slot_busy,
                            details={"role": "weir-spark-replica"})
        adopted = Replica(operator_root, partition, stores, slot, lock, incarnation)
    _OPEN[key] = adopted
    return adopted


def _write_owner(directory: Path, operator_root: Location) -> None:
    owner = directory / "OWNER.json"
    if not owner.exists():
        atomic_write(owner, orjson.dumps({"operator_root": str(operator_root)}))


def open_replicas() -> list[Replica]:
    """The replicas this process holds (tests, metrics)."""
    return [r for r in _OPEN.values() if not r.closed]


def release_replicas(operator_root: Location | None = None) -> None:
    """Close this process's replicas (of one operator, or all); their slots stay for the next
    worker to adopt."""
    for key, replica in list(_OPEN.items()):
        if operator_root is None or key[0] == str(operator_root):
            replica.close()
            del _OPEN[key]


def discard_replicas(operator_root: Location) -> None:
    """Close this process's replicas of one operator and delete their slots (an operator whose
    state lives for one task: a batch query's ``transform_with_state``)."""
    import shutil

    for key, replica in list(_OPEN.items()):
        if key[0] == str(operator_root):
            replica.close()
            del _OPEN[key]
            if replica.directory is not None:
                shutil.rmtree(replica.directory, ignore_errors=True)
