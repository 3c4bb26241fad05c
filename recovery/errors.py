"""Recovery's errors: checkpoints, restores and state tooling."""

from __future__ import annotations

from weir.stores.errors import WeirError

__all__ = ["RecoveryError", "CheckpointCorruptError", "StaleStoreError",
           "CheckpointRegressionError", "StateWithoutCheckpointError", "JobLockedError",
           "ChangelogPartitionMismatchError",
           # changelog and local-store damage (issue 9)
           "ChangelogStateError", "ChangelogMismatchError", "ChangelogDamagedError",
           "StoreRepairError"]


class RecoveryError(WeirError):
    """Base of the recovery package's errors."""


class CheckpointCorruptError(RecoveryError):
    """A checkpoint file failed its checksum or could not be parsed (names the file)."""


class StaleStoreError(RecoveryError):
    """A local store is older than ``stores.<s>.changelog.staleness.ms`` and must be restored."""


# -- input safety: checkpoints never move backwards, state never outlives its checkpoint --------

class CheckpointRegressionError(RecoveryError):
    """A checkpoint write would move an input offset below the task's previous checkpoint
    (for the same stream identity). Nothing was written; names the task, the SSP, both offsets
    and the checkpoint file."""

    def __init__(self, message: str, *, task: str, ssp: tuple, previous: int, offset: int,
                 path: str | None = None):
        super().__init__(message)
        self.task, self.ssp, self.previous, self.offset, self.path = (
            task, tuple(ssp), previous, offset, path)


class StateWithoutCheckpointError(RecoveryError):
    """A task has no checkpoint while a logged store of it holds state (in its changelog or
    its local files): restoring that state and starting the input from its default offsets
    would count messages twice, so Weir refuses and names the safe ways out."""

    def __init__(self, message: str, *, task: str, stores: tuple[str, ...],
                 checkpoint_path: str | None = None):
        super().__init__(message)
        self.task, self.stores, self.checkpoint_path = task, tuple(stores), checkpoint_path


class ChangelogPartitionMismatchError(RecoveryError):
    """A task's checkpoint was written against another changelog partition of a store than
    the one the job now gives the task (the coordinator stream's ``set-changelog``): restoring
    would give the task another task's state. Names both partitions (``recorded`` and
    ``current``, each ``(system, stream, partition)``), the task, the store and the
    checkpoint; nothing was restored or changed."""

    def __init__(self, message: str, *, task: str, store: str, recorded: tuple,
                 current: tuple, checkpoint_path: str | None = None):
        super().__init__(message)
        self.task, self.store, self.checkpoint_path = task, store, checkpoint_path
        self.recorded, self.current = tuple(recorded), tuple(current)


class JobLockedError(RecoveryError):
    """Another live process (a ``weir run`` of the same job, one of its containers, or a
    ``weir checkpoint`` command) holds the job's lock. Names its pid, host and the lock file."""

    def __init__(self, message: str, *, path: str, holder: dict | None = None):
        super().__init__(message)
        self.path, self.holder = path, dict(holder or {})


# -- changelog and local-store damage (issue 9, points 3 and 8) ----------------------------------
# Raised by TaskStorageManager.open when a store's changelog cannot give back the state its
# checkpoint covers. Nothing was deleted or rewound when one of these is raised: the local store
# directory is as it was before the attempt. The message names the store, task, changelog
# partition, the first offset that cannot be read (and its file and byte position when the
# changelog's system knows them) and the safe next steps (recovery/damage.py writes them).

class ChangelogStateError(RecoveryError):
    """A logged store's changelog cannot back the state its checkpoint covers.

    Attributes: ``task``, ``store``, ``changelog`` (``system.stream``), ``partition`` (None when
    unknown), ``offset`` (the first offset that is missing or cannot be read), ``path`` and
    ``position`` (file and byte position of the damage, when known), ``checkpointed`` (the
    checkpoint's changelog offset, None without one), ``newest`` (the changelog's newest
    readable offset), ``local_directory`` and ``local_offset`` (what the local copy's ``OFFSET``
    file proves, None when it proves nothing), ``advice`` (the next steps, in order of safety).
    """

    def __init__(self, message: str, *, task: str, store: str, changelog: str,
                 partition: int | None, offset: int, path: str | None = None,
                 position: int | None = None, checkpointed: int | None = None,
                 newest: int | None = None, local_directory: str | None = None,
                 local_offset: int | None = None, advice: tuple[str, ...] = ()):
        steps = "".join(f"\n  {i}. {step}" for i, step in enumerate(advice, 1))
        super().__init__(message + (f"\nWhat to do (nothing was changed):{steps}" if steps
                                    else ""))
        self.task, self.store, self.changelog, self.partition = task, store, changelog, partition
        self.offset, self.path, self.position = offset, path, position
        self.checkpointed, self.newest = checkpointed, newest
        self.local_directory, self.local_offset = local_directory, local_offset
        self.advice = advice


class ChangelogMismatchError(ChangelogStateError):
    """The changelog does not reach the checkpoint: its newest offset is below the checkpoint's
    changelog offset (the changelog was cut, emptied, recreated or damaged at its end), or the
    records up to the checkpoint are gone (checkpointed offset below its oldest offset)."""


class ChangelogDamagedError(ChangelogStateError):
    """Reading (or appending to) the changelog failed during restore: a record fails its checks,
    or a file cannot be read. ``__cause__`` is the changelog system's own error."""


class StoreRepairError(RecoveryError):
    """A repair asked for with ``weir state repair`` (``Repair.KEEP_LOCAL`` or
    ``Repair.ACCEPT_LOSS``) cannot be done safely; names the store and why. Nothing was changed."""
