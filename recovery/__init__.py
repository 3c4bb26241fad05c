"""Durability across process lifetimes: checkpoints, changelog restore, storage managers."""

from .errors import CheckpointCorruptError, RecoveryError, StaleStoreError

__all__ = ["CheckpointCorruptError", "RecoveryError", "StaleStoreError"]
