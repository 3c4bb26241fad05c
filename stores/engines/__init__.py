"""Bytes engines: RocksDB (rocksdict), LMDB and memory, all under one contract. The registry
every part of Weir picks them from is :mod:`weir.stores.engines.registry` (its names are
re-exported by :mod:`weir.stores`; docs/ENGINES.md)."""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

# Loaded on first use: a job imports the engines its stores use (LMDB's library only for an LMDB
# store).
_LAZY = {
    "BytesEngine": "weir.stores.engines._base",
    "BytesEngineBase": "weir.stores.engines._base",
    "BytesIterator": "weir.stores.engines._base",
    "BytesSnapshot": "weir.stores.engines._base",
    "LMDBEngine": "weir.stores.engines.lmdb",
    "LMDBOptions": "weir.stores.engines.lmdb",
    "LMDB_KEYS": "weir.stores.engines.lmdb",
    "MemoryEngine": "weir.stores.engines.memory",
    "ROCKSDB_KEYS": "weir.stores.engines.rocksdb",
    "RocksDBEngine": "weir.stores.engines.rocksdb",
    "RocksDBOptions": "weir.stores.engines.rocksdb",
    "prefix_upper_bound": "weir.stores.engines._base",
}

__all__ = ["BytesEngine", "BytesEngineBase", "BytesIterator", "BytesSnapshot", "prefix_upper_bound",
           "LMDB_KEYS", "LMDBEngine", "LMDBOptions", "MemoryEngine",
           "ROCKSDB_KEYS", "RocksDBEngine", "RocksDBOptions"]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
