"""LMDB engine options: a frozen dataclass parsed once from ``stores.<store>.lmdb.*``.

Defaults: the map starts at 64 MiB and doubles on demand up to 256 GiB (the data file is
sparse, so an unused map costs address space, not disk); commits fsync (``sync=true``); up to
10,000 buffered writes are committed in one transaction. Large transactions matter: LMDB
rewrites every page a transaction touches, so small random transactions multiply the bytes
written (a transaction per 1000 puts with fsync wrote ~260x the data: docs/ENGINES.md).

Example::

    >>> from weir.stores.config import Config
    >>> LMDBOptions.from_config(Config({"stores.s.lmdb.sync": "false"}), "s").sync
    False
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from weir.stores.config import Config, ConfigKey, declare
from weir.stores.errors import ConfigError

__all__ = ["LMDBOptions", "LMDB_KEYS"]

_MIB = 1024 * 1024
_GIB = 1024 * _MIB
_COMPONENT = "stores: lmdb engine"

MAP_SIZE = declare(
    "stores.<store>.lmdb.map.size.bytes", int, 64 * _MIB,
    "Initial LMDB map size of this store, in bytes; the map doubles by itself when full "
    "(or half full, when no snapshot is open), up to stores.<store>.lmdb.max.map.size.bytes.",
    component=_COMPONENT)
MAX_MAP_SIZE = declare(
    "stores.<store>.lmdb.max.map.size.bytes", int, 256 * _GIB,
    "Largest LMDB map this store may grow to, in bytes; past it writes fail with a StoreError "
    "(the buffered writes are kept).", component=_COMPONENT)
SYNC = declare(
    "stores.<store>.lmdb.sync", bool, True,
    "fsync every LMDB commit (flush). false survives a process crash but not a power cut; "
    "the changelog still restores what was lost.", component=_COMPONENT)
MAX_READERS = declare(
    "stores.<store>.lmdb.max.readers", int, 126,
    "Read transactions open at once: one for point reads plus one per open iterator or "
    "snapshot.", component=_COMPONENT)
WRITE_BATCH_SIZE = declare(
    "stores.<store>.lmdb.write.batch.size", int, 10_000,
    "Buffered writes (puts and deletes of distinct keys) that trigger a commit before the "
    "next flush; every commit is one LMDB write transaction.", component=_COMPONENT)

LMDB_KEYS: tuple[ConfigKey, ...] = (MAP_SIZE, MAX_MAP_SIZE, SYNC, MAX_READERS, WRITE_BATCH_SIZE)
"""Every config key the LMDB engine reads."""

_FIELDS: dict[str, tuple[ConfigKey, int | None]] = {
    "map_size_bytes": (MAP_SIZE, 64 * 1024),
    "max_map_size_bytes": (MAX_MAP_SIZE, 64 * 1024),
    "sync": (SYNC, None),
    "max_readers": (MAX_READERS, 2),
    "write_batch_size": (WRITE_BATCH_SIZE, 1),
}


@dataclass(frozen=True)
class LMDBOptions:
    """Tuning of one LMDB store; see the module docstring and ``docs/CONFIG.md``."""

    map_size_bytes: int = MAP_SIZE.default
    max_map_size_bytes: int = MAX_MAP_SIZE.default
    sync: bool = SYNC.default
    max_readers: int = MAX_READERS.default
    write_batch_size: int = WRITE_BATCH_SIZE.default

    def __post_init__(self) -> None:
        for f in fields(self):
            problem = _check(f.name, getattr(self, f.name))
            if problem:
                raise ValueError(f"LMDBOptions.{f.name}: {problem}")
        if self.max_map_size_bytes < self.map_size_bytes:
            raise ValueError(f"LMDBOptions.max_map_size_bytes ({self.max_map_size_bytes}) is "
                             f"smaller than map_size_bytes ({self.map_size_bytes})")

    @classmethod
    def from_config(cls, config: Config | Mapping[str, str], store: str) -> "LMDBOptions":
        """Parse ``stores.<store>.lmdb.*``; a bad value raises :class:`ConfigError` naming the
        key and where it was set."""
        if not isinstance(config, Config):
            config = Config(config)
        values: dict[str, Any] = {}
        for name, (ck, _minimum) in _FIELDS.items():
            concrete = ck.key(store=store)
            if concrete not in config:
                continue
            value = ck.parse(config, concrete)
            problem = _check(name, value)
            if problem:
                raise ConfigError(problem, key=concrete, origin=config.origin(concrete))
            values[name] = value
        initial = values.get("map_size_bytes", MAP_SIZE.default)
        cap = values.get("max_map_size_bytes", MAX_MAP_SIZE.default)
        if cap < initial:
            blamed = MAX_MAP_SIZE.key(store=store)
            if blamed not in config:
                blamed = MAP_SIZE.key(store=store)
            raise ConfigError(f"the map cap ({cap} bytes) is smaller than the initial map size "
                              f"({initial} bytes); raise {MAX_MAP_SIZE.key(store=store)} or "
                              f"lower {MAP_SIZE.key(store=store)}",
                              key=blamed, origin=config.origin(blamed))
        return cls(**values)


def _check(field_name: str, value: Any) -> str | None:
    """Why ``value`` is not allowed for ``field_name``, or None if it is."""
    _ck, minimum = _FIELDS[field_name]
    if minimum is None:
        return None if isinstance(value, bool) else f"bad value {value!r}: expected true or false"
    if isinstance(value, bool) or not isinstance(value, int):
        return f"bad value {value!r}: expected an integer"
    if value < minimum:
        return f"bad value {value}: must be at least {minimum}"
    return None
