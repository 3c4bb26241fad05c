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
    "OutgoingMessageEnvelope",
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


@dataclass(slots=True)
class OutgoingMessageEnvelope:
    """A message a task sends. The partition is ``partition`` if given, else chosen from
    ``partition_key`` (or, when absent, ``key``) by :func:`partition_for`."""

    system_stream: SystemStream
    message: Any
    key: Any = None
    partition_key: Any = None
    partition: Partition | None = None
    timestamp: int = NO_TIMESTAMP


def partition_for(key_bytes: bytes, partition_count: int) -> Partition:
    """The partition of a serialized key: ``crc32(key) mod partition_count``; stable across
    processes and Python versions (unlike ``hash()``)."""
    return zlib.crc32(key_bytes) % partition_count
