"""TaskStorageManager: one task's stores, restored from their changelogs and kept committable.

Life of a task's stores::

    tsm = TaskStorageManager("Partition 0", specs, base_dir, changelogs, config)
    stores = tsm.open(checkpoint_manager.read_last("Partition 0"))   # restore, then open
    ...  the task reads and writes stores[...] ...
    offsets = tsm.flush()            # commit: flush stores + changelogs, write OFFSET files
    checkpoint_manager.write("Partition 0", Checkpoint(inputs, offsets))
    tsm.close()

A store lives in ``<base_dir>/<store>/<task name with ' ' replaced by '_'>`` (Samza's layout).
``changelogs`` maps each logged store's name to its ``(ChangelogSink, ChangelogSource)`` pair
(the task's partition of ``stores.<s>.changelog``); the storage manager never sees streams.

Restore is transactional (:mod:`weir.recovery.restore` has the decision table): each logged store is
brought to exactly the changelog offset in the checkpoint, reusing or catching up its local
copy when its ``OFFSET`` file allows, and changelog records written after that checkpoint (by a
run that crashed) are reverted. Non-logged persistent stores are used as found; after a crash
they hold writes of messages that will be processed again (at-least-once for their state).

Nothing is deleted before it is replaced: a rebuild sets the old files aside
(:mod:`weir.recovery._aside`) and removes them only once the rebuilt store is complete; a restore
that fails puts them back. When the changelog cannot back the checkpoint (it ends before the
checkpoint's offset, or a record cannot be read) ``open`` raises a
:class:`~weir.recovery.errors.ChangelogStateError` naming the damage and the safe next steps
(:mod:`weir.recovery.damage`); ``repairs`` (``weir store repair``) applies the one an operator
chose.

Example::

    >>> import tempfile, pathlib
    >>> from weir.stores.config import Config
    >>> from weir.stores.filesink import FileChangelog
    >>> from weir.stores.spec import StoreSpec
    >>> cfg = Config({"stores.counts.factory": "memory", "stores.counts.key.serde": "string",
    ...               "stores.counts.msg.serde": "int64",
    ...               "stores.counts.changelog": "filelog.counts-changelog"})
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> log = FileChangelog(base / "counts.changelog")
    >>> tsm = TaskStorageManager("Partition 0", [StoreSpec.from_config(cfg, "counts")], base,
    ...                          {"counts": (log, log)}, cfg, progress=ProgressMode.QUIET)
    >>> tsm.open(None)["counts"].put("a", 1)
    >>> tsm.flush()
    {'counts': 0}
    >>> tsm.close()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.stores.api import KeyValueStore
from weir.stores.builder import build_store
from weir.stores.changelog import NO_OFFSET, ChangelogRecord, ChangelogSink, ChangelogSource
from weir.stores.config import Config
from weir.stores.engines._base import BytesEngine
from weir.stores.layers.logged import LoggedLayer
from weir.stores.spec import StoreSpec

from weir.stores.errors import StoreError, StoreLockedError

from weir.recovery._aside import SetAside, recover_interrupted_rebuild
from weir.recovery._progress import ProgressMode, RestoreProgress
from weir.recovery.checkpoint import Checkpoint
from weir.recovery.damage import Damage, DamageKind, changelog_error
from weir.recovery.errors import ChangelogStateError, RecoveryError, StoreRepairError
from weir.recovery.offset_file import (OffsetFileCorruptError, StoreOffset, read_offset_file,
                          remove_offset_file, write_offset_file)
from weir.recovery.restore import (Action, CheckpointedOffset, LocalState, Repair, RestorePlan,
                      RestoreStats, plan_restore, proof_problem, realign, replay, trim)

__all__ = ["TaskStorageManager", "ProgressMode", "Repair", "task_directory_name"]

_log = logging.getLogger(__name__)

_MIN_RESTORE_BATCH = 100_000
"""Restore writes batches of at least this many distinct keys (or write.batch.size if larger;
and at most ~64 MiB of records): every batch is one engine transaction (an fsync for LMDB), so
small batches make restore several times slower (tests/recovery/restore_speed.py)."""


def task_directory_name(task_name: str) -> str:
    """``"Partition 0"`` -> ``"Partition_0"``: the per-task directory name of a store."""
    return str(task_name).replace(" ", "_")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _GuardedSink:
    """A store's changelog sink, as the storage manager hands it to the store.

    While ``clean`` (the ``OFFSET`` file describes the files on disk), the first append removes
    the ``OFFSET`` file before passing the change on: the logged layer appends before it writes
    the engine, so no change reaches the engine while an ``OFFSET`` file claims otherwise.
    """

    __slots__ = ("sink", "directory", "clean", "unflushed", "_append", "_append_all")

    def __init__(self, sink: ChangelogSink, directory: Path | None):
        self.sink = sink
        self.directory = directory
        self.clean = False
        self.unflushed = False
        self._append = sink.append
        append_all = getattr(sink, "append_all", None)
        self._append_all = append_all if callable(append_all) else None

    def _mark_dirty(self) -> None:
        self.clean = False
        if self.directory is not None:
            remove_offset_file(self.directory)

    def append(self, key: bytes, value: bytes | None) -> None:
        if self.clean:
            self._mark_dirty()
        self.unflushed = True
        self._append(key, value)

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        items = items if isinstance(items, list) else list(items)
        if not items:
            return
        if self.clean:
            self._mark_dirty()
        self.unflushed = True
        if self._append_all is not None:
            self._append_all(items)
        else:
            for key, value in items:
                self._append(key, value)

    def flush(self) -> None:
        self.sink.flush()
        self.unflushed = False


@dataclass
class _Open:
    spec: StoreSpec
    store: KeyValueStore
    directory: Path
    guard: _GuardedSink | None
    source: ChangelogSource | None
    offset_file: StoreOffset | None = None
    """What the store's ``OFFSET`` file says, while the storage manager knows it is there."""


class _ChangelogFailure(Exception):
    """An exception from a store's changelog during restore (reading, or appending the trim and
    realign records), with the offset it happened at when known."""

    def __init__(self, cause: BaseException, *, reading: bool, offset: int | None):
        super().__init__(str(cause))
        self.cause, self.reading = cause, reading
        offset_attr = getattr(cause, "offset", None)
        self.exact = isinstance(offset_attr, int)
        self.offset = offset_attr if self.exact else offset
        self.path = getattr(cause, "path", None)
        position = getattr(cause, "position", None)
        self.position = position if isinstance(position, int) else None


class _CheckedSource:
    """A changelog source whose every failure is a :class:`_ChangelogFailure`: restore must
    tell a damaged changelog from its own errors, and must never read a damaged changelog as
    one that simply ends."""

    __slots__ = ("source",)

    def __init__(self, source: ChangelogSource):
        self.source = source

    def oldest_offset(self) -> int:
        try:
            return self.source.oldest_offset()
        except Exception as exc:
            raise _ChangelogFailure(exc, reading=True, offset=None) from exc

    def newest_offset(self) -> int:
        try:
            return self.source.newest_offset()
        except Exception as exc:
            raise _ChangelogFailure(exc, reading=True, offset=None) from exc

    def read(self, start: int, end: int) -> Iterator[ChangelogRecord]:
        last = start - 1
        try:
            for record in self.source.read(start, end):
                last = record[0]
                yield record
        except Exception as exc:
            raise _ChangelogFailure(exc, reading=True, offset=last + 1) from exc


class _CheckedSink:
    """The changelog sink as restore uses it (trim, realign); failures are
    :class:`_ChangelogFailure`."""

    __slots__ = ("sink",)

    def __init__(self, sink: ChangelogSink):
        self.sink = sink

    def append(self, key: bytes, value: bytes | None) -> None:
        self.append_all([(key, value)])

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        try:
            append_all = getattr(self.sink, "append_all", None)
            if callable(append_all):
                append_all(items)
            else:
                for key, value in items:
                    self.sink.append(key, value)
        except Exception as exc:
            raise _ChangelogFailure(exc, reading=False, offset=None) from exc

    def flush(self) -> None:
        try:
            self.sink.flush()
        except Exception as exc:
            raise _ChangelogFailure(exc, reading=False, offset=None) from exc


class _Restore:
    """The restore of one store of a task: plan, open (setting old files aside), apply, and
    either finish (remove or keep the set-aside files) or undo (put them back)."""

    def __init__(self, manager: "TaskStorageManager", spec: StoreSpec, directory: Path,
                 sink: ChangelogSink | None, source: ChangelogSource | None,
                 checkpointed: int | CheckpointedOffset):
        self.manager, self.spec, self.directory = manager, spec, directory
        self.sink, self.source = sink, source
        self.checked = _CheckedSource(source) if source is not None else None
        self.checkpointed = checkpointed
        self.repair = manager.repairs.get(spec.name, Repair.NONE)
        self.local: StoreOffset | LocalState = LocalState.MISSING
        self.oldest = self.newest = NO_OFFSET
        self.aside: SetAside | None = None
        self.keep_reason: str | None = None

    @property
    def task(self) -> str:
        return self.manager.task_name

    # -- deciding --------------------------------------------------------------------------
    def plan(self, local: StoreOffset | LocalState) -> RestorePlan:
        """The plan for ``local``; raises the changelog error instead of a STOP plan."""
        spec = self.spec
        self.local = local
        if self.checked is not None:
            try:
                self.oldest = self.checked.oldest_offset()
                self.newest = self.checked.newest_offset()
            except _ChangelogFailure as failure:
                raise self.damaged(None, failure) from failure.cause
        plan = plan_restore(
            store=spec.name, persistent=spec.persistent, logged=spec.logged,
            changelog=_changelog_name(spec), engine=spec.engine.value,
            checkpointed=self.checkpointed, oldest=self.oldest, newest=self.newest, local=local,
            staleness_ms=spec.staleness_ms, now_ms=self.manager._clock(), repair=self.repair,
            task=self.task)
        if (isinstance(local, StoreOffset) and local.task is not None and local.task != self.task
                and self.keep_reason is None):
            # Another task's store (moved or put back in the wrong place): rebuilt, never
            # discarded -- its files are kept aside for whoever owns them.
            self.keep_reason = proof_problem(local, _changelog_name(spec), spec.engine.value,
                                             self.task)
        if plan.action is Action.STOP:
            raise self.mismatch(plan)
        return plan

    # -- opening ---------------------------------------------------------------------------
    def open(self, plan: RestorePlan) -> tuple[_Open, RestorePlan]:
        spec, directory = self.spec, self.directory
        if plan.wipes:
            self.aside = SetAside.move(directory, store=spec.name)
        elif spec.persistent:
            directory.mkdir(parents=True, exist_ok=True)
        guard = None
        if self.sink is not None:
            guard = _GuardedSink(self.sink, directory if spec.persistent else None)
        reusing = plan.action in (Action.REUSE, Action.CATCH_UP)
        try:
            store = build_store(spec, directory, changelog=guard, config=self.manager.config)
        except StoreLockedError:
            self.undo()
            raise
        except StoreError as exc:
            if not reusing:
                self.undo()
                raise
            return self._rebuild_instead(LocalState.UNREADABLE,
                                         f"the engine cannot open the local files: {exc}")
        except BaseException:
            self.undo()
            raise
        entry = _Open(spec, store, directory, guard, self.source)
        if reusing:
            assert isinstance(self.local, StoreOffset)
            recorded = self.local.marker
            marker = _commit_marker(_bottom_engine(store, spec.name))
            if recorded is not None and marker is not None and marker != recorded:
                _close_quietly(store)
                return self._rebuild_instead(
                    LocalState.FOREIGN,
                    f"its OFFSET file was written for engine commit marker {recorded}, but the "
                    f"files show {marker} (files lost or replaced, or an OFFSET file put back)")
            if plan.action is Action.REUSE:
                entry.offset_file = self.local
            else:
                remove_offset_file(directory)  # catching up changes the files
        return entry, plan

    def _rebuild_instead(self, state: LocalState, detail: str) -> tuple[_Open, RestorePlan]:
        """The local copy cannot be used after all: decide again without it (a rebuild that
        keeps the old files, or the changelog error when nothing can prove the state)."""
        _log.warning("task '%s': store '%s': %s; the local copy proves nothing and is set "
                     "aside", self.task, self.spec.name, detail)
        self.keep_reason = detail
        plan = self.plan(state)
        return self.open(plan)

    # -- carrying it out -------------------------------------------------------------------
    def apply(self, entry: _Open, plan: RestorePlan,
              on_batch: Any) -> tuple[int, int, int, int]:
        spec = self.spec
        if self.sink is None or self.checked is None or entry.guard is None:
            return 0, 0, 0, 0
        engine = _bottom_engine(entry.store, spec.name)
        source, sink = self.checked, _CheckedSink(self.sink)
        records = nbytes = trimmed = realigned = 0
        if plan.replays:
            records, nbytes = replay(engine, source, plan.start, plan.target,
                                     batch_size=max(spec.write_batch_size, _MIN_RESTORE_BATCH),
                                     on_batch=on_batch)
            engine.flush()
        if plan.trims:
            trimmed = trim(engine, source, sink, after=plan.target, newest=plan.newest)
        if plan.realign is not None:
            realigned = realign(engine, source, sink, store=spec.name, oldest=self.oldest,
                                newest=plan.newest, target=plan.realign)
        if spec.persistent:
            self.manager._record_offset(entry, plan.state_offset)
        return records, nbytes, trimmed, realigned

    def undo(self) -> None:
        """Put the set-aside files back (the restore failed)."""
        aside, self.aside = self.aside, None
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
                        proof_problem(self.local, _changelog_name(spec), spec.engine.value,
                                      self.task))
            if unproven is None and isinstance(self.local, StoreOffset):
                unproven = f"it is proven at offset {self.local.offset}, not {c}"
        partition = getattr(self.source, "partition", None)
        return Damage(kind, self.task, spec.name, _changelog_name(spec),
                      partition if isinstance(partition, int) else None, offset, self.oldest,
                      self.newest, c, str(self.directory) if spec.persistent else None,
                      proven, unproven, **extra)

    def damaged(self, plan: RestorePlan | None, failure: _ChangelogFailure
                ) -> ChangelogStateError:
        proven = plan.proven if plan is not None else None
        if plan is None and self.spec.persistent and isinstance(self.local, StoreOffset):
            if proof_problem(self.local, _changelog_name(self.spec),
                             self.spec.engine.value, self.task) is None:
                proven = self.local.offset
        kind = DamageKind.UNREADABLE if failure.reading else DamageKind.UNWRITABLE
        cause = failure.cause
        return changelog_error(self._damage(
            kind, failure.offset, proven, path=failure.path, position=failure.position,
            detail=f"{type(cause).__name__}: {cause}", offset_exact=failure.exact))

    def mismatch(self, plan: RestorePlan) -> RecoveryError:
        c = self.checkpointed
        assert isinstance(c, int)
        if self.newest == NO_OFFSET or c > self.newest:
            extra: dict[str, Any] = {}
            probe = getattr(self.source, "probe", None)
            if callable(probe):
                try:
                    probe(self.newest + 1)
                except Exception as exc:  # noqa: BLE001 - the damage after the end, reported
                    failure = _ChangelogFailure(exc, reading=True, offset=self.newest + 1)
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


class TaskStorageManager:
    """Restores, opens, flushes and closes the stores of one task (see the module docstring).

    ``progress`` chooses how restores report (a bar on a terminal by default); ``clock``
    (milliseconds since the epoch) is for tests of the staleness rule.
    """

    def __init__(self, task_name: str, specs: Iterable[StoreSpec], store_dir: Path,
                 changelogs: Mapping[str, tuple[ChangelogSink, ChangelogSource]],
                 config: Config, *, progress: ProgressMode = ProgressMode.AUTO,
                 clock: Any = _now_ms, repairs: Mapping[str, Repair] | None = None):
        self.task_name = str(task_name)
        self.repairs = {name: Repair(r) for name, r in (repairs or {}).items()}
        self.specs = {spec.name: spec for spec in specs}
        self.store_dir = Path(store_dir)
        self.changelogs = dict(changelogs)
        self.config = config
        self.progress = progress
        self._clock = clock
        self._open: dict[str, _Open] | None = None
        self._closed = False
        self.restore_stats: dict[str, RestoreStats] = {}
        self._check_changelogs()

    def _check_changelogs(self) -> None:
        for name, spec in self.specs.items():
            if spec.logged and name not in self.changelogs:
                raise RecoveryError(
                    f"store '{name}' of task '{self.task_name}' logs to "
                    f"{_changelog_name(spec)} (stores.{name}.changelog) but no changelog "
                    "sink/source was given for it; pass its changelog partition to the storage "
                    "manager")
        for name in self.repairs:
            if name not in self.specs or not self.specs[name].logged:
                raise RecoveryError(
                    f"a repair was asked for store '{name}' of task '{self.task_name}', which "
                    "is not a logged store of this task; only logged stores are repaired")
        for name in self.changelogs:
            if name not in self.specs or not self.specs[name].logged:
                raise RecoveryError(
                    f"a changelog was given for store '{name}' of task '{self.task_name}', "
                    f"which is not a logged store of this task (no stores.{name}.changelog); "
                    "remove it or configure the store's changelog")

    def store_directory(self, store: str) -> Path:
        """Where ``store``'s files live for this task."""
        return self.store_dir / store / task_directory_name(self.task_name)

    # -- open: restore, then hand the stores out ------------------------------------------------
    def open(self, checkpoint: Checkpoint | None) -> dict[str, KeyValueStore]:
        """Restore every store to ``checkpoint`` (None: the whole changelog) and open it."""
        if self._open is not None or self._closed:
            raise RecoveryError(f"storage manager of task '{self.task_name}' was already opened;"
                                " create a new one to open the stores again")
        opened: dict[str, _Open] = {}
        try:
            with RestoreProgress(self.task_name, self.progress) as progress:
                for name in sorted(self.specs):
                    opened[name] = self._restore_and_open(self.specs[name], checkpoint,
                                                          progress)
        except BaseException:
            for entry in opened.values():
                _close_quietly(entry.store)
            raise
        self._open = opened
        return self.stores()

    def _restore_and_open(self, spec: StoreSpec, checkpoint: Checkpoint | None,
                          progress: RestoreProgress) -> _Open:
        name = spec.name
        directory = self.store_directory(name)
        sink, source = self.changelogs.get(name, (None, None))
        checkpointed: int | CheckpointedOffset = CheckpointedOffset.ABSENT
        if checkpoint is not None and name in checkpoint.changelog_offsets:
            checkpointed = checkpoint.changelog_offsets[name]
        job = _Restore(self, spec, directory, sink, source, checkpointed)
        if spec.persistent and spec.logged:
            note = recover_interrupted_rebuild(directory, store=name)
            if note is not None:
                _log.warning("task '%s': store '%s': %s", self.task_name, name, note)
        elif spec.persistent and remove_offset_file(directory):
            # A store that is no longer logged keeps no OFFSET file: its writes would not remove
            # it, and if the store were logged again it would vouch for files it does not describe.
            _log.info("task '%s': store '%s' has no changelog; removed its OFFSET file",
                      self.task_name, name)
        started = time.perf_counter()
        entry, plan = job.open(job.plan(self._local_state(spec, directory)))
        handle = progress.begin(plan)
        try:
            records, nbytes, trimmed, realigned = job.apply(entry, plan, handle.at)
        except BaseException as exc:
            _close_quietly(entry.store)
            job.undo()
            if isinstance(exc, _ChangelogFailure):
                raise job.damaged(plan, exc) from exc.cause
            raise
        job.done()
        stats = RestoreStats(self.task_name, name, plan.action, records, nbytes,
                             time.perf_counter() - started, plan.start, plan.target, trimmed,
                             plan.reason,
                             trimmed_records=plan.newest - plan.target if trimmed else 0,
                             realigned=realigned, repair=plan.repair)
        self.restore_stats[name] = stats
        handle.done(stats)
        return entry

    def _record_offset(self, entry: _Open, offset: int) -> None:
        """Make the ``OFFSET`` file say ``offset`` (the files on disk hold that state).

        Skipped when it already does, unless it is a quarter of the staleness limit old: an
        idle store of a running task must not look stale at the next start. ``NO_OFFSET`` (the
        changelog has no records) vouches for nothing: the file is removed instead."""
        assert entry.guard is not None
        if offset == NO_OFFSET:
            remove_offset_file(entry.directory)
            entry.offset_file = None
            entry.guard.clean = False
            return
        now = self._clock()
        current = entry.offset_file
        if (current is None or current.offset != offset or current.task != self.task_name
                or current.age_ms(now) >= entry.spec.staleness_ms // 4):
            entry.offset_file = write_offset_file(
                entry.directory, entry.spec.name, _changelog_name(entry.spec), offset,
                engine=entry.spec.engine.value, now_ms=now,
                marker=_commit_marker(_bottom_engine(entry.store, entry.spec.name)),
                task=self.task_name)
        entry.guard.clean = True

    def _local_state(self, spec: StoreSpec, directory: Path) -> StoreOffset | LocalState:
        if not (spec.persistent and spec.logged):
            return LocalState.MISSING
        try:
            found = read_offset_file(directory)
        except OffsetFileCorruptError as exc:
            _log.warning("task '%s': %s", self.task_name, exc)
            return LocalState.CORRUPT
        return LocalState.MISSING if found is None else found

    # -- the running task -----------------------------------------------------------------------
    def stores(self) -> dict[str, KeyValueStore]:
        """The open stores by name."""
        return {name: entry.store for name, entry in self._require_open().items()}

    def flush(self) -> dict[str, int]:
        """Flush every store and its changelog; return the changelog offsets to checkpoint.

        For each logged store the result holds the changelog's newest offset after the flush
        (``NO_OFFSET`` for an empty changelog), and a persistent store's ``OFFSET`` file is
        rewritten to it -- or removed when the changelog reports no newest offset: an offset
        the changelog cannot back never vouches for the files. Non-logged stores are flushed
        and absent from the result.
        """
        offsets: dict[str, int] = {}
        for name, entry in self._require_open().items():
            entry.store.flush()
            guard, source = entry.guard, entry.source
            if guard is None or source is None:
                continue
            if guard.unflushed:
                guard.flush()
            newest = source.newest_offset()
            offsets[name] = newest
            if entry.spec.persistent:
                if not guard.clean:
                    entry.offset_file = None  # the guard removed the file
                self._record_offset(entry, newest)
        return offsets

    def close(self) -> None:
        """Flush (writing ``OFFSET`` files) and close every store. A second close does nothing."""
        if self._closed:
            return
        opened = self._open
        if opened is None:
            self._closed = True
            return
        try:
            self.flush()
        finally:
            self._open = None
            self._closed = True
            errors = [exc for entry in opened.values()
                      if (exc := _close_quietly(entry.store)) is not None]
            if errors:
                raise errors[0]

    def _require_open(self) -> dict[str, _Open]:
        if self._open is None:
            state = "closed" if self._closed else "not opened yet (call open(checkpoint))"
            raise RecoveryError(f"stores of task '{self.task_name}' are {state}")
        return self._open

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._open is not None else "new")
        return f"<TaskStorageManager {self.task_name!r} {state} stores={sorted(self.specs)}>"


def _changelog_name(spec: StoreSpec) -> str:
    return ".".join(spec.changelog) if spec.changelog else ""


def _commit_marker(engine: BytesEngine) -> str | None:
    marker = getattr(engine, "commit_marker", None)
    return marker() if callable(marker) else None


def _bottom_engine(store: Any, name: str) -> BytesEngine:
    """The bytes engine under a built store's layers (each layer exposes ``inner``)."""
    layer = store
    while getattr(layer, "inner", None) is not None:
        layer = layer.inner
    if isinstance(layer, LoggedLayer) or not callable(getattr(layer, "write_batch", None)):
        raise RecoveryError(f"store '{name}': cannot find the bytes engine under its layers "
                            f"(stopped at {layer!r}); restore needs it")
    return layer


def _close_quietly(store: KeyValueStore) -> BaseException | None:
    try:
        store.close()
    except Exception as exc:  # noqa: BLE001 - reported by the caller
        _log.error("closing store '%s' failed: %s", getattr(store, "name", "?"), exc)
        return exc
    return None
