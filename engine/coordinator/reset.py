"""``--reset-state``: start a job's state over, so that new immutable settings can be accepted.

What the immutable-settings guard protects is the match between tasks, their checkpoints,
their changelog partitions and their local stores. Resetting removes all of it, for the
stores of the previous and of the new config:

1. each task's checkpoint (``task.checkpoint.path``): the inputs are read again from
   ``samza.offset.default``;
2. each store's local directories (``<base>/<store>``, logged and non-logged bases);
3. each store's changelog stream;
4. the coordinator stream's assignments (changelog partitions, task containers, input
   partitions, locality): the new job model assigns afresh.

Nothing is deleted while another process holds it: a store directory or a changelog partition
locked by a running process stops the reset with that process named. The coordinator
stream's assignments are deleted last, so a reset that fails halfway leaves the guard
refusing the change until a reset completes.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from weir.stores.config import Config
from weir.stores.errors import ConfigError, StoreLockedError
from weir.stores.locking import DirectoryLock
from weir.stores.spec import StoreSpec, stores_in

from weir.recovery.checkpoint import FileCheckpointManager

from weir.engine.config.job import JobConfig, StoreBase
from weir.engine.config.streams import all_input_streams
from weir.engine.coordinator.errors import CoordinatorError
from weir.engine.coordinator.state import CoordinatorState, assignment_tombstones
from weir.engine.coordinator.stream import CoordinatorStreamStore
from weir.engine.jobmodel.model import group_ssps
from weir.engine.model import SystemStream
from weir.engine.systems.registry import SystemRegistry

__all__ = ["ResetReport", "reset_job_state", "delete_stream"]

log = logging.getLogger("weir.coordinator")

RESET_SOURCE = "reset-state"


@dataclass
class ResetReport:
    """What a reset deleted."""

    checkpoints: list[Path] = field(default_factory=list)
    store_dirs: list[Path] = field(default_factory=list)
    changelogs: list[SystemStream] = field(default_factory=list)
    assignments: int = 0

    def summary(self) -> str:
        return (f"reset the job's state: {len(self.checkpoints)} checkpoint file(s), "
                f"{len(self.store_dirs)} store director(y/ies), {len(self.changelogs)} "
                f"changelog stream(s) ({', '.join(map(str, self.changelogs)) or 'none'}), "
                f"{self.assignments} assignment(s) in the coordinator stream")


def _job_configs(configs: Iterable[Config]) -> list[JobConfig]:
    out = []
    for config in configs:
        try:
            out.append(JobConfig.from_config(config))
        except ConfigError:
            continue  # an old config that no longer parses names no directories we can trust
    return out


def _specs(config: Config, job: JobConfig) -> list[StoreSpec]:
    specs = []
    for name in stores_in(config):
        try:
            specs.append(StoreSpec.from_config(config, name, changelog_system=job.changelog_system))
        except ConfigError:
            continue
    return specs


def reset_job_state(previous: CoordinatorState, config: Config, store: CoordinatorStreamStore,
                    registry: SystemRegistry) -> ResetReport:
    """Delete the job's state (see the module docstring) and return what was deleted."""
    report = ResetReport()
    configs = [c for c in (previous.config, config) if len(c)]
    jobs = _job_configs(configs)
    tasks = set(previous.changelog) | set(previous.task_containers)
    try:
        tasks |= set(group_ssps(config, registry.partition_counts(all_input_streams(config))))
    except Exception:  # noqa: BLE001 - the new model's errors are reported when it is built
        pass
    for job in jobs:
        manager = FileCheckpointManager(job.checkpoint_dir)
        names = set(tasks)
        if job.checkpoint_dir.is_dir():
            names |= set(manager.list_tasks())
        for name in sorted(names):
            for path in (manager.path_for(name), manager.previous_path_for(name)):
                if path.exists():
                    path.unlink()
                    report.checkpoints.append(path)
    stores: set[str] = set()
    changelogs: set[SystemStream] = set()
    for config_, job in zip(configs, jobs):
        for spec in _specs(config_, job):
            stores.add(spec.name)
            if spec.changelog is not None:
                changelogs.add(SystemStream(*spec.changelog))
    for job in jobs:
        for base in (StoreBase.LOGGED, StoreBase.NON_LOGGED):
            for name in sorted(stores):
                directory = job.base_dir(base) / name
                if directory.is_dir() and directory not in report.store_dirs:
                    _delete_store_dir(directory, name)
                    report.store_dirs.append(directory)
    for ss in sorted(changelogs):
        if delete_stream(registry, ss):
            report.changelogs.append(ss)
    tombstones = assignment_tombstones(previous, source=RESET_SOURCE)
    store.write(tombstones)
    report.assignments = len(tombstones)
    log.warning("%s", report.summary())
    return report


def _trash_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.reset-{os.getpid()}-{time.time_ns()}")


def _delete_store_dir(directory: Path, store: str) -> None:
    """Remove ``<base>/<store>`` unless a process holds one of its task directories."""
    locks = []
    try:
        for task_dir in sorted(p for p in directory.iterdir() if p.is_dir()):
            try:
                locks.append(DirectoryLock.acquire(task_dir, store=store))
            except StoreLockedError as exc:
                raise CoordinatorError(f"cannot reset store '{store}': {exc}") from None
        trash = _trash_name(directory)
        os.rename(directory, trash)
    finally:
        for lock in locks:
            lock.release()
    shutil.rmtree(trash)


def delete_stream(registry: SystemRegistry, ss: SystemStream) -> bool:
    """Delete stream ``ss``; False when it does not exist. Uses the admin's
    ``delete_stream`` when it has one; file log streams are removed whole once no process
    writes any of their partitions."""
    admin = registry.admin(ss.system)
    if not admin.stream_exists(ss.stream):
        return False
    deleter = getattr(admin, "delete_stream", None)
    if callable(deleter):
        deleter(ss.stream)
        return True
    stream_path = getattr(admin, "stream_path", None)
    if not callable(stream_path):
        raise CoordinatorError(
            f"cannot delete stream '{ss}': system '{ss.system}' has no way to delete streams; "
            f"delete it with the system's own tools, then run with --reset-state again")
    from weir.engine.systems.filelog._files import WRITER_LOCK, FileLock, LockBusy

    directory = Path(stream_path(ss.stream))
    locks = []
    try:
        for partition in range(admin.partition_count(ss.stream)):
            lock = FileLock(str(directory / str(partition) / WRITER_LOCK))
            try:
                lock.acquire("reset-state")
            except LockBusy as busy:
                raise CoordinatorError(
                    f"cannot delete stream '{ss}': partition {partition} is being written by "
                    f"process {busy.holder.get('pid', '?')} on {busy.holder.get('host', '?')}; "
                    f"stop it first") from None
            locks.append(lock)
        trash = _trash_name(directory)
        os.rename(directory, trash)
    finally:
        for lock in locks:
            lock.release()
    shutil.rmtree(trash)
    return True
