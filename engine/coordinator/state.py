"""What a coordinator stream says about a job: its config and the assignments of earlier runs.

:class:`CoordinatorState` is read from a bootstrapped
:class:`~weir.engine.coordinator.stream.CoordinatorStreamStore`:

* ``config``: every ``set-config`` entry;
* ``changelog``: task name -> changelog partition (``set-changelog``);
* ``task_containers``: task name -> container id (``set-task-container-assignment``);
* ``partition_counts``: input stream -> partition count, derived from the
  ``set-task-partition-assignment`` entries (highest partition + 1);
* ``locality``: container id -> :class:`Locality` (``set-container-host-assignment``).

:func:`assignment_messages` turns a job model into the messages that record it, keeping what
the stream already says (a task's changelog partition is never rewritten).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson

from weir.stores.config import Config

from weir.engine.coordinator.errors import CoordinatorStreamCorruptError
from weir.engine.coordinator.messages import CoordinatorMessage, MessageType, ssp_key
from weir.engine.coordinator.stream import CoordinatorStreamStore
from weir.engine.jobmodel.model import JobModel
from weir.engine.model import SystemStream

__all__ = ["Locality", "CoordinatorState", "assignment_messages", "assignment_tombstones",
           "localities"]


@dataclass(frozen=True)
class Locality:
    """Where a container last ran (Samza's ProcessorLocality)."""

    container_id: str
    host: str
    jmx_url: str = ""
    jmx_tunneling_url: str = ""
    written_ms: int = 0

    def to_dict(self) -> dict[str, str]:
        return {"id": self.container_id, "host": self.host, "jmx-url": self.jmx_url,
                "jmx-tunneling-url": self.jmx_tunneling_url}


@dataclass(frozen=True)
class CoordinatorState:
    """A job's coordinator stream, interpreted; see the module docstring."""

    config: Config = field(default_factory=Config)
    changelog: Mapping[str, int] = field(default_factory=dict)
    task_containers: Mapping[str, str] = field(default_factory=dict)
    task_partitions: Mapping[str, tuple[SystemStream, int, tuple[str, ...]]] = field(
        default_factory=dict)
    locality: Mapping[str, Locality] = field(default_factory=dict)

    @property
    def is_new(self) -> bool:
        """True when the stream holds no config: the job never ran (or was reset)."""
        return len(self.config) == 0

    @property
    def partition_counts(self) -> dict[SystemStream, int]:
        """Input stream -> partition count when the assignments were last written."""
        out: dict[SystemStream, int] = {}
        for ss, partition, _ in self.task_partitions.values():
            out[ss] = max(out.get(ss, 0), partition + 1)
        return out

    @classmethod
    def from_store(cls, store: CoordinatorStreamStore) -> "CoordinatorState":
        stream = store.stream
        changelog: dict[str, int] = {}
        for task, msg in store.entries(MessageType.SET_CHANGELOG).items():
            raw = msg.value("Partition")
            if raw is None or str(raw).strip() == "":
                continue  # Samza: a blank partition reads as null
            try:
                changelog[task] = int(str(raw))
            except ValueError:
                raise CoordinatorStreamCorruptError(
                    stream, msg.offset, f"set-changelog of task {task!r} has Partition "
                    f"{raw!r}, not an integer", where=store.where) from None
        containers = {task: str(msg.value("containerId"))
                      for task, msg in store.entries(MessageType.SET_TASK_CONTAINER_ASSIGNMENT).items()
                      if msg.value("containerId") is not None}
        partitions: dict[str, tuple[SystemStream, int, tuple[str, ...]]] = {}
        for key, msg in store.entries(MessageType.SET_TASK_PARTITION_ASSIGNMENT).items():
            try:
                ssp = orjson.loads(key)
                tasks = orjson.loads(msg.value("taskNames") or "[]")
                partitions[key] = (SystemStream(str(ssp["system"]), str(ssp["stream"])),
                                   int(ssp["partition"]), tuple(str(t) for t in tasks))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise CoordinatorStreamCorruptError(
                    stream, msg.offset, f"set-task-partition-assignment {key!r} is malformed "
                    f"({type(exc).__name__}: {exc})", where=store.where) from None
        return cls(store.config(), changelog, containers, partitions, localities(store))


def localities(store: CoordinatorStreamStore) -> dict[str, Locality]:
    """Container id -> :class:`Locality` from the ``set-container-host-assignment`` entries."""
    out = {}
    for cid, msg in store.entries(MessageType.SET_CONTAINER_HOST_ASSIGNMENT).items():
        host = msg.value("host")
        if host:
            out[cid] = Locality(cid, str(host), str(msg.value("jmx-url") or ""),
                                str(msg.value("jmx-tunneling-url") or ""), msg.timestamp)
    return out


def assignment_messages(state: CoordinatorState, model: JobModel, *,
                        source: str) -> list[CoordinatorMessage]:
    """The messages that record ``model``'s assignments, given what ``state`` holds:

    * ``set-changelog`` for tasks without a partition yet (existing entries win: a task's
      changelog partition never moves);
    * ``set-task-container-assignment`` for tasks whose container changed, a delete for tasks
      that are gone;
    * ``set-task-partition-assignment`` for input partitions whose tasks changed, a delete for
      partitions that are gone.
    """
    out: list[CoordinatorMessage] = []
    for task, partition in model.changelog_mapping().items():
        if task not in state.changelog:
            out.append(CoordinatorMessage.set_changelog(task, partition, source=source))
    assignment = model.task_assignment()
    for task, cid in assignment.items():
        if state.task_containers.get(task) != cid:
            out.append(CoordinatorMessage.set_task_container(task, cid, source=source))
    for task in state.task_containers:
        if task not in assignment:
            out.append(CoordinatorMessage.delete(MessageType.SET_TASK_CONTAINER_ASSIGNMENT,
                                                 task, source=source))
    by_ssp: dict[str, tuple[SystemStream, int, list[str]]] = {}
    for task, tm in model.tasks().items():
        for ssp in tm.ssps:
            key = ssp_key(ssp.system, ssp.stream, ssp.partition)
            by_ssp.setdefault(key, (ssp.system_stream, ssp.partition, []))[2].append(task)
    for key in sorted(by_ssp):
        ss, partition, tasks = by_ssp[key]
        old = state.task_partitions.get(key)
        if old is None or old[2] != tuple(sorted(tasks)):
            out.append(CoordinatorMessage.set_task_partition(ss.system, ss.stream, partition,
                                                             tasks, source=source))
    for key in state.task_partitions:
        if key not in by_ssp:
            out.append(CoordinatorMessage.delete(MessageType.SET_TASK_PARTITION_ASSIGNMENT,
                                                 key, source=source))
    return out


def assignment_tombstones(state: CoordinatorState, *, source: str) -> list[CoordinatorMessage]:
    """Deletes of every assignment (changelog partitions, task containers, input partitions,
    locality): what ``--reset-state`` writes once the state is gone."""
    out = [CoordinatorMessage.delete(MessageType.SET_CHANGELOG, t, source=source)
           for t in state.changelog]
    out += [CoordinatorMessage.delete(MessageType.SET_TASK_CONTAINER_ASSIGNMENT, t, source=source)
            for t in state.task_containers]
    out += [CoordinatorMessage.delete(MessageType.SET_TASK_PARTITION_ASSIGNMENT, k, source=source)
            for k in state.task_partitions]
    out += [CoordinatorMessage.delete(MessageType.SET_CONTAINER_HOST_ASSIGNMENT, c, source=source)
            for c in state.locality]
    return out
