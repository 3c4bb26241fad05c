"""StoreSpec: everything about one store, parsed once from its ``stores.<name>.*`` keys.

Example::

    >>> from weir.stores.config import Config
    >>> cfg = Config({
    ...     "stores.counts.factory": "org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory",
    ...     "stores.counts.key.serde": "string", "stores.counts.msg.serde": "long",
    ...     "stores.counts.changelog": "filelog.counts-changelog"})
    >>> spec = StoreSpec.from_config(cfg, "counts")
    >>> spec.engine, spec.changelog, spec.object_cache_size, spec.write_batch_size
    (<StoreEngine memory>, ('filelog', 'counts-changelog'), 1000, 500)
    >>> stores_in(cfg)
    ['counts']

Unknown ``stores.<name>.*`` keys are errors (a typo must not silently fall back to a default);
the message lists the keys that are valid for the store.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from weir.stores.config import Config, declare, declared_keys, find_declared
from weir.stores.engines.registry import (StoreEngine, declare_engine_keys, engine_choices,
                                          store_engine)
from weir.stores.errors import ConfigError
from weir.stores.serdes import serde_from_name

__all__ = [
    "LargeMessages",
    "StoreSpec",
    "stores_in",
    "check_store_keys",
    "STORE_FACTORY",
    "STORE_KEY_SERDE",
    "STORE_MSG_SERDE",
    "STORE_CHANGELOG",
    "STORE_OBJECT_CACHE_SIZE",
    "STORE_WRITE_BATCH_SIZE",
    "STORE_CHANGELOG_REPLICATION_FACTOR",
    "STORES_DEFAULT_CHANGELOG_REPLICATION_FACTOR",
    "STORE_CHANGELOG_STALENESS_MS",
    "STORE_CLEAN_ON_CONTAINER_START",
    "STORE_MIN_COMPACTION_LAG_MS",
    "STORE_MAX_MESSAGE_BYTES",
    "STORE_DISALLOW_LARGE_MESSAGES",
    "STORE_DROP_LARGE_MESSAGES",
]

_COMPONENT = "stores"


class LargeMessages(Enum):
    """What a store does with a value over ``changelog.max.message.size.bytes``."""

    FAIL_AT_WRITE = "fail-at-write"
    """RecordTooLargeError when it is written down to the engine and changelog (logged stores;
    a store without changelog has no limit then)."""
    FAIL_AT_PUT = "fail-at-put"
    """RecordTooLargeError at ``put`` (``disallow.large.messages``)."""
    DROP = "drop"
    """Neither stored nor logged; counted and logged (``drop.large.messages``)."""


STORE_FACTORY = declare(
    "stores.<store>.factory", str, None,
    "The store's engine: rocksdb, lmdb or memory (or an engine registered with "
    "weir.stores.engines.registry.register_engine, docs/ENGINES.md). Samza's factory class names "
    "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory and "
    "org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory are accepted. "
    "Required: setting it is what makes <store> a store.",
    component=_COMPONENT)
STORE_KEY_SERDE = declare(
    "stores.<store>.key.serde", str, None,
    "Serde of the store's keys: bytes, string, int64 (alias long, integer), json, msgpack, or a "
    "name registered with serializers.registry.<name>.class. Required.",
    component=_COMPONENT)
STORE_MSG_SERDE = declare(
    "stores.<store>.msg.serde", str, None,
    "Serde of the store's values; same names as key.serde. Required.",
    component=_COMPONENT)
STORE_CHANGELOG = declare(
    "stores.<store>.changelog", str, None,
    "Changelog stream of the store as system.stream (a bare stream name uses the job's "
    "changelog system, job.changelog.system). Unset: the store has no changelog and does not survive the loss of "
    "its directory.",
    component=_COMPONENT)
STORE_WRITE_BATCH_SIZE = declare(
    "stores.<store>.write.batch.size", int, 500,
    "Dirty cache entries that trigger a write-down to the engine (and changelog) in one "
    "batch; 0 (as in Samza): no batching, every write goes down at once (the same as 1). "
    "Unset in a job: object cache entries / 4, at least 500, from "
    "job.container.memory.mb (500 outside a job). (Restore writes in larger runs: "
    "job.container.restore.batch.bytes.)",
    component=_COMPONENT)
STORE_CHANGELOG_REPLICATION_FACTOR = declare(
    "stores.<store>.changelog.replication.factor", int, None,
    "Samza's replication factor of the changelog topic; accepted and not used: the file log "
    "keeps one copy of each stream, on this machine's disk (what a commit wrote survives a "
    "process crash; with systems.<system>.fsync.every.* a machine crash too). Must be >= 1.",
    component=_COMPONENT)
STORES_DEFAULT_CHANGELOG_REPLICATION_FACTOR = declare(
    "stores.default.changelog.replication.factor", int, None,
    "Samza's default replication factor of changelog topics; accepted and not used (see "
    "stores.<store>.changelog.replication.factor).", component=_COMPONENT)
STORE_OBJECT_CACHE_SIZE = declare(
    "stores.<store>.object.cache.size", int, None,
    "Entries in the store's LRU object cache; 0 disables the cache. Must not be less than "
    "write.batch.size when > 0. Unset in a job: sized from the store's share of "
    "job.container.memory.mb (half of it, at ~256 bytes an entry); outside a job "
    "max(write.batch.size, 1000).",
    component=_COMPONENT)
STORE_CHANGELOG_STALENESS_MS = declare(
    "stores.<store>.changelog.staleness.ms", int, 86_400_000,
    "A local copy of a logged store whose offset file is older than this is discarded and "
    "rebuilt from the changelog at start (Samza: changelog.delete.retention.ms, accepted as an "
    "alias).",
    component=_COMPONENT, aliases=("stores.<store>.changelog.delete.retention.ms",))
STORE_CLEAN_ON_CONTAINER_START = declare(
    "stores.<store>.clean.on.container.start", bool, False,
    "Wipe the store's local files at every start and begin from scratch: a logged store is "
    "rebuilt from its changelog, a store without changelog starts empty. The old files are "
    "set aside and removed only once the new store is open (Samza's key).",
    component=_COMPONENT)
STORE_MIN_COMPACTION_LAG_MS = declare(
    "stores.<store>.changelog.min.compaction.lag.ms", int, None,
    "Minimum compaction lag of the store's changelog: set on the changelog stream when Weir "
    "creates it (the file log's compaction.min.lag.ms of that stream), and used by restore: a "
    "checkpoint older than 0.9 x the lag restores the store to the changelog's newest offset "
    "instead of the checkpointed one (compaction may have removed committed values). Unset: "
    "stores.default.changelog.min.compaction.lag.ms, else the changelog system's own lag "
    "(default 4 h). Samza's key.",
    component=_COMPONENT)
STORES_DEFAULT_MIN_COMPACTION_LAG_MS = declare(
    "stores.default.changelog.min.compaction.lag.ms", int, None,
    "Default of stores.<store>.changelog.min.compaction.lag.ms for every store (Samza's key).",
    component=_COMPONENT)
STORE_MAX_MESSAGE_BYTES = declare(
    "stores.<store>.changelog.max.message.size.bytes", int, 1_048_576,
    "Largest serialized value a logged store writes to its changelog (and any store with "
    "disallow.large.messages or drop.large.messages). A larger value fails with "
    "RecordTooLargeError naming the store and key when it is written down to the engine, "
    "unless one of those two keys says otherwise (Samza's key and default).",
    component=_COMPONENT)
STORE_DISALLOW_LARGE_MESSAGES = declare(
    "stores.<store>.disallow.large.messages", bool, False,
    "Check the size of every value at put(), so a value over "
    "changelog.max.message.size.bytes fails right there (RecordTooLargeError) instead of at "
    "the next write-down; costs one extra serialization per put (Samza's key).",
    component=_COMPONENT)
STORE_DROP_LARGE_MESSAGES = declare(
    "stores.<store>.drop.large.messages", bool, False,
    "Drop a value over changelog.max.message.size.bytes instead of failing: it is neither "
    "stored nor logged, counted (dropped_large_messages) and logged as a warning (Samza's "
    "key).",
    component=_COMPONENT)
_STORE_PREFIX = "stores.<store>."
_FACTORY_RE = re.compile(r"^stores\.([^.]+)\.factory$")


@dataclass(frozen=True)
class StoreSpec:
    """One store's settings. Build it with :meth:`from_config`.

    ``engine`` is the registered :class:`~weir.stores.engines.registry.StoreEngine` (a name
    or alias is resolved when the spec is built in code); ``changelog`` is ``(system, stream)``
    or None; ``options`` holds the engine's options parsed from ``stores.<name>.<engine>.*``
    (None: the engine has none, or its defaults). Option keys of the other engines
    (``stores.<name>.lmdb.*`` on a RocksDB store) are accepted and ignored, so a store can be
    switched between engines by changing ``factory`` alone.
    """

    name: str
    engine: StoreEngine
    key_serde: str
    value_serde: str
    changelog: tuple[str, str] | None = None
    write_batch_size: int = 500
    object_cache_size: int = 1000
    staleness_ms: int = 86_400_000
    options: Any = None
    """The engine's options (``StoreEngine.parse_options``); None: its defaults."""
    clean_on_start: bool = False
    """``stores.<s>.clean.on.container.start``: a fresh store at every start."""
    min_compaction_lag_ms: int | None = None
    """The changelog's minimum compaction lag set in config (None: the system's own)."""
    max_message_bytes: int = 1_048_576
    large_messages: LargeMessages = LargeMessages.FAIL_AT_WRITE

    def __post_init__(self) -> None:
        if not isinstance(self.engine, StoreEngine):
            object.__setattr__(self, "engine", store_engine(self.engine))
        # from_config reports these with the config key; this catches specs built in code.
        for field_name in ("write_batch_size", "staleness_ms"):
            if getattr(self, field_name) <= 0:
                raise ValueError(f"StoreSpec {self.name!r}: {field_name} must be positive, "
                                 f"got {getattr(self, field_name)}")
        if self.object_cache_size < 0:
            raise ValueError(f"StoreSpec {self.name!r}: object_cache_size must be >= 0 (0 "
                             f"disables the cache), got {self.object_cache_size}")
        if 0 < self.object_cache_size < self.write_batch_size:
            raise ValueError(f"StoreSpec {self.name!r}: object_cache_size "
                             f"({self.object_cache_size}) cannot be less than write_batch_size "
                             f"({self.write_batch_size})")

    @property
    def persistent(self) -> bool:
        """Whether the engine's files outlive the process (False for the memory engine)."""
        return self.engine.persistent

    @property
    def logged(self) -> bool:
        return self.changelog is not None

    @property
    def cached(self) -> bool:
        return self.object_cache_size > 0

    @classmethod
    def from_config(cls, config: Config, name: str, *,
                    changelog_system: str | None = None) -> "StoreSpec":
        """Parse and validate ``stores.<name>.*``. Raises ConfigError naming the bad key.

        ``changelog_system`` is the system of a changelog given as a bare stream name; the job
        resolves it (``job.changelog.system``, else ``job.default.system``) and passes it in,
        because the storage core does not read job settings.
        """
        if not isinstance(config, Config):
            config = Config(config)
        check_store_keys(config, name)
        engine = _engine(config, name)
        key_serde = _serde(config, name, STORE_KEY_SERDE)
        value_serde = _serde(config, name, STORE_MSG_SERDE)
        batch = _at_least(config, name, STORE_WRITE_BATCH_SIZE, 0) or 1  # 0: write through
        _at_least(config, name, STORE_CHANGELOG_REPLICATION_FACTOR, 1)
        cache = STORE_OBJECT_CACHE_SIZE.get(config, store=name)
        cache_key = STORE_OBJECT_CACHE_SIZE.key(store=name)
        if cache is None:
            cache = max(batch, 1000)
        elif cache < 0:
            raise ConfigError(f"must be >= 0 (0 disables the cache), got {cache}",
                              key=cache_key, origin=config.origin(cache_key))
        elif 0 < cache < batch:
            raise ConfigError(
                f"object.cache.size ({cache}) cannot be less than write.batch.size ({batch}); "
                f"raise the cache size, lower the batch size, or set 0 to disable the cache",
                key=cache_key, origin=config.origin(cache_key))
        staleness = _positive(config, name, STORE_CHANGELOG_STALENESS_MS)
        lag = STORE_MIN_COMPACTION_LAG_MS.get(config, store=name)
        lag_key = STORE_MIN_COMPACTION_LAG_MS.key(store=name)
        if lag is None:
            lag = STORES_DEFAULT_MIN_COMPACTION_LAG_MS.get(config)
            lag_key = STORES_DEFAULT_MIN_COMPACTION_LAG_MS.name
        if lag is not None and lag < 0:
            raise ConfigError(f"must be >= 0, got {lag}", key=lag_key,
                              origin=config.origin(lag_key))
        max_bytes = _positive(config, name, STORE_MAX_MESSAGE_BYTES)
        disallow = STORE_DISALLOW_LARGE_MESSAGES.get(config, store=name)
        drop = STORE_DROP_LARGE_MESSAGES.get(config, store=name)
        if disallow and drop:
            key = STORE_DROP_LARGE_MESSAGES.key(store=name)
            raise ConfigError(
                f"cannot be true together with {STORE_DISALLOW_LARGE_MESSAGES.key(store=name)}: "
                f"a value over the limit is either refused at put (disallow) or dropped (drop); "
                f"set one of them", key=key, origin=config.origin(key))
        large = (LargeMessages.DROP if drop else
                 LargeMessages.FAIL_AT_PUT if disallow else LargeMessages.FAIL_AT_WRITE)
        return cls(name=name, engine=engine, key_serde=key_serde, value_serde=value_serde,
                   changelog=_changelog(config, name, changelog_system), write_batch_size=batch,
                   object_cache_size=cache, staleness_ms=staleness,
                   options=engine.options(config, name),
                   clean_on_start=STORE_CLEAN_ON_CONTAINER_START.get(config, store=name),
                   min_compaction_lag_ms=lag, max_message_bytes=max_bytes,
                   large_messages=large)


def stores_in(config: Config) -> list[str]:
    """Names of the configured stores (those with ``stores.<name>.factory``), sorted."""
    return sorted({m.group(1) for k in config if (m := _FACTORY_RE.match(k))})


# -- parsing helpers --------------------------------------------------------------------------

def _engine(config: Config, name: str) -> StoreEngine:
    key = STORE_FACTORY.key(store=name)
    raw = config.get_str(key)
    if not raw:
        raise ConfigError(f"is required to define store {name!r}: set it to one of "
                          f"{engine_choices()}", key=key, origin=config.origin(key))
    return store_engine(raw, key=key, origin=config.origin(key), what="store factory")


def _serde(config: Config, name: str, decl: Any) -> str:
    key = decl.key(store=name)
    raw = config.get_str(key)
    if not raw:
        raise ConfigError(f"is required for store {name!r}: set a serde name (bytes, string, "
                          f"int64, json, msgpack or a serializers.registry.<name> entry)",
                          key=key, origin=config.origin(key))
    serde_from_name(raw, config, key=key)  # fails now, at parse time, if it cannot resolve
    return raw


def _positive(config: Config, name: str, decl: Any) -> int:
    return _at_least(config, name, decl, 1)


def _at_least(config: Config, name: str, decl: Any, low: int) -> Any:
    value = decl.get(config, store=name)
    if value is not None and value < low:
        key = decl.key(store=name)
        what = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise ConfigError(f"must be {what}, got {value}", key=key, origin=config.origin(key))
    return value


def _changelog(config: Config, name: str, default_system: str | None) -> tuple[str, str] | None:
    key = STORE_CHANGELOG.key(store=name)
    if key not in config:
        return None
    raw = config.get_str(key) or ""
    if not raw:
        raise ConfigError("is empty: set it to system.stream, or remove it for a store without "
                          "changelog", key=key, origin=config.origin(key))
    system, dot, stream = raw.partition(".")
    if dot and system and stream:
        return system, stream
    if dot:
        raise ConfigError(f"bad value {raw!r}: expected system.stream", key=key,
                          origin=config.origin(key))
    if not default_system:
        raise ConfigError(f"names stream {raw!r} without a system: write system.stream "
                          f"(e.g. filelog.{raw}) or set job.changelog.system",
                          key=key, origin=config.origin(key))
    return default_system, raw


def check_store_keys(config: Config, name: str) -> None:
    """Refuse the first unknown ``stores.<name>.*`` key (in key order) with a ConfigError that
    names it, where it was set, the closest valid key and every valid key. The job's config
    check and :meth:`StoreSpec.from_config` both call it, so a typo gets one message."""
    prefix = f"stores.{name}."
    declare_engine_keys()
    for key in sorted(config):
        if not key.startswith(prefix) or find_declared(key) is not None:
            continue
        valid = sorted(d.key(store=name) for d in declared_keys()
                       if d.name.startswith(_STORE_PREFIX))
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(f"unknown key for store {name!r}; {hint}valid keys: {', '.join(valid)}",
                          key=key, origin=config.origin(key))
