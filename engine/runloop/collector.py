"""A task's MessageCollector: :class:`ProducerCollector` serializes what the task sends, picks
the partition and hands it to the system's producer (docs/ARCHITECTURE.md, ``runloop/``).

Example::

    >>> from weir.engine.model import OutgoingMessageEnvelope, SystemStream
    >>> sent = []
    >>> class Producer:
    ...     def register(self, source): pass
    ...     def send(self, source, envelope): sent.append((envelope.partition, envelope.message))
    ...     def flush(self, source): pass
    >>> out = ProducerCollector("Partition 0", {"mem": Producer()}, partition_count=lambda ss: 4)
    >>> out.send(OutgoingMessageEnvelope(SystemStream("mem", "s"), b"v", key=b"k"))
    >>> sent[0][1], out.sent
    (b'v', 1)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from weir.stores.errors import SerdeError

from weir.engine.config.serdes import SerdeManager, StreamSerdes, StreamSerdesBase
from weir.engine.errors import EngineError
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, make_outgoing, partition_for
from weir.engine.systems.api import SystemProducer

__all__ = ["ProducerCollector"]


class ProducerCollector:
    """The MessageCollector of one task: serialize, choose the partition, send.

    Partition: ``envelope.partition`` when set; else ``crc32`` of the partition key's bytes
    (the stream's key serde applied to ``partition_key``; bytes as they are; a str as UTF-8
    when the stream has no key serde), else of the serialized key; with neither, round-robin
    over the partitions per stream, starting at 0 -- what Kafka's default partitioner does
    for null keys under Samza. The producer is called with the task name as ``source``.
    """

    __slots__ = ("source", "_producers", "_serializer", "_partition_count", "_counts",
                 "_round_robin", "sent")

    def __init__(self, source: str, producers: Mapping[str, SystemProducer] | None = None,
                 serializer: SerdeManager | None = None,
                 partition_count: Callable[[SystemStream], int] | None = None):
        if serializer is not None and not isinstance(serializer, SerdeManager):
            raise TypeError(f"ProducerCollector '{source}': serializer must be a SerdeManager "
                            f"(the job's SystemRegistry.serdes) or None to send objects as "
                            f"they are, got {serializer!r}")
        self.source = str(source)
        self._producers = dict(producers or {})
        self._serializer = serializer
        self._partition_count = partition_count
        self._counts: dict[SystemStream, int] = {}
        self._round_robin: dict[SystemStream, int] = {}
        self.sent = 0

    def register(self) -> None:
        """Register the task as a source with every producer (before producers start)."""
        for producer in self._producers.values():
            producer.register(self.source)

    def _count(self, ss: SystemStream) -> int:
        count = self._counts.get(ss)
        if count is None:
            if self._partition_count is None:
                raise EngineError(f"task '{self.source}': cannot choose a partition of '{ss}' "
                                  f"(no partition counts were given); set envelope.partition")
            count = self._counts[ss] = self._partition_count(ss)
        return count

    def _key_bytes(self, ss: SystemStream, key: Any) -> bytes:
        if isinstance(key, (bytes, bytearray, memoryview)):
            return bytes(key)
        if self._serializer is not None:
            try:
                kb = self._serializer.serialize(OutgoingMessageEnvelope(ss, None, key=key))[0]
            except SerdeError:
                if not isinstance(key, str):
                    raise
            else:
                if kb is not None:
                    return kb
        if isinstance(key, str):
            return key.encode()
        raise EngineError(f"task '{self.source}': partition key {key!r} for '{ss}' is neither "
                          f"bytes nor str and the stream has no key serde to serialize it")

    def partition_count(self, ss: SystemStream) -> int:
        """The partition count of ``ss`` (cached; what partition choice uses)."""
        return self._count(ss)

    def serdes_for(self, ss: SystemStream) -> StreamSerdesBase:
        """The serdes ``send`` applies to ``ss``; without a serializer, the passthrough serdes
        (no key or message serde: ``send`` hands keys and messages over as they are)."""
        if self._serializer is None:
            return StreamSerdes(SystemStream(*ss))
        return self._serializer.for_stream(ss)

    def send_serialized(self, ss: SystemStream, key: bytes | None, message: bytes | None,
                        partition: int, timestamp: int = -1) -> None:
        """Send bytes the caller serialized itself to ``partition`` (operators with their
        own fast path); the same producer call and accounting as :meth:`send`."""
        producer = self._producers.get(ss.system)
        if producer is None:
            raise EngineError(f"task '{self.source}' sent a message to '{ss}' but system "
                              f"'{ss.system}' has no producer; define systems.{ss.system}.factory")
        producer.send(self.source, make_outgoing(ss, message, key, None, partition,
                                                 timestamp))
        self.sent += 1

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        ss = envelope.system_stream
        producer = self._producers.get(ss.system)
        if producer is None:
            raise EngineError(f"task '{self.source}' sent a message to '{ss}' but system "
                              f"'{ss.system}' has no producer; define systems.{ss.system}.factory")
        if self._serializer is not None:
            key, message = self._serializer.serialize(envelope)
        else:
            key, message = envelope.key, envelope.message
        partition = envelope.partition
        if partition is None:
            count = self._count(ss)
            pkey = envelope.partition_key
            pbytes = self._key_bytes(ss, pkey) if pkey is not None else key
            if pbytes is not None:
                partition = partition_for(bytes(pbytes), count)
            else:
                n = self._round_robin.get(ss, 0)
                self._round_robin[ss] = n + 1
                partition = n % count
        producer.send(self.source, make_outgoing(
            ss, message, key, None, partition, envelope.timestamp))
        self.sent += 1

    def flush(self) -> None:
        """Make everything this task sent durable (every producer's ``flush(source)``)."""
        for producer in self._producers.values():
            producer.flush(self.source)
