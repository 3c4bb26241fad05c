"""The system interfaces: admin, consumer, producer and the factory that makes them.

A *system* is named in config (``systems.<name>.factory=filelog|memory|module:Class``).
Consumers and producers move ``bytes`` keys and messages; the engine's serde layer turns them
into objects at the edge.

Offsets: ``register(ssp, offset)`` takes the offset of the *first record to read*.
:class:`PartitionMetadata` gives ``oldest`` (first retained record), ``newest`` (last record,
``oldest - 1`` when the partition is empty) and ``upcoming`` (``newest + 1``, the offset the
next appended record will get).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

from weir.engine.model import IncomingMessageEnvelope, OutgoingMessageEnvelope, SystemStreamPartition

__all__ = [
    "CleanupPolicy",
    "OffsetType",
    "PartitionMetadata",
    "StreamSpec",
    "SystemAdmin",
    "SystemConsumer",
    "SystemProducer",
    "SystemFactory",
    "partition_identities",
]


class CleanupPolicy(Enum):
    DELETE = "delete"
    COMPACT = "compact"


class OffsetType(Enum):
    """Where a consumer starts when there is no checkpoint (``samza.offset.default``)."""

    OLDEST = "oldest"
    NEWEST = "newest"
    UPCOMING = "upcoming"


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """Offsets of one partition, and its identity.

    ``identity`` names this *incarnation* of the partition: it changes when the stream is
    deleted and created again, so offsets recorded against one identity (in a checkpoint)
    are never applied to another. None when the system cannot tell (then nothing is checked).
    It takes no part in equality.
    """

    oldest: int
    newest: int
    upcoming: int
    identity: str | None = field(default=None, compare=False, repr=False)

    @property
    def is_empty(self) -> bool:
        return self.newest < self.oldest

    def offset_of(self, kind: OffsetType) -> int:
        return {OffsetType.OLDEST: self.oldest, OffsetType.NEWEST: self.newest,
                OffsetType.UPCOMING: self.upcoming}[kind]


@dataclass(frozen=True)
class StreamSpec:
    """What ``create_stream`` needs. ``bounded`` streams end with end-of-stream once their
    producer closes them. ``config`` carries system-specific settings (segment size, retention)."""

    name: str
    partitions: int
    cleanup_policy: CleanupPolicy = CleanupPolicy.DELETE
    bounded: bool = False
    config: Mapping[str, str] = field(default_factory=dict)


def partition_identities(admin: "SystemAdmin", ssps: Iterable[SystemStreamPartition]
                         ) -> dict[SystemStreamPartition, str | None]:
    """The identity of each partition (None: unknown). Uses the admin's cheap
    ``identities(ssps)`` when it has one (the file log and memory systems: no record
    counting), else its :meth:`SystemAdmin.metadata`."""
    ssps = list(ssps)
    if not ssps:
        return {}
    cheap = getattr(admin, "identities", None)
    if callable(cheap):
        return dict(cheap(ssps))
    return {ssp: md.identity for ssp, md in admin.metadata(ssps).items()}


@runtime_checkable
class SystemAdmin(Protocol):
    def metadata(self, ssps: Iterable[SystemStreamPartition]) -> dict[SystemStreamPartition, PartitionMetadata]:
        """Metadata of many SSPs in one call. Raises StreamNotFoundError for a missing stream."""
        ...

    def partition_count(self, stream: str) -> int: ...
    def stream_exists(self, stream: str) -> bool: ...

    def create_stream(self, spec: StreamSpec) -> bool:
        """Create the stream; False if it already existed with the same partition count
        (a different count raises)."""
        ...

    def offset_comparator(self, a: int, b: int) -> int:
        """-1, 0 or 1, like Java's compareTo."""
        ...


@runtime_checkable
class SystemConsumer(Protocol):
    def register(self, ssp: SystemStreamPartition, offset: int) -> None: ...
    def start(self) -> None: ...

    def poll(self, ssps: Collection[SystemStreamPartition],
             timeout: float) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        """Envelopes for some of ``ssps`` (a bounded number per SSP), waiting up to ``timeout``
        seconds when none is ready. A bounded stream that has ended yields one end-of-stream
        envelope after its last record, then nothing."""
        ...

    def stop(self) -> None: ...


@runtime_checkable
class SystemProducer(Protocol):
    def register(self, source: str) -> None: ...
    def start(self) -> None: ...

    def send(self, source: str, envelope: OutgoingMessageEnvelope) -> None:
        """Send one envelope whose ``partition`` is set and whose key/message are bytes
        (or None)."""
        ...

    def flush(self, source: str) -> None:
        """Make everything sent by ``source`` durable before returning."""
        ...

    def stop(self) -> None: ...


@runtime_checkable
class SystemFactory(Protocol):
    def get_admin(self, system: str, config: Mapping[str, str]) -> SystemAdmin: ...
    def get_consumer(self, system: str, config: Mapping[str, str]) -> SystemConsumer: ...
    def get_producer(self, system: str, config: Mapping[str, str]) -> SystemProducer: ...
