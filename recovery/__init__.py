"""Durability across process lifetimes: checkpoints, changelog restore, storage managers.

``recovery`` imports ``stores`` and never ``engine``: it reads and writes changelogs only
through the :class:`stores.ChangelogSink` / :class:`stores.ChangelogSource` protocols.
"""

from .checkpoint import (
    CHECKPOINT_FORMAT,
    Checkpoint,
    CheckpointManager,
    CorruptCheckpointPolicy,
    FileCheckpointManager,
    MemoryCheckpointManager,
    decode_checkpoint,
    encode_checkpoint,
)
from .errors import CheckpointCorruptError, RecoveryError, StaleStoreError
from .offset_file import OffsetFileCorruptError, StoreOffset, read_offset_file, write_offset_file
from .restore import Action, RestorePlan, RestoreStats, plan_restore
from .storage import ProgressMode, TaskStorageManager, task_directory_name

__all__ = [
    "CHECKPOINT_FORMAT", "Checkpoint", "CheckpointManager", "CorruptCheckpointPolicy",
    "FileCheckpointManager", "MemoryCheckpointManager", "decode_checkpoint", "encode_checkpoint",
    "CheckpointCorruptError", "RecoveryError", "StaleStoreError",
    "OffsetFileCorruptError", "StoreOffset", "read_offset_file", "write_offset_file",
    "Action", "RestorePlan", "RestoreStats", "plan_restore",
    "ProgressMode", "TaskStorageManager", "task_directory_name",
]
