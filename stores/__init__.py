"""Weir's storage core: one store's life on one machine.

The public API is re-exported here; modules starting with ``_`` are internal.
"""

from .changelog import NO_OFFSET, ChangelogSink, ChangelogSource
from .config import Config, ConfigKey, declare, declared_keys
from .errors import (
    ConfigError,
    NullKeyOrValueError,
    ReadOnlyStoreError,
    SerdeError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    WeirError,
)

__all__ = [
    "NO_OFFSET", "ChangelogSink", "ChangelogSource",
    "Config", "ConfigKey", "declare", "declared_keys",
    "ConfigError", "NullKeyOrValueError", "ReadOnlyStoreError", "SerdeError",
    "StoreClosedError", "StoreError", "StoreLockedError", "WeirError",
]
