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
"""

from __future__ import annotations

from collections.abc import Mapping

from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.spec import STORE_CHANGELOG, StoreSpec, stores_in

from weir.engine.config.job import JOB_CHANGELOG_SYSTEM
from weir.engine.config.streams import JOB_DEFAULT_SYSTEM, TASK_INPUTS
from weir.engine.coordinator.errors import ImmutableSettingError
from weir.engine.coordinator.settings import JOB_HOST_AFFINITY_ENABLED
from weir.engine.coordinator.state import CoordinatorState
from weir.engine.jobmodel.model import (AUTO_CONTAINERS, CONTAINER_COUNT, SSP_GROUPER,
                                        container_count, group_ssps,
                                        requested_container_count, ssp_grouper)
from weir.engine.model import SystemStream

__all__ = ["check_immutable_settings", "is_stateful"]


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
