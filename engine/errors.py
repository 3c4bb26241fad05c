"""The engine's errors: streams, systems, tasks and jobs.

Every message names the stream / partition / offset / task and says what to do next.
Recoverable conditions have their own types (:class:`CorruptRecordError`,
:class:`PartitionLockedError`).
"""

from __future__ import annotations

from weir.stores.errors import ConfigError, WeirError

__all__ = [
    "EngineError",
    "ConfigError",
    "SystemError_",
    "StreamNotFoundError",
    "CorruptRecordError",
    "PartitionLockedError",
    "DeserializationError",
    "TaskError",
    "CallbackTimeoutError",
    "StreamIdentityMismatchError",
    "ChangelogNotCompactedError",
    "UnwritableDirectoryError",
]


class EngineError(WeirError):
    """Base of the engine's errors."""


class SystemError_(EngineError):
    """A system (file log, memory, user system) failed. Named with a trailing underscore so
    it does not shadow Python's builtin ``SystemError``."""


class StreamNotFoundError(SystemError_):
    """A stream does not exist; ``where`` names the place searched (a file log's root)."""

    def __init__(self, system: str, stream: str, hint: str = "", *, where: str | None = None):
        place = f" in {where}" if where else ""
        super().__init__(f"stream '{system}.{stream}' does not exist{place}"
                         + (f": {hint}" if hint else
                            f"; create it with `weir log create {stream}` or set the job's inputs right"))
        self.system, self.stream, self.where = system, stream, where


class CorruptRecordError(SystemError_):
    """A record in the middle of a log failed its length or CRC check."""

    def __init__(self, message: str, *, stream: str, partition: int, offset: int | None,
                 path: str, position: int):
        super().__init__(f"stream '{stream}' partition {partition} offset {offset}: {message} "
                         f"(file {path}, byte position {position}). Nothing was skipped, reset "
                         f"or deleted; put the segment file back from a backup or replica and "
                         f"run again")
        self.stream, self.partition, self.offset = stream, partition, offset
        self.path, self.position = path, position


class PartitionLockedError(SystemError_):
    """Another live process is the writer of a log partition."""

    def __init__(self, message: str, *, stream: str, partition: int, holder: dict | None = None):
        super().__init__(message)
        self.stream, self.partition, self.holder = stream, partition, holder or {}


class DeserializationError(EngineError):
    """An incoming message could not be deserialized (names SSP and offset)."""

    def __init__(self, message: str, *, ssp: object, offset: int):
        super().__init__(f"{ssp} offset {offset}: {message}; fix the producer or the serde config, "
                         f"or set task.drop.deserialization.errors=true to drop such messages")
        self.ssp, self.offset = ssp, offset


class TaskError(EngineError):
    """User task code failed; names the task, SSP and offset and carries the user traceback."""


class CallbackTimeoutError(TaskError):
    """An async task's callback did not fire within task.callback.timeout.ms."""


class StreamIdentityMismatchError(EngineError):
    """A stream partition (an input, or a store's changelog) is not the incarnation a task's
    checkpoint was written against: it was deleted and created again, so the checkpointed
    offsets name other records now. Names the stream, the checkpoint file and the fix."""

    def __init__(self, message: str, *, task: str, ssp: object, recorded: str,
                 current: str | None, checkpoint_path: str | None = None,
                 store: str | None = None):
        super().__init__(message)
        self.task, self.ssp, self.recorded, self.current = task, ssp, recorded, current
        self.checkpoint_path, self.store = checkpoint_path, store


class ChangelogNotCompactedError(SystemError_):
    """A store's changelog stream exists but is not compacted: retention would delete the
    records its state is rebuilt from. Names the stream, the store and the fix."""

    def __init__(self, message: str, *, stream: str, store: str | None, policy: str):
        super().__init__(message)
        self.stream, self.store, self.policy = stream, store, policy


class UnwritableDirectoryError(ConfigError):
    """A directory the job must write (checkpoints, stores, a file log that holds changelogs)
    cannot be created or written. Found before anything is created; names the directory,
    why, and the config key that chose it (``key``, ``origin``, ``path``)."""

    def __init__(self, message: str, *, path: str, key: str, origin: str | None = None):
        super().__init__(message, key=key, origin=origin)
        self.path = path

