"""The stream model: partitions, streams, SSPs, task names and message envelopes.

Offsets are non-negative integers (record numbers in the file log and the memory system);
the admin of a system compares offsets of its own system. Keys and messages in envelopes are
``bytes`` between systems and the engine's serde layer, and typed objects in user code.

Example::

    >>> ssp = SystemStreamPartition("filelog", "transactions", 3)
    >>> ssp.system_stream
    SystemStream(system='filelog', stream='transactions')
    >>> str(ssp)
    'filelog.transactions#3'
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

__all__ = [
    "Partition",
    "SystemStream",
    "SystemStreamPartition",
    "TaskName",
    "EnvelopeKind",
    "IncomingMessageEnvelope",
    "EnvelopeFactory",
    "OutgoingMessageEnvelope",
    "make_outgoing",
    "NO_TIMESTAMP",
    "partition_for",
]

Partition = int
"""A partition id (0-based). A plain int: partitions are hashed and compared on the hot path."""

NO_TIMESTAMP: int = -1
"""The timestamp of a message that carries no event time."""


class SystemStream(NamedTuple):
    system: str
    stream: str

    @classmethod
    def parse(cls, text: str) -> "SystemStream":
        """``"system.stream"``; the first dot separates the system (``kafka.foo.bar`` is
        system ``kafka``, stream ``foo.bar``)."""
        system, sep, stream = text.strip().partition(".")
        if not sep or not system or not stream:
            raise ValueError(f"expected 'system.stream', got {text!r}")
        return cls(system, stream)

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}"


class SystemStreamPartition(NamedTuple):
    system: str
    stream: str
    partition: Partition

    @property
    def system_stream(self) -> SystemStream:
        return SystemStream(self.system, self.stream)

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}#{self.partition}"


class TaskName(str):
    """A task's name, e.g. ``"Partition 0"`` (group by partition) or
    ``"SystemStreamPartition [filelog, t, 0]"`` (group by SSP)."""

    __slots__ = ()


class EnvelopeKind(Enum):
    MESSAGE = "message"
    END_OF_STREAM = "end-of-stream"
    WATERMARK = "watermark"
    CONTROL = "control"
    """An in-band control message of an intermediate stream (watermark, end-of-stream,
    drain; ``weir.engine.control``): it has a real offset and is handled by the task's
    control bookkeeping, never by ``process``."""


@dataclass(slots=True)
class IncomingMessageEnvelope:
    """One message read from an SSP. ``kind`` tells user messages from control messages
    (end-of-stream, watermark). An end-of-stream envelope's offset is the SSP's upcoming
    offset (one past the last record)."""

    ssp: SystemStreamPartition
    offset: int
    key: Any
    message: Any
    timestamp: int = NO_TIMESTAMP
    size: int = 0
    kind: EnvelopeKind = EnvelopeKind.MESSAGE

    @property
    def is_end_of_stream(self) -> bool:
        return self.kind is EnvelopeKind.END_OF_STREAM

    @classmethod
    def end_of_stream(cls, ssp: SystemStreamPartition, offset: int) -> "IncomingMessageEnvelope":
        return cls(ssp, offset, None, None, NO_TIMESTAMP, 0, EnvelopeKind.END_OF_STREAM)


EnvelopeFactory = Callable[[SystemStreamPartition, int, Any, Any, int, int],
                           IncomingMessageEnvelope]
"""What builds the envelope of one data record: ``make(ssp, offset, key, message, timestamp,
size)`` with the record's raw ``bytes`` key and message (None: null), as
``IncomingMessageEnvelope``'s positional constructor takes them. A consumer that
``takes_envelope_factory`` calls one per record
(:meth:`weir.engine.systems.api.SystemConsumerBase.set_envelope_factory`); the stream's
serdes build it (:meth:`weir.engine.config.serdes.StreamSerdesBase.envelope_factory`)."""


_SAMZA_ORDER = (
    "Weir's order is OutgoingMessageEnvelope(system_stream, message, *, key=None, "
    "partition_key=None, partition=None, timestamp=NO_TIMESTAMP): the message comes second "
    "and everything else by keyword. ")


def _positional_error(extra: tuple) -> TypeError:
    """The TypeError for positional arguments after ``message``: Samza's constructors put the
    key (and the partition key or partition) before the message, so a literal port would send
    the key as the message and partition by the message."""
    if len(extra) == 1:
        fix = ("Samza's new OutgoingMessageEnvelope(stream, key, message) is "
               "OutgoingMessageEnvelope(stream, message, key=key) here")
    elif len(extra) == 2:
        fix = ("Samza's new OutgoingMessageEnvelope(stream, partitionKey, key, message) is "
               "OutgoingMessageEnvelope(stream, message, key=key, partition_key=partitionKey) "
               "here, and (stream, Integer partition, key, message) is "
               "OutgoingMessageEnvelope(stream, message, key=key, partition=partition)")
    else:
        fix = "pass key, partition_key, partition and timestamp by keyword"
    return TypeError(f"OutgoingMessageEnvelope() takes 2 positional arguments (system_stream, "
                     f"message) but {2 + len(extra)} were given. {_SAMZA_ORDER}{fix} "
                     f"(docs/PORTING.md)")


@dataclass(slots=True, init=False)
class OutgoingMessageEnvelope:
    """A message a task sends: ``OutgoingMessageEnvelope(stream, message, key=key)``.

    Only the stream and the message are positional; ``key``, ``partition_key``,
    ``partition`` and ``timestamp`` are keyword-only, because Samza's constructors put the key
    *before* the message (``new OutgoingMessageEnvelope(stream, key, message)``) and a literal
    port would silently send the key as the message. Three positional arguments are a
    ``TypeError`` that shows the keyword form. The partition is ``partition`` if given, else
    chosen from ``partition_key`` (or, when absent, ``key``) by :func:`partition_for`.

    Example::

        >>> OUT = SystemStream("filelog", "word-counts")
        >>> OutgoingMessageEnvelope(OUT, {"count": 2}, key="hello").key
        'hello'
        >>> OutgoingMessageEnvelope(OUT, "hello", {"count": 2})
        Traceback (most recent call last):
        ...
        TypeError: OutgoingMessageEnvelope() takes 2 positional arguments (system_stream, message) but 3 were given. Weir's order is OutgoingMessageEnvelope(system_stream, message, *, key=None, partition_key=None, partition=None, timestamp=NO_TIMESTAMP): the message comes second and everything else by keyword. Samza's new OutgoingMessageEnvelope(stream, key, message) is OutgoingMessageEnvelope(stream, message, key=key) here (docs/PORTING.md)
    """

    system_stream: SystemStream
    message: Any
    key: Any
    partition_key: Any
    partition: Partition | None
    timestamp: int

    def __init__(self, system_stream: SystemStream, message: Any, *extra: Any, key: Any = None,
                 partition_key: Any = None, partition: Partition | None = None,
                 timestamp: int = NO_TIMESTAMP):
        if extra:
            raise _positional_error(extra)
        self.system_stream = system_stream
        self.message = message
        self.key = key
        self.partition_key = partition_key
        self.partition = partition
        self.timestamp = timestamp


def make_outgoing(system_stream: SystemStream, message: Any, key: Any, partition_key: Any,
                  partition: Partition | None, timestamp: int = NO_TIMESTAMP,
                  _new: Any = object.__new__) -> OutgoingMessageEnvelope:
    """An :class:`OutgoingMessageEnvelope` from positional fields, for the engine's hot paths
    (collectors, changelogs, operators), which build one per message: as fast as a positional
    constructor, without a keyword call. User code writes
    ``OutgoingMessageEnvelope(stream, message, key=...)``."""
    env = _new(OutgoingMessageEnvelope)
    env.system_stream = system_stream
    env.message = message
    env.key = key
    env.partition_key = partition_key
    env.partition = partition
    env.timestamp = timestamp
    return env


def partition_for(key_bytes: bytes, partition_count: int) -> Partition:
    """The partition of a serialized key: ``crc32(key) mod partition_count``; stable across
    processes and Python versions (unlike ``hash()``)."""
    return zlib.crc32(key_bytes) % partition_count
