"""Recovery's errors: checkpoints, restores and state tooling."""

from __future__ import annotations

from weir.stores.errors import WeirError

__all__ = ["RecoveryError", "CheckpointCorruptError", "StaleStoreError"]


class RecoveryError(WeirError):
    """Base of the recovery package's errors."""


class CheckpointCorruptError(RecoveryError):
    """A checkpoint file failed its checksum or could not be parsed (names the file)."""


class StaleStoreError(RecoveryError):
    """A local store is older than ``stores.<s>.changelog.staleness.ms`` and must be restored."""
