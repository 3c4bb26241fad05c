"""TaskStorageManager: one task's stores, restored from their changelogs and kept committable.

Life of a task's stores::

    tsm = TaskStorageManager("Partition 0", specs, base_dir, changelogs, config)
    stores = tsm.open(checkpoint_manager.read_last("Partition 0"))   # restore, then open
    ...  the task reads and writes stores[...] ...
    offsets = tsm.flush()            # commit: flush stores + changelogs, settle idle stores
    checkpoint_manager.write("Partition 0", Checkpoint(inputs, offsets))
    tsm.close()

A store lives in ``<base_dir>/<store>/<task name with ' ' replaced by '_'>`` (Samza's layout).
``changelogs`` maps each logged store's name to its ``(ChangelogSink, ChangelogSource)`` pair
(the task's partition of ``stores.<s>.changelog``); the storage manager never sees streams.

Restore is transactional (:mod:`weir.recovery.restore` has the target offsets,
:mod:`weir.recovery.validity` the store-validity table): each logged store is
brought to exactly the changelog offset in the checkpoint, reusing or catching up its local
copy when its ``OFFSET`` file allows, and changelog records written after that checkpoint (by a
run that crashed) are reverted. Non-logged persistent stores are used as found; after a crash
they hold writes of messages that will be processed again (at-least-once for their state).

Nothing is deleted before it is replaced: a rebuild sets the old files aside
(:mod:`weir.recovery._aside`) and removes them only once the rebuilt store is complete; a restore
that fails puts them back. When the changelog cannot back the checkpoint (it ends before the
checkpoint's offset, or a record cannot be read) ``open`` raises a
:class:`~weir.recovery.errors.ChangelogStateError` naming the damage and the safe next steps
(:mod:`weir.recovery.damage`); ``repairs`` (``weir state repair``) applies the one an operator
chose.

Each store is restored by a :class:`~weir.recovery.store_restore.StoreRestore`, the object this
manager shares with the :class:`~weir.recovery.container_storage.ContainerStorageManager`:
:meth:`TaskStorageManager.open` runs them one after the other; the container storage manager
takes them (:meth:`TaskStorageManager.restores`) and runs the restores of all its tasks in
parallel, then hands the opened stores back (:meth:`TaskStorageManager.adopt`).

Example::

    >>> import tempfile, pathlib
    >>> from weir.stores.config import Config
    >>> from weir.testing import FileChangelog
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
from pathlib import Path
from typing import Any

from weir.stores.api import FlushScope, KeyValueStore
from weir.stores.changelog import ChangelogSink, ChangelogSource
from weir.stores.config import Config
from weir.stores.spec import StoreSpec

from weir.recovery._progress import ProgressMode, RestoreProgress
from weir.recovery.checkpoint import Checkpoint
from weir.recovery.errors import RecoveryError
from weir.recovery.restore import Repair, RestoreStats
from weir.recovery.store_restore import (OpenStore, RestoreOptions, StoreRestore, changelog_name,
                                         close_quietly, record_offset)

__all__ = ["TaskStorageManager", "ProgressMode", "Repair", "task_directory_name", "SETTLE_MS"]

SETTLE_MS = 5_000
"""A logged persistent store that keeps changing is settled (its engine's files made durable,
its ``OFFSET`` file written) by at most one commit in this many milliseconds; see
:meth:`TaskStorageManager.flush`."""

_log = logging.getLogger(__name__)


def task_directory_name(task_name: str) -> str:
    """``"Partition 0"`` -> ``"Partition_0"``: the per-task directory name of a store."""
    return str(task_name).replace(" ", "_")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TaskStorageManager:
    """Restores, opens, flushes and closes the stores of one task (see the module docstring).

    ``progress`` chooses how restores report (a bar on a terminal by default); ``clock``
    (milliseconds since the epoch) is for tests of the staleness rule; ``options`` how
    restores run (batch size, worker processes, ``retain.existing.state``).
    """

    def __init__(self, task_name: str, specs: Iterable[StoreSpec], store_dir: Path,
                 changelogs: Mapping[str, tuple[ChangelogSink, ChangelogSource]],
                 config: Config, *, progress: ProgressMode = ProgressMode.AUTO,
                 clock: Any = _now_ms, repairs: Mapping[str, Repair] | None = None,
                 options: RestoreOptions = RestoreOptions()):
        self.task_name = str(task_name)
        self.repairs = {name: Repair(r) for name, r in (repairs or {}).items()}
        self.specs = {spec.name: spec for spec in specs}
        self.store_dir = Path(store_dir)
        self.changelogs = dict(changelogs)
        self.config = config
        self.progress = progress
        self.options = options
        self._clock = clock
        self._settled_ms: dict[str, int] = {}
        self._flushed: dict[str, int] = {}  # the offset each store's last flush returned
        self._unsettled: set[str] = set()
        self._open: dict[str, OpenStore] | None = None
        self._closed = False
        self.restore_stats: dict[str, RestoreStats] = {}
        self._check_changelogs()

    def _check_changelogs(self) -> None:
        for name, spec in self.specs.items():
            if spec.logged and name not in self.changelogs:
                raise RecoveryError(
                    f"store '{name}' of task '{self.task_name}' logs to "
                    f"{changelog_name(spec)} (stores.{name}.changelog) but no changelog "
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
    def restores(self, checkpoint: Checkpoint | None) -> list[StoreRestore]:
        """One :class:`StoreRestore` per store, to ``checkpoint`` (None: the whole changelog),
        in store-name order; nothing is read or changed yet."""
        if self._open is not None or self._closed:
            raise RecoveryError(f"storage manager of task '{self.task_name}' was already opened;"
                                " create a new one to open the stores again")
        out = []
        for name in sorted(self.specs):
            spec = self.specs[name]
            sink, source = self.changelogs.get(name, (None, None))
            out.append(StoreRestore(self.task_name, spec, self.store_directory(name), sink,
                                    source, checkpoint, config=self.config, clock=self._clock,
                                    repair=self.repairs.get(name, Repair.NONE),
                                    options=self.options))
        return out

    def open(self, checkpoint: Checkpoint | None) -> dict[str, KeyValueStore]:
        """Restore every store to ``checkpoint`` (None: the whole changelog), one after the
        other, and open it. Every store is decided before any is changed."""
        jobs = self.restores(checkpoint)
        for job in jobs:
            job.prepare()
        opened: dict[str, tuple[OpenStore, RestoreStats]] = {}
        try:
            with RestoreProgress(f"task '{self.task_name}'", self.progress) as progress:
                for job in jobs:
                    progress.expect(self.task_name, job.plan_)
                for job in jobs:
                    opened[job.spec.name] = job.run(progress)
        except BaseException:
            for entry, _ in opened.values():
                close_quietly(entry.store)
            raise
        self.adopt(opened)
        return self.stores()

    def adopt(self, opened: Mapping[str, tuple[OpenStore, RestoreStats]]) -> None:
        """Take the stores a container storage manager restored for this task."""
        if self._open is not None or self._closed:
            raise RecoveryError(f"storage manager of task '{self.task_name}' was already opened")
        missing = set(self.specs) - set(opened)
        if missing:
            raise RecoveryError(f"task '{self.task_name}': stores {sorted(missing)} were not "
                                "restored")
        self._open = {name: entry for name, (entry, _) in opened.items()}
        self.restore_stats = {name: stats for name, (_, stats) in opened.items()}
        now = self._clock()
        self._settled_ms = {name: now for name in self._open}  # a restore ends settled
        self._flushed = {name: entry.offset_file.offset for name, entry in self._open.items()
                         if entry.offset_file is not None}

    # -- the running task -----------------------------------------------------------------------
    def stores(self) -> dict[str, KeyValueStore]:
        """The open stores by name."""
        return {name: entry.store for name, entry in self._require_open().items()}

    def flush(self) -> dict[str, int]:
        """Flush every store and its changelog; return the changelog offsets to checkpoint.

        For each logged store the result holds the changelog's newest offset after the flush
        (``NO_OFFSET`` for an empty changelog). Every layer's buffered writes reach the engine
        and the changelog is flushed; a persistent store is also **settled** -- its engine's
        files made durable and its ``OFFSET`` file rewritten to that offset (or removed when
        the changelog reports no newest offset: an offset the changelog cannot back never
        vouches for the files) -- when it had no change since the previous flush, when its
        last settle is :data:`SETTLE_MS` old, and at :meth:`close`. A store that keeps
        changing is not settled at every commit: its ``OFFSET`` file would be removed by its
        next change anyway (a crash then finds none and restores from the changelog, settled
        or not), and settling is most of an exactly-once commit's cost (a RocksDB memtable
        flush, an fsynced file, its removal). :meth:`unsettled` says a store waits for a settle,
        so the task commits once more when it goes idle. Non-logged stores are flushed
        durably and absent from the result.
        """
        return self._flush(closing=False)

    def unsettled(self) -> bool:
        """Whether a store changed since it was last settled (its files lag its changelog and it
        has no ``OFFSET`` file): the task's next periodic commit must run, even with nothing
        new, so that an idle task's stores are reused after a crash."""
        return bool(self._unsettled)

    def _flush(self, *, closing: bool) -> dict[str, int]:
        """:meth:`flush`; ``closing``: the flush of :meth:`close`, after the last commit.

        A store with no change since the last flush (or since its restore) keeps the offset
        that flush returned (the restore's target), in the result and in its ``OFFSET`` file,
        instead of moving to the changelog's newest offset: the records after it are not the
        store's (with exactly-once, the commit marker of the last transaction follows the
        offset the last checkpoint recorded), so the state is the same, and the file must say
        the offset a checkpoint says, or the next start takes the copy for one holding
        uncommitted writes and rebuilds it -- after a clean stop, or a SIGKILL of an idle job
        between the commit that settled its stores and that commit's checkpoint.
        """
        offsets: dict[str, int] = {}
        now = self._clock()
        for name, entry in self._require_open().items():
            guard, source = entry.guard, entry.source
            if guard is None or source is None:
                entry.store.flush()  # no changelog: the files are the state
                continue
            entry.store.flush(FlushScope.CHANGELOG)
            if guard.unflushed:
                guard.flush()
            changed, guard.changed = guard.changed, False
            last = self._flushed.get(name)
            # A store without a change since its last flush keeps that flush's offset: the
            # records after it are not the store's (with exactly-once, the commit marker of the
            # last transaction), and an OFFSET file or checkpoint past it would make the next
            # start take the copy for one holding uncommitted writes.
            newest = last if not changed and last is not None else source.newest_offset()
            offsets[name] = self._flushed[name] = newest
            if not entry.spec.persistent:
                continue
            if changed and not closing and now - self._settled_ms.get(name, now) < SETTLE_MS:
                entry.offset_file = None  # the guard removed the file at the first change
                self._unsettled.add(name)
                continue
            entry.store.flush()  # settle: the engine's files hold every write
            if not guard.clean:
                entry.offset_file = None  # the guard removed the file
            record_offset(entry, newest, now, self.task_name)
            self._settled_ms[name] = now
            self._unsettled.discard(name)
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
            self._flush(closing=True)
        finally:
            self._open = None
            self._closed = True
            errors = [exc for entry in opened.values()
                      if (exc := close_quietly(entry.store)) is not None]
            if errors:
                raise errors[0]

    def _require_open(self) -> dict[str, OpenStore]:
        if self._open is None:
            state = "closed" if self._closed else "not opened yet (call open(checkpoint))"
            raise RecoveryError(f"stores of task '{self.task_name}' are {state}")
        return self._open

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._open is not None else "new")
        return f"<TaskStorageManager {self.task_name!r} {state} stores={sorted(self.specs)}>"
