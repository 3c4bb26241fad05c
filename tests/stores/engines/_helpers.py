"""Helpers shared by the engine tests."""

from __future__ import annotations

from pathlib import Path

from stores.engines.lmdb import LMDBEngine
from stores.engines.rocksdb import RocksDBEngine

__all__ = ["PERSISTENT", "keys_of", "open_persistent"]

PERSISTENT = ["rocksdb", "lmdb"]


def keys_of(it) -> list[bytes]:
    """The keys of iterator ``it``, which is closed afterwards."""
    with it:
        return [k for k, _ in it]


def open_persistent(kind: str, path: Path, name: str = "s"):
    """A RocksDB (logged) or LMDB engine named ``name`` on ``path``."""
    if kind == "rocksdb":
        return RocksDBEngine(name, path, logged=True)
    return LMDBEngine(name, path)
