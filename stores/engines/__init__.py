"""Bytes engines: RocksDB (rocksdict), LMDB and memory, all under one contract."""

from ._base import BytesEngine, BytesIterator, BytesSnapshot, prefix_upper_bound
from .lmdb import LMDB_KEYS, LMDBEngine, LMDBOptions
from .memory import MemoryEngine
from .rocksdb import ROCKSDB_KEYS, RocksDBEngine, RocksDBOptions

__all__ = ["BytesEngine", "BytesIterator", "BytesSnapshot", "prefix_upper_bound",
           "LMDB_KEYS", "LMDBEngine", "LMDBOptions", "MemoryEngine",
           "ROCKSDB_KEYS", "RocksDBEngine", "RocksDBOptions"]
