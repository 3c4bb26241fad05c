"""The system interfaces: admin, consumer, producer and the factory that makes them.

A *system* is named in config (``systems.<name>.factory=filelog|memory|module:Class``).
Consumers and producers move ``bytes`` keys and messages; the engine's serde layer turns them
into objects at the edge.

Offsets: ``register(ssp, offset)`` takes the offset of the *first record to read*.
:class:`PartitionMetadata` gives ``oldest`` (first retained record), ``newest`` (last record,
``oldest - 1`` when the partition is empty) and ``upcoming`` (``newest + 1``, the offset the
next appended record will get).

The four ``Protocol`` classes are what any system must provide. The ``*Base`` classes
(:class:`SystemAdminBase`, :class:`SystemConsumerBase`, :class:`SystemProducerBase`,
:class:`SystemFactoryBase`) declare, besides, every *optional* capability the engine and the
``weir log`` tools use, each with a default that means "this system cannot do better"
(docs/ARCHITECTURE.md, "Seams"): the file log and the memory system derive from them and
override what they can do. A user system derives from them too; one that does not is adapted
where its factory is loaded (:mod:`weir.engine.systems.foreign`) and gets the defaults.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from weir.engine.errors import SystemError_, UnsupportedOperationError
from weir.engine.model import (EnvelopeFactory, IncomingMessageEnvelope, OutgoingMessageEnvelope,
                               SystemStream, SystemStreamPartition, make_outgoing)

if TYPE_CHECKING:
    from weir.engine.systems.filelog.transactions import OpenTransaction

__all__ = [
    "CleanupPolicy",
    "OffsetType",
    "PartitionInfo",
    "PartitionMetadata",
    "StreamSpec",
    "SystemAdmin",
    "SystemAdminBase",
    "SystemConsumer",
    "SystemConsumerBase",
    "SystemProducer",
    "SystemProducerBase",
    "SystemFactory",
    "SystemFactoryBase",
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


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """What a system tells about one partition's storage (``weir log describe`` / ``list``):
    ``segments`` (file log), ``bytes`` and whether the partition ``ended``; None where the
    system cannot tell."""

    partition: int
    segments: int | None = None
    bytes: int | None = None
    ended: bool | None = None


def partition_identities(admin: "SystemAdminBase", ssps: Iterable[SystemStreamPartition]
                         ) -> dict[SystemStreamPartition, str | None]:
    """The identity of each partition (None: unknown): the admin's
    :meth:`SystemAdminBase.identities`."""
    ssps = list(ssps)
    return dict(admin.identities(ssps)) if ssps else {}


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


# -- the bases: required methods abstract, optional capabilities with their defaults -----------

class SystemAdminBase(ABC):
    """The base of every system admin: :class:`SystemAdmin`'s methods, and the optional
    capabilities with the defaults of a system that cannot do better.

    Capabilities and defaults: ``system`` (the system's name; None: not known) and ``root``
    (the directory the system keeps its streams in: the file log's root; None: none on this
    machine); :meth:`identities` (from :meth:`metadata`); :meth:`partition_counts` (one
    :meth:`partition_count` per existing stream); :meth:`cleanup_policy` and
    :meth:`is_bounded` and :meth:`min_compaction_lag_ms` (None: the system does not tell);
    :meth:`stream_path` (None: no path);
    :meth:`describe` (nothing known per partition); :meth:`list_streams`,
    :meth:`delete_stream` and :meth:`rename_stream` raise
    :class:`~weir.engine.errors.UnsupportedOperationError` naming the system, and
    ``deletes_streams`` / ``renames_streams`` (default False) say beforehand whether
    :meth:`delete_stream` / :meth:`rename_stream` work (a command checks before it changes
    anything).
    """

    system: str | None = None
    root: str | None = None
    deletes_streams: ClassVar[bool] = False
    renames_streams: ClassVar[bool] = False

    @abstractmethod
    def metadata(self, ssps: Iterable[SystemStreamPartition]
                 ) -> dict[SystemStreamPartition, PartitionMetadata]:
        """Metadata of many SSPs in one call. Raises StreamNotFoundError for a missing stream."""

    @abstractmethod
    def partition_count(self, stream: str) -> int: ...

    @abstractmethod
    def stream_exists(self, stream: str) -> bool: ...

    @abstractmethod
    def create_stream(self, spec: StreamSpec) -> bool:
        """Create the stream; False if it already existed with the same partition count
        (a different count raises)."""

    @abstractmethod
    def offset_comparator(self, a: int, b: int) -> int:
        """-1, 0 or 1, like Java's compareTo."""

    # -- optional capabilities -----------------------------------------------------------------
    def identities(self, ssps: Sequence[SystemStreamPartition]
                   ) -> dict[SystemStreamPartition, str | None]:
        """Each partition's identity (None: unknown). Default: :meth:`metadata`'s; a system
        that can tell without counting records overrides it."""
        return {ssp: md.identity for ssp, md in self.metadata(ssps).items()}

    def partition_counts(self, streams: Sequence[str]) -> dict[str, int]:
        """The partition count of each of ``streams`` that exists (a missing stream is left
        out: the caller names it in its error). Default: one call per stream."""
        return {stream: self.partition_count(stream) for stream in streams
                if self.stream_exists(stream)}

    def cleanup_policy(self, stream: str) -> CleanupPolicy | None:
        """The stream's cleanup policy; None when the system does not tell (then nothing
        checks that a changelog or checkpoint stream is compacted)."""
        return None

    def is_bounded(self, stream: str) -> bool | None:
        """Whether the stream is bounded (ends with end-of-stream); None: not told."""
        return None

    def min_compaction_lag_ms(self, stream: str) -> int | None:
        """How long after a record is written compaction may remove the values it supersedes
        (the file log's ``compaction.min.lag.ms``); None when the system does not say."""
        return None

    def stream_path(self, stream: str) -> str | None:
        """Where the stream's files are (named in errors and by ``weir checkpoint reset``);
        None when the system keeps no files on this machine."""
        return None

    def describe(self, stream: str) -> Sequence[PartitionInfo]:
        """What the system tells about each partition's storage; empty: nothing."""
        return ()

    def list_streams(self) -> list[str]:
        """The system's streams, sorted."""
        raise UnsupportedOperationError(self.system, "list its streams",
                                        "name a stream: `weir log describe STREAM`")

    def delete_stream(self, stream: str) -> object:
        """Delete ``stream`` and every record in it. Works where ``deletes_streams`` is True."""
        raise UnsupportedOperationError(self.system, "delete streams",
                                        "only the file log can")

    def rename_stream(self, stream: str, new_name: str) -> str:
        """Rename ``stream`` (``weir checkpoint reset`` moves changelogs aside); returns where
        it went. Works where ``renames_streams`` is True."""
        raise UnsupportedOperationError(self.system, "move streams aside",
                                        "move or delete the stream with the system's own tools")


class SystemConsumerBase(ABC):
    """The base of every system consumer: :class:`SystemConsumer`'s methods and the optional
    capabilities of a transactional system, with the defaults of one without transactions
    (every record is committed): :meth:`set_isolation_level` does nothing and
    :meth:`held_back_by` is None.

    ``takes_envelope_factory`` (default False) says that :meth:`set_envelope_factory` works:
    the consumer builds each data record's envelope with the function it is given, so the
    engine hands it one that deserializes while it builds (one typed envelope per record
    instead of a raw one and its typed copy). A consumer without it delivers
    ``IncomingMessageEnvelope`` objects with ``bytes`` and the engine deserializes them.
    """

    takes_envelope_factory: ClassVar[bool] = False

    @abstractmethod
    def register(self, ssp: SystemStreamPartition, offset: int) -> None: ...

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def poll(self, ssps: Collection[SystemStreamPartition],
             timeout: float) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        """See :meth:`SystemConsumer.poll`."""

    @abstractmethod
    def stop(self) -> None: ...

    def set_isolation_level(self, level: str) -> None:
        """``read_committed`` or ``read_uncommitted``, before ``start``. Default: nothing to
        set (a system without transactions has only committed records)."""
        return None

    def held_back_by(self, ssp: SystemStreamPartition) -> "OpenTransaction | None":
        """The open transaction that holds ``ssp``'s ``read_committed`` reader back; default
        None (no transactions)."""
        return None

    def set_envelope_factory(self, ssp: SystemStreamPartition, make: EnvelopeFactory) -> None:
        """Build the envelope of every data record of ``ssp`` (a registered SSP) as
        ``make(ssp, offset, key, message, timestamp, size)`` from now on, instead of
        ``IncomingMessageEnvelope(...)``; end-of-stream envelopes stay the consumer's own.
        ``make`` never raises for bad data: it returns an envelope either way. Works where
        ``takes_envelope_factory`` is True."""
        raise UnsupportedOperationError(None, "build envelopes with a given factory",
                                        "leave takes_envelope_factory False: the engine then "
                                        "deserializes the consumer's envelopes")


class SystemProducerBase(ABC):
    """The base of every system producer: :class:`SystemProducer`'s methods and the optional
    :meth:`send_batch`, by default one :meth:`send` per record."""

    @abstractmethod
    def register(self, source: str) -> None: ...

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def send(self, source: str, envelope: OutgoingMessageEnvelope) -> None:
        """See :meth:`SystemProducer.send`."""

    @abstractmethod
    def flush(self, source: str) -> None:
        """Make everything sent by ``source`` durable before returning."""

    @abstractmethod
    def stop(self) -> None: ...

    def send_batch(self, source: str, stream: SystemStream, partition: int,
                   items: Iterable[tuple[bytes | None, bytes | None]], *,
                   require_keys: bool = False) -> int:
        """Send raw ``(key, value)`` records to one partition of ``stream`` in order (a store's
        changelog write-down); returns how many. ``require_keys`` refuses a null key with
        ``SystemError_``. Default: one :meth:`send` per record; the file log's writes the batch
        under one writer lock."""
        send = self.send
        n = 0
        for key, value in items:
            if require_keys and key is None:
                raise SystemError_(f"stream '{stream.system}.{stream.stream}' partition "
                                   f"{partition} (source '{source}'): a changelog record "
                                   f"needs a key")
            send(source, make_outgoing(stream, value, key, None, partition))
            n += 1
        return n


class SystemFactoryBase(ABC):
    """The base of every system factory. ``process_local`` (default False): the system's
    streams live in one process's memory (the memory system), so a job that uses it cannot
    spread its tasks over processes."""

    process_local: ClassVar[bool] = False

    @abstractmethod
    def get_admin(self, system: str, config: Mapping[str, str]) -> SystemAdminBase: ...

    @abstractmethod
    def get_consumer(self, system: str, config: Mapping[str, str]) -> SystemConsumerBase: ...

    @abstractmethod
    def get_producer(self, system: str, config: Mapping[str, str]) -> SystemProducerBase: ...
