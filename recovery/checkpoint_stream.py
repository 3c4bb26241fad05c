"""Checkpoints in a compacted stream: :class:`StreamCheckpointManager`.

Samza keeps checkpoints in a compacted Kafka topic, ``__samza_checkpoint_ver_1_for_<job>_<id>``
(``task.checkpoint.system``); so can Weir, as an alternative to one file per task
(:class:`~weir.recovery.checkpoint.FileCheckpointManager`). The two are interchangeable: the
same :class:`~weir.recovery.checkpoint.Checkpoint`, the same checksummed encoding (format 2),
the same stream identities, the same refusal to move an input offset backwards, the same
previous generation for ``weir checkpoint use-previous``, and the same crash guarantees.

``recovery`` does not know streams: the manager reads and appends records through a
:class:`CheckpointLog` (the engine adapts a system's stream to it). Each task's records go to
one partition of the log (its changelog partition number): the file log has one writer per
partition, and every container writes only its own tasks' partitions.

Records (key -> value), keys compact JSON as Samza's checkpoint keys::

    {"type":"checkpoint","task":"Partition 0"}           -> the last checkpoint
    {"type":"checkpoint-previous","task":"Partition 0"}  -> the one before it
    {"type":"checkpoint-replaced","task":"Partition 0","at":"20250102T030405Z"}
                                                          -> kept by use-previous, never removed

Each value is exactly a checkpoint file's bytes (:func:`~weir.recovery.checkpoint.encode_checkpoint`,
with its CRC-32C). A write appends the current last checkpoint as ``checkpoint-previous`` and
the new one as ``checkpoint`` in one append and one flush (durable when ``write`` returns);
compaction keeps the newest value of each key. Atomicity: a crash before the flush leaves the
old records; a record torn by a crash is cut off by the log (its CRC fails) and never read; if
only the ``checkpoint-previous`` record made it, it equals the last checkpoint, which stays the
last. A value that does not decode is :class:`~weir.recovery.errors.CheckpointCorruptError`,
with the same safe ways out as a damaged file.

Example::

    >>> log = MemoryCheckpointLog()
    >>> manager = StreamCheckpointManager(log, {"Partition 0": 0})
    >>> manager.register("Partition 0"); manager.start()
    >>> manager.write("Partition 0", Checkpoint({("filelog", "clicks", 0): 41}, {"counts": 7}))
    >>> manager.read_last("Partition 0").input_offsets
    mappingproxy({('filelog', 'clicks', 0): 41})
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import orjson

from weir.recovery.checkpoint import (Checkpoint, CheckpointEntry, CheckpointFile, _Bindings,
                                      aside_suffix, check_forward, corrupt_advice,
                                      decode_checkpoint_file, encode_checkpoint, _ssp_key)
from weir.recovery.errors import CheckpointCorruptError, RecoveryError

__all__ = ["CheckpointLog", "MemoryCheckpointLog", "StreamCheckpointManager", "record_key"]

_log = logging.getLogger(__name__)

LAST = "checkpoint"
PREVIOUS = "checkpoint-previous"
REPLACED = "checkpoint-replaced"


def record_key(kind: str, task: str, **extra: str) -> bytes:
    """The key of a checkpoint record (compact JSON, sorted keys)."""
    return orjson.dumps({"type": kind, "task": str(task), **extra}, option=orjson.OPT_SORT_KEYS)


@runtime_checkable
class CheckpointLog(Protocol):
    """Where a :class:`StreamCheckpointManager` keeps its records: a compacted, partitioned
    log of ``(key, value)`` records."""

    def read(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        """Every record of ``partition`` now, in order (``None`` value: a tombstone)."""
        ...

    def append(self, partition: int, records: list[tuple[bytes, bytes]]) -> None:
        """Append ``records`` to ``partition``; durable when it returns."""
        ...

    def describe(self, partition: int | None = None) -> str:
        """The log (and partition) in words, for messages."""
        ...


class MemoryCheckpointLog:
    """A :class:`CheckpointLog` in a dict (tests, examples)."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}

    def read(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        return list(self.partitions.get(partition, []))

    def append(self, partition: int, records: list[tuple[bytes, bytes]]) -> None:
        self.partitions.setdefault(partition, []).extend(records)

    def describe(self, partition: int | None = None) -> str:
        where = f" partition {partition}" if partition is not None else ""
        return f"memory checkpoint log{where}"


class StreamCheckpointManager:
    """Checkpoints as records of a compacted stream (see the module docstring).

    ``partitions`` maps each task to its partition of the log (its changelog partition);
    ``job_config`` only makes the advice in error messages name the right command.
    """

    def __init__(self, log: CheckpointLog, partitions: Mapping[str, int], *,
                 job_config: str | None = None):
        self.log = log
        self.partitions = {str(task): int(p) for task, p in partitions.items()}
        self.job_config = job_config
        self._tasks: set[str] = set()
        self._records: dict[int, dict[bytes, bytes | None]] = {}
        self._bindings = _Bindings()
        self._stopped = False

    # -- lifecycle -----------------------------------------------------------------------
    def register(self, task_name: str) -> None:
        self._partition(str(task_name))
        self._tasks.add(str(task_name))

    def start(self) -> None:
        """Read the partitions of the registered tasks (the latest record of every key)."""
        for partition in sorted({self.partitions[t] for t in self._tasks}):
            self._load(partition)

    def stop(self) -> None:
        self._stopped = True

    # -- binding the running job -----------------------------------------------------------
    def bind(self, task_name: str, *, inputs: Mapping[Any, str] | None = None,
             changelogs: Mapping[str, str] | None = None,
             changelog_partitions: Mapping[str, Any] | None = None) -> None:
        """See :meth:`FileCheckpointManager.bind`."""
        self._bindings.bind(str(task_name), inputs, changelogs, changelog_partitions)

    def allow_rewind(self, task_name: str, ssps: Collection[Any]) -> None:
        """See :meth:`FileCheckpointManager.allow_rewind`."""
        self._bindings.rewind.setdefault(str(task_name), set()).update(
            _ssp_key(s) for s in ssps)

    # -- reading and writing -------------------------------------------------------------
    def location(self, task_name: str) -> str:
        """Where ``task_name``'s checkpoint lives, in words."""
        return (f"{self.log.describe(self._partition(str(task_name)))}, key "
                f"{record_key(LAST, task_name).decode()}")

    def read_last(self, task_name: str) -> Checkpoint | None:
        """The last checkpoint of ``task_name``, or None if it never wrote one."""
        self._check_open()
        task_name = str(task_name)
        checkpoint = self._decoded(task_name, LAST)
        self._bindings.last[task_name] = checkpoint
        return checkpoint

    def read_previous(self, task_name: str) -> Checkpoint | None:
        """The checkpoint before the last one, or None."""
        self._check_open()
        return self._decoded(str(task_name), PREVIOUS)

    def has_previous(self, task_name: str) -> bool:
        return self._raw(str(task_name), PREVIOUS) is not None

    def write(self, task_name: str, checkpoint: Checkpoint) -> None:
        """Append ``checkpoint`` as the last one of ``task_name`` (the current last one
        becomes the previous); durable on return. Refuses to move an input offset backwards
        (:class:`~weir.recovery.errors.CheckpointRegressionError`, nothing written)."""
        self._check_open()
        task_name = str(task_name)
        checkpoint = self._bindings.stamp(task_name, checkpoint)
        check_forward(task_name, self._baseline(task_name), checkpoint,
                      allowed=self._bindings.rewind.get(task_name, ()),
                      path=self.location(task_name))
        self._append(task_name, encode_checkpoint(task_name, checkpoint))
        self._bindings.written(task_name, checkpoint)

    def _append(self, task_name: str, value: bytes) -> None:
        partition = self._partition(task_name)
        records = []
        current = self._raw(task_name, LAST)
        if current is not None:
            records.append((record_key(PREVIOUS, task_name), current))
        records.append((record_key(LAST, task_name), value))
        self.log.append(partition, records)
        cache = self._records.setdefault(partition, {})
        cache.update(records)

    def _baseline(self, task_name: str) -> Checkpoint | None:
        if task_name in self._bindings.last:
            return self._bindings.last[task_name]
        previous = self._decoded(task_name, LAST)
        self._bindings.last[task_name] = previous
        return previous

    # -- tools (``weir checkpoint``; the caller holds the job lock) --------------------------
    def task_names(self) -> list[str]:
        """Tasks with a checkpoint (or a previous one) in the partitions of the known tasks."""
        names = set()
        for partition in sorted(set(self.partitions.values())):
            for key in self._load(partition):
                doc = _key_doc(key)
                if doc is not None and doc.get("type") in (LAST, PREVIOUS):
                    names.add(str(doc.get("task")))
        return sorted(names)

    def read_entry(self, task_name: str) -> CheckpointEntry:
        """The last and previous checkpoint of ``task_name`` as read, or why they could not
        be (for ``weir checkpoint show``)."""
        task_name = str(task_name)
        current, error = self._entry_part(task_name, LAST)
        previous, previous_error = self._entry_part(task_name, PREVIOUS)
        return CheckpointEntry(task_name, self.location(task_name), current, error, previous,
                               previous_error)

    def _entry_part(self, task_name: str, kind: str) -> tuple[CheckpointFile | None, str | None]:
        try:
            return self._file(task_name, kind), None
        except RecoveryError as exc:
            return None, str(exc).split(";")[0]

    def use_previous(self, task_name: str, *, suffix: str | None = None) -> str | None:
        """Make the previous checkpoint the last one of ``task_name``; the replaced one is
        kept under a ``checkpoint-replaced`` key (never removed). Returns that key (None when
        there was no last checkpoint). Raises :class:`CheckpointCorruptError` when the
        previous one is missing or damaged."""
        task_name = str(task_name)
        previous = self._raw(task_name, PREVIOUS)
        reset = f"`weir checkpoint reset {self.job_config or '<job config>'} --yes`"
        if previous is None:
            raise CheckpointCorruptError(
                f"task '{task_name}' has no previous checkpoint in {self.location(task_name)}; "
                f"put back the checkpoint stream from a backup, or start the job's state over "
                f"with {reset}")
        decoded = self._decode(task_name, PREVIOUS, previous,
                               advice=f"it cannot be used; start the job's state over with "
                                      f"{reset}")
        partition = self._partition(task_name)
        records = []
        current = self._raw(task_name, LAST)
        kept = None
        if current is not None:
            key = record_key(REPLACED, task_name, at=suffix or aside_suffix("replaced"))
            records.append((key, current))
            kept = key.decode()
        records.append((record_key(LAST, task_name), previous))
        self.log.append(partition, records)
        self._records.setdefault(partition, {}).update(records)
        self._bindings.last[task_name] = decoded.checkpoint
        return kept

    def set_last(self, task_name: str, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` as the last one without the never-backwards check (operator
        commands that checked it themselves: ``weir checkpoint set``)."""
        self._append(str(task_name), encode_checkpoint(str(task_name), checkpoint))
        self._bindings.last[str(task_name)] = checkpoint

    # -- internals -------------------------------------------------------------------------
    def _partition(self, task_name: str) -> int:
        try:
            return self.partitions[task_name]
        except KeyError:
            raise RecoveryError(
                f"task '{task_name}' has no partition of {self.log.describe()} (known tasks: "
                f"{', '.join(sorted(self.partitions)) or 'none'})") from None

    def _load(self, partition: int) -> dict[bytes, bytes | None]:
        if partition not in self._records:
            latest: dict[bytes, bytes | None] = {}
            for key, value in self.log.read(partition):
                latest[key] = value
            self._records[partition] = latest
        return self._records[partition]

    def _raw(self, task_name: str, kind: str) -> bytes | None:
        return self._load(self._partition(task_name)).get(record_key(kind, task_name))

    def _file(self, task_name: str, kind: str) -> CheckpointFile | None:
        raw = self._raw(task_name, kind)
        if raw is None:
            return None
        return self._decode(task_name, kind, raw)

    def _decoded(self, task_name: str, kind: str) -> Checkpoint | None:
        decoded = self._file(task_name, kind)
        return decoded.checkpoint if decoded is not None else None

    def _decode(self, task_name: str, kind: str, raw: bytes, *,
                advice: str | None = None) -> CheckpointFile:
        source = f"{self.log.describe(self._partition(task_name))}, record {kind} of task " \
                 f"'{task_name}'"
        advice = advice or corrupt_advice(task_name, self.job_config)
        decoded = decode_checkpoint_file(raw, source=source, advice=advice)
        if decoded.task != task_name:
            raise CheckpointCorruptError(
                f"{source} belongs to task {decoded.task!r}, not {task_name!r}; {advice}")
        return decoded

    def _check_open(self) -> None:
        if self._stopped:
            raise RecoveryError(f"checkpoint manager of {self.log.describe()} is stopped; "
                                "create a new one")

    def __repr__(self) -> str:
        return f"<StreamCheckpointManager {self.log.describe()} tasks={sorted(self._tasks)}>"


def _key_doc(key: bytes) -> dict | None:
    try:
        doc = orjson.loads(key)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None
