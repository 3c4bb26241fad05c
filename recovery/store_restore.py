"""The restore of one store, shared by both storage managers: :class:`StoreRestore`.

:class:`~weir.recovery.storage.TaskStorageManager` (one task's stores, one after the other) and
:class:`~weir.recovery.container_storage.ContainerStorageManager` (every store of a container,
in parallel restore threads) both restore a store by the same steps, carried out by one
:class:`StoreRestore` each:

1. :meth:`StoreRestore.prepare`: finish a rebuild a killed process left half-way, read the
   store's ``OFFSET`` file and the changelog's bounds, and decide (:func:`~weir.recovery.restore.plan_restore`:
   the validity table of :mod:`weir.recovery.validity` and the target offset). A changelog
   that cannot back the checkpoint raises here, before any store is changed;
2. :meth:`StoreRestore.run`: set invalid files aside (renamed, never deleted before the rebuild
   succeeded; the log line says why they were invalid), open the store, replay the changelog
   below serdes and cache in large sorted runs (:mod:`weir.recovery.bulk`; in a worker
   process when ``workers`` are given and the replay is large, :mod:`weir.recovery._workers`),
   revert records written after the checkpoint (trim), write the ``OFFSET`` file, and remove
   the set-aside files -- or put them back when anything failed.

The container storage manager runs step 1 for every store before step 2 for any: one
mismatch anywhere changes nothing.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from weir.stores.api import KeyValueStore
from weir.stores.builder import build_store
from weir.stores.changelog import (NO_BULK_READER, NO_OFFSET, UNKNOWN_IDENTITY, BulkReader,
                                   ChangelogBatch, ChangelogRecord, ChangelogSink,
                                   ChangelogSource, ForwardingSink, ForwardingSource, Unavailable,
                                   batched)
from weir.stores.config import Config
from weir.stores.engines._base import BytesEngineBase
from weir.stores.engines.registry import WorkerRestore
from weir.stores.errors import StoreError, StoreLockedError
from weir.stores.layers.stack import layers_of
from weir.stores.locking import LOCK_FILE_NAME
from weir.stores.spec import StoreSpec

from weir.recovery._aside import SetAside, recover_interrupted_rebuild
from weir.recovery._workers import (RestoreWorkerError, RestoreWorkers, WorkerChangelogError,
                                    fill_job, sorted_files_job)
from weir.recovery.bulk import DEFAULT_BUDGET_BYTES, RunBuilder, load_run_files, replay_runs
from weir.recovery.checkpoint import Checkpoint
from weir.recovery.damage import Damage, DamageKind, changelog_error
from weir.recovery.errors import ChangelogStateError, RecoveryError, StoreRepairError
from weir.recovery.offset_file import (OffsetFileCorruptError, StoreOffset, read_offset_file,
                                       remove_offset_file, write_offset_file)
from weir.recovery.restore import (Action, CheckpointedOffset, ReadPath, Repair, RestorePlan,
                                   RestoreStats, plan_restore, realign, trim)
from weir.recovery.validity import LocalState, proof_problem

if TYPE_CHECKING:
    from weir.recovery._progress import RestoreProgress, StoreProgress

__all__ = ["OpenStore", "StoreRestore", "GuardedSink", "RestoreOptions", "SST_STAGING_SUFFIX",
           "changelog_name", "commit_marker", "bottom_engine", "close_quietly", "record_offset"]

_log = logging.getLogger("weir.recovery.restore")

SST_STAGING_SUFFIX = ".restore-sst"
"""``<store dir>.restore-sst``: where worker processes put the SST files of a RocksDB replay
(the run files of an LMDB one) until they are ingested or loaded (removed after; a leftover of a killed restore is removed at the next
start)."""


@dataclass(frozen=True)
class RestoreOptions:
    """How restores run (``job.container.restore.*``, see
    :class:`~weir.recovery.container_storage.RestoreSettings`)."""

    budget_bytes: int = DEFAULT_BUDGET_BYTES
    """Record bytes collected into one sorted run before it is written."""
    worker_min_records: int = 250_000
    """Replays of at least this many changelog offsets go to a worker process (when there
    are workers and the changelog's files can be read from another process)."""
    retain_existing_state: bool = True
    """``task.transactional.state.retain.existing.state``: a persistent store without
    changelog keeps its files across starts (False: it starts empty every time)."""


class GuardedSink(ForwardingSink):
    """A store's changelog sink, as the storage manager hands it to the store.

    While ``clean`` (the ``OFFSET`` file describes the files on disk), the first append removes
    the ``OFFSET`` file before passing the change on: the logged layer appends before it writes
    the engine, so no change reaches the engine while an ``OFFSET`` file claims otherwise.
    ``changed`` says a change passed since the storage manager last cleared it (at each
    commit: a store with none settles, see :class:`~weir.recovery.storage.TaskStorageManager`).
    Every write capability is guarded; the others are forwarded (:class:`ForwardingSink`).
    """

    __slots__ = ("directory", "clean", "unflushed", "changed")

    def __init__(self, sink: ChangelogSink, directory: Path | None):
        super().__init__(sink)
        self.directory = directory
        self.clean = False
        self.unflushed = False
        self.changed = False

    def _mark_dirty(self) -> None:
        self.clean = False
        if self.directory is not None:
            remove_offset_file(self.directory)

    def append(self, key: bytes, value: bytes | None) -> None:
        if self.clean:
            self._mark_dirty()
        self.unflushed = self.changed = True
        self.sink.append(key, value)

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        items = items if isinstance(items, list) else list(items)
        if not items:
            return
        if self.clean:
            self._mark_dirty()
        self.unflushed = self.changed = True
        self.sink.append_all(items)

    def append_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        if not keys:
            return
        if self.clean:
            self._mark_dirty()
        self.unflushed = self.changed = True
        self.sink.append_columns(keys, values)

    def flush(self) -> None:
        self.sink.flush()
        self.unflushed = False


@dataclass
class OpenStore:
    """A store opened by a restore, as its storage manager keeps it."""

    spec: StoreSpec
    store: KeyValueStore
    directory: Path
    guard: GuardedSink | None
    source: ChangelogSource | None
    offset_file: StoreOffset | None = None
    """What the store's ``OFFSET`` file says, while the storage manager knows it is there."""
    identity: str | None = None
    """The changelog partition's identity, recorded in the ``OFFSET`` file."""


class ChangelogFailure(Exception):
    """An exception from a store's changelog during restore (reading, or appending the trim and
    realign records), with the offset it happened at when known."""

    def __init__(self, cause: BaseException, *, reading: bool, offset: int | None):
        super().__init__(str(cause))
        self.cause, self.reading = cause, reading
        offset_attr = getattr(cause, "offset", None)
        exact = getattr(cause, "exact", None)  # a worker's error says whether it is exact
        self.exact = exact if isinstance(exact, bool) else isinstance(offset_attr, int)
        self.offset = offset_attr if isinstance(offset_attr, int) else offset
        self.path = getattr(cause, "path", None)
        position = getattr(cause, "position", None)
        self.position = position if isinstance(position, int) else None


class CheckedSource(ForwardingSource):
    """A changelog source whose every failure is a :class:`ChangelogFailure`: restore must
    tell a damaged changelog from its own errors, and must never read a damaged changelog as
    one that simply ends. Every capability is checked; ``partition`` is forwarded."""

    __slots__ = ()

    def oldest_offset(self) -> int:
        return _reading(self.source.oldest_offset)

    def newest_offset(self) -> int:
        return _reading(self.source.newest_offset)

    def read(self, start: int, end: int) -> Iterator[ChangelogRecord]:
        last = start - 1
        try:
            for record in self.source.read(start, end):
                last = record[0]
                yield record
        except Exception as exc:
            raise ChangelogFailure(exc, reading=True, offset=last + 1) from exc

    def read_batches(self, start: int, end: int, *, into: dict | None = None
                     ) -> Iterator[ChangelogBatch]:
        """The source's batches of ``[start, end]`` (its bulk read when it has one, storing
        into ``into`` when it can; else its records grouped: the ChangelogSource default)."""
        if type(self.source).read_batches is ChangelogSource.read_batches:
            # The default groups the source's records: group ours, whose errors carry the
            # exact offset of the record that failed.
            yield from batched(self.read(start, end))
            return
        next_offset = start
        try:
            for batch in self.source.read_batches(start, end, into=into):
                next_offset = batch.last + 1
                yield batch
        except Exception as exc:
            raise ChangelogFailure(exc, reading=True, offset=next_offset) from exc

    def bulk_reader(self) -> BulkReader | Literal[Unavailable.NO_BULK_READER]:
        """The source's picklable reader for a worker process, or ``NO_BULK_READER``."""
        return self.source.bulk_reader()

    def split(self, start: int, end: int, parts: int) -> list[tuple[int, int]]:
        return self.source.split(start, end, parts)

    def identity(self) -> str | Literal[Unavailable.UNKNOWN_IDENTITY]:
        return _reading(self.source.identity)

    def min_compaction_lag_ms(self) -> int | None:
        return _reading(self.source.min_compaction_lag_ms)

    def probe(self, offset: int) -> None:
        """The source's probe; its error is raised as it is (restore reports it as the
        damage at the changelog's end)."""
        self.source.probe(offset)


class CheckedSink(ForwardingSink):
    """The changelog sink as restore uses it (trim, realign); failures are
    :class:`ChangelogFailure`."""

    __slots__ = ()

    def append(self, key: bytes, value: bytes | None) -> None:
        self.append_all([(key, value)])

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        _writing(self.sink.append_all, items)

    def append_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        _writing(self.sink.append_columns, keys, values)

    def flush(self) -> None:
        _writing(self.sink.flush)


def _reading(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except Exception as exc:
        raise ChangelogFailure(exc, reading=True, offset=None) from exc


def _writing(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except Exception as exc:
        raise ChangelogFailure(exc, reading=False, offset=None) from exc


class StoreRestore:
    """The restore of one store of one task (see the module docstring): :meth:`prepare`,
    then :meth:`run`, which returns the open store and what the restore did. A restore that
    fails leaves the store directory as it found it."""

    def __init__(self, task: str, spec: StoreSpec, directory: Path, sink: ChangelogSink | None,
                 source: ChangelogSource | None, checkpoint: Checkpoint | None, *,
                 config: Config, clock: Callable[[], int], repair: Repair = Repair.NONE,
                 options: RestoreOptions = RestoreOptions()):
        self.task, self.spec, self.directory = str(task), spec, Path(directory)
        self.sink, self.source = sink, source
        self.checked = CheckedSource(source) if source is not None else None
        self.checkpointed: int | CheckpointedOffset = CheckpointedOffset.ABSENT
        if checkpoint is not None and spec.name in checkpoint.changelog_offsets:
            self.checkpointed = checkpoint.changelog_offsets[spec.name]
        self.checkpoint_written_ms = checkpoint.written_at_ms if checkpoint is not None else None
        self.config, self.clock, self.repair, self.options = config, clock, repair, options
        self.local: StoreOffset | LocalState = LocalState.MISSING
        self.oldest = self.newest = NO_OFFSET
        self.identity: str | None = None
        self.aside: SetAside | None = None
        self.keep_reason: str | None = None
        self.plan_: RestorePlan | None = None
        self._prefilled: tuple[int, int] | None = None
        self.read_path = ReadPath.NONE
        """How :meth:`apply` read the records it replayed (reported in the stats)."""

    # -- deciding --------------------------------------------------------------------------
    def prepare(self) -> RestorePlan:
        """Finish an interrupted rebuild, then decide; raises the changelog error (nothing
        changed) when the changelog cannot back the checkpoint."""
        spec, directory = self.spec, self.directory
        if spec.persistent and spec.logged:
            note = recover_interrupted_rebuild(directory, store=spec.name)
            if note is not None:
                _log.warning("task '%s': store '%s': %s", self.task, spec.name, note)
            _remove_staging(directory)
        elif spec.persistent and remove_offset_file(directory):
            # A store that is no longer logged keeps no OFFSET file: its writes would not remove
            # it, and if the store were logged again it would vouch for files it does not describe.
            _log.info("task '%s': store '%s' has no changelog; removed its OFFSET file",
                      self.task, spec.name)
        self.plan_ = self.plan(self._local_state())
        return self.plan_

    def predict(self, marker: str | None = None) -> RestorePlan:
        """What :meth:`prepare` and :meth:`run` would decide for the store as it is now,
        changing nothing (``weir state list``): a STOP plan where a start raises the changelog
        error. ``marker`` is the commit marker the store's engine shows (None: not looked at);
        a reuse or catch-up whose ``OFFSET`` file recorded another one is a rebuild, as in
        :meth:`open`. A rebuild a killed process left half-way (``<dir>.restore-aside``) is
        finished by the start before it decides: not predicted here."""
        local = self._local_state(quiet=True)
        plan = self._decide(local)
        if (plan.action in (Action.REUSE, Action.CATCH_UP) and isinstance(local, StoreOffset)
                and local.marker is not None and marker is not None and marker != local.marker):
            plan = self._decide(LocalState.FOREIGN)
        return plan

    def _local_state(self, *, quiet: bool = False) -> StoreOffset | LocalState:
        spec = self.spec
        if not (spec.persistent and spec.logged):
            return LocalState.MISSING
        try:
            found = read_offset_file(self.directory)
        except OffsetFileCorruptError as exc:
            if not quiet:
                _log.warning("task '%s': %s", self.task, exc)
            return LocalState.CORRUPT
        return LocalState.MISSING if found is None else found

    def plan(self, local: StoreOffset | LocalState) -> RestorePlan:
        """The plan for ``local``; raises the changelog error instead of a STOP plan."""
        plan = self._decide(local)
        if plan.action is Action.STOP:
            raise self.mismatch(plan)
        return plan

    def _decide(self, local: StoreOffset | LocalState) -> RestorePlan:
        """The plan for ``local`` (a STOP plan included)."""
        spec = self.spec
        self.local = local
        lag = spec.min_compaction_lag_ms
        if self.checked is not None:
            try:
                self.oldest = self.checked.oldest_offset()
                self.newest = self.checked.newest_offset()
                identity = self.checked.identity()
                # The OFFSET file records an unknown identity as null.
                self.identity = None if identity is UNKNOWN_IDENTITY else identity
                system_lag = self.checked.min_compaction_lag_ms()
            except ChangelogFailure as failure:
                raise self.damaged(None, failure) from failure.cause
            if system_lag is not None:
                lag = system_lag if lag is None else min(lag, system_lag)
        now = self.clock()
        age = (now - self.checkpoint_written_ms) if self.checkpoint_written_ms else None
        clean = spec.clean_on_start or (not spec.logged and not self.options.retain_existing_state)
        plan = plan_restore(
            store=spec.name, persistent=spec.persistent, logged=spec.logged,
            changelog=changelog_name(spec), engine=spec.engine.name,
            checkpointed=self.checkpointed, oldest=self.oldest, newest=self.newest, local=local,
            staleness_ms=spec.staleness_ms, now_ms=now, repair=self.repair,
            identity=self.identity, files=_has_files(self.directory) if spec.persistent else False,
            clean=clean, checkpoint_age_ms=age, min_compaction_lag_ms=lag, task=self.task)
        if (isinstance(local, StoreOffset) and local.task is not None and local.task != self.task
                and self.keep_reason is None):
            # Another task's store (moved or put back in the wrong place): rebuilt, never
            # discarded -- its files are kept aside for whoever owns them.
            self.keep_reason = proof_problem(local, changelog_name(spec), spec.engine.name,
                                             task=self.task)
        return plan

    # -- carrying it out -------------------------------------------------------------------
    def run(self, progress: "RestoreProgress", workers: RestoreWorkers | None = None
            ) -> tuple[OpenStore, RestoreStats]:
        """Carry out the prepared plan: open the store, replay, trim, write ``OFFSET``; the
        store stays open (the caller owns it). Reports through ``progress``."""
        plan = self.plan_ if self.plan_ is not None else self.prepare()
        started = time.perf_counter()
        if plan.wipes and self.keep_reason is None and plan.action is Action.REBUILD:
            if _has_files(self.directory):
                _log.warning("task '%s': store '%s': the local store is not valid (%s); its "
                             "files are set aside and it is rebuilt", self.task,
                             self.spec.name, plan.reason)
        handle = progress.begin(self.task, plan)
        try:
            entry, plan = self.open(plan, handle, workers)
        except BaseException as exc:  # open() put the old files back
            handle.failed()
            if isinstance(exc, ChangelogFailure):  # read by a worker filling the store
                raise self.damaged(self.plan_ or plan, exc) from exc.cause
            raise
        try:
            records, nbytes, trimmed, realigned = self.apply(entry, plan, handle, workers)
        except BaseException as exc:
            close_quietly(entry.store)
            handle.failed()
            self.undo()
            if isinstance(exc, ChangelogFailure):
                raise self.damaged(plan, exc) from exc.cause
            raise
        self.done()
        stats = RestoreStats(self.task, self.spec.name, plan.action, records, nbytes,
                             time.perf_counter() - started, plan.start, plan.target, trimmed,
                             plan.reason,
                             trimmed_records=plan.newest - plan.target if trimmed else 0,
                             realigned=realigned, repair=plan.repair,
                             read_path=self.read_path)
        handle.done(stats)
        return entry, stats

    def open(self, plan: RestorePlan, handle: "StoreProgress | None" = None,
             workers: RestoreWorkers | None = None) -> tuple[OpenStore, RestorePlan]:
        spec, directory = self.spec, self.directory
        if plan.wipes:
            self.aside = SetAside.move(directory, store=spec.name)
        elif spec.persistent:
            directory.mkdir(parents=True, exist_ok=True)
        guard = None
        if self.sink is not None:
            guard = GuardedSink(self.sink, directory if spec.persistent else None)
        reusing = plan.action in (Action.REUSE, Action.CATCH_UP)
        try:
            if self._worker_fills(plan, workers):
                assert workers is not None and handle is not None
                self._prefill(plan, workers, handle)
            store = build_store(spec, directory, changelog=guard, config=self.config)
        except StoreLockedError:
            self.undo()
            raise
        except StoreError as exc:
            if not reusing:
                self.undo()
                raise
            return self._rebuild_instead(LocalState.UNREADABLE,
                                         f"the engine cannot open the local files: {exc}",
                                         handle, workers)
        except BaseException:
            self.undo()
            raise
        entry = OpenStore(spec, store, directory, guard, self.source, identity=self.identity)
        if reusing:
            assert isinstance(self.local, StoreOffset)
            recorded = self.local.marker
            marker = commit_marker(bottom_engine(store, spec.name))
            if recorded is not None and marker is not None and marker != recorded:
                close_quietly(store)
                return self._rebuild_instead(
                    LocalState.FOREIGN,
                    f"its OFFSET file was written for engine commit marker {recorded}, but the "
                    f"files show {marker} (files lost or replaced, or an OFFSET file put back)",
                    handle, workers)
            if plan.action is Action.REUSE:
                entry.offset_file = self.local
            else:
                remove_offset_file(directory)  # catching up changes the files
        return entry, plan

    def _rebuild_instead(self, state: LocalState, detail: str, handle: "StoreProgress | None",
                         workers: RestoreWorkers | None) -> tuple[OpenStore, RestorePlan]:
        """The local copy cannot be used after all: decide again without it (a rebuild that
        keeps the old files, or the changelog error when nothing can prove the state)."""
        _log.warning("task '%s': store '%s': %s; the local copy proves nothing and is set "
                     "aside", self.task, self.spec.name, detail)
        self.keep_reason = detail
        plan = self.plan(state)
        self.plan_ = plan
        if handle is not None:
            handle.replan(plan)
        return self.open(plan, handle, workers)

    def _replay_size(self, plan: RestorePlan) -> int:
        return plan.target - plan.start + 1 if plan.replays else 0

    def _worker_fills(self, plan: RestorePlan, workers: RestoreWorkers | None) -> bool:
        """A rebuild of a fill-before-open engine (LMDB) large enough for a worker: the worker
        fills the empty directory before the store is opened here."""
        return (workers is not None
                and self.spec.engine.worker_restore is WorkerRestore.FILL_BEFORE_OPEN
                and plan.action is Action.REBUILD and plan.replays
                and self._replay_size(plan) >= self.options.worker_min_records
                and self.checked is not None and self.checked.bulk_reader() is not NO_BULK_READER)

    def _prefill(self, plan: RestorePlan, workers: RestoreWorkers,
                 handle: "StoreProgress") -> None:
        assert self.checked is not None
        reader = self.checked.bulk_reader()
        future = workers.submit(fill_job, reader, plan.start, plan.target,
                                str(self.directory), self.spec,
                                self.options.budget_bytes, progress=handle.advance)
        result = self._wait(future, plan.start)
        self._prefilled = (result.records, result.nbytes)
        self.read_path = ReadPath.WORKERS

    def _wait(self, future: Future, start: int) -> Any:
        try:
            return future.result()
        except WorkerChangelogError as exc:
            raise ChangelogFailure(exc, reading=True, offset=exc.offset) from exc
        except RestoreWorkerError as exc:
            raise RecoveryError(
                f"task '{self.task}': restoring store '{self.spec.name}' failed in a restore "
                f"worker process: {exc}; the store's old files were put back") from exc

    def apply(self, entry: OpenStore, plan: RestorePlan, handle: "StoreProgress",
              workers: RestoreWorkers | None = None) -> tuple[int, int, int, int]:
        spec = self.spec
        if self.sink is None or self.checked is None or entry.guard is None:
            return 0, 0, 0, 0
        engine = bottom_engine(entry.store, spec.name)
        source, sink = self.checked, CheckedSink(self.sink)
        records = nbytes = trimmed = realigned = 0
        if self._prefilled is not None:
            records, nbytes = self._prefilled
        elif plan.replays:
            empty = plan.action in (Action.REBUILD, Action.REPLAY)
            if (workers is not None
                    and spec.engine.worker_restore in (WorkerRestore.SORTED_FILES,
                                                       WorkerRestore.SORTED_RUNS)
                    and self._replay_size(plan) >= self.options.worker_min_records
                    and source.bulk_reader() is not NO_BULK_READER):
                records, nbytes = self._replay_in_workers(engine, plan, handle, workers, empty)
                self.read_path = ReadPath.WORKERS
            else:
                builder = RunBuilder()
                records, nbytes = replay_runs(
                    engine, source.read_batches(plan.start, plan.target, into=builder.pairs),
                    empty=empty, budget_bytes=self.options.budget_bytes,
                    progress=handle.advance, builder=builder)
                self.read_path = (ReadPath.RECORDS if source.bulk_reader() is NO_BULK_READER
                                  else ReadPath.BULK)
            engine.flush()
        if plan.trims:
            trimmed = trim(engine, source, sink, after=plan.target, newest=plan.newest)
        if plan.realign is not None:
            realigned = realign(engine, source, sink, store=spec.name, oldest=self.oldest,
                                newest=plan.newest, target=plan.realign)
        if spec.persistent:
            record_offset(entry, plan.state_offset, self.clock(), self.task)
        return records, nbytes, trimmed, realigned

    def _replay_in_workers(self, engine: Any, plan: RestorePlan, handle: "StoreProgress",
                           workers: RestoreWorkers, empty: bool) -> tuple[int, int]:
        """Sorted files (RocksDB) or sorted runs (LMDB): workers turn parts of the range into
        files (RocksDB's SST files, the engine's ``write_sorted_file``; run files otherwise),
        taken here in order: SST files ingested once every part is written, run files
        loaded (``load_sorted``) part by part as each worker finishes, overlapping the
        workers still at work."""
        runs = self.spec.engine.worker_restore is WorkerRestore.SORTED_RUNS
        assert self.checked is not None
        reader = self.checked.bulk_reader()
        staging = _staging_dir(self.directory)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            parts = self.checked.split(plan.start, plan.target, workers.size)
            futures = [workers.submit(sorted_files_job, reader, lo, hi, str(staging), self.spec,
                                      self.options.budget_bytes, empty and i == 0, f"part{i:03d}",
                                      progress=handle.advance)
                       for i, (lo, hi) in enumerate(parts)]
            results = []
            failure: BaseException | None = None
            for (lo, _), future in zip(parts, futures):
                try:
                    result = self._wait(future, lo)
                    if runs and failure is None:
                        load_run_files(engine, result.files)
                    results.append(result)
                except BaseException as exc:  # noqa: BLE001 - wait for the others first
                    failure = failure or exc
            if failure is not None:
                raise failure
            if not runs:
                engine.ingest_files([path for result in results for path in result.files])
            return sum(r.records for r in results), sum(r.nbytes for r in results)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def undo(self) -> None:
        """Put the set-aside files back (the restore failed)."""
        aside, self.aside = self.aside, None
        self._prefilled = None
        self.read_path = ReadPath.NONE
        if aside is None:
            return
        try:
            aside.put_back()
        except Exception:
            _log.exception("task '%s': store '%s': could not put the old files back from %s; "
                           "they are still there: move them back into %s by hand",
                           self.task, self.spec.name, aside.path, self.directory)
            raise

    def done(self) -> None:
        """Remove the set-aside files (the rebuild succeeded), or keep them when they were
        damaged, saying where."""
        aside, self.aside = self.aside, None
        if aside is None:
            return
        if self.keep_reason is None:
            aside.discard()
            return
        kept = aside.keep()
        _log.warning("task '%s': store '%s' was rebuilt from its changelog; its old files are "
                     "kept in %s (%s). Remove that directory when you no longer need it",
                     self.task, self.spec.name, kept, self.keep_reason)

    # -- errors ----------------------------------------------------------------------------
    def _damage(self, kind: DamageKind, offset: int | None, proven: int | None,
                **extra: Any) -> Damage:
        spec = self.spec
        c = self.checkpointed if isinstance(self.checkpointed, int) else None
        unproven = None
        if spec.persistent and proven is None:
            unproven = (self.keep_reason or
                        proof_problem(self.local, changelog_name(spec), spec.engine.name,
                                      task=self.task))
            if unproven is None and isinstance(self.local, StoreOffset):
                unproven = f"it is proven at offset {self.local.offset}, not {c}"
        partition = self.source.partition if self.source is not None else None
        return Damage(kind, self.task, spec.name, changelog_name(spec),
                      partition if isinstance(partition, int) else None, offset, self.oldest,
                      self.newest, c, str(self.directory) if spec.persistent else None,
                      proven, unproven, **extra)

    def damaged(self, plan: RestorePlan | None, failure: ChangelogFailure
                ) -> ChangelogStateError:
        proven = plan.proven if plan is not None else None
        if plan is None and self.spec.persistent and isinstance(self.local, StoreOffset):
            if proof_problem(self.local, changelog_name(self.spec),
                             self.spec.engine.name, task=self.task) is None:
                proven = self.local.offset
        kind = DamageKind.UNREADABLE if failure.reading else DamageKind.UNWRITABLE
        cause = failure.cause
        detail = (f"{cause.kind}: {cause.message}" if isinstance(cause, WorkerChangelogError)
                  else f"{type(cause).__name__}: {cause}")
        return changelog_error(self._damage(
            kind, failure.offset, proven, path=failure.path, position=failure.position,
            detail=detail, offset_exact=failure.exact))

    def mismatch(self, plan: RestorePlan) -> RecoveryError:
        c = self.checkpointed
        assert isinstance(c, int)
        if self.newest == NO_OFFSET or c > self.newest:
            extra: dict[str, Any] = {}
            if self.source is not None:
                try:
                    self.source.probe(self.newest + 1)
                except Exception as exc:  # noqa: BLE001 - the damage after the end, reported
                    failure = ChangelogFailure(exc, reading=True, offset=self.newest + 1)
                    extra = dict(damaged_end=True, path=failure.path,
                                 position=failure.position,
                                 detail=f"{type(exc).__name__}: {exc}")
            error = changelog_error(self._damage(DamageKind.ENDS_EARLY, self.newest + 1,
                                                 plan.proven, **extra))
        else:
            error = changelog_error(self._damage(DamageKind.STARTS_LATE, self.oldest,
                                                 plan.proven))
        if self.repair is Repair.NONE:
            return error
        return StoreRepairError(
            f"store '{self.spec.name}' of task '{self.task}': the {self.repair.value} repair "
            f"cannot be done: {plan.reason}. Nothing was changed.\n{error}")


def record_offset(entry: OpenStore, offset: int, now_ms: int, task: str | None = None) -> None:
    """Make the store's ``OFFSET`` file say ``offset`` (the files on disk hold that state).

    Skipped when it already does, unless it is a quarter of the staleness limit old: an idle
    store of a running task must not look stale at the next start. ``NO_OFFSET`` (the
    changelog has no records) vouches for nothing: the file is removed instead."""
    assert entry.guard is not None
    if offset == NO_OFFSET:
        remove_offset_file(entry.directory)
        entry.offset_file = None
        entry.guard.clean = False
        return
    current = entry.offset_file
    if (current is None or current.offset != offset or current.task != task
            or current.age_ms(now_ms) >= entry.spec.staleness_ms // 4):
        entry.offset_file = write_offset_file(
            entry.directory, entry.spec.name, changelog_name(entry.spec), offset,
            engine=entry.spec.engine.name, now_ms=now_ms,
            marker=commit_marker(bottom_engine(entry.store, entry.spec.name)),
            identity=entry.identity, task=task)
    entry.guard.clean = True


def _has_files(directory: Path) -> bool:
    """Whether a store directory holds any file besides its lock file."""
    try:
        return any(child.name != LOCK_FILE_NAME for child in directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return False


def _staging_dir(directory: Path) -> Path:
    return directory.with_name(directory.name + SST_STAGING_SUFFIX)


def _remove_staging(directory: Path) -> None:
    staging = _staging_dir(directory)
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
        _log.info("removed %s, left by an interrupted restore", staging)


def changelog_name(spec: StoreSpec) -> str:
    return ".".join(spec.changelog) if spec.changelog else ""


def commit_marker(engine: BytesEngineBase) -> str | None:
    """The engine's commit marker (None: it has none, or none yet)."""
    return engine.commit_marker()


def bottom_engine(store: Any, name: str) -> BytesEngineBase:
    """The bytes engine under a built store's layers (:func:`~weir.stores.layers.stack.layers_of`)."""
    *_, layer = layers_of(store)
    if not isinstance(layer, BytesEngineBase):
        raise RecoveryError(f"store '{name}': cannot find the bytes engine under its layers "
                            f"(stopped at {layer!r}); restore needs it")
    return layer


def close_quietly(store: KeyValueStore) -> BaseException | None:
    try:
        store.close()
    except Exception as exc:  # noqa: BLE001 - reported by the caller
        _log.error("closing store '%s' failed: %s", store.name, exc)
        return exc
    return None
