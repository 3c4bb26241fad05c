"""Bytes engines: RocksDB (rocksdict), LMDB and memory, all under one contract."""

from ._base import BytesEngine, BytesIterator, BytesSnapshot, prefix_upper_bound

__all__ = ["BytesEngine", "BytesIterator", "BytesSnapshot", "prefix_upper_bound"]
