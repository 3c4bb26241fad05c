"""Durability across process lifetimes: checkpoints, changelog restore, storage managers.

``recovery`` imports ``stores`` and never ``engine``: it reads and writes changelogs only
through the :class:`weir.stores.ChangelogSink` / :class:`weir.stores.ChangelogSource` protocols.
"""

from weir.recovery.checkpoint import (
    CHECKPOINT_FORMAT,
    Checkpoint,
    CheckpointManager,
    CorruptCheckpointPolicy,
    FileCheckpointManager,
    MemoryCheckpointManager,
    decode_checkpoint,
    encode_checkpoint,
)
from weir.recovery.errors import (ChangelogDamagedError, ChangelogMismatchError, ChangelogStateError,
                                  CheckpointCorruptError, RecoveryError, StaleStoreError,
                                  StoreRepairError)
from weir.recovery.offset_file import OffsetFileCorruptError, StoreOffset, read_offset_file, write_offset_file
from weir.recovery.restore import Action, Repair, RestorePlan, RestoreStats, plan_restore
from weir.recovery.storage import ProgressMode, TaskStorageManager, task_directory_name

__all__ = [
    "CHECKPOINT_FORMAT", "Checkpoint", "CheckpointManager", "CorruptCheckpointPolicy",
    "FileCheckpointManager", "MemoryCheckpointManager", "decode_checkpoint", "encode_checkpoint",
    "CheckpointCorruptError", "RecoveryError", "StaleStoreError",
    "ChangelogStateError", "ChangelogMismatchError", "ChangelogDamagedError", "StoreRepairError",
    "OffsetFileCorruptError", "StoreOffset", "read_offset_file", "write_offset_file",
    "Action", "Repair", "RestorePlan", "RestoreStats", "plan_restore",
    "ProgressMode", "TaskStorageManager", "task_directory_name",
]
