"""Where the store directory lock used to live; it is :mod:`stores.locking` now.

Kept for the modules that still import it from here (``stores.engines.rocksdb``); new code
imports :mod:`stores.locking`.
"""

from ..locking import LOCK_FILE_NAME, DirectoryLock, LockHolder, read_lock_holder

__all__ = ["LOCK_FILE_NAME", "LockHolder", "DirectoryLock", "read_lock_holder"]
