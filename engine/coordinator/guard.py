"""The immutable-settings guard: settings that decide which state belongs to which task.

Between runs of a job (and for config written while it runs), these may not change, because
the new job model would read a task's state from a changelog partition written by another
task, or lose track of it:

| setting | key | checked when |
|---|---|---|
| the grouper | ``job.systemstreampartition.grouper.factory`` | always (it renames the tasks) |
| an input stream's partition count | ``task.inputs`` | the job has stores |
| a store's changelog | ``stores.<store>.changelog`` | the store existed before |
| the container count | ``job.container.count`` | host affinity is on (``job.host-affinity.enabled``) |

A change raises :class:`~weir.engine.coordinator.errors.ImmutableSettingError` naming the key,
the old and the new value, and the fix (put the old value back, or ``--reset-state``).

While the job runs, the directories it keeps its state in may not change either
(:func:`check_running_directories`): ``job.data.dir``, ``task.checkpoint.path``,
``job.logged.store.base.dir`` and ``job.non-logged.store.base.dir``, compared as the directories
they resolve to (:class:`StateDirectories`). The running job holds its job lock and checkpoints
in one and its stores in the others; a container restarted with another would open other
state, or none, under another job lock. Between runs they may change: moving a job's data is
an operator's move (docs/COORDINATOR.md, "Moving a job's data"), and a directory without the
job's checkpoints is refused by the restore (``StateWithoutCheckpointError``) as before.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.spec import STORE_CHANGELOG, StoreSpec, stores_in

from weir.engine.config.job import (JOB_CHANGELOG_SYSTEM, JOB_DATA_DIR,
                                    JOB_LOGGED_STORE_BASE_DIR, JOB_NON_LOGGED_STORE_BASE_DIR,
                                    TASK_CHECKPOINT_PATH, JobConfig)
from weir.engine.config.streams import JOB_DEFAULT_SYSTEM, TASK_INPUTS
from weir.engine.coordinator.errors import ImmutableSettingError
from weir.engine.coordinator.settings import JOB_HOST_AFFINITY_ENABLED
from weir.engine.coordinator.state import CoordinatorState
from weir.engine.jobmodel.model import (AUTO_CONTAINERS, CONTAINER_COUNT, SSP_GROUPER,
                                        container_count, group_ssps,
                                        requested_container_count, ssp_grouper)
from weir.engine.model import SystemStream

__all__ = ["check_immutable_settings", "check_running_directories", "directory_changes",
           "is_stateful", "StateDirectories"]


def is_stateful(config: Config) -> bool:
    """True when the job has stores (``stores.<name>.factory``)."""
    return bool(stores_in(config))


def _changelog(config: Config, store: str) -> str:
    """The store's changelog as ``system.stream``, or ``(none)``."""
    system = JOB_CHANGELOG_SYSTEM.get(config) or JOB_DEFAULT_SYSTEM.get(config)
    try:
        spec = StoreSpec.from_config(config, store, changelog_system=system)
    except ConfigError:
        raw = config.get_str(STORE_CHANGELOG.key(store=store))
        return raw if raw else "(none)"
    return f"{spec.changelog[0]}.{spec.changelog[1]}" if spec.changelog else "(none)"


def check_immutable_settings(previous: CoordinatorState, config: Config,
                             partition_counts: Mapping[SystemStream, int]) -> None:
    """Raise ImmutableSettingError when ``config`` (with the inputs' current
    ``partition_counts``) changes a setting the job's state depends on, compared with
    ``previous`` (the coordinator stream before this run wrote anything). A new job (no
    config in the stream) passes."""
    if previous.is_new:
        return
    old_config = previous.config
    old, new = ssp_grouper(old_config), ssp_grouper(config)
    if old is not new:
        key = SSP_GROUPER.name
        raise ImmutableSettingError(
            key, old.value, new.value,
            "the grouper names the tasks, and each task's checkpoint and changelog partition "
            "belong to its name", origin=config.origin(key))
    if is_stateful(config):
        before = previous.partition_counts
        for ss in sorted(partition_counts):
            if ss in before and before[ss] != partition_counts[ss]:
                key = TASK_INPUTS.name
                raise ImmutableSettingError(
                    key, f"{ss} with {before[ss]} partitions",
                    f"{ss} with {partition_counts[ss]} partitions",
                    "keys are partitioned by the partition count, so a key's messages would "
                    "reach a task that does not hold its state", origin=config.origin(key))
    for store in sorted(set(stores_in(old_config)) & set(stores_in(config))):
        was, now = _changelog(old_config, store), _changelog(config, store)
        if was != now:
            key = STORE_CHANGELOG.key(store=store)
            raise ImmutableSettingError(
                key, was, now, f"store '{store}' would be restored from another changelog "
                f"than the one that holds its state", origin=config.origin(key))
    if JOB_HOST_AFFINITY_ENABLED.get(config) or JOB_HOST_AFFINITY_ENABLED.get(old_config):
        was_count = _containers(old_config, previous.partition_counts)
        now_count = _containers(config, partition_counts)
        if was_count != now_count:
            key = CONTAINER_COUNT.name
            raise ImmutableSettingError(
                key, _describe_count(old_config, was_count), _describe_count(config, now_count),
                "with job.host-affinity.enabled each container's tasks and local state stay "
                "on the host it last ran on", origin=config.origin(key))


def _containers(config: Config, partition_counts: Mapping[SystemStream, int]) -> int:
    """The container count ``config`` gives with these partition counts (``auto`` resolved
    on this machine)."""
    if requested_container_count(config) is not None:
        return container_count(config)
    try:
        tasks = len(group_ssps(config, partition_counts))
    except Exception:  # noqa: BLE001 - inputs not known (any more): count as one task
        tasks = 1
    return container_count(config, tasks)


def _describe_count(config: Config, count: int) -> str:
    return str(count) if requested_container_count(config) is not None else (
        f"{AUTO_CONTAINERS} ({count} on this machine)")


# -- while the job runs: the directories of its state -------------------------------------------

@dataclass(frozen=True)
class StateDirectories:
    """Where a job keeps its state on this machine, as absolute paths: ``job.data.dir`` and
    the directories it gives by default (checkpoints and the job lock, stores with and without
    a changelog)."""

    data_dir: Path
    checkpoint_dir: Path
    logged_store_base_dir: Path
    non_logged_store_base_dir: Path

    @classmethod
    def of(cls, config: Config, *, cwd: Path | None = None,
           environ: Mapping[str, str] | None = None) -> "StateDirectories":
        """The directories ``config`` gives in working directory ``cwd`` (this process's by
        default) with ``environ`` (for ``LOGGED_STORE_BASE_DIR``; ``os.environ`` by default)."""
        job = JobConfig.from_config(config, cwd=cwd, environ=environ)
        return cls(*(Path(os.path.abspath(p)) for p in (
            job.data_dir, job.checkpoint_dir, job.logged_store_base_dir,
            job.non_logged_store_base_dir)))

    def to_record(self) -> dict[str, str]:
        return {"data_dir": str(self.data_dir), "checkpoint_dir": str(self.checkpoint_dir),
                "logged_store_base_dir": str(self.logged_store_base_dir),
                "non_logged_store_base_dir": str(self.non_logged_store_base_dir)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "StateDirectories | None":
        """The directories a :meth:`to_record` dict names; None when it lacks one."""
        try:
            return cls(*(Path(str(record[k])) for k in (
                "data_dir", "checkpoint_dir", "logged_store_base_dir",
                "non_logged_store_base_dir")))
        except KeyError:
            return None

    def describe(self) -> str:
        """``job.data.dir D (checkpoints C, stores S)`` for messages."""
        stores = str(self.logged_store_base_dir)
        if self.non_logged_store_base_dir != self.logged_store_base_dir:
            stores += f" and {self.non_logged_store_base_dir}"
        return (f"job.data.dir {self.data_dir} (checkpoints and job lock in "
                f"{self.checkpoint_dir}, stores in {stores})")


_DIRECTORY_KEYS = (
    ("checkpoint_dir", TASK_CHECKPOINT_PATH, "its checkpoints and its job lock"),
    ("logged_store_base_dir", JOB_LOGGED_STORE_BASE_DIR, "its stores with a changelog"),
    ("non_logged_store_base_dir", JOB_NON_LOGGED_STORE_BASE_DIR,
     "its stores without a changelog"),
)


def check_running_directories(running: StateDirectories, old: Config, new: Config, *,
                              cwd: Path | None = None,
                              environ: Mapping[str, str] | None = None) -> None:
    """Raise ImmutableSettingError when config ``new``, written while the job runs with
    ``old`` in directories ``running``, would move a directory of its state (see the module
    docstring). ``cwd`` and ``environ`` are the running job's (this process's by default):
    relative directories resolve against its working directory.

    The key named is the one whose value moves the directory: ``task.checkpoint.path``,
    ``job.logged.store.base.dir`` or ``job.non-logged.store.base.dir`` when its value changed,
    else ``job.data.dir`` (the directories it gives by default)."""
    after = StateDirectories.of(new, cwd=cwd, environ=environ)
    moved = [(field, decl, what) for field, decl, what in _DIRECTORY_KEYS
             if getattr(running, field) != getattr(after, field)]
    if not moved:
        return
    for field, decl, what in moved:
        if old.get(decl.name) != new.get(decl.name):
            key, was, now = decl.name, getattr(running, field), getattr(after, field)
            break
    else:
        key, was, now = JOB_DATA_DIR.name, running.data_dir, after.data_dir
        by_directory: dict[Path, list[str]] = {}
        for field, _, what in moved:
            by_directory.setdefault(getattr(running, field), []).append(what)
        what = "; ".join(f"{' and '.join(whats)} in {directory}"
                         for directory, whats in by_directory.items())
    kept = what if key == JOB_DATA_DIR.name else f"{what} in {was}"
    value = old.get(key)
    put_back = "--delete" if value is None else f"--value {shlex.quote(value)}"
    raise ImmutableSettingError(
        key, str(was), str(now),
        f"the job runs and keeps {kept}; a container restarted with the new value "
        f"would open other state, or none, under another job lock",
        origin=new.origin(key),
        fix=(f"The running job keeps {str(was)!r}; if the new value was written to the "
             f"coordinator stream, write the old one back (`weir coordinator set-config "
             f"<config> --key {key} {put_back}`). To move the job's data, stop the job, move "
             f"the directories to the new place and start it with the new value "
             f"(docs/COORDINATOR.md, 'Moving a job's data')"))


def directory_changes(previous: Config, config: Config) -> list[tuple[str, str | None, str | None]]:
    """``(key, old value, new value)`` of each directory key whose value differs between the
    last run's config and this one (``None``: not set). Allowed between runs (the job's data
    may have been moved); a start reports them, since a job pointed at directories without its
    checkpoints is refused by its restore."""
    return [(decl.name, previous.get(decl.name), config.get(decl.name))
            for decl in (JOB_DATA_DIR, *(d for _, d, _ in _DIRECTORY_KEYS))
            if previous.get(decl.name) != config.get(decl.name)]
