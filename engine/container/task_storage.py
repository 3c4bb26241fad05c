"""A task's stores as its task instance sees them, and the changelogs they write.

:class:`TaskStorage` joins the :class:`~weir.recovery.storage.TaskStorageManager` of each
store base directory of one task; :class:`TrackedChangelog` keeps a changelog partition's
newest offset without asking the system at every commit.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.container_storage import ContainerStorageManager, RestoreSettings
from weir.recovery.storage import ProgressMode, Repair, TaskStorageManager
from weir.stores.changelog import ChangelogSink, ChangelogSource, ForwardingChangelog
from weir.stores.config import Config
from weir.stores.spec import StoreSpec

from weir.engine.config.job import JobConfig, StoreBase
from weir.engine.model import SystemStreamPartition, TaskName
from weir.engine.systems.api import SystemProducer
from weir.engine.systems.changelog import SystemChangelogSink, SystemChangelogSource

__all__ = ["LoggedStore", "TaskStorage", "TrackedChangelog", "changelog_source_name",
           "tracks_offsets"]


def changelog_source_name(task_name: str, store: str) -> str:
    """The producer source under which a task's store writes its changelog."""
    return f"{task_name}/{store}"


def tracks_offsets(registry: Any, system: str) -> bool:
    """True for the built-in file log and memory systems: their offsets are record numbers,
    consecutive per partition, so a changelog partition's newest offset can be tracked from
    what its one writer appended (see :class:`TrackedChangelog`)."""
    factory = registry.factory(system)
    try:
        from weir.engine.systems.filelog import FileLogSystemFactory
    except ImportError:
        pass
    else:
        if isinstance(factory, FileLogSystemFactory):
            return True
    from weir.engine.systems.memory import MemorySystemFactory  # after: a file log job's
    return isinstance(factory, MemorySystemFactory)              # start does not import it


def _is_transactional(producer: SystemProducer) -> bool:
    """Whether ``producer`` is a task's transactional producer (exactly-once)."""
    # No instance exists before its class's module was imported: a job without exactly-once
    # does not import the module for this check.
    module = sys.modules.get(_TRANSACTIONS_MODULE)
    return module is not None and isinstance(producer, module.TransactionalProducer)


_TRANSACTIONS_MODULE = "weir.engine.systems.filelog.transactions"


class TrackedChangelog(ForwardingChangelog):
    """The sink and source of one changelog partition, with the newest offset tracked.

    A store's changelog partition has one writer: its task. After one real metadata read,
    ``newest_offset()`` is that offset plus the records appended since, so a commit does
    not ask the system (the file log's admin CRC-scans every record appended since its last
    look, ~6 us per record). Only for systems where :func:`tracks_offsets` holds. The appends
    and ``newest_offset`` are its own; every other capability is forwarded
    (:class:`~weir.stores.changelog.ForwardingChangelog`).
    """

    __slots__ = ("_base", "_appended", "_append", "_append_all")

    def __init__(self, sink: ChangelogSink, source: ChangelogSource):
        super().__init__(sink, source)
        self._base: int | None = None
        self._appended = 0
        self._append = sink.append
        self._append_all = sink.append_all

    # -- ChangelogSink --------------------------------------------------------------------
    def append(self, key: bytes, value: bytes | None) -> None:
        self._append(key, value)
        self._appended += 1

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """The sink's batch append (one call down to the partition writer for the file
        log; one ``append`` per change by the ChangelogSink default)."""
        items = items if isinstance(items, list) else list(items)
        try:
            self._append_all(items)
        except BaseException:
            # Part of the batch may be in the log: forget the tracked offset, so the next
            # newest_offset() flushes and asks the system again.
            self._base = None
            self._appended += 1
            raise
        self._appended += len(items)

    def append_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        """``append_all`` of two parallel lists."""
        self.append_all(list(zip(keys, values)))

    # -- ChangelogSource ------------------------------------------------------------------
    def newest_offset(self) -> int:
        if self._base is None:
            if self._appended:
                self.sink.flush()  # make earlier appends visible to the system first
            self._base, self._appended = self.source.newest_offset(), 0
        return self._base + self._appended


@dataclass(frozen=True)
class LoggedStore:
    """One logged store of a task: its changelog partition and source, and its directory
    (None for an in-memory store)."""

    name: str
    changelog: SystemStreamPartition
    source: Any
    directory: Path | None
    spec: StoreSpec | None = None


class TaskStorage:
    """The stores of one task, as a task instance sees them (``stores``/``flush``/``close``).

    Logged and non-logged stores may live under different base directories
    (``job.logged.store.base.dir`` / ``job.non-logged.store.base.dir``); each base gets its own
    :class:`~weir.recovery.storage.TaskStorageManager` and this object joins them.
    """

    def __init__(self, task_name: TaskName, specs: Iterable[StoreSpec], job: JobConfig,
                 changelog_partition: int, producers: Mapping[str, SystemProducer],
                 registry: Any, config: Config, progress: ProgressMode, *,
                 repairs: Mapping[str, Repair] | None = None,
                 restore: RestoreSettings | None = None):
        by_base: dict[Any, list[StoreSpec]] = {}
        for spec in specs:
            base = StoreBase.LOGGED if spec.logged else StoreBase.NON_LOGGED
            by_base.setdefault(job.base_dir(base), []).append(spec)
        self.task_name = task_name
        self.progress = progress
        self.restore_settings = restore if restore is not None else RestoreSettings()
        self.managers: list[TaskStorageManager] = []
        self.changelog_ssps: dict[str, SystemStreamPartition] = {}
        for base_dir, group in sorted(by_base.items(), key=lambda kv: str(kv[0])):
            changelogs = {}
            for spec in group:
                if not spec.logged:
                    continue
                system, stream = spec.changelog
                ssp = SystemStreamPartition(system, stream, changelog_partition)
                self.changelog_ssps[spec.name] = ssp
                sink = SystemChangelogSink(producers[system], ssp,
                                           changelog_source_name(task_name, spec.name))
                source = SystemChangelogSource(registry, ssp)
                if _is_transactional(producers[system]):  # exactly-once
                    from weir.engine.container.exactly_once import TransactionalChangelog
                    exact = TransactionalChangelog(sink, source, producers[system])
                    changelogs[spec.name] = (exact, exact)
                elif tracks_offsets(registry, system):
                    tracked = TrackedChangelog(sink, source)
                    changelogs[spec.name] = (tracked, tracked)
                else:
                    changelogs[spec.name] = (sink, source)
            group_repairs = {s.name: repairs[s.name] for s in group
                             if repairs and s.name in repairs}
            self.managers.append(TaskStorageManager(task_name, group, base_dir, changelogs,
                                                    config, progress=progress,
                                                    repairs=group_repairs,
                                                    options=self.restore_settings.options))
        self._stores: dict[str, Any] = {}

    def logged_stores(self) -> list[LoggedStore]:
        """Every logged store of the task with its changelog partition, its changelog source
        and its local directory (None for in-memory stores), for start-up checks."""
        out = []
        for manager in self.managers:
            for name, spec in sorted(manager.specs.items()):
                if not spec.logged:
                    continue
                source = manager.changelogs[name][1]
                directory = manager.store_directory(name) if spec.persistent else None
                out.append(LoggedStore(name, self.changelog_ssps[name], source, directory, spec))
        return out

    def open(self, checkpoint: Checkpoint | None) -> dict[str, Any]:
        """Restore every store to ``checkpoint`` (in parallel restore threads, see
        :class:`~weir.recovery.container_storage.ContainerStorageManager`) and open it."""
        ContainerStorageManager(self.managers, self.restore_settings, progress=self.progress,
                                title=f"task '{self.task_name}'").restore(
            {self.task_name: checkpoint})
        return self.adopted()

    def adopted(self) -> dict[str, Any]:
        """The stores, once the managers were opened (by :meth:`open`, or by the container's
        storage manager)."""
        for manager in self.managers:
            self._stores.update(manager.stores())
        return dict(self._stores)

    def stores(self) -> Mapping[str, Any]:
        return self._stores

    def flush(self) -> dict[str, int]:
        offsets: dict[str, int] = {}
        for manager in self.managers:
            offsets.update(manager.flush())
        return offsets

    def unsettled(self) -> bool:
        """A store changed since it was last settled (see
        :meth:`weir.recovery.storage.TaskStorageManager.flush`)."""
        return any(manager.unsettled() for manager in self.managers)

    def close(self) -> None:
        errors = []
        for manager in self.managers:
            try:
                manager.close()
            except Exception as exc:  # noqa: BLE001 - close the others, then raise the first
                errors.append(exc)
        if errors:
            raise errors[0]

    def restore_stats(self) -> list[Any]:
        return [s for m in self.managers for s in m.restore_stats.values()]
