"""Durability across process lifetimes: checkpoints, changelog restore, storage managers.

``recovery`` imports ``stores`` and never ``engine``: it reads and writes changelogs only
through the :class:`weir.stores.ChangelogSink` / :class:`weir.stores.ChangelogSource` protocols.
"""

from weir.stores._lazy import lazy_exports

# Loaded on first use, so ``import weir`` (which re-exports these names) stays cheap.
_LAZY = {
    "CHECKPOINT_FORMAT": "weir.recovery.checkpoint",
    "Checkpoint": "weir.recovery.checkpoint",
    "CheckpointFile": "weir.recovery.checkpoint",
    "CheckpointManager": "weir.recovery.checkpoint",
    "CorruptCheckpointPolicy": "weir.recovery.checkpoint",
    "FileCheckpointManager": "weir.recovery.checkpoint",
    "MemoryCheckpointManager": "weir.recovery.checkpoint",
    "decode_checkpoint": "weir.recovery.checkpoint",
    "decode_checkpoint_file": "weir.recovery.checkpoint",
    "encode_checkpoint": "weir.recovery.checkpoint",
    "CheckpointCorruptError": "weir.recovery.errors",
    "CheckpointRegressionError": "weir.recovery.errors",
    "JobLockedError": "weir.recovery.errors",
    "RecoveryError": "weir.recovery.errors",
    "StaleStoreError": "weir.recovery.errors",
    "StateWithoutCheckpointError": "weir.recovery.errors",
    "JobLock": "weir.recovery.job_lock",
    "ChangelogStateError": "weir.recovery.errors",
    "ChangelogMismatchError": "weir.recovery.errors",
    "ChangelogDamagedError": "weir.recovery.errors",
    "StoreRepairError": "weir.recovery.errors",
    "ChangelogPartitionMismatchError": "weir.recovery.errors",
    "OffsetFileCorruptError": "weir.recovery.offset_file",
    "StoreOffset": "weir.recovery.offset_file",
    "read_offset_file": "weir.recovery.offset_file",
    "write_offset_file": "weir.recovery.offset_file",
    "Action": "weir.recovery.restore",
    "ReadPath": "weir.recovery.restore",
    "Repair": "weir.recovery.restore",
    "RestorePlan": "weir.recovery.restore",
    "RestoreStats": "weir.recovery.restore",
    "plan_restore": "weir.recovery.restore",
    "ProgressMode": "weir.recovery.storage",
    "TaskStorageManager": "weir.recovery.storage",
    "task_directory_name": "weir.recovery.storage",
    "RestoreOptions": "weir.recovery.store_restore",
    "StoreRestore": "weir.recovery.store_restore",
    "ContainerStorageManager": "weir.recovery.container_storage",
    "RestoreSettings": "weir.recovery.container_storage",
    "Found": "weir.recovery.validity",
    "LocalCheck": "weir.recovery.validity",
    "LocalState": "weir.recovery.validity",
    "StartFrom": "weir.recovery.validity",
    "StoreDecision": "weir.recovery.validity",
    "check_local_store": "weir.recovery.validity",
    "decide": "weir.recovery.validity",
}

__all__ = list(_LAZY)


__getattr__ = lazy_exports(__name__, _LAZY, globals())
