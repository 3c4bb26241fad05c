"""Bytes engines: RocksDB (rocksdict), LMDB and memory, all under one contract."""

from __future__ import annotations

import importlib
from typing import Any

# Loaded on first use: a job imports the engines its stores use (LMDB's library only for an LMDB
# store).
_LAZY = {
    "BytesEngine": "weir.stores.engines._base",
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

__all__ = ["BytesEngine", "BytesIterator", "BytesSnapshot", "prefix_upper_bound",
           "LMDB_KEYS", "LMDBEngine", "LMDBOptions", "MemoryEngine",
           "ROCKSDB_KEYS", "RocksDBEngine", "RocksDBOptions"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'weir.stores.engines' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
