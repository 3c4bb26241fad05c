"""The job model: which container runs which tasks, and which input partitions each task reads.

Built from the config and the partition count of every input stream, as Samza's JobModel
(docs/COORDINATOR.md, "The job model and stable assignments"):

1. input SSPs: every partition of every ``task.inputs`` stream;
2. grouping (``job.systemstreampartition.grouper.factory``): by partition (task
   ``Partition N`` takes partition N of every input) or by SSP (one task per SSP, named
   ``SystemStreamPartition [system, stream, N]``); broadcast SSPs (``task.broadcast.inputs``)
   are left out of the grouping and added to every task;
3. changelog partitions: a task keeps the partition it had before; a new task ``Partition N``
   takes N when free; other new tasks, in name order, take the next partition after the
   highest in use (section 4.9, see :func:`changelog_partition_mapping`);
4. containers (``job.container.count``; ``auto``, the default, is min(tasks, usable CPU
   cores), 1 for a job on an in-process system): tasks sorted by name (as strings) dealt
   round-robin,
   or the previous assignment kept / rebalanced (:func:`assign_containers`).

Example::

    >>> from weir.stores.config import Config
    >>> cfg = Config({"task.inputs": "filelog.clicks,filelog.users", "job.container.count": "2"})
    >>> model = build_job_model(cfg, {SystemStream("filelog", "clicks"): 3,
    ...                               SystemStream("filelog", "users"): 3})
    >>> {cid: sorted(c.tasks) for cid, c in model.containers.items()}
    {'0': ['Partition 0', 'Partition 2'], '1': ['Partition 1']}
    >>> sorted(str(s) for s in model.task("Partition 1").ssps)
    ['filelog.clicks#1', 'filelog.users#1']
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from weir.stores.config import Config, ConfigKey, declare
from weir.stores.errors import ConfigError

from weir.engine.jobmodel.frozen import FrozenMap
from weir.engine.jobmodel.grouping import (
    JobModelError,
    assign_containers,
    changelog_partition_mapping,
    container_order,
)
from weir.engine.errors import StreamNotFoundError
from weir.engine.model import SystemStream, SystemStreamPartition, TaskName
from weir.engine.config.streams import (TASK_BROADCAST_INPUTS, TASK_INPUTS, broadcast_inputs,
                                        broadcast_streams, job_inputs)

__all__ = [
    "SspGrouper",
    "TaskNameGrouper",
    "task_name_grouper",
    "ALL_SSP_TASK",
    "TaskMode",
    "TaskModel",
    "ContainerModel",
    "JobModel",
    "JobModelError",
    "build_job_model",
    "group_ssps",
    "changelog_partition_mapping",
    "assign_containers",
    "ssp_grouper",
    "container_count",
    "requested_container_count",
    "usable_cores",
    "AUTO_CONTAINERS",
    "task_name_for_partition",
    "task_name_for_ssp",
    "SSP_GROUPER",
    "CONTAINER_COUNT",
    "TASK_NAME_GROUPER",
]


class SspGrouper(Enum):
    """How input partitions are grouped into tasks."""

    BY_PARTITION = "partition"
    BY_SSP = "ssp"
    ALL_TO_ONE_TASK = "all-to-one-task"
    """Samza's AllSspToSingleTaskGrouper: one task (``Task-0``) reads every partition."""


_SAMZA_GROUPERS = {
    "org.apache.samza.container.grouper.stream.GroupByPartitionFactory": SspGrouper.BY_PARTITION,
    "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory": SspGrouper.BY_SSP,
    "org.apache.samza.container.grouper.stream.AllSspToSingleTaskGrouperFactory":
        SspGrouper.ALL_TO_ONE_TASK,
}
_GROUPERS = {g.value: g for g in SspGrouper} | _SAMZA_GROUPERS

SSP_GROUPER = declare(
    "job.systemstreampartition.grouper.factory", str, SspGrouper.BY_PARTITION.value,
    "How input partitions become tasks: `partition` (task `Partition N` reads partition N of "
    "every input), `ssp` (one task per partition of each input) or `all-to-one-task` (Samza's "
    "AllSspToSingleTaskGrouperFactory: one task, `Task-0`, reads every partition, in one "
    "container; Samza relies on Kafka's consumer groups to split the partitions between "
    "containers, which the file log does not have). Samza's factory class names are "
    "accepted. Changing it changes the tasks, so stateful jobs must not change it.",
    component="job model", choices=tuple(_GROUPERS))
AUTO_CONTAINERS = "auto"
"""``job.container.count=auto`` (the default): min(tasks, usable CPU cores), or 1 when the job
uses a system whose streams live in one process's memory (the ``memory`` system)."""


class ContainerCountType:
    """The value type of ``job.container.count``: a positive integer, or ``auto`` (None)."""

    type_name = "positive integer or 'auto'"

    @staticmethod
    def parse_value(raw: str) -> int | None:
        text = raw.strip()
        if text.lower() == AUTO_CONTAINERS:
            return None
        count = int(text)
        if count < 1:
            raise ValueError("a job needs at least 1 container")
        return count


CONTAINER_COUNT = declare(
    "job.container.count", ContainerCountType, AUTO_CONTAINERS,
    "Number of containers the tasks are spread over (round-robin by task name), at most the "
    "number of tasks; each container is a process when there are more than one. `auto` (the "
    "default): min(tasks, usable CPU cores), so a job uses every core; 1 for a job on an "
    "in-process system (`memory`). Tasks of all containers may send to the same file-log "
    "partition (producers append in turn). A number is used exactly.",
    component="job model", aliases=("yarn.container.count",))
class TaskNameGrouper(Enum):
    """How tasks are spread over containers (``task.name.grouper.factory``)."""

    CONTAINER_COUNT = "container-count"
    """Samza's GroupByContainerCount: round-robin by task name; a later run keeps the
    previous assignment, or moves as few tasks as possible when the count changed; more
    containers than tasks is an error."""
    CONTAINER_IDS = "container-ids"
    """Samza's GroupByContainerIds: round-robin by task name over the container ids 0..n-1,
    dealt afresh each run; more containers than tasks uses as many containers as tasks."""


_TASK_GROUPERS = {g.value: g for g in TaskNameGrouper} | {
    "org.apache.samza.container.grouper.task.GroupByContainerCountFactory":
        TaskNameGrouper.CONTAINER_COUNT,
    "org.apache.samza.container.grouper.task.GroupByContainerIdsFactory":
        TaskNameGrouper.CONTAINER_IDS,
}

TASK_NAME_GROUPER = declare(
    "task.name.grouper.factory", str, "container-count", "How tasks are spread over containers: "
    "`container-count` (Samza's GroupByContainerCountFactory: round-robin by task name, a "
    "later run keeps the previous assignment or moves as few tasks as it can) or "
    "`container-ids` (Samza's GroupByContainerIdsFactory: round-robin dealt afresh, and more "
    "containers than tasks uses one per task). Samza's class names are accepted.",
    component="job model", choices=tuple(_TASK_GROUPERS))


class TaskMode(Enum):
    ACTIVE = "Active"
    STANDBY = "Standby"


# -- the model ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskModel:
    """One task: its name, the SSPs it reads and the partition of its stores' changelogs."""

    task_name: TaskName
    ssps: frozenset[SystemStreamPartition]
    changelog_partition: int
    task_mode: TaskMode = TaskMode.ACTIVE

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_name", TaskName(self.task_name))
        object.__setattr__(self, "ssps", frozenset(SystemStreamPartition(*s) for s in self.ssps))

    def sorted_ssps(self) -> list[SystemStreamPartition]:
        return sorted(self.ssps)


@dataclass(frozen=True)
class ContainerModel:
    """One container (``container_id`` ``"0"``, ``"1"``, ...) and its tasks by name."""

    container_id: str
    tasks: Mapping[TaskName, TaskModel]

    def __post_init__(self) -> None:
        object.__setattr__(self, "container_id", str(self.container_id))
        object.__setattr__(self, "tasks", FrozenMap(
            (TaskName(name), self.tasks[name]) for name in sorted(self.tasks)))


@dataclass(frozen=True)
class JobModel:
    """The whole job: config and containers by id. ``max_change_log_stream_partitions``
    (highest changelog partition + 1) is derived when not given."""

    config: Config
    containers: Mapping[str, ContainerModel]
    max_change_log_stream_partitions: int = field(default=-1)

    def __post_init__(self) -> None:
        object.__setattr__(self, "containers", FrozenMap(
            (cid, self.containers[cid]) for cid in sorted(self.containers, key=container_order)))
        derived = max((t.changelog_partition for t in self.tasks().values()), default=-1) + 1
        object.__setattr__(self, "max_change_log_stream_partitions",
                           max(derived, self.max_change_log_stream_partitions))

    def tasks(self) -> dict[TaskName, TaskModel]:
        """Every task of every container, by name (sorted)."""
        out = {name: t for c in self.containers.values() for name, t in c.tasks.items()}
        return {name: out[name] for name in sorted(out)}

    def task(self, name: str) -> TaskModel:
        for container in self.containers.values():
            if name in container.tasks:
                return container.tasks[name]  # type: ignore[index]
        raise KeyError(f"no task named {name!r} in the job model")

    def task_assignment(self) -> dict[TaskName, str]:
        """Task name -> container id."""
        return {name: cid for cid, c in self.containers.items() for name in c.tasks}

    def changelog_mapping(self) -> dict[TaskName, int]:
        """Task name -> changelog partition (what the coordinator stream stores)."""
        return {name: t.changelog_partition for name, t in self.tasks().items()}

    def to_dict(self) -> dict:
        """Samza's JSON shape as plain data: dash-case keys, containers by id, tasks by name,
        SSPs sorted, plus the derived ``max-change-log-stream-partitions``."""
        return {
            "config": {k: self.config[k] for k in sorted(self.config)},
            "containers": {cid: {
                "processor-id": cid,
                "tasks": {name: {
                    "task-name": name,
                    "system-stream-partitions": [
                        {"system": s.system, "stream": s.stream, "partition": s.partition,
                         "keyBucket": -1} for s in task.sorted_ssps()],
                    "changelog-partition": task.changelog_partition,
                    "task-mode": task.task_mode.value,
                } for name, task in container.tasks.items()},
            } for cid, container in self.containers.items()},
            "max-change-log-stream-partitions": self.max_change_log_stream_partitions,
        }

    def to_json(self) -> str:
        """Compact, deterministic JSON: the same model always gives the same text."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> "JobModel":
        """Read Samza's JSON shape. Unknown properties are ignored; a container without
        ``processor-id`` uses the pre-0.13 integer ``container-id``; an SSP without
        ``keyBucket`` gets -1. Anything malformed raises JobModelError."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise JobModelError(f"job model JSON is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping) -> "JobModel":
        try:
            containers = {}
            for key, c in dict(data.get("containers") or {}).items():
                cid = _container_id(key, c)
                tasks = {name: _task_from_dict(name, t) for name, t in dict(c.get("tasks") or {}).items()}
                containers[cid] = ContainerModel(cid, tasks)
            config = Config({str(k): v for k, v in dict(data.get("config") or {}).items()})
        except JobModelError:
            raise
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise JobModelError(f"job model JSON is malformed ({type(exc).__name__}: {exc}); "
                                f"expected Samza's shape {{config, containers: {{id: {{processor-id, "
                                f"tasks}}}}}}") from None
        return cls(config, containers)


def _container_id(key: str, c: Mapping) -> str:
    if "processor-id" in c:
        return str(c["processor-id"])
    if "container-id" in c:
        return str(int(c["container-id"]))
    raise JobModelError(f"job model JSON: container {key!r} has neither 'processor-id' nor "
                        f"'container-id'")


def _task_from_dict(name: str, t: Mapping) -> TaskModel:
    ssps = []
    for s in t.get("system-stream-partitions") or []:
        bucket = s.get("keyBucket", -1)
        if bucket != -1:
            raise JobModelError(f"job model JSON: task {name!r} has an SSP with keyBucket "
                                f"{bucket}; key buckets (Samza elasticity) are not supported")
        ssps.append(SystemStreamPartition(str(s["system"]), str(s["stream"]), int(s["partition"])))
    mode = t.get("task-mode", TaskMode.ACTIVE.value)
    try:
        task_mode = TaskMode(mode)
    except ValueError:
        raise JobModelError(f"job model JSON: task {name!r} has task-mode {mode!r}; expected "
                            f"Active or Standby") from None
    return TaskModel(TaskName(t.get("task-name", name)), frozenset(ssps),
                     int(t["changelog-partition"]), task_mode)


# -- config -------------------------------------------------------------------------------------

def _set_key(config: Config, decl: ConfigKey) -> str:
    """The name under which ``decl`` is set in ``config`` (itself or an alias)."""
    return next((k for k in (decl.name, *decl.aliases) if k in config), decl.name)


def ssp_grouper(config: Config) -> SspGrouper:
    return _GROUPERS[SSP_GROUPER.get(config)]


def task_name_grouper(config: Config) -> TaskNameGrouper:
    return _TASK_GROUPERS[TASK_NAME_GROUPER.get(config)]


def requested_container_count(config: Config) -> int | None:
    """``job.container.count`` as set: a number, or None for ``auto``."""
    value = CONTAINER_COUNT.get(config)
    return None if value == AUTO_CONTAINERS else value


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, e.g. a container's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def container_count(config: Config, tasks: int | None = None) -> int:
    """The number of containers: the configured number, or for ``auto`` min(``tasks``,
    usable cores) (1 when ``tasks`` is not known or the job uses an in-process system)."""
    count = requested_container_count(config)
    if count is None:
        if tasks is None or tasks <= 1:
            return 1
        if _uses_in_process_system(config):
            return 1
        return max(1, min(tasks, usable_cores()))
    return count


def _uses_in_process_system(config: Config) -> bool:
    from weir.engine.config.streams import JOB_DEFAULT_SYSTEM
    from weir.engine.systems.registry import process_local_systems

    named = {ss.system for ss in job_inputs(config)} | {
        ss.system for ss in broadcast_inputs(config)}
    default = JOB_DEFAULT_SYSTEM.get(config)
    if default:
        named.add(default)
    return bool(process_local_systems(config, named))


def task_name_for_partition(partition: int) -> TaskName:
    return TaskName(f"Partition {partition}")


def task_name_for_ssp(ssp: SystemStreamPartition) -> TaskName:
    return TaskName(f"SystemStreamPartition [{ssp.system}, {ssp.stream}, {ssp.partition}]")


# -- steps --------------------------------------------------------------------------------------

def _partition_count(config: Config, counts: Mapping[SystemStream, int], ss: SystemStream,
                     key: str) -> int:
    count = counts.get(ss)
    if count is None:
        where = f" at {config.origin(key)}" if config.origin(key) else ""
        raise StreamNotFoundError(ss.system, ss.stream, hint=(
            f"no partition count for this stream, named in {key}{where}; create the stream "
            f"(e.g. `weir log create {ss.stream} --partitions N`) or remove it from {key}"))
    if count < 0:
        raise JobModelError(f"stream '{ss}' has a negative partition count {count}")
    return count


def group_ssps(config: Config, partition_counts: Mapping[SystemStream, int]
               ) -> dict[TaskName, frozenset[SystemStreamPartition]]:
    """Task name -> SSPs, per the configured grouper, broadcast SSPs (``task.broadcast.inputs``
    and every partition of a ``samza.broadcast`` input) added to every task."""
    broadcast = broadcast_inputs(config)
    for ssp in broadcast:
        n = _partition_count(config, partition_counts, ssp.system_stream, TASK_BROADCAST_INPUTS.name)
        if ssp.partition >= n:
            key = TASK_BROADCAST_INPUTS.name
            raise ConfigError(f"names partition {ssp.partition} of '{ssp.system_stream}', which "
                              f"has {n} partitions (0..{n - 1})", key=key, origin=config.origin(key))
    for ss in broadcast_streams(config):
        for p in range(_partition_count(config, partition_counts, ss, TASK_INPUTS.name)):
            ssp = SystemStreamPartition(ss.system, ss.stream, p)
            if ssp not in broadcast:
                broadcast.append(ssp)
    excluded = set(broadcast)
    grouper = ssp_grouper(config)
    if grouper is SspGrouper.ALL_TO_ONE_TASK:
        return _all_to_one_task(config, partition_counts, excluded)
    groups: dict[TaskName, set[SystemStreamPartition]] = {}
    for ss in job_inputs(config):
        for p in range(_partition_count(config, partition_counts, ss, TASK_INPUTS.name)):
            ssp = SystemStreamPartition(ss.system, ss.stream, p)
            if ssp in excluded:
                continue
            name = task_name_for_partition(p) if grouper is SspGrouper.BY_PARTITION \
                else task_name_for_ssp(ssp)
            groups.setdefault(name, set()).add(ssp)
    return {name: frozenset(groups[name] | excluded) for name in sorted(groups)}


ALL_SSP_TASK = TaskName("Task-0")
"""The one task of ``AllSspToSingleTaskGrouperFactory`` (Samza names it ``Task-<processor>``;
the one container here is ``0``)."""


def _all_to_one_task(config: Config, partition_counts: Mapping[SystemStream, int],
                     broadcast: set[SystemStreamPartition]
                     ) -> dict[TaskName, frozenset[SystemStreamPartition]]:
    """Samza's AllSspToSingleTaskGrouper: one task reads every input partition. Samza gives
    each container such a task and lets Kafka's consumer group split the partitions between
    them; the file log has no consumer groups, so here the job has one task (and one
    container), and broadcast inputs are refused as Samza refuses them."""
    key = _set_key(config, SSP_GROUPER)
    if broadcast:
        raise ConfigError("cannot be AllSspToSingleTaskGrouperFactory with broadcast inputs "
                          "(task.broadcast.inputs or samza.broadcast), as in Samza: its one "
                          "task already reads every partition", key=key,
                          origin=config.origin(key))
    ssps = {SystemStreamPartition(ss.system, ss.stream, p) for ss in job_inputs(config)
            for p in range(_partition_count(config, partition_counts, ss, TASK_INPUTS.name))}
    return {ALL_SSP_TASK: frozenset(ssps)} if ssps else {}


def build_job_model(config: Config, partition_counts: Mapping[SystemStream, int], *,
                    previous: JobModel | None = None,
                    changelog_mapping: Mapping[str, int] | None = None,
                    task_assignment: Mapping[str, str] | None = None) -> JobModel:
    """The job model for ``config`` given each input stream's partition count.

    ``previous`` (the last run's model) keeps tasks on their containers and changelog
    partitions; ``changelog_mapping`` (the coordinator stream's ``set-changelog`` entries,
    which may name tasks that no longer exist) overrides the previous model's mapping;
    ``task_assignment`` (task name -> container id, the stream's
    ``set-task-container-assignment`` entries) likewise overrides the previous model's. The
    same config and counts always give the same model.

    Raises StreamNotFoundError for an input without a partition count, and ConfigError (with
    ``file:line``) for a bad key, a job without tasks or more containers than tasks.
    """
    task_grouper = task_name_grouper(config)
    requested_container_count(config)  # validates before the groups are computed
    groups = group_ssps(config, partition_counts)
    count = container_count(config, len(groups))
    if not groups:
        key = TASK_INPUTS.name
        raise ConfigError("gives the job no tasks: list at least one input stream with "
                          "partitions (broadcast inputs alone create no task)",
                          key=key, origin=config.origin(key))
    if count > len(groups) and task_grouper is TaskNameGrouper.CONTAINER_IDS:
        count = len(groups)  # Samza's GroupByContainerIds takes the first ids only
    elif count > len(groups):
        key = _set_key(config, CONTAINER_COUNT)
        why = (" (job.systemstreampartition.grouper.factory is AllSspToSingleTaskGrouperFactory:"
               " one task reads every partition, so the job runs in one container)"
               if ssp_grouper(config) is SspGrouper.ALL_TO_ONE_TASK else "")
        raise ConfigError(f"is {count} but the job has only {len(groups)} tasks{why}; set it "
                          f"to at most {len(groups)} or add input partitions",
                          key=key, origin=config.origin(key))
    if changelog_mapping is None and previous is not None:
        changelog_mapping = previous.changelog_mapping()
    partitions = changelog_partition_mapping(list(groups), changelog_mapping)
    if task_assignment is None and previous is not None:
        task_assignment = previous.task_assignment()
    if task_grouper is TaskNameGrouper.CONTAINER_IDS:
        task_assignment = None  # dealt afresh, as Samza's GroupByContainerIds does
    assignment = assign_containers(list(groups), count, task_assignment)
    containers = {
        cid: ContainerModel(cid, {name: TaskModel(name, groups[name], partitions[name])
                                  for name in names})
        for cid, names in assignment.items()}
    return JobModel(config, containers)
