"""Changelogs over systems: the stores' ChangelogSink / ChangelogSource on any system.

``stores`` writes changes through :class:`weir.stores.changelog.ChangelogSink` and ``recovery``
reads them back through :class:`weir.stores.changelog.ChangelogSource`; neither knows streams.
This module adapts one partition of a system stream (a *changelog partition*) to both:

- :class:`SystemChangelogSink` sends each change to the partition with a
  :class:`~weir.engine.systems.api.SystemProducer` and ``flush()`` flushes the producer;
- :class:`SystemChangelogSource` reads the partition with the system's admin (oldest/newest)
  and a fresh consumer per :meth:`~SystemChangelogSource.read`; :meth:`~SystemChangelogSource.probe`
  tells restore whether a changelog that ends early is damaged at its end;
  :meth:`~SystemChangelogSource.read_batches` is restore's bulk read (for the file log: its
  segments read directly by :func:`weir.engine.systems.filelog.bulk.read_changelog`, which a
  restore worker process can also call through :meth:`~SystemChangelogSource.bulk_reader`);
- :func:`ensure_changelog_stream` creates the changelog as a compacted stream.

Compacted changelogs have gaps (offsets of overwritten records are gone); ``read`` yields the
records that exist in ``[start, end]`` in offset order and never waits for missing offsets.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.model import SystemStreamPartition
    >>> from weir.engine.systems.registry import SystemRegistry
    >>> reg = SystemRegistry(Config({"systems.mem-cl-doc.factory": "memory"}))
    >>> ensure_changelog_stream(reg.admin("mem-cl-doc"), "counts-changelog", 2)
    True
    >>> ssp = SystemStreamPartition("mem-cl-doc", "counts-changelog", 1)
    >>> producer = reg.producer("mem-cl-doc"); producer.register("counts"); producer.start()
    >>> sink = SystemChangelogSink(producer, ssp, "counts")
    >>> sink.append(b"a", b"1"); sink.append(b"a", None); sink.flush()
    >>> source = SystemChangelogSource(reg, ssp)
    >>> source.oldest_offset(), source.newest_offset(), list(source.read(0, 1))
    (0, 1, [(0, b'a', b'1'), (1, b'a', None)])
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from weir.stores.changelog import (NO_BULK_READER, NO_OFFSET, UNKNOWN_IDENTITY, BulkReader,
                                   ChangelogBatch, ChangelogRecord, ChangelogSink,
                                   ChangelogSource, Unavailable, batched)

from weir.engine.errors import ChangelogNotCompactedError, OpenTransactionError, SystemError_
from weir.engine.model import SystemStream, SystemStreamPartition, make_outgoing
from weir.engine.systems.api import (CleanupPolicy, PartitionMetadata, StreamSpec, SystemAdminBase,
                                     SystemConsumerBase, SystemFactory, SystemFactoryBase,
                                     SystemProducerBase)
from weir.engine.systems.foreign import adapt_factory

if TYPE_CHECKING:
    from weir.engine.systems.registry import SystemRegistry

__all__ = [
    "SystemChangelogSink",
    "SystemChangelogSource",
    "ensure_changelog_stream",
]

_POLL_TIMEOUT_S = 0.2
"""How long ``read`` waits for the next records before deciding the partition has no more
(only reached when the last offsets in the range were compacted away)."""


class SystemChangelogSink(ChangelogSink):
    """The :class:`~weir.stores.changelog.ChangelogSink` of one store partition.

    ``append(key, value)`` sends ``key -> value`` (``None`` value: a tombstone) to ``ssp``'s
    partition through ``producer`` as ``source_name``; ``flush()`` flushes that source, so
    every appended change is durable in the changelog when it returns. The producer must be
    registered for ``source_name`` and started by its owner (the container).

    Batches (a store's write-down) go through ``append_all(pairs)`` or
    ``append_columns(keys, values)``: one ``producer.send_batch`` (the file log's writes the
    whole batch under one writer lock, without an envelope per record; the default of
    :class:`~weir.engine.systems.api.SystemProducerBase` sends each change as ``append``).
    """

    __slots__ = ("producer", "ssp", "source_name", "_ss", "_send", "_send_batch")

    def __init__(self, producer: SystemProducerBase, ssp: SystemStreamPartition,
                 source_name: str):
        self.producer = producer
        self.ssp = ssp
        self.source_name = source_name
        self._ss = SystemStream(ssp.system, ssp.stream)
        self._send = producer.send
        self._send_batch = producer.send_batch

    def append(self, key: bytes, value: bytes | None) -> None:
        if key is None:
            raise SystemError_(f"changelog {self.ssp} (store source '{self.source_name}'): a "
                               f"changelog record needs a key")
        self._send(self.source_name, make_outgoing(
            self._ss, value, key, None, self.ssp.partition))

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Append ``(key, value)`` changes in order; returns how many."""
        return self._send_batch(self.source_name, self._ss, self.ssp.partition, items,
                                require_keys=True)

    def append_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> int:
        """``append_all`` of two parallel lists (``values[i]`` is the value of ``keys[i]``)."""
        return self.append_all(zip(keys, values))

    def flush(self) -> None:
        self.producer.flush(self.source_name)

    def __repr__(self) -> str:
        return f"SystemChangelogSink({self.ssp}, source={self.source_name!r})"


class SystemChangelogSource(ChangelogSource):
    """The :class:`~weir.stores.changelog.ChangelogSource` of one changelog partition.

    ``systems`` is a :class:`~weir.engine.systems.registry.SystemRegistry` or a system factory
    (then ``config`` is what the factory is given; a duck-typed one is adapted:
    :mod:`weir.engine.systems.foreign`).
    The admin is made once; each :meth:`read` uses a new consumer and stops it when done
    (also when the caller abandons the iterator and it is closed or collected).
    """

    def __init__(self, systems: "SystemRegistry | SystemFactory | SystemFactoryBase",
                 ssp: SystemStreamPartition, config: Mapping[str, str] | None = None):
        self.ssp = ssp
        from weir.engine.systems.registry import SystemRegistry
        if isinstance(systems, SystemRegistry):
            self._admin: SystemAdminBase = systems.admin(ssp.system)
            self._make_consumer: Any = lambda: systems.consumer(ssp.system)
        else:
            cfg = config if config is not None else {}
            factory = adapt_factory(systems, ssp.system)
            self._admin = factory.get_admin(ssp.system, cfg)
            self._make_consumer = lambda: factory.get_consumer(ssp.system, cfg)

    def _new_consumer(self) -> SystemConsumerBase:
        """A consumer that reads committed data only (where the system has transactions),
        whatever ``consumer.isolation.level`` says: restore rebuilds committed state."""
        consumer = self._make_consumer()
        consumer.set_isolation_level("read_committed")
        return consumer

    @property
    def partition(self) -> int:
        """The changelog partition (restore names it in its errors)."""
        return self.ssp.partition

    def _metadata(self) -> PartitionMetadata:
        return self._admin.metadata([self.ssp])[self.ssp]

    def oldest_offset(self) -> int:
        """The first retained offset (the upcoming offset when the partition is empty)."""
        return self._metadata().oldest

    def newest_offset(self) -> int:
        """The last record's offset, or ``NO_OFFSET`` when the partition is empty."""
        md = self._metadata()
        return NO_OFFSET if md.is_empty else md.newest

    def read(self, start: int, end: int) -> Iterator[ChangelogRecord]:
        """Records with ``start <= offset <= end`` that exist now, in offset order. ``start``
        below the oldest retained offset reads from the oldest; ``end`` past the newest reads
        to the newest."""
        md = self._metadata()
        if md.is_empty:
            return iter(())
        first = max(start, md.oldest)
        last = min(end, md.newest)
        if first > last:
            return iter(())
        return self._read(first, last)

    def identity(self) -> str | Literal[Unavailable.UNKNOWN_IDENTITY]:
        """The partition's identity (changes when the stream is deleted and created again);
        ``UNKNOWN_IDENTITY`` when the system cannot tell."""
        identity = self._metadata().identity
        return UNKNOWN_IDENTITY if identity is None else identity

    def min_compaction_lag_ms(self) -> int | None:
        """How long after a record is written compaction may remove the values it
        supersedes (the file log's ``compaction.min.lag.ms`` of the stream); None when the
        system does not say."""
        return self._admin.min_compaction_lag_ms(self.ssp.stream)

    def bulk_reader(self) -> BulkReader | Literal[Unavailable.NO_BULK_READER]:
        """A picklable ``reader(start, end, into=None)`` yielding batches (see
        :meth:`read_batches`) straight from the partition's files, for a restore worker process;
        ``NO_BULK_READER`` when the system keeps its records elsewhere (then use
        :meth:`read_batches`)."""
        location = self._location()
        if location is None:
            return NO_BULK_READER
        from weir.engine.systems.filelog.bulk import read_changelog
        return functools.partial(read_changelog, location)

    def split(self, start: int, end: int, parts: int) -> list[tuple[int, int]]:
        """``[start, end]`` cut into up to ``parts`` sub-ranges that several workers can read
        independently (at file-log segment boundaries); ``[(start, end)]`` otherwise."""
        location = self._location()
        if location is None:
            return [(start, end)]
        from weir.engine.systems.filelog.bulk import changelog_parts
        return changelog_parts(location, start, end, parts)

    def read_batches(self, start: int, end: int, *, into: dict | None = None
                     ) -> Iterator[ChangelogBatch]:
        """The records of ``[start, end]`` that exist now, in offset order, in batches: the
        bulk read of restore, below envelopes and serdes for the file log. A batch has
        ``.pairs`` (the last value of each key it read, as a dict -- ``into`` when given and
        the system can store into it -- or a ``(key, value)`` list), ``.last`` (offset of its
        last record), ``.records`` and ``.nbytes``."""
        md = self._metadata()
        if md.is_empty:
            return iter(())
        first, last = max(start, md.oldest), min(end, md.newest)
        if first > last:
            return iter(())
        reader = self.bulk_reader()
        if reader is not NO_BULK_READER:
            return reader(first, last, into=into)
        return batched(self._read(first, last))  # 65,536 records a batch

    def _location(self) -> Any:
        from weir.engine.systems.filelog.admin import FileLogAdmin
        if not isinstance(self._admin, FileLogAdmin):
            return None
        from weir.engine.systems.filelog.bulk import ChangelogLocation
        return ChangelogLocation(self._admin.root, self.ssp.stream, self.ssp.partition)

    def probe(self, offset: int) -> None:
        """Read what the partition holds at ``offset`` (normally its upcoming offset) once,
        and raise the system's error if it is damaged there (the file log's
        ``CorruptRecordError`` names the file and byte position). Returns quietly when there
        is nothing, or a readable record. Restore calls it when the changelog ends before the
        checkpoint's offset, to tell a cut changelog from one damaged at its end."""
        consumer = self._new_consumer()
        consumer.register(self.ssp, offset)
        consumer.start()
        try:
            consumer.poll([self.ssp], 0)
        finally:
            consumer.stop()

    def _read(self, first: int, last: int) -> Iterator[ChangelogRecord]:
        ssp = self.ssp
        consumer = self._new_consumer()
        consumer.register(ssp, first)
        consumer.start()
        try:
            while True:
                batch = consumer.poll([ssp], _POLL_TIMEOUT_S).get(ssp)
                if not batch:
                    self._check_not_held_back(consumer, last)
                    return  # nothing more now: the tail of the range was compacted away
                for env in batch:
                    if env.is_end_of_stream or env.offset > last:
                        return
                    yield env.offset, env.key, env.message
                    if env.offset == last:
                        return
        finally:
            consumer.stop()

    def _check_not_held_back(self, consumer: SystemConsumerBase, last: int) -> None:
        """A read that stops before ``last`` because a transaction is still open there would
        return too few records: raise instead (restore must never rebuild part of a state)."""
        txn = consumer.held_back_by(self.ssp)
        if txn is None or txn.first_offset > last:
            return
        raise OpenTransactionError(
            f"changelog {self.ssp}: reading up to offset {last} is held back at offset "
            f"{txn.first_offset} by an open transaction of producer {txn.producer_id} (epoch "
            f"{txn.epoch}, transaction {txn.sequence}); the job that owns it completes it when "
            f"it starts (or a reader does after its transaction timeout once its process is "
            f"gone): start that job, or wait, then start again. When its process is gone and "
            f"waiting does not help (nothing else reads the stream), `weir log transactions "
            f"{self.ssp.stream} --resolve` completes it now from its producer state",
            stream=self.ssp.stream,
            partition=self.ssp.partition, producer_id=txn.producer_id,
            first_offset=txn.first_offset)

    def __repr__(self) -> str:
        return f"SystemChangelogSource({self.ssp})"


def ensure_changelog_stream(admin: SystemAdminBase, stream: str, partitions: int, *,
                            store: str | None = None,
                            min_compaction_lag_ms: int | None = None) -> bool:
    """Create ``stream`` as a compacted changelog with ``partitions`` partitions; False if it
    already exists with that count. A different existing count raises SystemError_: changelog
    partitions map to tasks, so the count cannot change while the job keeps its state. An
    existing stream that is not compacted raises :class:`ChangelogNotCompactedError` (when the
    admin can tell its policy: ``cleanup_policy(stream)``). ``min_compaction_lag_ms``
    (``stores.<s>.changelog.min.compaction.lag.ms``) is set on a stream it creates."""
    if admin.stream_exists(stream):
        have = admin.partition_count(stream)
        if have != partitions:
            raise SystemError_(
                f"changelog stream '{stream}' has {have} partitions but the job needs "
                f"{partitions} (one per task); keep the job's partition count, or start the "
                f"job's state over with `weir checkpoint reset <job config> --yes` (moves "
                f"checkpoints, local stores and changelogs aside together)")
        _check_compacted(admin, stream, store)
        return False
    config = ({} if min_compaction_lag_ms is None
              else {"compaction.min.lag.ms": str(min_compaction_lag_ms)})
    return admin.create_stream(StreamSpec(stream, partitions, CleanupPolicy.COMPACT,
                                          config=config))


def _check_compacted(admin: SystemAdminBase, stream: str, store: str | None) -> None:
    policy = admin.cleanup_policy(stream)
    if policy is None or policy is CleanupPolicy.COMPACT:
        return  # None: the system does not tell its policy
    name = f"{admin.system}.{stream}" if admin.system else stream
    path = admin.stream_path(stream)
    where = "" if path is None else f" ({path}/stream.json)"
    owner = f" of store '{store}'" if store else ""
    key = f"stores.{store}.changelog" if store else "stores.<store>.changelog"
    raise ChangelogNotCompactedError(
        f"changelog stream '{name}'{owner} exists with cleanup policy '{policy.value}'{where}, "
        f"not 'compact': retention would delete the records the store's state is rebuilt "
        f"from, so Weir does not use it. If it holds this store's state, make it compacted "
        f"while the job is stopped (file log: set \"cleanup_policy\" to \"compact\" in its "
        f"stream.json) and check with `weir log describe {stream}` that its oldest offset is "
        f"still 0 (records retention already deleted are lost); if it is not this store's "
        f"changelog, point {key} at another stream name and Weir creates it compacted",
        stream=name, store=store, policy=policy.value)
