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

from weir.stores._lazy import lazy_exports

# Loaded on first use: `import weir` (a task module's first line) and `weir run` up to reading
# its config need only the config and error types, not the builder, the engines or the
# changelog file format; the containers' fork server starts that much sooner.
_LAZY = {
    "SEAL_KEY": "weir.stores.adjunct",
    "EMPTY_SEAL_KEY": "weir.stores.adjunct",
    "SealKind": "weir.stores.adjunct",
    "AdjunctSpec": "weir.stores.adjunct",
    "RejectedKeys": "weir.stores.adjunct",
    "adjunct_specs": "weir.stores.adjunct",
    "KeyValueIterator": "weir.stores.api",
    "KeyValueSnapshot": "weir.stores.api",
    "KeyValueStore": "weir.stores.api",
    "FlushScope": "weir.stores.api",
    "ReadOnlyKeyValueStore": "weir.stores.api",
    "MemoryBudget": "weir.stores.budget",
    "build_store": "weir.stores.builder",
    "open_engine": "weir.stores.builder",
    "NO_OFFSET": "weir.stores.changelog",
    "ChangelogSink": "weir.stores.changelog",
    "ChangelogSource": "weir.stores.changelog",
    "Changelog": "weir.stores.changelog",
    "ChangelogBatch": "weir.stores.changelog",
    "ForwardingSink": "weir.stores.changelog",
    "ForwardingSource": "weir.stores.changelog",
    "ForwardingChangelog": "weir.stores.changelog",
    "NO_BULK_READER": "weir.stores.changelog",
    "UNKNOWN_IDENTITY": "weir.stores.changelog",
    "Config": "weir.stores.config",
    "ConfigKey": "weir.stores.config",
    "declare": "weir.stores.config",
    "declared_keys": "weir.stores.config",
    "BytesEngine": "weir.stores.engines",
    "BytesIterator": "weir.stores.engines",
    "BytesSnapshot": "weir.stores.engines",
    "ConfigError": "weir.stores.errors",
    "NullKeyOrValueError": "weir.stores.errors",
    "ReadOnlyStoreError": "weir.stores.errors",
    "SerdeError": "weir.stores.errors",
    "StoreClosedError": "weir.stores.errors",
    "StoreError": "weir.stores.errors",
    "StoreLockedError": "weir.stores.errors",
    "StoredDataError": "weir.stores.errors",
    "WeirError": "weir.stores.errors",
    "BUILTIN_SERDES": "weir.stores.serdes",
    "Serde": "weir.stores.serdes",
    "serde_from_name": "weir.stores.serdes",
    "Capability": "weir.stores.engines.registry",
    "Durability": "weir.stores.engines.registry",
    "StoreEngine": "weir.stores.engines.registry",
    "UnknownEngineError": "weir.stores.engines.registry",
    "WorkerRestore": "weir.stores.engines.registry",
    "register_engine": "weir.stores.engines.registry",
    "store_engine": "weir.stores.engines.registry",
    "store_engines": "weir.stores.engines.registry",
    "unregister_engine": "weir.stores.engines.registry",
    "StoreSpec": "weir.stores.spec",
    "stores_in": "weir.stores.spec",
}

__all__ = [
    "MemoryBudget",
    "SEAL_KEY", "EMPTY_SEAL_KEY", "SealKind", "AdjunctSpec", "RejectedKeys", "adjunct_specs",
    "KeyValueIterator", "KeyValueSnapshot", "KeyValueStore", "ReadOnlyKeyValueStore", "FlushScope",
    "build_store", "open_engine",
    "NO_OFFSET", "ChangelogSink", "ChangelogSource", "Changelog", "ChangelogBatch",
    "ForwardingSink", "ForwardingSource", "ForwardingChangelog", "NO_BULK_READER",
    "UNKNOWN_IDENTITY",
    "Config", "ConfigKey", "declare", "declared_keys",
    "BytesEngine", "BytesIterator", "BytesSnapshot",
    "Capability", "Durability", "StoreEngine", "UnknownEngineError", "WorkerRestore",
    "register_engine", "store_engine", "store_engines", "unregister_engine",
    "ConfigError", "NullKeyOrValueError", "ReadOnlyStoreError", "SerdeError",
    "StoreClosedError", "StoreError", "StoreLockedError", "StoredDataError", "WeirError",
    "BUILTIN_SERDES", "Serde", "serde_from_name",
    "StoreSpec", "stores_in",
]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
