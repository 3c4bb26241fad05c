"""Which checkpoint manager a job uses, and the stream one's log: :class:`CheckpointSettings`.

Two interchangeable checkpoint managers (docs/RECOVERY.md, "Checkpoints"):

* ``file`` (default): one checksummed JSON file per task in ``task.checkpoint.path``
  (:class:`~weir.recovery.checkpoint.FileCheckpointManager`);
* ``stream``: records of a compacted stream on ``task.checkpoint.system``, named as Samza names
  its checkpoint topic, ``__samza_checkpoint_ver_1_for_<job.name>_<job.id>`` (``_`` in name and
  id turned into ``-``), one partition per task: the task's changelog partition
  (:class:`~weir.recovery.checkpoint_stream.StreamCheckpointManager`).

``task.checkpoint.factory`` chooses (``file`` / ``stream``, or Samza's
``FileSystemCheckpointManagerFactory`` / ``KafkaCheckpointManagerFactory`` class names); setting
``task.checkpoint.system`` alone chooses ``stream``. The job lock stays in the checkpoint
directory either way.

Example::

    >>> from weir.stores.config import Config
    >>> settings = CheckpointSettings.from_config(Config({
    ...     "job.name": "word_count", "job.id": "1", "task.checkpoint.system": "filelog"}))
    >>> settings.kind.value, settings.stream
    ('stream', '__samza_checkpoint_ver_1_for_word-count_1')
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from weir.recovery.checkpoint import FileCheckpointManager
from weir.recovery.checkpoint_stream import StreamCheckpointManager
from weir.stores.config import Config, declare
from weir.stores.errors import ConfigError

from weir.engine.config.job import JobConfig
from weir.engine.model import SystemStream, SystemStreamPartition
from weir.engine.errors import SystemError_
from weir.engine.systems.api import CleanupPolicy, StreamSpec, SystemAdminBase
from weir.engine.systems.changelog import SystemChangelogSink, SystemChangelogSource

__all__ = ["CheckpointKind", "CheckpointSettings", "StreamCheckpointLog",
           "checkpoint_stream_name", "open_checkpoint_manager"]

_C = "container"

TASK_CHECKPOINT_FACTORY = declare(
    "task.checkpoint.factory", str, None,
    "The checkpoint manager: file (one checkpoint file per task in task.checkpoint.path) or "
    "stream (a compacted stream on task.checkpoint.system, "
    "__samza_checkpoint_ver_1_for_<job.name>_<job.id>). Samza's "
    "org.apache.samza.checkpoint.file.FileSystemCheckpointManagerFactory and "
    "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory are accepted. Unset: "
    "stream when task.checkpoint.system is set, else file.", component=_C)
TASK_CHECKPOINT_SYSTEM = declare(
    "task.checkpoint.system", str, None,
    "The system of the checkpoint stream (Samza's key); setting it chooses the stream "
    "checkpoint manager unless task.checkpoint.factory says otherwise.", component=_C)

_FACTORIES = {
    "file": "file",
    "org.apache.samza.checkpoint.file.filesystemcheckpointmanagerfactory": "file",
    "stream": "stream",
    "org.apache.samza.checkpoint.kafka.kafkacheckpointmanagerfactory": "stream",
}


class CheckpointKind(Enum):
    FILE = "file"
    STREAM = "stream"


def checkpoint_stream_name(job_name: str, job_id: str) -> str:
    """Samza's checkpoint topic name: ``__samza_checkpoint_ver_1_for_<name>_<id>`` with ``_``
    in name and id turned into ``-``."""
    return (f"__samza_checkpoint_ver_1_for_{job_name.replace('_', '-')}_"
            f"{job_id.replace('_', '-')}")


@dataclass(frozen=True)
class CheckpointSettings:
    """Where a job's checkpoints live; parsed once with :meth:`from_config`."""

    kind: CheckpointKind
    system: str | None
    stream: str

    @classmethod
    def from_config(cls, config: Config, job: JobConfig | None = None) -> "CheckpointSettings":
        job = job if job is not None else JobConfig.from_config(config)
        system = TASK_CHECKPOINT_SYSTEM.get(config)
        raw = TASK_CHECKPOINT_FACTORY.get(config)
        key = TASK_CHECKPOINT_FACTORY.name
        if raw is None:
            kind = CheckpointKind.STREAM if system else CheckpointKind.FILE
        else:
            name = _FACTORIES.get(raw.strip().lower())
            if name is None:
                raise ConfigError(f"unknown checkpoint manager {raw!r}: expected file or stream "
                                  f"(or Samza's FileSystemCheckpointManagerFactory / "
                                  f"KafkaCheckpointManagerFactory)", key=key,
                                  origin=config.origin(key))
            kind = CheckpointKind(name)
        if kind is CheckpointKind.STREAM and not system:
            raise ConfigError("chooses the stream checkpoint manager, which needs "
                              "task.checkpoint.system: set it to the system of the checkpoint "
                              "stream", key=key, origin=config.origin(key))
        if system is not None and not system.strip():
            raise ConfigError("is empty; set a system name or remove the key",
                              key=TASK_CHECKPOINT_SYSTEM.name,
                              origin=config.origin(TASK_CHECKPOINT_SYSTEM.name))
        return cls(kind, system.strip() if system else None,
                   checkpoint_stream_name(job.name, job.id))

    @property
    def system_stream(self) -> SystemStream | None:
        return SystemStream(self.system, self.stream) if self.system else None


class StreamCheckpointLog:
    """A :class:`~weir.recovery.checkpoint_stream.CheckpointLog` over a system's stream:
    reads a partition with the system's admin and consumer, appends with its producer (started
    on the first append, stopped by :meth:`close`). Tasks that commit at once append from
    several threads: one producer is made for all of them."""

    def __init__(self, registry: Any, system: str, stream: str):
        self.registry, self.system, self.stream = registry, system, stream
        self._producer: Any = None
        self._making = threading.Lock()

    def read(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """The partition's records; none when the stream does not exist (yet, or any more:
        a reset moved it aside)."""
        if not self.registry.admin(self.system).stream_exists(self.stream):
            return []
        source = SystemChangelogSource(self.registry,
                                       SystemStreamPartition(self.system, self.stream, partition))
        newest = source.newest_offset()
        if newest < 0:
            return []
        return [(key, value) for _, key, value in source.read(source.oldest_offset(), newest)]

    def append(self, partition: int, records: list[tuple[bytes, bytes]]) -> None:
        if self._producer is None:
            with self._making:
                if self._producer is None:
                    producer = self.registry.producer(self.system)
                    producer.register("checkpoints")
                    producer.start()
                    self._producer = producer
        sink = SystemChangelogSink(self._producer,
                                   SystemStreamPartition(self.system, self.stream, partition),
                                   "checkpoints")
        sink.append_all(records)
        sink.flush()

    def describe(self, partition: int | None = None) -> str:
        where = f" partition {partition}" if partition is not None else ""
        return f"checkpoint stream {self.system}.{self.stream}{where}"

    def close(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            producer.stop()


class _ClosingStreamManager(StreamCheckpointManager):
    """The stream manager whose ``stop`` also stops its log's producer."""

    def stop(self) -> None:
        super().stop()
        self.log.close()  # type: ignore[attr-defined]


def open_checkpoint_manager(settings: CheckpointSettings, job: JobConfig, registry: Any,
                            partitions: Mapping[str, int], *, job_config: str | None = None,
                            create: bool = False, stream_partitions: int | None = None) -> Any:
    """The job's checkpoint manager. ``partitions`` maps each task to its changelog partition
    (the stream manager's partition for it); with ``create`` a missing checkpoint stream is
    created compacted with ``stream_partitions`` partitions (an existing one with another
    count is refused, as for changelogs)."""
    if settings.kind is CheckpointKind.FILE:
        return FileCheckpointManager(job.checkpoint_dir, job_config=job_config)
    assert settings.system is not None
    if create:
        count = stream_partitions if stream_partitions is not None else (
            max(partitions.values(), default=-1) + 1)
        _ensure_stream(registry.admin(settings.system), settings, max(count, 1))
    log = StreamCheckpointLog(registry, settings.system, settings.stream)
    return _ClosingStreamManager(log, partitions, job_config=job_config)


def _ensure_stream(admin: SystemAdminBase, settings: CheckpointSettings, partitions: int) -> None:
    """Create the checkpoint stream, compacted, or check the one there."""
    name = f"{settings.system}.{settings.stream}"
    if admin.stream_exists(settings.stream):
        have = admin.partition_count(settings.stream)
        if have != partitions:
            raise SystemError_(
                f"checkpoint stream '{name}' has {have} partitions but the job needs "
                f"{partitions} (one per task's changelog partition); keep the job's partition "
                f"count, or start the job's state over with `weir checkpoint reset <job config> "
                f"--yes` (moves checkpoints, local stores and changelogs aside together)")
        policy = admin.cleanup_policy(settings.stream)  # None: the system does not tell
        if policy is not None and policy is not CleanupPolicy.COMPACT:
            raise SystemError_(
                f"checkpoint stream '{name}' exists but is not compacted; retention could "
                f"delete checkpoints. Make it compacted while the job is stopped (file log: "
                f"\"cleanup_policy\": \"compact\" in its stream.json)")
        return
    admin.create_stream(StreamSpec(settings.stream, partitions, CleanupPolicy.COMPACT))


def task_partitions(tasks: Iterable[Any]) -> dict[str, int]:
    """``{task name: changelog partition}`` of job model tasks."""
    return {str(t.task_name): t.changelog_partition for t in tasks}


__all__ += ["task_partitions"]
