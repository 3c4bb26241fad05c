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
    "UnsupportedOperationError",
    "CorruptRecordError",
    "PartitionLockedError",
    "DeserializationError",
    "TaskError",
    "CallbackTimeoutError",
    "StreamIdentityMismatchError",
    "ChangelogNotCompactedError",
    "UnwritableDirectoryError",
    "TransactionError",
    "ProducerFencedError",
    "TransactionalIdInUseError",
    "OpenTransactionError",
    "ProducerStateCorruptError",
    "FencedCheckpointError",
    "ProducerStateMissingError",
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


class UnsupportedOperationError(SystemError_):
    """A system cannot do what was asked (its admin keeps the default of an optional
    capability: engine/systems/api.py); ``system`` and ``operation`` name both."""

    def __init__(self, system: str | None, operation: str, hint: str):
        name = f"system '{system}'" if system else "this system"
        super().__init__(f"{name} cannot {operation}; {hint}")
        self.system, self.operation = system, operation


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



class TransactionError(SystemError_):
    """Base of the errors of transactional producers (docs/EXACTLY-ONCE.md)."""


class ProducerFencedError(TransactionError):
    """A newer incarnation of this transactional id has started: this producer is a zombie
    and may not write (Kafka's ``ProducerFencedException``). Nothing it sent after the newer
    one started is visible to ``read_committed`` readers."""

    def __init__(self, transactional_id: str, epoch: int, current: int, *, producer_id: int,
                 where: str = ""):
        super().__init__(
            f"producer '{transactional_id}' (producer id {producer_id}, epoch {epoch}) is "
            f"fenced: a newer incarnation started with epoch {current}{where}. This process "
            f"was replaced (it was paused or cut off while another run of the task started); "
            f"what it writes from now on is invisible to read_committed readers. Stop this "
            f"process; nothing needs repairing")
        self.transactional_id, self.epoch, self.current = transactional_id, epoch, current
        self.producer_id = producer_id


class TransactionalIdInUseError(TransactionError):
    """``init_transactions`` found the transactional id owned by a live process."""

    def __init__(self, transactional_id: str, holder: dict, lock_path: str, waited_s: float):
        super().__init__(
            f"producer '{transactional_id}' is in use by pid {holder.get('pid', '?')} on host "
            f"{holder.get('host', '?')} (since {holder.get('since', '?')}, lock file "
            f"{lock_path}); waited {waited_s:.1f} s. Stop that process (or wait for it to "
            f"exit) and start again; the lock is released when its process exits")
        self.transactional_id, self.holder, self.lock_path = transactional_id, holder, lock_path


class OpenTransactionError(TransactionError):
    """A read that must reach an offset is held back by a transaction still open there."""

    def __init__(self, message: str, *, stream: str, partition: int, producer_id: int,
                 first_offset: int, transactional_id: str | None = None):
        super().__init__(message)
        self.stream, self.partition, self.producer_id = stream, partition, producer_id
        self.first_offset, self.transactional_id = first_offset, transactional_id


class ProducerStateCorruptError(TransactionError):
    """A producer state file of the file log does not parse or fails its checksum."""

    def __init__(self, path: str, detail: str):
        super().__init__(
            f"producer state {path} is damaged ({detail}); put it back from a backup. Do not "
            f"delete it while its producer has transactions open: they could then only be "
            f"aborted")
        self.path = path


class FencedCheckpointError(EngineError):
    """A task's checkpoint names a transaction that its producer state records as aborted:
    a fenced process (a zombie) wrote it after its successor took over."""

    def __init__(self, task: str, checkpoint_path: str, transactional_id: str, epoch: int,
                 sequence: int, job_config: str | None = None):
        job = job_config or "<job config>"
        super().__init__(
            f"the checkpoint of task '{task}' ({checkpoint_path}) names transaction {sequence} "
            f"of producer '{transactional_id}' at epoch {epoch}, which was aborted when a "
            f"newer incarnation started: a fenced (zombie) process wrote this checkpoint after "
            f"it was replaced, so it does not match the committed state and outputs. Nothing "
            f"was changed. Go back to the checkpoint before it with `weir checkpoint "
            f"use-previous {job} --task '{task}'`")
        self.task, self.checkpoint_path = task, checkpoint_path
        self.transactional_id, self.epoch, self.sequence = transactional_id, epoch, sequence


class ProducerStateMissingError(EngineError):
    """A task's checkpoint names a transaction of a producer whose producer state file is
    gone: which partitions the transaction wrote (where its commit markers belong) is
    unknown, so Weir can neither finish it nor prove it finished."""

    def __init__(self, task: str, checkpoint_path: str, transactional_id: str,
                 producer_id: int, epoch: int, sequence: int, state_path: str,
                 job_config: str | None = None):
        job = job_config or "<job config>"
        super().__init__(
            f"the checkpoint of task '{task}' ({checkpoint_path}) names transaction {sequence} "
            f"of producer {producer_id} ('{transactional_id}', epoch {epoch}) as committed, "
            f"but that producer's state {state_path} is missing (the log's .transactions "
            f"directory was deleted or replaced). It records the partitions the transaction "
            f"wrote, where its commit markers belong; without it the transaction can neither "
            f"be finished nor proved finished, and aborting it would drop records the "
            f"checkpoint counts as done. Nothing was changed. Put the .transactions directory "
            f"back from a backup and start again; do not run `weir log transactions --resolve` "
            f"on the job's streams meanwhile (it would abort the transaction). If the state is "
            f"lost for good, start the job's state over with `weir checkpoint reset {job} "
            f"--yes` (moves checkpoints, stores and changelogs aside together)")
        self.task, self.checkpoint_path = task, checkpoint_path
        self.transactional_id, self.producer_id = transactional_id, producer_id
        self.epoch, self.sequence, self.state_path = epoch, sequence, state_path
