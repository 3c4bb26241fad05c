"""Weir's storage core: one store's life on one machine.

The public API is re-exported here; modules starting with ``_`` are internal.

Example::

    >>> from weir.stores import Config, StoreSpec, build_store
    >>> import tempfile, pathlib
    >>> cfg = Config({"stores.counts.factory": "memory", "stores.counts.key.serde": "string",
    ...               "stores.counts.msg.serde": "int64"})
    >>> store = build_store(StoreSpec.from_config(cfg, "counts"), pathlib.Path(tempfile.mkdtemp()),
    ...                     changelog=None, config=cfg)
    >>> store.put("apples", 3); store.get("apples")
    3
    >>> store.close()
"""

from weir.stores.adjunct import SEAL_KEY, AdjunctSpec, RejectedKeys, adjunct_specs
from weir.stores.api import KeyValueIterator, KeyValueSnapshot, KeyValueStore, ReadOnlyKeyValueStore
from weir.stores.budget import MemoryBudget
from weir.stores.builder import build_store, open_engine
from weir.stores.changelog import NO_OFFSET, ChangelogSink, ChangelogSource
from weir.stores.config import Config, ConfigKey, declare, declared_keys
from weir.stores.engines import BytesEngine, BytesIterator, BytesSnapshot
from weir.stores.errors import (
    ConfigError,
    NullKeyOrValueError,
    ReadOnlyStoreError,
    SerdeError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    StoredDataError,
    WeirError,
)
from weir.stores.filesink import FileChangelog
from weir.stores.serdes import BUILTIN_SERDES, Serde, serde_from_name
from weir.stores.spec import EngineKind, StoreSpec, stores_in

__all__ = [
    "MemoryBudget",
    "SEAL_KEY", "AdjunctSpec", "RejectedKeys", "adjunct_specs",
    "KeyValueIterator", "KeyValueSnapshot", "KeyValueStore", "ReadOnlyKeyValueStore",
    "build_store", "open_engine",
    "NO_OFFSET", "ChangelogSink", "ChangelogSource",
    "Config", "ConfigKey", "declare", "declared_keys",
    "BytesEngine", "BytesIterator", "BytesSnapshot",
    "ConfigError", "NullKeyOrValueError", "ReadOnlyStoreError", "SerdeError",
    "StoreClosedError", "StoreError", "StoreLockedError", "StoredDataError", "WeirError",
    "FileChangelog",
    "BUILTIN_SERDES", "Serde", "serde_from_name",
    "EngineKind", "StoreSpec", "stores_in",
]
