"""Bytes engines: RocksDB (rocksdict), LMDB and memory, all under one contract."""

from weir.stores.engines._base import BytesEngine, BytesIterator, BytesSnapshot, prefix_upper_bound
from weir.stores.engines.lmdb import LMDB_KEYS, LMDBEngine, LMDBOptions
from weir.stores.engines.memory import MemoryEngine
from weir.stores.engines.rocksdb import ROCKSDB_KEYS, RocksDBEngine, RocksDBOptions

__all__ = ["BytesEngine", "BytesIterator", "BytesSnapshot", "prefix_upper_bound",
           "LMDB_KEYS", "LMDBEngine", "LMDBOptions", "MemoryEngine",
           "ROCKSDB_KEYS", "RocksDBEngine", "RocksDBOptions"]
