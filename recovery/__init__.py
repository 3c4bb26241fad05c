"""Durability across process lifetimes: checkpoints, changelog restore, storage managers.

``recovery`` imports ``stores`` and never ``engine``: it reads and writes changelogs only
through the :class:`weir.stores.ChangelogSink` / :class:`weir.stores.ChangelogSource` protocols.
"""

from weir.recovery.checkpoint import (
    CHECKPOINT_FORMAT,
    Checkpoint,
    CheckpointFile,
    CheckpointManager,
    CorruptCheckpointPolicy,
    FileCheckpointManager,
    MemoryCheckpointManager,
    decode_checkpoint,
    decode_checkpoint_file,
    encode_checkpoint,
)
from weir.recovery.errors import (ChangelogDamagedError, ChangelogMismatchError,
                                  ChangelogPartitionMismatchError, ChangelogStateError,
                                  CheckpointCorruptError, CheckpointRegressionError, JobLockedError,
                                  RecoveryError, StaleStoreError, StateWithoutCheckpointError,
                                  StoreRepairError)
from weir.recovery.job_lock import JobLock
from weir.recovery.offset_file import OffsetFileCorruptError, StoreOffset, read_offset_file, write_offset_file
from weir.recovery.restore import Action, ReadPath, Repair, RestorePlan, RestoreStats, plan_restore
from weir.recovery.storage import ProgressMode, TaskStorageManager, task_directory_name
from weir.recovery.store_restore import RestoreOptions, StoreRestore
from weir.recovery.container_storage import ContainerStorageManager, RestoreSettings
from weir.recovery.validity import (Found, LocalCheck, LocalState, StartFrom, StoreDecision,
                                    check_local_store, decide)

__all__ = [
    "CHECKPOINT_FORMAT", "Checkpoint", "CheckpointFile", "CheckpointManager",
    "CorruptCheckpointPolicy", "FileCheckpointManager", "MemoryCheckpointManager",
    "decode_checkpoint", "decode_checkpoint_file", "encode_checkpoint",
    "CheckpointCorruptError", "CheckpointRegressionError", "JobLockedError", "RecoveryError",
    "StaleStoreError", "StateWithoutCheckpointError", "JobLock",
    "ChangelogStateError", "ChangelogMismatchError", "ChangelogDamagedError", "StoreRepairError",
    "ChangelogPartitionMismatchError",
    "OffsetFileCorruptError", "StoreOffset", "read_offset_file", "write_offset_file",
    "Action", "ReadPath", "Repair", "RestorePlan", "RestoreStats", "plan_restore",
    "ProgressMode", "TaskStorageManager", "task_directory_name",
    "RestoreOptions", "StoreRestore", "ContainerStorageManager", "RestoreSettings",
    "Found", "LocalCheck", "LocalState", "StartFrom", "StoreDecision", "check_local_store",
    "decide",
]
