"""Helpers shared by the engine tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from weir.stores.config import Config
from weir.stores.engines.registry import Durability, store_engine
from weir.stores.errors import ConfigError
from weir.stores.spec import StoreSpec

PERSISTENT = ("rocksdb", "lmdb")
"""The built-in persistent engines, for what they share beyond the store contract (an engine
of the registry is held to the contract and its declared capabilities in tests/stores/
test_contract.py)."""

__all__ = ["PERSISTENT", "bad_option_error", "keys_of", "open_persistent"]



def keys_of(it) -> list[bytes]:
    """The keys of iterator ``it``, which is closed afterwards."""
    with it:
        return [k for k, _ in it]


def open_persistent(kind: str, path: Path, name: str = "s"):
    """A persistent registered engine (RocksDB, LMDB, ...) named ``name`` on ``path``,
    opened as for a logged store."""
    return store_engine(kind).open(StoreSpec(name, kind, "bytes", "bytes"), path,
                                   Durability.CHANGELOG)


def bad_option_error(from_config: Callable[[Config, str], object], key: str, value: str,
                     origin: str) -> ConfigError:
    """The ConfigError ``from_config`` raises for ``key=value`` (read from ``origin``) for
    store ``s``, after checking that it names the key and the origin."""
    cfg = Config({key: value}, origins={key: origin})
    with pytest.raises(ConfigError) as info:
        from_config(cfg, "s")
    assert info.value.key == key
    assert info.value.origin == origin
    return info.value
