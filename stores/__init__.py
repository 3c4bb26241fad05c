"""Weir's storage core: one store's life on one machine.

The public API is re-exported here; modules starting with ``_`` are internal.

Example::

    >>> from stores import Config, StoreSpec, build_store
    >>> import tempfile, pathlib
    >>> cfg = Config({"stores.counts.factory": "memory", "stores.counts.key.serde": "string",
    ...               "stores.counts.msg.serde": "int64"})
    >>> store = build_store(StoreSpec.from_config(cfg, "counts"), pathlib.Path(tempfile.mkdtemp()),
    ...                     changelog=None, config=cfg)
    >>> store.put("apples", 3); store.get("apples")
    3
    >>> store.close()
"""

from .api import KeyValueIterator, KeyValueSnapshot, KeyValueStore, ReadOnlyKeyValueStore
from .builder import build_store, open_engine
from .changelog import NO_OFFSET, ChangelogSink, ChangelogSource
from .config import Config, ConfigKey, declare, declared_keys
from .engines import BytesEngine, BytesIterator, BytesSnapshot
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
from .filesink import FileChangelog
from .serdes import BUILTIN_SERDES, Serde, serde_from_name
from .spec import EngineKind, StoreSpec, stores_in

__all__ = [
    "KeyValueIterator", "KeyValueSnapshot", "KeyValueStore", "ReadOnlyKeyValueStore",
    "build_store", "open_engine",
    "NO_OFFSET", "ChangelogSink", "ChangelogSource",
    "Config", "ConfigKey", "declare", "declared_keys",
    "BytesEngine", "BytesIterator", "BytesSnapshot",
    "ConfigError", "NullKeyOrValueError", "ReadOnlyStoreError", "SerdeError",
    "StoreClosedError", "StoreError", "StoreLockedError", "WeirError",
    "FileChangelog",
    "BUILTIN_SERDES", "Serde", "serde_from_name",
    "EngineKind", "StoreSpec", "stores_in",
]
