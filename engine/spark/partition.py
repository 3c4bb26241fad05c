"""One state partition during one micro-batch: bring the replica to the previous version, hand
out staged stores, publish the batch's version (or adopt the one already published).

The life of a task of batch ``b`` on partition ``p`` (:class:`PartitionState`)::

    open()      replica of p in this worker (reused, adopted or new), brought to version b-1:
                  - already there: nothing to do
                  - behind: replay the changelogs in between (when they are all there)
                  - ahead (a replayed batch), empty, or changelogs missing/damaged: restore the
                    newest readable snapshot <= b-1, then replay the changelogs after it; a
                    damaged snapshot is set aside and written again from the changelogs
                If version b is already published (a retry, a speculative copy, a replay after
                a crash), the task adopts it: ``published`` holds it and nothing is computed.
    stores      typed stores over staged views of the replica (writes stay in memory)
    commit()    encode the batch's changes (and what the task emitted) as version b and publish
                it create-if-absent; when another attempt published b first, drop ours and
                apply the published changelog instead. Every `snapshot.interval` versions the
                partition's whole state is published as a snapshot and old files are retired.

The replica only ever holds published versions, so whatever happens to an attempt, the next
task of the partition starts from a state some published history produced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from weir.stores.api import KeyValueStore
from weir.stores.builder import compose_store
from weir.stores.config import Config

from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta, PartitionFiles
from weir.engine.spark.errors import StateFileDamagedError, StateHistoryError
from weir.engine.spark.overlay import StagedEngine
from weir.engine.spark.providers import StateStoreSpec
from weir.engine.spark.replica import Replica, acquire_replica
from weir.engine.spark.settings import ProviderSettings
from weir.engine.spark.statefile import (OUTPUT_SECTION, VersionFile, VersionKind,
                                         encode_version)

__all__ = ["PartitionState", "PartitionMetrics", "Outcome", "load_version"]

log = logging.getLogger("weir.spark.state")


class Outcome:
    """How a task's version came about (metrics and logs)."""

    PUBLISHED = "published"     # this attempt's changes became the version
    ADOPTED = "adopted"         # another attempt published first; its version was applied
    REPLAYED = "replayed"       # the version was already published when the task started


@dataclass
class PartitionMetrics:
    """What one task did with its partition's state (reported through observed metrics)."""

    operator: str
    partition: int
    batch: int
    replica: str = ""              # reused | adopted | new | rebuilt
    outcome: str = ""
    restore_ms: float = 0.0
    publish_ms: float = 0.0
    snapshot_ms: float = 0.0
    changelogs_replayed: int = 0
    snapshot_loaded: int | None = None
    snapshots_rewritten: list[int] = field(default_factory=list)
    changes: int = 0
    state_rows: int = 0
    state_bytes: int = 0
    version_bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


class PartitionState:
    """See the module docstring. Use once per task::

        state = PartitionState(checkpoint, meta, partition, batch, stores, settings)
        state.open()
        if state.published is None:
            ... use state.store(name, config) ...
            version = state.commit(outputs=[...], meta={...})
        state.close()
    """

    def __init__(self, checkpoint: OperatorCheckpoint, meta: OperatorMeta, partition: int,
                 batch: int, stores: Sequence[StateStoreSpec], settings: ProviderSettings):
        if not 0 <= partition < meta.partitions:
            raise StateHistoryError(f"partition {partition} is outside the operator's "
                                    f"{meta.partitions} partitions", operator=meta.operator,
                                    partition=partition, version=batch,
                                    directory=checkpoint.root)
        self.checkpoint = checkpoint
        self.meta = meta
        self.partition = partition
        self.batch = batch
        self.stores = tuple(stores)
        self.settings = settings
        self.files: PartitionFiles = checkpoint.partition(partition)
        self.base = meta.created_at_version - 1
        self.replica: Replica | None = None
        self.published: VersionFile | None = None
        self.version: VersionFile | None = None
        self._own_outputs: tuple[list[bytes], list[bytes | None]] | None = None
        self._own_meta: dict[str, Any] | None = None
        self._staged: dict[str, StagedEngine] = {}
        self._typed: list[KeyValueStore] = []
        self.metrics = PartitionMetrics(meta.operator, partition, batch)

    # -- open -------------------------------------------------------------------------------
    def open(self) -> None:
        started = time.perf_counter()
        if self.batch <= self.base:
            raise StateHistoryError(
                f"batch {self.batch} comes before the operator's first version "
                f"{self.base + 1}: the query's Spark checkpoint and the operator's state do "
                f"not belong together (was the Spark checkpoint replaced?)",
                operator=self.meta.operator, partition=self.partition, version=self.batch,
                directory=self.files.directory)
        self.files.clean_orphans(self.settings.orphan_age_ms)
        replica = acquire_replica(self.checkpoint.root, self.partition, self.stores,
                                  self.settings.local_root, self.meta.incarnation)
        self.replica = replica
        self.metrics.replica = ("adopted" if replica.adopted and replica.version is not None
                                else "reused" if replica.version is not None else "new")
        replica.adopted = False
        published = None
        if self.files.exists(self.batch, VersionKind.CHANGELOG):
            published = self._read_changelog(self.batch)
        if published is not None and replica.version == self.batch:
            self.published = published
        else:
            self._bring(self.batch - 1)
            if published is not None:
                self._apply(published, self.batch)
                self.published = published
        if self.published is not None:
            self.version = self.published
            self.metrics.outcome = Outcome.REPLAYED
            self._after_version()
        else:
            self._staged = {s.name: StagedEngine(replica.engines[s.name]) for s in self.stores}
        self.metrics.restore_ms = _ms(started)

    def _read_changelog(self, version: int) -> VersionFile:
        return self.files.read(version, VersionKind.CHANGELOG)

    def _apply(self, version_file: VersionFile, version: int) -> None:
        assert self.replica is not None
        self.replica.apply({s.name: version_file.section(s.name) for s in self.stores})
        self.replica.mark(version, version_file.meta.get("rows"), version_file.meta)

    def _current(self) -> int:
        assert self.replica is not None
        return self.replica.version if self.replica.version is not None else self.base

    def _bring(self, target: int) -> None:
        """Bring the replica to ``target`` (see the module docstring)."""
        replica = self.replica
        assert replica is not None
        if replica.version == target:
            return
        if replica.version is not None and replica.version > target:
            self.metrics.replica = "rebuilt"
            replica.wipe()
        if target == self.base:
            if replica.version is not None:
                replica.wipe()
            return
        listing = self.files.listing()
        current = self._current()
        needed = range(current + 1, target + 1)
        # Catch up by replaying when the replica is at most one snapshot interval behind (or no
        # newer snapshot exists); further behind, loading the newest snapshot is cheaper.
        newer_snapshot = any(current < s <= target for s in listing.snapshots)
        short = len(needed) <= self.settings.snapshot_interval or not newer_snapshot
        if short and all(v in listing.changelogs for v in needed):
            try:
                self._replay(needed)
                return
            except StateFileDamagedError:
                if not newer_snapshot:
                    raise
                log.warning("operator '%s' partition %d: a changelog after version %d is "
                            "damaged; restoring from a newer snapshot instead",
                            self.meta.operator, self.partition, current)
        self._restore(target, listing)

    def _replay(self, versions: range | list[int], rewrite: set[int] = frozenset()) -> None:
        for version in versions:
            changelog = self._read_changelog(version)
            self._apply(changelog, version)
            self.metrics.changelogs_replayed += 1
            if version in rewrite:
                self._write_snapshot(version, rewritten=True)

    def _restore(self, target: int, listing) -> None:
        """Empty the replica and rebuild ``target`` from the newest readable snapshot at or
        below it (or from the operator's first version) plus the changelogs after it."""
        replica = self.replica
        assert replica is not None
        self.metrics.replica = "rebuilt" if self.metrics.replica != "new" else "new"
        damaged: set[int] = set()
        for snap in sorted((s for s in listing.snapshots if self.base < s <= target),
                           reverse=True):
            after = range(snap + 1, target + 1)
            missing = [v for v in after if v not in listing.changelogs]
            if missing:
                break  # an older snapshot needs these changelogs too
            try:
                snapshot = self.files.read(snap, VersionKind.SNAPSHOT)
            except StateFileDamagedError as exc:
                aside = self.files.set_aside_damaged(snap, VersionKind.SNAPSHOT)
                log.warning("operator '%s' partition %d: snapshot of version %d is damaged "
                            "(%s); set aside as %s, rebuilding it from the changelogs",
                            self.meta.operator, self.partition, snap, exc.reason, aside)
                damaged.add(snap)
                continue
            replica.wipe()
            contents = {s.name: snapshot.section(s.name) for s in self.stores}
            replica.load_snapshot(contents)
            replica.mark(snap, {name: len(keys) for name, (keys, _) in contents.items()},
                         snapshot.meta.get("version_meta") or {})
            self.metrics.snapshot_loaded = snap
            self._replay(after, damaged)
            return
        first = self.base + 1
        missing = [v for v in range(first, target + 1) if v not in listing.changelogs]
        if missing:
            raise StateHistoryError(
                f"cannot rebuild version {target}: changelog(s) of version(s) "
                f"{_describe(missing)} are missing and no readable snapshot at or below "
                f"{target} has every changelog after it"
                + (f" (damaged snapshot(s) set aside: {sorted(damaged)})" if damaged else "")
                + ". Put the missing files back from a backup of the checkpoint; a batch whose "
                "output was consumed only in part (a limit() or take() on the operator's "
                "output) never publishes its version: run the operator's output through one "
                "action that reads all of it",
                operator=self.meta.operator, partition=self.partition, version=target,
                directory=self.files.directory)
        replica.wipe()
        self._replay(range(first, target + 1), damaged)

    # -- the batch's stores -------------------------------------------------------------------
    def staged(self, name: str) -> StagedEngine:
        return self._staged[name]

    def store(self, name: str, config: Config | Mapping[str, str] | None = None) -> KeyValueStore:
        """The typed store ``name`` for this batch (serdes of its spec, no object cache: the
        staged view already keeps every write in memory)."""
        spec = next(s for s in self.stores if s.name == name)
        cfg = config if isinstance(config, Config) else Config(config or {})
        typed = compose_store(spec.spec, self._staged[name], changelog=None, config=cfg,
                              cache=False)
        self._typed.append(typed)
        return typed

    # -- commit -------------------------------------------------------------------------------
    def commit(self, *, outputs: Sequence[tuple[bytes, bytes]] = (),
               meta: Mapping[str, Any] | None = None) -> str:
        """Publish this batch's version (changes of every store, ``outputs`` as the
        ``@output`` section, ``meta`` in the header). Returns the :class:`Outcome`:
        ``PUBLISHED`` (ours) or ``ADOPTED`` (another attempt's; :attr:`version` holds it)."""
        if self.published is not None:
            raise RuntimeError("the version of this batch was already published; use "
                               "PartitionState.published")
        replica = self.replica
        assert replica is not None
        started = time.perf_counter()
        for typed in self._typed:
            typed.flush()
        sections = []
        changes = {}
        rows = {}
        for spec in self.stores:
            staged = self._staged[spec.name]
            keys, values = staged.changes()
            changes[spec.name] = (keys, values)
            sections.append((spec.name, keys, values))
            rows[spec.name] = replica.rows.get(spec.name, 0) + staged.row_delta(keys, values)
            self.metrics.changes += len(keys)
        if outputs:
            sections.append((OUTPUT_SECTION, [k for k, _ in outputs], [v for _, v in outputs]))
        data = encode_version(VersionKind.CHANGELOG, self.meta.operator, self.partition,
                              self.batch, sections,
                              meta={"base": self.batch - 1, "rows": rows, **(meta or {})},
                              level=self.settings.compression_level)
        self.metrics.version_bytes = len(data)
        won = self.files.publish(self.batch, VersionKind.CHANGELOG, data)
        self._close_views()
        if won:
            self._own_outputs = ([k for k, _ in outputs], [v for _, v in outputs])
            self._own_meta = {"base": self.batch - 1, "rows": rows, **(meta or {})}
            replica.apply(changes)
            replica.mark(self.batch, rows, self._own_meta)
            self.metrics.outcome = Outcome.PUBLISHED
        else:
            log.info("operator '%s' partition %d: version %d was published by another attempt; "
                     "adopting it", self.meta.operator, self.partition, self.batch)
            published = self._read_changelog(self.batch)
            self._apply(published, self.batch)
            self.version = published
            self.metrics.outcome = Outcome.ADOPTED
        self.metrics.publish_ms = _ms(started)
        self._after_version()
        return self.metrics.outcome

    def _after_version(self) -> None:
        """Snapshot when due, retire old files, refresh the size metrics."""
        version = self.batch
        if (version - self.base) % self.settings.snapshot_interval == 0 and \
                not self.files.exists(version, VersionKind.SNAPSHOT):
            self._write_snapshot(version)
            removed = self.files.retain(version, self.settings.min_versions_to_retain)
            if removed:
                log.debug("operator '%s' partition %d: retired %d file(s)", self.meta.operator,
                          self.partition, len(removed))
        assert self.replica is not None
        stats = self.replica.stats()
        self.metrics.state_rows, self.metrics.state_bytes = stats["rows"], stats["bytes"]

    def _write_snapshot(self, version: int, *, rewritten: bool = False) -> None:
        started = time.perf_counter()
        assert self.replica is not None and self.replica.version == version
        contents = self.replica.export()
        data = encode_version(VersionKind.SNAPSHOT, self.meta.operator, self.partition, version,
                              [(s.name, *contents[s.name]) for s in self.stores],
                              meta={"rewritten": rewritten,
                                    "version_meta": self.replica.meta},
                              level=self.settings.compression_level)
        self.files.publish(version, VersionKind.SNAPSHOT, data)
        if rewritten:
            self.metrics.snapshots_rewritten.append(version)
        self.metrics.snapshot_ms += _ms(started)

    # -- the end -------------------------------------------------------------------------------
    def outputs(self) -> tuple[list[bytes], list[bytes | None]]:
        """The ``@output`` section of the version (ours, adopted or replayed)."""
        if self._own_outputs is not None:
            return self._own_outputs
        if self.version is None:
            return [], []
        return self.version.section(OUTPUT_SECTION)

    def version_meta(self) -> dict[str, Any]:
        """The header ``meta`` of the version (ours, adopted or replayed)."""
        if self._own_meta is not None:
            return self._own_meta
        return dict(self.version.meta) if self.version is not None else {}

    def _close_views(self) -> None:
        for engine in self._staged.values():
            engine.close()

    def close(self) -> None:
        """Close this batch's views (the replica stays open for the next task)."""
        self._close_views()
        self._typed.clear()


def load_version(checkpoint: OperatorCheckpoint, partition: int, version: int,
                 stores: Sequence[str]) -> dict[str, dict[bytes, bytes]]:
    """The state of ``partition`` at ``version`` read straight from the checkpoint (no replica):
    the newest readable snapshot at or below it plus the changelogs after it. For readers
    (the weirstate data source, tools); StateHistoryError when the version cannot be built."""
    meta = checkpoint.read_meta()
    if meta is None:
        raise StateHistoryError("the operator has no state here", operator=checkpoint.operator,
                                partition=partition, version=version, directory=checkpoint.root)
    files = checkpoint.partition(partition)
    listing = files.listing()
    base = meta.created_at_version - 1
    state: dict[str, dict[bytes, bytes]] = {s: {} for s in stores}
    if version <= base:
        return state
    if version > listing.latest:
        raise StateHistoryError(f"version {version} was never published (the newest is "
                                f"{listing.latest})", operator=checkpoint.operator,
                                partition=partition, version=version, directory=files.directory)
    start = base + 1
    for snap in sorted((s for s in listing.snapshots if base < s <= version), reverse=True):
        if any(v not in listing.changelogs for v in range(snap + 1, version + 1)):
            break
        try:
            snapshot = files.read(snap, VersionKind.SNAPSHOT, sections=list(stores))
        except StateFileDamagedError:
            continue
        for name in stores:
            keys, values = snapshot.section(name)
            state[name] = dict(zip(keys, values))
        start = snap + 1
        break
    missing = [v for v in range(start, version + 1) if v not in listing.changelogs]
    if missing:
        raise StateHistoryError(f"changelog(s) of version(s) {_describe(missing)} are not "
                                f"there (retired by retention, or missing)",
                                operator=checkpoint.operator, partition=partition,
                                version=version, directory=files.directory)
    for v in range(start, version + 1):
        changelog = files.read(v, VersionKind.CHANGELOG, sections=list(stores))
        for name in stores:
            target = state[name]
            keys, values = changelog.section(name)
            for k, val in zip(keys, values):
                if val is None:
                    target.pop(k, None)
                else:
                    target[k] = val
    return state


def _describe(versions: Sequence[int]) -> str:
    if len(versions) > 6:
        return f"{versions[0]}..{versions[-1]} ({len(versions)} versions)"
    return ", ".join(map(str, versions))
