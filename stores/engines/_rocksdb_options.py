"""RocksDB engine options: a frozen dataclass parsed once from ``stores.<store>.rocksdb.*``.

Defaults follow Samza (docs/ENGINES.md, "RocksDB") where Samza has one and it suits a per-store
engine, with three deliberate changes: sizes are per store (Samza's ``container.*`` sizes are
divided among the container's tasks; pass ``tasks_in_container`` to get the same split when a
Samza key is used), compression defaults to lz4 (decompresses faster than snappy at a similar
ratio; RocksDB's own recommendation), and compaction defaults to ``level`` (space
amplification ~1.1x instead of universal's up to 2x, and cheaper reads). A 10-bit bloom filter
is on by default: it makes misses ~4x cheaper (docs/ENGINES.md).

Example::

    >>> from weir.stores.config import Config
    >>> opts = RocksDBOptions.from_config(
    ...     Config({"stores.counts.rocksdb.compression": "zstd"}), "counts")
    >>> opts.compression
    <Compression.ZSTD: 'zstd'>
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

import rocksdict

from weir.stores.config import Config, ConfigKey, declare
from weir.stores.errors import ConfigError

__all__ = ["Compression", "CompactionStyle", "RocksDBOptions", "ROCKSDB_KEYS"]

_MIB = 1024 * 1024
_COMPONENT = "stores: rocksdb engine"


class Compression(str, Enum):
    """Block compression. Samza's names are accepted (``bzip2``)."""

    NONE = "none"
    SNAPPY = "snappy"
    LZ4 = "lz4"
    LZ4HC = "lz4hc"
    ZSTD = "zstd"
    ZLIB = "zlib"
    BZIP2 = "bzip2"

    def native(self) -> Any:
        t = rocksdict.DBCompressionType
        return {"none": t.none, "snappy": t.snappy, "lz4": t.lz4, "lz4hc": t.lz4hc,
                "zstd": t.zstd, "zlib": t.zlib, "bzip2": t.bz2}[self.value]()


class CompactionStyle(str, Enum):
    """Compaction style. ``fifo`` drops the oldest files once the store passes 1 GiB: it loses
    data and suits only caches; it is accepted because Samza accepts it."""

    LEVEL = "level"
    UNIVERSAL = "universal"
    FIFO = "fifo"

    def native(self) -> Any:
        return getattr(rocksdict.DBCompactionStyle, self.value)()


BLOCK_CACHE_SIZE = declare(
    "stores.<store>.rocksdb.block.cache.size.bytes", int, 64 * _MIB,
    "RocksDB block cache (LRU) of this store, in bytes; 0 disables the cache. Unset in a job: "
    "a quarter of the store's share of job.container.memory.mb. Samza's "
    "stores.<store>.container.cache.size.bytes is accepted and divided among the container's "
    "tasks.", component=_COMPONENT, aliases=("stores.<store>.container.cache.size.bytes",))
WRITE_BUFFER_SIZE = declare(
    "stores.<store>.rocksdb.write.buffer.size.bytes", int, 32 * _MIB,
    "Size of one RocksDB memtable of this store, in bytes. Unset in a job: a quarter of the "
    "store's share of job.container.memory.mb / max.write.buffer.number. Samza's "
    "stores.<store>.container.write.buffer.size.bytes is accepted and divided among the "
    "container's tasks.", component=_COMPONENT,
    aliases=("stores.<store>.container.write.buffer.size.bytes",))
MAX_WRITE_BUFFER_NUMBER = declare(
    "stores.<store>.rocksdb.max.write.buffer.number", int, 3,
    "Memtables kept in memory (the active one plus those waiting to be flushed); at least 2.",
    component=_COMPONENT, aliases=("stores.<store>.rocksdb.num.write.buffers",))
COMPRESSION = declare(
    "stores.<store>.rocksdb.compression", Compression, Compression.LZ4,
    "Block compression: none, snappy, lz4, lz4hc, zstd, zlib or bzip2.", component=_COMPONENT)
BLOOM_FILTER_BITS = declare(
    "stores.<store>.rocksdb.bloom.filter.bits", int, 10,
    "Bloom filter bits per key (cheap negative lookups); 0 disables the filter.",
    component=_COMPONENT)
MEMTABLE_BLOOM_PERCENT = declare(
    "stores.<store>.rocksdb.memtable.bloom.percent", int, 10,
    "Size of a whole-key bloom filter in each memtable, in percent of the write buffer "
    "(0-25; 0 disables it): a get of a key that is not in the memtable skips its skip-list "
    "search. Gets of new keys (a store filling up, a large key space) cost ~20% less "
    "(bench/RESULTS.md).", component=_COMPONENT)
BLOCK_SIZE = declare(
    "stores.<store>.rocksdb.block.size.bytes", int, 4096,
    "Uncompressed size of a RocksDB data block, in bytes.", component=_COMPONENT)
MAX_OPEN_FILES = declare(
    "stores.<store>.rocksdb.max.open.files", int, -1,
    "SST files RocksDB keeps open; -1 keeps all open.", component=_COMPONENT)
COMPACTION_STYLE = declare(
    "stores.<store>.rocksdb.compaction.style", CompactionStyle, CompactionStyle.LEVEL,
    "Compaction style: level, universal or fifo (fifo deletes old data; caches only).",
    component=_COMPONENT)

ROCKSDB_KEYS: tuple[ConfigKey, ...] = (
    BLOCK_CACHE_SIZE, WRITE_BUFFER_SIZE, MAX_WRITE_BUFFER_NUMBER, COMPRESSION,
    BLOOM_FILTER_BITS, MEMTABLE_BLOOM_PERCENT, BLOCK_SIZE, MAX_OPEN_FILES, COMPACTION_STYLE)
"""Every config key the RocksDB engine reads."""

# field name -> (config key, smallest allowed value, or None for enums)
_FIELDS: dict[str, tuple[ConfigKey, int | None]] = {
    "block_cache_size_bytes": (BLOCK_CACHE_SIZE, 0),
    "write_buffer_size_bytes": (WRITE_BUFFER_SIZE, 64 * 1024),
    "max_write_buffer_number": (MAX_WRITE_BUFFER_NUMBER, 2),
    "compression": (COMPRESSION, None),
    "bloom_filter_bits": (BLOOM_FILTER_BITS, 0),
    "memtable_bloom_percent": (MEMTABLE_BLOOM_PERCENT, 0),
    "block_size_bytes": (BLOCK_SIZE, 256),
    "max_open_files": (MAX_OPEN_FILES, -1),
    "compaction_style": (COMPACTION_STYLE, None),
}
# Samza's per-container sizes, divided among the container's tasks when they are the key used.
_PER_CONTAINER_ALIASES = frozenset({"stores.<store>.container.cache.size.bytes",
                                    "stores.<store>.container.write.buffer.size.bytes"})


@dataclass(frozen=True)
class RocksDBOptions:
    """Tuning of one RocksDB store. Every field has a documented default (see ``docs/CONFIG.md``).

    ``max_open_files`` may be -1 (keep all open) or at least 1; the other integers have the
    minimums in ``_FIELDS`` (RocksDB itself silently raises a write-buffer number below 2).
    """

    block_cache_size_bytes: int = BLOCK_CACHE_SIZE.default
    write_buffer_size_bytes: int = WRITE_BUFFER_SIZE.default
    max_write_buffer_number: int = MAX_WRITE_BUFFER_NUMBER.default
    compression: Compression = COMPRESSION.default
    bloom_filter_bits: int = BLOOM_FILTER_BITS.default
    memtable_bloom_percent: int = MEMTABLE_BLOOM_PERCENT.default
    block_size_bytes: int = BLOCK_SIZE.default
    max_open_files: int = MAX_OPEN_FILES.default
    compaction_style: CompactionStyle = COMPACTION_STYLE.default

    def __post_init__(self) -> None:
        for f in fields(self):
            problem = _check(f.name, getattr(self, f.name))
            if problem:
                raise ValueError(f"RocksDBOptions.{f.name}: {problem}")

    @classmethod
    def from_config(cls, config: Config | Mapping[str, str], store: str, *,
                    tasks_in_container: int = 1) -> "RocksDBOptions":
        """Parse ``stores.<store>.rocksdb.*`` (and Samza's names for the same settings).

        A bad value raises :class:`ConfigError` naming the key and where it was set.
        ``tasks_in_container`` divides Samza's per-container sizes when those keys are used.
        """
        if not isinstance(config, Config):
            config = Config(config)
        values: dict[str, Any] = {}
        for name, (ck, _minimum) in _FIELDS.items():
            found = _find(config, ck, store)
            if found is None:
                continue
            template, concrete = found
            value = ck.parse(config, concrete)
            problem = _check(name, value)
            if not problem and template in _PER_CONTAINER_ALIASES and tasks_in_container > 1:
                value //= tasks_in_container
                problem = _check(name, value)
                if problem:
                    problem += f" after dividing among {tasks_in_container} tasks"
            if problem:
                raise ConfigError(problem, key=concrete, origin=config.origin(concrete))
            values[name] = value
        return cls(**values)

    def to_rocksdict_options(self) -> rocksdict.Options:
        """A fresh ``rocksdict.Options`` in raw (bytes) mode carrying these settings."""
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_write_buffer_size(self.write_buffer_size_bytes)
        opts.set_max_write_buffer_number(self.max_write_buffer_number)
        opts.set_compression_type(self.compression.native())
        opts.set_compaction_style(self.compaction_style.native())
        if self.compaction_style is CompactionStyle.LEVEL:
            opts.set_level_compaction_dynamic_level_bytes(True)
        opts.set_max_open_files(self.max_open_files)
        opts.set_keep_log_file_num(2)  # Samza's default; RocksDB's info LOG is for humans
        if self.memtable_bloom_percent > 0:
            opts.set_memtable_prefix_bloom_ratio(self.memtable_bloom_percent / 100)
            opts.set_memtable_whole_key_filtering(True)  # no prefix extractor: whole keys
        table = rocksdict.BlockBasedOptions()
        if self.block_cache_size_bytes > 0:
            table.set_block_cache(rocksdict.Cache(self.block_cache_size_bytes))
        else:
            table.disable_cache()
        if self.bloom_filter_bits > 0:
            table.set_bloom_filter(self.bloom_filter_bits, False)  # full filter, not per block
        table.set_block_size(self.block_size_bytes)
        opts.set_block_based_table_factory(table)
        return opts


def _find(config: Config, ck: ConfigKey, store: str) -> tuple[str, str] | None:
    """``(template, concrete name)`` of the first of the key's names that is set."""
    for template in (ck.name, *ck.aliases):
        concrete = template.replace("<store>", store)
        if concrete in config:
            return template, concrete
    return None


def _check(field_name: str, value: Any) -> str | None:
    """Why ``value`` is not allowed for ``field_name``, or None if it is."""
    ck, minimum = _FIELDS[field_name]
    if minimum is None:
        if not isinstance(value, ck.type):
            allowed = ", ".join(m.value for m in ck.type)
            return f"bad value {value!r}: expected one of {allowed}"
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"bad value {value!r}: expected an integer"
    if field_name == "memtable_bloom_percent" and value > 25:
        return f"bad value {value}: must be at most 25 (percent of the write buffer)"
    if field_name == "max_open_files" and value == 0:
        return "bad value 0: expected -1 (keep every file open) or a positive number"
    if value < minimum:
        return f"bad value {value}: must be at least {minimum}"
    return None
