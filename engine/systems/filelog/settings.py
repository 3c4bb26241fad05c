"""Configuration of the file log system, parsed once into frozen settings.

System-wide keys are ``systems.<system>.<key>``. The storage keys (segment size, retention,
compaction, compression, fsync policy, fetch size) can be set per stream, first hit wins:

1. ``systems.<system>.streams.<stream>.<key>`` in the job config;
2. ``<key>`` in the ``config`` of the stream's ``StreamSpec`` (kept in its ``stream.json``);
3. ``systems.<system>.<key>``;
4. the default.

Example::

    >>> from weir.stores.config import Config
    >>> s = FileLogSettings.from_config("filelog", Config({
    ...     "systems.filelog.root": "/tmp/weir-log", "systems.filelog.segment.bytes": "1048576",
    ...     "systems.filelog.streams.clicks.segment.bytes": "4096"}))
    >>> s.root, s.for_stream("clicks").segment_bytes, s.for_stream("other").segment_bytes
    ('/tmp/weir-log', 4096, 1048576)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from weir.stores.config import Config, ConfigError, ConfigKey, declare

__all__ = [
    "Compression",
    "OffsetReset",
    "IsolationLevel",
    "StreamSettings",
    "FileLogSettings",
    "STREAM_KEYS",
]

_C = "file log"


class Compression(Enum):
    NONE = "none"
    ZSTD = "zstd"


class OffsetReset(Enum):
    """What a consumer does with an offset outside ``[oldest, upcoming]``."""

    OLDEST = "oldest"
    UPCOMING = "upcoming"
    ERROR = "error"


class IsolationLevel(Enum):
    """Which records of transactions a consumer sees (Kafka's ``isolation.level``)."""

    READ_COMMITTED = "read_committed"
    """Plain records and records of committed transactions, up to the last stable offset (the
    first offset of the earliest open transaction). Aborted and fenced records are skipped."""
    READ_UNCOMMITTED = "read_uncommitted"
    """Every data record of a complete batch, aborted ones included."""


_RESET_ALIASES = {"oldest": OffsetReset.OLDEST, "smallest": OffsetReset.OLDEST,
                  "earliest": OffsetReset.OLDEST, "upcoming": OffsetReset.UPCOMING,
                  "largest": OffsetReset.UPCOMING, "latest": OffsetReset.UPCOMING,
                  "error": OffsetReset.ERROR, "none": OffsetReset.ERROR}

ROOT = declare(
    "systems.<system>.root", str, "./weir-data/log",
    "Directory of a file log system (one sub-directory per stream); a relative path is "
    "resolved against the working directory of the process when the config is read.",
    component=_C)
PRODUCER_BUFFER_BYTES = declare(
    "systems.<system>.producer.buffer.bytes", int, 1 << 20,
    "Bytes of framed records a partition writer buffers before it writes them to the file "
    "(flush always writes everything; producer.linger.ms writes them out sooner).",
    component=_C)
PRODUCER_LINGER_MS = declare(
    "systems.<system>.producer.linger.ms", int, 5,
    "How long a producer keeps sent records in its partition writers' buffers before it "
    "writes them out to the files, where every reader (this process or another) sees them "
    "(milliseconds; Kafka's linger.ms, whose default is 5 since Kafka 4.0). A full buffer "
    "(producer.buffer.bytes) is written at once, and a run loop that has nothing to process "
    "writes out what its tasks sent without waiting. 0: every send is written out at once. "
    "Writing out does not fsync: records are durable at the next flush (a commit), as "
    "before. The transactional producer (exactly-once) hands a batch to its writer when it "
    "is full (producer.batch.size) and at commit, and read_committed readers see a "
    "transaction's records at its commit marker, so for them the commit interval is the "
    "latency.",
    component=_C, aliases=("task.intermediate.linger.ms",))
PRODUCER_APPEND_LOCK_TIMEOUT_MS = declare(
    "systems.<system>.producer.append.lock.timeout.ms", int, 30_000,
    "How long a producer waits for its turn to append to a partition that producers of other "
    "processes write too (each holds the partition's append lock only while it writes its "
    "buffer out). Waiting longer than this means a holder is stopped or hung: the producer "
    "raises PartitionLockedError naming the lock file.", component=_C)
CONSUMER_READ_BYTES = declare(
    "systems.<system>.consumer.read.bytes", int, 1 << 20,
    "Bytes a consumer reads from a segment file at a time.", component=_C)
CONSUMER_RESET = declare(
    "systems.<system>.consumer.auto.offset.reset", str, "oldest",
    "Where a consumer goes when its offset is outside the retained range (deleted by "
    "retention, or beyond the end): oldest, upcoming or error (Samza's smallest/largest and "
    "Kafka's earliest/latest/none are accepted).", component=_C,
    choices=tuple(_RESET_ALIASES))
CONSUMER_ISOLATION = declare(
    "systems.<system>.consumer.isolation.level", str, "read_committed",
    "Which records of transactions a consumer sees (Kafka's isolation.level; Samza has no "
    "such key): read_committed (plain records and records of committed transactions, up to "
    "the first offset of the earliest open transaction; aborted ones are skipped) or "
    "read_uncommitted (every record, aborted ones included). On a log without transactions "
    "both read the same, at the same speed. Kafka's default is read_uncommitted; Weir's is "
    "read_committed, so a downstream job never sees output its upstream job aborted. Restore "
    "always reads committed.", component=_C,
    choices=tuple(level.value for level in IsolationLevel))
PRODUCER_TRANSACTION_TIMEOUT_MS = declare(
    "systems.<system>.producer.transaction.timeout.ms", int, 60_000,
    "How long a transaction of a producer that is gone (its process died and no new "
    "incarnation started) may hold read_committed readers back before a reader completes it "
    "(rolls it forward when its checkpoint committed it, else aborts it); Kafka's "
    "transaction.timeout.ms. Recorded in the producer state, so readers use the producer's "
    "value. A live producer is never overruled.", component=_C)
PRODUCER_BATCH_SIZE = declare(
    "systems.<system>.producer.batch.size", int, 64 * 1024,
    "Bytes of records a transactional producer collects per partition before it hands them to "
    "the partition's writer as one batch (Kafka's batch.size); each batch costs a 40-byte "
    "header and one check per reader.", component=_C)
PRODUCER_INIT_TIMEOUT_MS = declare(
    "systems.<system>.producer.init.timeout.ms", int, 10_000,
    "How long init_transactions waits for the previous incarnation of a transactional id to "
    "release its owner lock before it fails with TransactionalIdInUseError.", component=_C)
CONSUMER_POLL_SLEEP_MS = declare(
    "systems.<system>.consumer.poll.max.sleep.ms", int, 10,
    "Longest sleep between two looks at the files while poll() waits for records, where "
    "inotify cannot wake the consumer (the wait starts at 0.5 ms and doubles). A consumer "
    "woken by inotify looks at every change of its partitions' directories and every 100 ms "
    "(or this, when longer).", component=_C)


def _pair(key: str, type_, default, doc: str, **kw) -> tuple[ConfigKey, ConfigKey]:
    system = declare(f"systems.<system>.{key}", type_, default, doc, component=_C, **kw)
    stream = declare(f"systems.<system>.streams.<stream>.{key}", type_, None,
                     f"Per-stream override of systems.<system>.{key}.", component=_C, **kw)
    return system, stream


SEGMENT_BYTES = _pair(
    "segment.bytes", int, 64 << 20,
    "Size at which a partition's active segment is sealed and a new one started.")
RETENTION_BYTES = _pair(
    "retention.bytes", int, -1,
    "Delete the oldest sealed segments of a partition while it holds more than this many "
    "bytes (-1: no size limit). Streams with cleanup policy delete only.")
RETENTION_MS = _pair(
    "retention.ms", int, -1,
    "Delete sealed segments sealed longer ago than this (-1: keep forever). Streams with "
    "cleanup policy delete only.")
TOMBSTONE_RETENTION_MS = _pair(
    "compaction.tombstone.retention.ms", int, 86_400_000,
    "Compaction keeps a tombstone (null value) at least this long after its segment was "
    "sealed, so that slow readers see the delete.")
COMPACTION_MIN_LAG_MS = _pair(
    "compaction.min.lag.ms", int, 14_400_000,
    "Compaction only rewrites sealed segments sealed at least this long ago, and only their "
    "records can supersede older values (Kafka's min.compaction.lag.ms). A committed store "
    "value superseded by writes a crashed run never committed must stay in the changelog "
    "until restore has reverted those writes: keep this well above task.commit.ms.")
COMPACTION_INTERVAL_MS = _pair(
    "compaction.interval.ms", int, 600_000,
    "A writer of a compacted stream compacts its partition at a segment roll when this long "
    "has passed since its last compaction (0: only on demand).")
COMPRESSION = _pair(
    "compression", str, "none",
    "Compression of sealed segments: none or zstd.", choices=("none", "zstd"))
COMPRESSION_LEVEL = _pair(
    "compression.level", int, 3, "zstd level of sealed segments.")
FSYNC_EVERY_RECORDS = _pair(
    "fsync.every.records", int, 1,
    "flush() fsyncs a partition once at least this many records were written since its last "
    "fsync (1: every flush that wrote something; 0: never by count).")
FSYNC_EVERY_MS = _pair(
    "fsync.every.ms", int, 0,
    "flush() also fsyncs a partition with unsynced records when its last fsync is at least "
    "this old (0: never by time).")
FETCH_MAX_RECORDS = _pair(
    "fetch.max.records", int, 500,
    "Records a consumer returns per partition per poll (Kafka's max.poll.records default; "
    "larger batches keep more envelopes alive across garbage collections and read slower).")

STREAM_KEYS: dict[str, tuple[ConfigKey, ConfigKey]] = {
    pair[0].name.removeprefix("systems.<system>."): pair
    for pair in (SEGMENT_BYTES, RETENTION_BYTES, RETENTION_MS, TOMBSTONE_RETENTION_MS,
                 COMPACTION_MIN_LAG_MS, COMPACTION_INTERVAL_MS, COMPRESSION, COMPRESSION_LEVEL,
                 FSYNC_EVERY_RECORDS, FSYNC_EVERY_MS, FETCH_MAX_RECORDS)}
"""Keys that may be set per stream, by their short name (``segment.bytes``)."""


@dataclass(frozen=True)
class StreamSettings:
    """The effective storage settings of one stream."""

    segment_bytes: int = 64 << 20
    retention_bytes: int = -1
    retention_ms: int = -1
    tombstone_retention_ms: int = 86_400_000
    compaction_min_lag_ms: int = 14_400_000
    compaction_interval_ms: int = 600_000
    compression: Compression = Compression.NONE
    compression_level: int = 3
    fsync_every_records: int = 1
    fsync_every_ms: int = 0
    fetch_max_records: int = 500


@dataclass(frozen=True)
class FileLogSettings:
    """Everything the file log reads from config, for one system name."""

    system: str
    root: str
    producer_buffer_bytes: int = 1 << 20
    consumer_read_bytes: int = 1 << 20
    auto_offset_reset: OffsetReset = OffsetReset.OLDEST
    poll_max_sleep_ms: int = 10
    config: Config = field(default_factory=Config, repr=False)
    isolation_level: IsolationLevel = IsolationLevel.READ_COMMITTED
    transaction_timeout_ms: int = 60_000
    batch_size: int = 64 * 1024
    init_timeout_ms: int = 10_000
    append_lock_timeout_ms: int = 30_000
    producer_linger_ms: int = 5

    @classmethod
    def from_config(cls, system: str, config: Mapping[str, str]) -> "FileLogSettings":
        cfg = config if isinstance(config, Config) else Config(config)
        reset = _RESET_ALIASES[CONSUMER_RESET.get(cfg, system=system)]
        settings = cls(system, os.path.abspath(ROOT.get(cfg, system=system)),
                       _positive(cfg, PRODUCER_BUFFER_BYTES, system),
                       _positive(cfg, CONSUMER_READ_BYTES, system), reset,
                       max(0, CONSUMER_POLL_SLEEP_MS.get(cfg, system=system)), cfg,
                       isolation_level=IsolationLevel(CONSUMER_ISOLATION.get(cfg, system=system)),
                       transaction_timeout_ms=_positive(cfg, PRODUCER_TRANSACTION_TIMEOUT_MS,
                                                        system),
                       batch_size=_positive(cfg, PRODUCER_BATCH_SIZE, system),
                       init_timeout_ms=max(0, PRODUCER_INIT_TIMEOUT_MS.get(cfg, system=system)),
                       append_lock_timeout_ms=_positive(cfg, PRODUCER_APPEND_LOCK_TIMEOUT_MS,
                                                        system),
                       producer_linger_ms=_not_negative(cfg, PRODUCER_LINGER_MS, system))
        settings.for_stream("")  # validate the system-level storage keys now
        return settings

    def for_stream(self, stream: str, stored: Mapping[str, str] | None = None) -> StreamSettings:
        """The settings of ``stream``; ``stored`` is the config kept in its stream.json."""
        values = {}
        for short, (sys_key, stream_key) in STREAM_KEYS.items():
            values[short] = _resolve(self.config, self.system, stream, short, sys_key,
                                     stream_key, stored or {})
        out = StreamSettings(
            segment_bytes=values["segment.bytes"], retention_bytes=values["retention.bytes"],
            retention_ms=values["retention.ms"],
            tombstone_retention_ms=values["compaction.tombstone.retention.ms"],
            compaction_min_lag_ms=values["compaction.min.lag.ms"],
            compaction_interval_ms=values["compaction.interval.ms"],
            compression=Compression(values["compression"]),
            compression_level=values["compression.level"],
            fsync_every_records=values["fsync.every.records"],
            fsync_every_ms=values["fsync.every.ms"],
            fetch_max_records=values["fetch.max.records"])
        for short, value in (("segment.bytes", out.segment_bytes),
                             ("fetch.max.records", out.fetch_max_records)):
            if value <= 0:
                key = STREAM_KEYS[short][0].key(system=self.system)
                raise ConfigError(f"must be positive, got {value}", key=key,
                                  origin=self.config.origin(key))
        return out


def _resolve(config: Config, system: str, stream: str, short: str, sys_key: ConfigKey,
             stream_key: ConfigKey, stored: Mapping[str, str]):
    if stream:
        name = stream_key.key(system=system, stream=stream)
        if name in config:
            return stream_key.parse(config, name)
        if short in stored:
            name = sys_key.key(system=system)
            return sys_key.parse(Config({name: stored[short]},
                                        origins={name: f"stream.json of '{stream}'"}), name)
    return sys_key.get(config, system=system)


def _positive(config: Config, key: ConfigKey, system: str) -> int:
    value = key.get(config, system=system)
    if value <= 0:
        raise ConfigError(f"must be positive, got {value}", key=key.key(system=system),
                          origin=config.origin(key.key(system=system)))
    return value


def _not_negative(config: Config, key: ConfigKey, system: str) -> int:
    value = key.get(config, system=system)
    if value < 0:
        name = next((n for n in (key.key(system=system), *key.aliases) if n in config),
                    key.key(system=system))
        raise ConfigError(f"must be 0 or more, got {value}", key=name, origin=config.origin(name))
    return value
