"""Recovery's errors: checkpoints, restores and state tooling."""

from __future__ import annotations

from weir.stores.errors import WeirError

__all__ = ["RecoveryError", "CheckpointCorruptError", "StaleStoreError",
           "CheckpointRegressionError", "StateWithoutCheckpointError", "JobLockedError"]


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


class JobLockedError(RecoveryError):
    """Another live process (a ``weir run`` of the same job, one of its containers, or a
    ``weir checkpoint`` command) holds the job's lock. Names its pid, host and the lock file."""

    def __init__(self, message: str, *, path: str, holder: dict | None = None):
        super().__init__(message)
        self.path, self.holder = path, dict(holder or {})
