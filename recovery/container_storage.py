"""ContainerStorageManager: the restore of every store of a container, in parallel.

One per container (Samza's ``ContainerStorageManager``). It takes the
:class:`~weir.recovery.storage.TaskStorageManager` of every task of the container (each
task's stores, by store base directory) and restores all their stores before any task
processes a message:

1. every store is *decided* first, one after the other
   (:meth:`~weir.recovery.store_restore.StoreRestore.prepare`): the validity table, the target
   offset, and the changelog checks. A changelog that cannot back its checkpoint stops the
   container here, before any store of any task was changed;
2. then the stores are restored in parallel on a pool of restore threads
   (``job.container.restore.thread.pool.size``, Samza's key; default min(stores, cores), at
   most ``job.container.restore.thread.pool.max.size``). Large replays of file-log changelogs
   run in restore worker processes (``job.container.restore.worker.processes``; as many as
   there are restore threads, or cores when a RocksDB replay can be split at segment
   boundaries), so several stores -- or one large RocksDB store -- use several cores
   (CPython runs one thread of Python at a time);
3. progress is one combined bar on a terminal (records, MB, rate, time left), periodic log
   lines otherwise, and a summary line per store;
4. each task's storage manager adopts its opened stores. When any store fails, the others
   finish, every opened store is closed, and the first error (in task and store order) is
   raised; the failed store's old files were put back.

Broadcast adjunct stores (container-level stores) come with the adjunct-store issue; they will
be restored here too.

Example::

    >>> import tempfile, pathlib
    >>> from weir.stores.config import Config
    >>> from weir.testing import FileChangelog
    >>> from weir.stores.spec import StoreSpec
    >>> cfg = Config({"stores.counts.factory": "memory", "stores.counts.key.serde": "string",
    ...               "stores.counts.msg.serde": "int64",
    ...               "stores.counts.changelog": "filelog.counts-changelog"})
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> logs = [FileChangelog(base / f"{p}.changelog") for p in range(2)]
    >>> managers = [TaskStorageManager(f"Partition {p}", [StoreSpec.from_config(cfg, "counts")],
    ...                                base, {"counts": (logs[p], logs[p])}, cfg)
    ...             for p in range(2)]
    >>> csm = ContainerStorageManager(managers, progress=ProgressMode.QUIET)
    >>> sorted(csm.restore({}))
    ['Partition 0', 'Partition 1']
    >>> csm.close()
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from weir.stores.api import KeyValueStore
from weir.stores.config import Config, declare
from weir.stores.engines.registry import WorkerRestore
from weir.stores.errors import ConfigError

from weir.recovery._progress import ProgressMode, RestoreProgress
from weir.recovery._workers import RestoreWorkers
from weir.recovery.bulk import DEFAULT_BUDGET_BYTES
from weir.recovery.checkpoint import Checkpoint
from weir.recovery.restore import Action, RestoreStats
from weir.recovery.storage import TaskStorageManager
from weir.recovery.store_restore import OpenStore, RestoreOptions, StoreRestore, close_quietly

__all__ = ["ContainerStorageManager", "RestoreSettings", "available_cores"]

_log = logging.getLogger("weir.recovery.restore")
_C = "recovery"

RESTORE_POOL_SIZE = declare(
    "job.container.restore.thread.pool.size", int, None,
    "Restore threads of a container: how many stores are restored at once (Samza's key). "
    "Unset: min(stores to restore, cores available).", component=_C)
RESTORE_POOL_MAX_SIZE = declare(
    "job.container.restore.thread.pool.max.size", int, 64,
    "Upper bound of the restore threads (Samza's key).", component=_C)
RESTORE_WORKER_PROCESSES = declare(
    "job.container.restore.worker.processes", bool, True,
    "Run large replays of file-log changelogs in restore worker processes (one per restore "
    "thread), so that restoring several stores, or one large RocksDB store, uses several "
    "cores. false: every replay runs in its restore thread.", component=_C)
RESTORE_WORKER_MIN_RECORDS = declare(
    "job.container.restore.worker.min.records", int, 250_000,
    "Replays of at least this many changelog offsets go to a restore worker process (smaller "
    "ones do not pay for starting it).", component=_C)
RESTORE_BATCH_BYTES = declare(
    "job.container.restore.batch.bytes", int, DEFAULT_BUDGET_BYTES,
    "Changelog bytes a restore collects (the last value per key, sorted) before it bulk-loads "
    "them into the store as one run; bounds restore's memory per restore thread (about 2x "
    "this) and the size of one engine transaction.", component=_C)
RETAIN_EXISTING_STATE = declare(
    "task.transactional.state.retain.existing.state", bool, True,
    "Keep the local files of a persistent store without changelog across starts (Samza's "
    "key). false: such stores start empty at every start (their files are set aside and "
    "removed once the new store is open). Logged stores are not affected: their state always "
    "comes from the changelog and the checkpoint.", component=_C)


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class RestoreSettings:
    """How a container restores its stores; parsed once with :meth:`from_config`."""

    threads: int | None = None
    """``job.container.restore.thread.pool.size`` (None: min(stores, cores))."""
    max_threads: int = 64
    worker_processes: bool = True
    options: RestoreOptions = field(default_factory=RestoreOptions)

    @classmethod
    def from_config(cls, config: Config) -> "RestoreSettings":
        threads = RESTORE_POOL_SIZE.get(config)
        max_threads = RESTORE_POOL_MAX_SIZE.get(config)
        for decl, value in ((RESTORE_POOL_SIZE, threads), (RESTORE_POOL_MAX_SIZE, max_threads),
                            (RESTORE_BATCH_BYTES, RESTORE_BATCH_BYTES.get(config))):
            if value is not None and value <= 0:
                raise ConfigError(f"must be a positive integer, got {value}", key=decl.name,
                                  origin=config.origin(decl.name))
        minimum = RESTORE_WORKER_MIN_RECORDS.get(config)
        if minimum < 0:
            raise ConfigError(f"must be >= 0, got {minimum}", key=RESTORE_WORKER_MIN_RECORDS.name,
                              origin=config.origin(RESTORE_WORKER_MIN_RECORDS.name))
        options = RestoreOptions(budget_bytes=RESTORE_BATCH_BYTES.get(config),
                                 worker_min_records=minimum,
                                 retain_existing_state=RETAIN_EXISTING_STATE.get(config))
        return cls(threads, max_threads, RESTORE_WORKER_PROCESSES.get(config), options)

    def pool_size(self, stores: int) -> int:
        """Restore threads for ``stores`` stores to restore."""
        wanted = self.threads if self.threads is not None else available_cores()
        return max(1, min(stores, wanted, self.max_threads))


_SPLIT_MODES = (WorkerRestore.SORTED_FILES, WorkerRestore.SORTED_RUNS)
"""Worker modes whose replay splits at segment boundaries over every worker."""


def _wants_worker(job: StoreRestore, minimum: int) -> bool:
    plan = job.plan_
    if plan is None or not plan.replays or job.checked is None:
        return False
    if plan.target - plan.start + 1 < minimum or not job.spec.persistent:
        return False
    mode = job.spec.engine.worker_restore
    if mode is WorkerRestore.NONE:
        return False
    if mode is WorkerRestore.FILL_BEFORE_OPEN and plan.action is not Action.REBUILD:
        return False
    return job.checked.bulk_reader() is not None


class ContainerStorageManager:
    """Restores the stores of every task of a container in parallel (see the module
    docstring), then hands them to the tasks' storage managers; :meth:`close` closes them."""

    def __init__(self, managers: Iterable[TaskStorageManager],
                 settings: RestoreSettings = RestoreSettings(), *,
                 progress: ProgressMode = ProgressMode.AUTO, title: str = "container"):
        self.managers = list(managers)
        self.settings = settings
        self.progress = progress
        self.title = title
        self.stats: list[RestoreStats] = []
        self.seconds = 0.0
        self.threads = 0
        self.worker_processes = 0

    def restore(self, checkpoints: Mapping[str, Checkpoint | None]
                ) -> dict[str, dict[str, KeyValueStore]]:
        """Restore every store to its task's checkpoint (a task missing from
        ``checkpoints`` has none) and open it; returns each task's stores by name."""
        started = time.perf_counter()
        jobs: list[tuple[TaskStorageManager, StoreRestore]] = []
        for manager in self.managers:
            checkpoint = checkpoints.get(manager.task_name)
            jobs.extend((manager, job) for job in manager.restores(checkpoint))
        for _, job in jobs:  # decide everything before changing anything
            job.prepare()
        opened = self._run(jobs)
        by_manager: dict[int, dict[str, tuple[OpenStore, RestoreStats]]] = {
            id(m): {} for m in self.managers}
        for (manager, job), result in zip(jobs, opened):
            by_manager[id(manager)][job.spec.name] = result
        for manager in self.managers:
            manager.adopt(by_manager[id(manager)])
        self.stats = [stats for _, stats in opened]
        self.seconds = time.perf_counter() - started
        if len(jobs) > 1 and any(s.records for s in self.stats):
            records = sum(s.records for s in self.stats)
            _log.info("%s: restored %d stores in %.2f s (%d restore thread(s)%s): %s records, "
                      "%.0f records/s", self.title, len(jobs), self.seconds, self.threads,
                      f", {self.worker_processes} worker process(es)"
                      if self.worker_processes else "", f"{records:,}",
                      records / self.seconds if self.seconds > 0 else 0.0)
        out: dict[str, dict[str, KeyValueStore]] = {}
        for manager in self.managers:
            out.setdefault(manager.task_name, {}).update(manager.stores())
        return out

    def _run(self, jobs: list[tuple[TaskStorageManager, StoreRestore]]
             ) -> list[tuple[OpenStore, RestoreStats]]:
        settings = self.settings
        busy = [job for _, job in jobs if job.plan_ is not None and job.plan_.replays]
        # Every store on the pool, also when none replays: opening a store is mostly I/O
        # (RocksDB's files, fsyncs, the directory lock) that threads overlap; measured 9-14%
        # off the restore phase of a 4-store start-up (bench/RESULTS.md, issue 16).
        self.threads = settings.pool_size(len(jobs))
        workers = None
        eligible = [job for job in busy
                    if _wants_worker(job, settings.options.worker_min_records)]
        if settings.worker_processes and eligible:
            # A sorted-files or sorted-runs replay (RocksDB's SST files, LMDB's run files)
            # splits at segment boundaries over every worker there is.
            splits = any(job.spec.engine.worker_restore in _SPLIT_MODES for job in eligible)
            self.worker_processes = settings.pool_size(1 << 30 if splits else len(eligible))
            workers = RestoreWorkers(self.worker_processes)
        results: list[Any] = [None] * len(jobs)
        errors: list[tuple[int, BaseException]] = []
        try:
            with RestoreProgress(self.title, self.progress) as progress:
                for manager, job in jobs:
                    assert job.plan_ is not None
                    progress.expect(manager.task_name, job.plan_)
                with ThreadPoolExecutor(self.threads, thread_name_prefix="weir-restore") as pool:
                    futures = [pool.submit(job.run, progress, workers) for _, job in jobs]
                    for i, future in enumerate(futures):
                        try:
                            results[i] = future.result()
                        except BaseException as exc:  # noqa: BLE001 - raised below
                            errors.append((i, exc))
        finally:
            if workers is not None:
                workers.close()
        if errors:
            for result in results:
                if result is not None:
                    close_quietly(result[0].store)
            first = errors[0][1]
            for i, exc in errors[1:]:
                manager, job = jobs[i]
                _log.error("task '%s': restoring store '%s' failed as well: %s",
                           manager.task_name, job.spec.name, exc)
            raise first
        return results

    def close(self) -> None:
        """Close every task's stores (each flushes first); every manager is attempted."""
        first: BaseException | None = None
        for manager in self.managers:
            try:
                manager.close()
            except Exception as exc:  # noqa: BLE001 - close the others, then raise the first
                first = first or exc
        if first is not None:
            raise first

    def __repr__(self) -> str:
        tasks = sorted({m.task_name for m in self.managers})
        return f"<ContainerStorageManager {self.title!r} tasks={tasks}>"
