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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.stores.api import KeyValueStore
from weir.stores.builder import build_store
from weir.stores.changelog import NO_OFFSET, ChangelogSink, ChangelogSource
from weir.stores.config import Config
from weir.stores.engines._base import BytesEngine
from weir.stores.layers.logged import LoggedLayer
from weir.stores.spec import StoreSpec

from weir.recovery._progress import ProgressMode, RestoreProgress
from weir.recovery.checkpoint import Checkpoint
from weir.recovery.errors import RecoveryError
from weir.recovery.offset_file import (OffsetFileCorruptError, StoreOffset, read_offset_file,
                          remove_offset_file, write_offset_file)
from weir.recovery.restore import (Action, CheckpointedOffset, LocalState, RestorePlan, RestoreStats,
                      plan_restore, replay, trim, wipe_store_directory)

__all__ = ["TaskStorageManager", "ProgressMode", "task_directory_name"]

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


class TaskStorageManager:
    """Restores, opens, flushes and closes the stores of one task (see the module docstring).

    ``progress`` chooses how restores report (a bar on a terminal by default); ``clock``
    (milliseconds since the epoch) is for tests of the staleness rule.
    """

    def __init__(self, task_name: str, specs: Iterable[StoreSpec], store_dir: Path,
                 changelogs: Mapping[str, tuple[ChangelogSink, ChangelogSource]],
                 config: Config, *, progress: ProgressMode = ProgressMode.AUTO,
                 clock: Any = _now_ms):
        self.task_name = str(task_name)
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
        oldest = newest = NO_OFFSET
        if source is not None:
            oldest, newest = source.oldest_offset(), source.newest_offset()
        checkpointed: int | CheckpointedOffset = CheckpointedOffset.ABSENT
        if checkpoint is not None and name in checkpoint.changelog_offsets:
            checkpointed = checkpoint.changelog_offsets[name]
        local = self._local_state(spec, directory)
        plan = plan_restore(
            store=name, persistent=spec.persistent, logged=spec.logged,
            changelog=_changelog_name(spec), engine=spec.engine.value,
            checkpointed=checkpointed, oldest=oldest, newest=newest, local=local,
            staleness_ms=spec.staleness_ms, now_ms=self._clock())
        handle = progress.begin(plan)
        started = time.perf_counter()
        if plan.wipes:
            wipe_store_directory(directory, store=name)
        elif spec.persistent:
            directory.mkdir(parents=True, exist_ok=True)
            if plan.action is Action.CATCH_UP:
                remove_offset_file(directory)
        guard = None
        if sink is not None:
            guard = _GuardedSink(sink, directory if spec.persistent else None)
        store = build_store(spec, directory, changelog=guard, config=self.config)
        entry = _Open(spec, store, directory, guard, source)
        if plan.action is Action.REUSE and isinstance(local, StoreOffset):
            entry.offset_file = local
        try:
            records, nbytes, trimmed = self._apply(entry, plan, sink, handle.at)
        except BaseException:
            _close_quietly(store)
            raise
        stats = RestoreStats(self.task_name, name, plan.action, records, nbytes,
                             time.perf_counter() - started, plan.start, plan.target, trimmed,
                             plan.reason,
                             trimmed_records=plan.newest - plan.target if trimmed else 0)
        self.restore_stats[name] = stats
        handle.done(stats)
        return entry

    def _apply(self, entry: _Open, plan: RestorePlan, sink: ChangelogSink | None,
               on_batch: Any) -> tuple[int, int, int]:
        spec = entry.spec
        if sink is None or entry.source is None or entry.guard is None:
            return 0, 0, 0
        engine = _bottom_engine(entry.store, spec.name)
        records = nbytes = trimmed = 0
        if plan.replays:
            records, nbytes = replay(engine, entry.source, plan.start, plan.target,
                                     batch_size=max(spec.write_batch_size, _MIN_RESTORE_BATCH),
                                     on_batch=on_batch)
            engine.flush()
        if plan.trims:
            trimmed = trim(engine, entry.source, sink, after=plan.target, newest=plan.newest)
        if spec.persistent:
            self._record_offset(entry, plan.target)
        return records, nbytes, trimmed

    def _record_offset(self, entry: _Open, offset: int) -> None:
        """Make the ``OFFSET`` file say ``offset`` (the files on disk hold that state).

        Skipped when it already does, unless it is a quarter of the staleness limit old: an
        idle store of a running task must not look stale at the next start."""
        now = self._clock()
        current = entry.offset_file
        if (current is None or current.offset != offset
                or current.age_ms(now) >= entry.spec.staleness_ms // 4):
            entry.offset_file = write_offset_file(
                entry.directory, entry.spec.name, _changelog_name(entry.spec), offset,
                engine=entry.spec.engine.value, now_ms=now)
        assert entry.guard is not None
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
        rewritten to it. Non-logged stores are flushed and absent from the result.
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
