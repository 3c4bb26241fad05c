"""The adjunct stores of one container: laid out, decided, opened, bootstrapped.

:class:`AdjunctStorage` runs at container start, after the logged stores were restored and
before any task is initialized (Samza's order: stores, then side inputs, then tasks):

1. **layout**: a broadcast binding gives one store per container, in
   ``<logged base>/<store>/broadcast-container-<id>``, written by the container's first task
   (in name order) that has the stream -- the *designated writer* -- and read by all; a
   partitioned binding gives one store per task, in ``<logged base>/<store>/<task>`` (Samza
   keeps side-input stores under the logged base too);
2. **decide** each store by the recovery table of :mod:`weir.recovery.adjunct` (found none /
   invalid / valid x bootstrap or not, persistent or in memory);
3. **bootstrap**: a store of a bootstrap stream is read from its start offset to the
   partitions' heads *now*, before any task sees a message. Where the store keeps the
   stream's bytes as they are (default extractor, no projection, not versioned, the same
   serdes) this is restore's bulk path: the file log's segments parsed straight into one
   de-duplicated run, bulk-loaded below serdes and cache (RocksDB SST ingest, LMDB
   ``putmulti``); otherwise record by record through the extractor;
4. **starting offsets** of the adjunct partitions for the consumers: one past what was read,
   one past the offset recorded beside the store, or (table) the task's checkpoint.

After the start, changes keep coming through the consumers and the tasks' managers apply
them (:mod:`weir.engine.adjunct.manager`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from weir.recovery.adjunct import (AdjunctDecision, AdjunctStart, AdjunctStore,
                                   check_adjunct_store, decide_adjunct)
from weir.recovery.bulk import DEFAULT_BUDGET_BYTES, RunBuilder
from weir.recovery.checkpoint import Checkpoint
from weir.recovery.storage import task_directory_name
from weir.recovery.validity import Found
from weir.stores.changelog import NO_BULK_READER
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.spec import StoreSpec

from weir.engine.adjunct.extract import EMPTY_SEAL_KEY_BYTES, SEAL_KEY_BYTES, make_extractor
from weir.engine.adjunct.manager import AdjunctDataStoreManager, Feed
from weir.engine.adjunct.settings import JOB_ADSTORE_MANAGER_FACTORY, AdjunctBinding, AdjunctSettings
from weir.engine.config.job import JobConfig, StoreBase
from weir.engine.errors import SystemError_
from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition, TaskName
from weir.engine.systems.changelog import SystemChangelogSource
from weir.engine.systems.registry import SystemRegistry, _import_target

__all__ = ["AdjunctStorage", "AdjunctTaskStorage", "BootstrapStats"]

log = logging.getLogger("weir.adjunct")

_TO_HEAD = (1 << 63) - 1
"""The end of a bootstrap read: whatever the partition holds when the read gets there."""


class BootstrapStats:
    """What one store's start did: the decision, records read, seconds."""

    __slots__ = ("store", "owner", "decision", "reason", "records", "seconds", "bulk")

    def __init__(self, store: str, owner: str, decision: AdjunctDecision, reason: str):
        self.store, self.owner, self.decision, self.reason = store, owner, decision, reason
        self.records = 0
        self.seconds = 0.0
        self.bulk = False

    def line(self) -> str:
        rate = self.records / self.seconds if self.seconds > 0 else 0.0
        how = "bulk" if self.bulk else "record by record"
        return (f"adjunct store '{self.store}' ({self.owner}): {self.reason}; "
                f"{self.decision.start.value}"
                f"{', re-created' if self.decision.recreate else ''}; "
                + (f"bootstrapped {self.records:,} records {how} in {self.seconds:.2f} s "
                   f"({rate:,.0f} records/s)" if self.decision.blocking else
                   "filled alongside processing"))


class _Unit:
    """One adjunct store of the container and who reads and writes it."""

    def __init__(self, binding: AdjunctBinding, spec: StoreSpec, store: AdjunctStore,
                 ssps: list[SystemStreamPartition], readers: list[TaskName], writer: TaskName):
        self.binding, self.spec, self.store = binding, spec, store
        self.ssps, self.readers, self.writer = ssps, readers, writer
        self.extractor: Any = None
        self.starts: dict[SystemStreamPartition, int] = {}
        self.stats: BootstrapStats | None = None


class AdjunctStorage:
    """Every adjunct store of one container (see the module docstring)."""

    def __init__(self, settings: AdjunctSettings, specs: Mapping[str, StoreSpec],
                 tasks: Mapping[TaskName, Any], container_id: str, job: JobConfig,
                 registry: SystemRegistry, config: Config, *, concurrent: bool = False,
                 budget_bytes: int = DEFAULT_BUDGET_BYTES):
        self.settings = settings
        self.registry = registry
        self.config = config
        self.container_id = str(container_id)
        self.budget_bytes = budget_bytes
        self.units: list[_Unit] = []
        base = job.base_dir(StoreBase.LOGGED)
        for binding in settings.bindings:
            spec = specs[binding.spec.store]
            ss = binding.stream
            owners = {name: sorted(s for s in task.ssps if s.system_stream == ss)
                      for name, task in sorted(tasks.items())}
            owners = {name: ssps for name, ssps in owners.items() if ssps}
            if not owners:
                continue
            if binding.broadcast:
                ssps = sorted({s for ssps in owners.values() for s in ssps})
                directory = base / spec.name / f"broadcast-container-{self.container_id}"
                store = AdjunctStore(spec, binding.spec, directory, config,
                                     partitions=[str(s.partition) for s in ssps],
                                     concurrent=concurrent)
                self.units.append(_Unit(binding, spec, store, ssps, list(owners), min(owners)))
            else:
                for name, ssps in owners.items():
                    directory = base / spec.name / task_directory_name(name)
                    store = AdjunctStore(spec, binding.spec, directory, config,
                                         partitions=[str(s.partition) for s in ssps],
                                         concurrent=concurrent)
                    self.units.append(_Unit(binding, spec, store, ssps, [name], name))
        self._opened: list[AdjunctStore] = []

    # -- start -----------------------------------------------------------------------------
    def open(self, last: Mapping[TaskName, Checkpoint | None]) -> list[BootstrapStats]:
        """Decide, open and (bootstrap streams) fill every store; see the module docstring."""
        out = []
        try:
            for unit in self.units:
                unit.extractor = make_extractor(unit.binding.spec, self.config)
                out.append(self._open_unit(unit, last))
        except BaseException:
            self.close()
            raise
        return out

    def _metadata(self, ssps: list[SystemStreamPartition]) -> dict[SystemStreamPartition, Any]:
        return self.registry.metadata(ssps)

    def _open_unit(self, unit: _Unit, last: Mapping[TaskName, Checkpoint | None]
                   ) -> BootstrapStats:
        store, spec = unit.store, unit.spec
        # Partition metadata only where it decides something: the file log finds a
        # partition's newest offset by scanning its active segment, which costs as much as
        # reading it; a bootstrap reads to the head without it.
        if spec.persistent:
            directory = store.directory
            metadata = {}
            if directory is not None and directory.is_dir() and any(directory.iterdir()):
                metadata = self._metadata(unit.ssps)
            bounds = {str(s.partition): (md.oldest, None if md.is_empty else md.newest)
                      for s, md in metadata.items()}
            check = check_adjunct_store(directory, spec=spec, adjunct=unit.binding.spec,
                                        partitions=[str(s.partition) for s in unit.ssps],
                                        bounds=bounds)
            found, reason, recorded = check.found, check.reason, check.recorded
        else:
            found, reason, recorded = None, "in memory", None
        decision = decide_adjunct(persistent=spec.persistent, found=found,
                                  bootstrap=unit.binding.bootstrap)
        owner = ("broadcast, written by " + unit.writer if unit.binding.broadcast
                 else f"task '{unit.writer}'")
        stats = unit.stats = BootstrapStats(spec.name, owner, decision, reason)
        store.open(recorded if found is Found.VALID else None, recreate=decision.recreate)
        self._opened.append(store)
        starts: dict[SystemStreamPartition, int | None]
        if decision.start is AdjunctStart.STORE_OFFSET:
            starts = {s: store.offsets.get(str(s.partition), -1) + 1 for s in unit.ssps}
        elif decision.start is AdjunctStart.OLDEST:
            starts = {s: 0 for s in unit.ssps}  # below the oldest offset: from the oldest
        else:
            starts = self._checkpointed(unit, last)
        if decision.blocking:
            started = time.perf_counter()
            for ssp in unit.ssps:
                start = starts.get(ssp)
                if start is None:  # checkpoint row without a checkpoint: the whole stream
                    start = 0
                read, head = self._bootstrap(unit, ssp, start)
                stats.records += read
                starts[ssp] = head + 1 if head is not None else self._upcoming(ssp, start)
            store.flush()
            stats.seconds = time.perf_counter() - started
        unit.starts = {s: o for s, o in starts.items() if o is not None}
        log.info("%s", stats.line())
        return stats

    def _upcoming(self, ssp: SystemStreamPartition, start: int) -> int:
        """Where the consumers start on a partition a bootstrap found nothing in from
        ``start``: its upcoming offset when that is later."""
        md = self._metadata([ssp]).get(ssp)
        return max(start, md.upcoming) if md is not None else start

    def _checkpointed(self, unit: _Unit, last: Mapping[TaskName, Checkpoint | None]
                      ) -> dict[SystemStreamPartition, int | None]:
        """One past the writer's checkpointed offsets (None: the consumers' default)."""
        cp = last.get(unit.writer)
        done = cp.input_offsets if cp is not None else {}
        return {s: (done[s] + 1 if s in done else None) for s in unit.ssps}

    def _bootstrap(self, unit: _Unit, ssp: SystemStreamPartition, start: int
                   ) -> tuple[int, int | None]:
        """Read ``ssp`` from ``start`` to its head into the unit's store; returns the records
        read and the last offset read (None: nothing there)."""
        source = SystemChangelogSource(self.registry, ssp)
        reader = source.bulk_reader()
        if reader is NO_BULK_READER:  # not the file log: bounded by the partition's metadata
            md = self._metadata([ssp]).get(ssp)
            if md is None or md.is_empty or start > md.newest:
                return 0, None
            start, end = max(start, md.oldest), md.newest
            if self._bulk_ok(unit):
                unit.stats.bulk = True
                return self._bulk(unit, ssp, source.read_batches(start, end), source, start,
                                  end)
            return self._records(unit, ssp, source, start, end)
        # The file log: its bulk reader reads from the oldest offset at or after ``start`` to
        # whatever the partition holds when it gets there, without a metadata scan first.
        if self._bulk_ok(unit):
            unit.stats.bulk = True
            pairs: dict = {}
            return self._bulk(unit, ssp, reader(start, _TO_HEAD, into=pairs), source, start,
                              _TO_HEAD, pairs=pairs)
        return self._records(unit, ssp, source, start, _TO_HEAD)

    def _records(self, unit: _Unit, ssp: SystemStreamPartition, source: SystemChangelogSource,
                 start: int, end: int) -> tuple[int, int | None]:
        """Read ``[start, end]`` record by record through the extractor (as the task's
        manager applies messages while running); returns records read and the last offset."""
        serdes = self.registry.serdes_for(ssp.system_stream)
        manager = AdjunctDataStoreManager(unit.writer, {ssp: [Feed(unit.store, unit.extractor,
                                                                   True)]}, {})
        if end == _TO_HEAD:
            md = self._metadata([ssp]).get(ssp)
            if md is None or md.is_empty:
                return 0, None
            end = md.newest
        records = 0
        last = None
        for offset, key, value in source.read(start, end):
            manager.apply(serdes.deserialize(IncomingMessageEnvelope(ssp, offset, key, value)))
            records += 1
            last = offset
        return records, last

    def _bulk_ok(self, unit: _Unit) -> bool:
        adjunct, spec = unit.binding.spec, unit.spec
        if adjunct.extractor_factory or adjunct.projection or adjunct.versioned:
            return False
        serdes = self.registry.serdes_for(unit.binding.stream)
        return (_same_serde(serdes.key_serde_name, spec.key_serde)
                and _same_serde(serdes.msg_serde_name, spec.value_serde))

    def _bulk(self, unit: _Unit, ssp: SystemStreamPartition, batches: Any,
              source: SystemChangelogSource, start: int, end: int, *,
              pairs: dict | None = None) -> tuple[int, int | None]:
        """Collect ``batches`` into de-duplicated runs and bulk-load them (see the module
        docstring); ``pairs`` is the dict the batches' reader stores into, when it does.
        Returns records read and the last offset read."""
        store = unit.store
        builder = RunBuilder()
        if pairs is not None:
            builder.pairs = pairs
        records = 0
        head = None
        empty = not store.offsets or all(o < 0 for o in store.offsets.values())
        partition = str(ssp.partition)
        try:
            for batch in batches:
                if batch.pairs is not builder.pairs:
                    builder.add(batch)
                else:
                    builder.pending_bytes += batch.nbytes
                records += batch.records
                head = batch.last
                if builder.pending_bytes >= self.budget_bytes:
                    _drop_seals(builder.pairs)
                    store.load_bytes(builder, empty=empty)
                    empty = False
                store.applied(partition, head)
        except SystemError_:
            # The bulk reader takes keyed records only (it refuses a record without key):
            # what it collected is loaded, and the rest is read record by record, where a
            # message without key is rejected with its offset (or dropped and counted).
            builder.pairs.pop(None, None)
            _drop_seals(builder.pairs)
            if len(builder):
                store.load_bytes(builder, empty=empty)
            first = head + 1 if head is not None else start
            more, last = self._records(unit, ssp, source, first, end)
            return records + more, last if last is not None else head
        _drop_seals(builder.pairs)  # a seal means nothing to this store
        if len(builder):
            store.load_bytes(builder, empty=empty)
        return records, head

    # -- what the tasks get ----------------------------------------------------------------
    def starts(self, task: TaskName) -> dict[SystemStreamPartition, int]:
        """Starting offsets of ``task``'s adjunct partitions decided here (others: the
        consumers' usual starting offsets)."""
        out = {}
        for unit in self.units:
            if task in unit.readers:
                out.update(unit.starts)
        return out

    def manager(self, task: TaskName) -> Any | None:
        """``task``'s adjunct data store manager (None: the task has no adjunct store)."""
        feeds: dict[SystemStreamPartition, list[Feed]] = {}
        views: dict[str, Any] = {}
        for unit in self.units:
            if task not in unit.readers:
                continue
            views[unit.spec.name] = unit.store.view()
            for ssp in unit.ssps:
                feeds.setdefault(ssp, []).append(Feed(unit.store, unit.extractor,
                                                      unit.writer == task))
        if not feeds:
            return None
        factory_name = self.settings.manager_factory
        if factory_name is None:
            return AdjunctDataStoreManager(task, feeds, views)
        key = JOB_ADSTORE_MANAGER_FACTORY.name
        try:
            factory = _import_target(factory_name)
            return factory(task, feeds, views)
        except Exception as exc:  # noqa: BLE001 - user code: the key names it
            raise ConfigError(f"cannot build the adjunct store manager {factory_name!r}: "
                              f"{type(exc).__name__}: {exc}", key=key,
                              origin=self.config.origin(key)) from exc

    def stores(self) -> list[AdjunctStore]:
        return [u.store for u in self.units]

    def close(self) -> None:
        """Flush, record and close every opened store; every store is attempted."""
        first: BaseException | None = None
        while self._opened:
            store = self._opened.pop()
            try:
                store.close()
            except Exception as exc:  # noqa: BLE001 - close the others, then raise the first
                log.error("closing adjunct store '%s' failed: %s", store.name, exc)
                first = first or exc
        if first is not None:
            raise first


class AdjunctTaskStorage:
    """A task's storage as its instance sees it: its own stores plus its adjunct stores
    (read-only views); a commit flushes both (the adjunct stores the task writes record
    their offsets beside them)."""

    def __init__(self, inner: Any, manager: Any):
        self.inner, self.manager = inner, manager

    def stores(self) -> dict[str, Any]:
        out = dict(self.inner.stores()) if self.inner is not None else {}
        out.update(self.manager.views())
        return out

    def flush(self) -> Mapping[str, int]:
        offsets = self.inner.flush() if self.inner is not None else {}
        self.manager.flush()
        return offsets

    def close(self) -> None:
        try:
            if self.inner is not None:
                self.inner.close()
        finally:
            self.manager.close()

    def __getattr__(self, name: str) -> Any:  # restore_stats, logged_stores, ...
        return getattr(self.inner, name)


def _same_serde(stream: str, store: str) -> bool:
    aliases = {"long": "int64", "integer": "int64"}
    a, b = stream.lower(), store.lower()
    return aliases.get(a, a) == aliases.get(b, b)


def _drop_seals(pairs: dict) -> None:
    """Seal markers (both kinds) are no records of a store that is not versioned."""
    pairs.pop(SEAL_KEY_BYTES, None)
    pairs.pop(EMPTY_SEAL_KEY_BYTES, None)
