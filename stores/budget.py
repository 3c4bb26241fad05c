"""A container's memory budget, split across its stores: object caches, write batches and
RocksDB's block cache and memtables are sized from it unless set explicitly.

Samza sizes each of these by a fixed count or byte value per store; a task whose hot set is
larger than the 1,000-entry default cache then reads the engine on most gets. Weir starts from
one number, ``job.container.memory.mb`` (Samza's ``cluster-manager.container.memory.mb`` is
accepted, same default), and derives the rest:

1. ``RUNTIME_RESERVE_MB`` (64 MiB) is kept for the interpreter, Weir and the libraries.
2. A store with ``stores.<store>.container.memory.mb`` takes that much; the rest is split
   evenly among the other stores. A store's part is split evenly among the container's tasks
   (each task has its own instance of every store): that is one instance's *share*.
3. Of a share, a RocksDB store gives a quarter to its block cache and a quarter to its
   memtables (``rocksdb.write.buffer.size.bytes`` = that quarter / ``max.write.buffer.number``),
   and half to the object cache; LMDB and memory stores give half to the object cache (LMDB's
   pages are the operating system's page cache; a memory store's data is its own).
4. Object cache entries = the cache's half / ``ENTRY_BYTES`` (an estimate of one entry: key,
   value and LRU links as Python objects, and its part of a write-down's passing lists),
   at least ``max(write batch, 1000)`` (Samza's default); write batch = entries / 4, at least
   500 (Samza's default). A bigger batch writes a key changed again and again down, and logs
   it, once per batch instead of once per 500 changes: with a large key space, where most
   keys change once or twice between two write-downs, a batch of a quarter of the cache
   leaves ~22% fewer changelog records and engine writes than one of 5,000 (the 1M-key job of
   bench/RESULTS.md, ~7% less CPU). The price is a longer pause per write-down (a few
   microseconds per entry); a job that needs short pauses sets
   ``stores.<store>.write.batch.size``.

Any of ``object.cache.size``, ``write.batch.size``, ``rocksdb.block.cache.size.bytes`` and
``rocksdb.write.buffer.size.bytes`` set for a store (by any of its names) wins over the budget.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.stores.spec import StoreSpec
    >>> cfg = Config({"stores.s.factory": "rocksdb", "stores.s.key.serde": "bytes",
    ...               "stores.s.msg.serde": "int64", "job.container.memory.mb": "576"})
    >>> budget = MemoryBudget.from_config(cfg, ["s"])
    >>> [sized] = budget.size([StoreSpec.from_config(cfg, "s")], tasks=2)
    >>> sized.object_cache_size, sized.write_batch_size, sized.options.block_cache_size_bytes >> 20
    (524288, 131072, 64)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from weir.stores.config import Config, declare
from weir.stores.engines._rocksdb_options import (BLOCK_CACHE_SIZE, MAX_WRITE_BUFFER_NUMBER,
                                                  WRITE_BUFFER_SIZE, RocksDBOptions)
from weir.stores.errors import ConfigError
from weir.stores.spec import STORE_OBJECT_CACHE_SIZE, STORE_WRITE_BATCH_SIZE, StoreSpec

__all__ = ["MemoryBudget", "StoreShare", "JOB_CONTAINER_MEMORY_MB", "STORE_CONTAINER_MEMORY_MB",
           "RUNTIME_RESERVE_MB", "ENTRY_BYTES"]

_MIB = 1 << 20
RUNTIME_RESERVE_MB = 64
"""Kept out of the budget for the interpreter, Weir and its libraries."""
ENTRY_BYTES = 256
"""Estimated bytes of one object-cache entry (a small key and value as Python objects, the
LRU links, a dirty-map slot: ~150 bytes) and its part of the lists a write-down of a quarter
of the cache passes down (serialized values, changelog frames: ~90 bytes per cache entry)."""
_MIN_SHARE = 4 * _MIB
_BATCH_MIN = 500
_BATCH_OF_CACHE = 4
"""The derived write batch is the cache's entries / this."""

JOB_CONTAINER_MEMORY_MB = declare(
    "job.container.memory.mb", int, 1024,
    "Memory budget of one container in MiB. 64 MiB are kept for the runtime; the rest is "
    "split across the stores (stores.<store>.container.memory.mb first, the rest evenly) and "
    "each store's part across the container's tasks; each store instance sizes its object "
    "cache, write batch and (RocksDB) block cache and memtables from its share, unless those "
    "keys are set. Samza's cluster-manager.container.memory.mb is accepted.",
    component="stores", aliases=("cluster-manager.container.memory.mb",
                                 "yarn.container.memory.mb"))
STORE_CONTAINER_MEMORY_MB = declare(
    "stores.<store>.container.memory.mb", int, None,
    "This store's part of job.container.memory.mb in MiB (all its task instances in one "
    "container together); unset: an even split of what the stores with this key leave.",
    component="stores")


@dataclass(frozen=True)
class StoreShare:
    """What one instance of a store gets: ``share_bytes`` and the sizes derived from it
    (None where the store's own key wins or the engine has no such setting)."""

    store: str
    share_bytes: int
    object_cache_size: int | None
    write_batch_size: int | None
    block_cache_bytes: int | None
    write_buffer_bytes: int | None


@dataclass(frozen=True)
class MemoryBudget:
    """The container budget and which per-store sizes were set explicitly; parsed once."""

    container_mb: int = JOB_CONTAINER_MEMORY_MB.default
    store_mb: Mapping[str, int] = field(default_factory=dict)
    explicit: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Per store, the fields set by the user: ``object_cache_size``, ``write_batch_size``,
    ``block_cache_size_bytes``, ``write_buffer_size_bytes``."""

    @classmethod
    def from_config(cls, config: Config | Mapping[str, str],
                    stores: Iterable[str]) -> "MemoryBudget":
        config = config if isinstance(config, Config) else Config(config)
        container_mb = JOB_CONTAINER_MEMORY_MB.get(config)
        key = JOB_CONTAINER_MEMORY_MB.name
        if container_mb <= RUNTIME_RESERVE_MB:
            raise ConfigError(f"must be more than the {RUNTIME_RESERVE_MB} MiB kept for the "
                              f"runtime, got {container_mb}; the default is "
                              f"{JOB_CONTAINER_MEMORY_MB.default}", key=key,
                              origin=config.origin(key))
        store_mb: dict[str, int] = {}
        explicit: dict[str, frozenset[str]] = {}
        for name in stores:
            mb = STORE_CONTAINER_MEMORY_MB.get(config, store=name)
            if mb is not None:
                skey = STORE_CONTAINER_MEMORY_MB.key(store=name)
                if mb <= 0:
                    raise ConfigError(f"must be a positive number of MiB, got {mb}", key=skey,
                                      origin=config.origin(skey))
                store_mb[name] = mb
            explicit[name] = frozenset(
                f for f, ck in (("object_cache_size", STORE_OBJECT_CACHE_SIZE),
                                ("write_batch_size", STORE_WRITE_BATCH_SIZE),
                                ("block_cache_size_bytes", BLOCK_CACHE_SIZE),
                                ("write_buffer_size_bytes", WRITE_BUFFER_SIZE),
                                ("max_write_buffer_number", MAX_WRITE_BUFFER_NUMBER))
                if any(n.replace("<store>", name) in config for n in (ck.name, *ck.aliases)))
        total = sum(store_mb.values())
        if store_mb and total > container_mb - RUNTIME_RESERVE_MB:
            keys = ", ".join(STORE_CONTAINER_MEMORY_MB.key(store=s) for s in sorted(store_mb))
            raise ConfigError(
                f"the stores' own parts ({keys}: {total} MiB together) do not fit in the "
                f"container budget of {container_mb} MiB less {RUNTIME_RESERVE_MB} MiB for the "
                f"runtime; raise {key} to at least {total + RUNTIME_RESERVE_MB} or lower them",
                key=key, origin=config.origin(key))
        return cls(container_mb, store_mb, explicit)

    def shares(self, specs: Iterable[StoreSpec], tasks: int) -> dict[str, StoreShare]:
        """Each store's per-instance share with ``tasks`` tasks in the container."""
        specs = list(specs)
        tasks = max(1, tasks)
        left = (self.container_mb - RUNTIME_RESERVE_MB) * _MIB
        left -= sum(mb * _MIB for name, mb in self.store_mb.items()
                    if any(s.name == name for s in specs))
        even = [s for s in specs if s.name not in self.store_mb]
        out: dict[str, StoreShare] = {}
        for spec in specs:
            part = (self.store_mb[spec.name] * _MIB if spec.name in self.store_mb
                    else left // max(1, len(even)))
            out[spec.name] = self._share(spec, max(_MIN_SHARE, part // tasks))
        return out

    def _share(self, spec: StoreSpec, share: int) -> StoreShare:
        explicit = self.explicit.get(spec.name, frozenset())
        cache = batch = block = buffer = None
        if "object_cache_size" not in explicit:
            floor = spec.write_batch_size if "write_batch_size" in explicit else _BATCH_MIN
            cache = max(floor, 1000, (share // 2) // ENTRY_BYTES)
        if "write_batch_size" not in explicit:
            entries = cache if cache is not None else spec.object_cache_size
            batch = max(_BATCH_MIN, entries // _BATCH_OF_CACHE)
            if entries:  # a cache may not be smaller than its batch
                batch = min(batch, entries)
        if isinstance(spec.options, RocksDBOptions):  # the engine whose memory is sized here
            if "block_cache_size_bytes" not in explicit:
                block = share // 4
            if "write_buffer_size_bytes" not in explicit:
                buffer = max(64 * 1024, (share // 4) // spec.options.max_write_buffer_number)
        return StoreShare(spec.name, share, cache, batch, block, buffer)

    def size(self, specs: Iterable[StoreSpec], tasks: int) -> list[StoreSpec]:
        """``specs`` with every size the user did not set taken from the budget."""
        specs = list(specs)
        shares = self.shares(specs, tasks)
        out = []
        for spec in specs:
            sh = shares[spec.name]
            changes: dict = {}
            if sh.object_cache_size is not None:
                changes["object_cache_size"] = sh.object_cache_size
            if sh.write_batch_size is not None:
                changes["write_batch_size"] = sh.write_batch_size
            rocks: dict = {}
            if sh.block_cache_bytes is not None:
                rocks["block_cache_size_bytes"] = sh.block_cache_bytes
            if sh.write_buffer_bytes is not None:
                rocks["write_buffer_size_bytes"] = sh.write_buffer_bytes
            if rocks:
                changes["options"] = dataclasses.replace(spec.options, **rocks)
            out.append(dataclasses.replace(spec, **changes) if changes else spec)
        return out

    def describe(self, specs: Iterable[StoreSpec], tasks: int) -> str:
        """One line for the container's log: what each store instance got."""
        parts = []
        for sh in self.shares(specs, tasks).values():
            bits = [f"share {sh.share_bytes / _MIB:.0f} MiB"]
            if sh.object_cache_size is not None:
                bits.append(f"object cache {sh.object_cache_size:,}")
            if sh.write_batch_size is not None:
                bits.append(f"write batch {sh.write_batch_size:,}")
            if sh.block_cache_bytes is not None:
                bits.append(f"block cache {sh.block_cache_bytes / _MIB:.0f} MiB")
            if sh.write_buffer_bytes is not None:
                bits.append(f"memtable {sh.write_buffer_bytes / _MIB:.0f} MiB")
            parts.append(f"store '{sh.store}' ({', '.join(bits)})")
        return (f"memory budget {self.container_mb} MiB over {max(1, tasks)} task(s): "
                + ("; ".join(parts) or "no stores"))
