"""The in-memory system: the fast, fully behaving test double of a real system.

Streams live in process memory, shared by every admin, consumer and producer of the same
*system name* within the process (``systems.<name>.factory=memory``). Offsets are record
numbers from 0, exactly as in the file log; records are never deleted or compacted.

Behaviour (the same contract as the file log, checked by ``tests/engine/systems/test_contract.py``):

- ``send`` appends at once; a record is visible to consumers as soon as ``send`` returns,
  and ``flush`` has nothing left to do.
- ``poll(ssps, timeout)`` returns at most ``systems.<name>.memory.fetch.max.records``
  envelopes per SSP and, when nothing is ready, waits on a condition variable that every
  ``send`` and ``end_stream`` signals, so a waiting consumer wakes at once and an idle one
  does not spin.
- A *bounded* stream (``StreamSpec(bounded=True)``) ends when ``end_stream(stream)`` is called
  on the admin or a producer: each partition's consumers then get one end-of-stream envelope
  (offset = the partition's upcoming offset) after its last record, and nothing after it.

Example::

    >>> from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
    >>> from weir.engine.systems.api import StreamSpec
    >>> factory = MemorySystemFactory()
    >>> admin = factory.get_admin("mem-doc", {})
    >>> admin.create_stream(StreamSpec("words", 1, bounded=True))
    True
    >>> producer = factory.get_producer("mem-doc", {})
    >>> producer.send("cli", OutgoingMessageEnvelope(SystemStream("mem-doc", "words"), b"hi", partition=0))
    >>> producer.end_stream("words")
    >>> consumer = factory.get_consumer("mem-doc", {})
    >>> ssp = SystemStreamPartition("mem-doc", "words", 0)
    >>> consumer.register(ssp, 0); consumer.start()
    >>> [(e.offset, e.message, e.kind.value) for e in consumer.poll([ssp], 0)[ssp]]
    [(0, b'hi', 'message'), (1, None, 'end-of-stream')]
    >>> reset_memory_systems("mem-doc")
"""

from __future__ import annotations

import threading
import uuid
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from weir.stores.config import Config, declare

from weir.engine.errors import StreamNotFoundError, SystemError_
from weir.engine.model import (
    EnvelopeFactory,
    EnvelopeKind,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    SystemStreamPartition,
    partition_for,
)
from weir.engine.systems.api import (CleanupPolicy, PartitionInfo, PartitionMetadata, StreamSpec,
                                     SystemAdminBase, SystemConsumerBase, SystemFactoryBase,
                                     SystemProducerBase)

__all__ = [
    "MEMORY_FETCH_MAX_RECORDS",
    "MemorySystemFactory",
    "MemorySystemAdmin",
    "MemorySystemConsumer",
    "MemorySystemProducer",
    "MemoryPartitionInfo",
    "reset_memory_systems",
]

MEMORY_FETCH_MAX_RECORDS = declare(
    "systems.<system>.memory.fetch.max.records", int, 1000,
    "Most envelopes one `poll` of a memory-system consumer returns per partition.",
    component="memory system")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPartitionInfo(PartitionInfo):
    """What ``weir log describe`` shows for one partition of a memory stream (which has no
    segments), and its metadata."""

    metadata: PartitionMetadata


# --------------------------------------------------------------------------------------
# shared state
# --------------------------------------------------------------------------------------

# One record: (key, value, timestamp_ms, size in bytes). The offset is its index in the
# partition's list.
_Record = tuple["bytes | None", "bytes | None", int, int]


@dataclass(slots=True)
class _Partition:
    records: list[_Record] = field(default_factory=list)
    nbytes: int = 0
    ended: bool = False


@dataclass(slots=True)
class _Stream:
    spec: StreamSpec
    partitions: list[_Partition]
    incarnation: str = field(default_factory=lambda: uuid.uuid4().hex)
    """This creation's identity (a stream created again after a reset gets another)."""


class _SystemState:
    """All streams of one memory system; ``cond`` guards them and signals appends."""

    __slots__ = ("name", "streams", "cond")

    def __init__(self, name: str):
        self.name = name
        self.streams: dict[str, _Stream] = {}
        self.cond = threading.Condition()

    def stream(self, stream: str) -> _Stream:
        try:
            return self.streams[stream]
        except KeyError:
            raise StreamNotFoundError(self.name, stream) from None

    def partition(self, ssp: SystemStreamPartition) -> _Partition:
        parts = self.stream(ssp.stream).partitions
        if not 0 <= ssp.partition < len(parts):
            raise SystemError_(
                f"{ssp}: stream '{self.name}.{ssp.stream}' has partitions 0..{len(parts) - 1}; "
                f"use one of those or recreate the stream with more partitions")
        return parts[ssp.partition]


_SYSTEMS: dict[str, _SystemState] = {}
_SYSTEMS_LOCK = threading.Lock()


def _state(system: str) -> _SystemState:
    with _SYSTEMS_LOCK:
        state = _SYSTEMS.get(system)
        if state is None:
            state = _SYSTEMS[system] = _SystemState(system)
        return state


def reset_memory_systems(*systems: str) -> None:
    """Forget the streams of the named memory systems (all of them when none is named).

    Tests call this between cases; admins, consumers and producers created before keep
    pointing at the old data.
    """
    with _SYSTEMS_LOCK:
        if systems:
            for name in systems:
                _SYSTEMS.pop(name, None)
        else:
            _SYSTEMS.clear()


def _end_stream(state: _SystemState, stream: str) -> None:
    with state.cond:
        s = state.stream(stream)
        if not s.spec.bounded:
            raise SystemError_(
                f"stream '{state.name}.{stream}' is not bounded and cannot be ended; "
                f"create it with bounded=True (`weir log create {stream} --bounded`)")
        for part in s.partitions:
            part.ended = True
        state.cond.notify_all()


# --------------------------------------------------------------------------------------
# admin
# --------------------------------------------------------------------------------------

class MemorySystemAdmin(SystemAdminBase):
    """Creates and describes the streams of one memory system."""

    def __init__(self, system: str):
        self.system = system
        self._state = _state(system)

    def metadata(self, ssps: Iterable[SystemStreamPartition]) -> dict[SystemStreamPartition, PartitionMetadata]:
        out: dict[SystemStreamPartition, PartitionMetadata] = {}
        with self._state.cond:
            for ssp in ssps:
                n = len(self._state.partition(ssp).records)
                out[ssp] = PartitionMetadata(0, n - 1, n,
                                             self._state.stream(ssp.stream).incarnation)
        return out

    def identities(self, ssps: Iterable[SystemStreamPartition]
                   ) -> dict[SystemStreamPartition, str | None]:
        """Each partition's identity: its stream's incarnation in this process."""
        with self._state.cond:
            return {ssp: self._state.stream(ssp.stream).incarnation for ssp in ssps
                    if self._state.partition(ssp) is not None}

    def partition_count(self, stream: str) -> int:
        with self._state.cond:
            return len(self._state.stream(stream).partitions)

    def stream_exists(self, stream: str) -> bool:
        with self._state.cond:
            return stream in self._state.streams

    def create_stream(self, spec: StreamSpec) -> bool:
        if spec.partitions < 1:
            raise SystemError_(f"stream '{self.system}.{spec.name}': partitions must be >= 1, "
                               f"got {spec.partitions}")
        with self._state.cond:
            existing = self._state.streams.get(spec.name)
            if existing is not None:
                have = len(existing.partitions)
                if have != spec.partitions:
                    raise SystemError_(
                        f"stream '{self.system}.{spec.name}' already exists with {have} "
                        f"partitions, not {spec.partitions}; use the existing count or "
                        f"create a stream with another name")
                return False
            self._state.streams[spec.name] = _Stream(
                spec, [_Partition() for _ in range(spec.partitions)])
            return True

    def offset_comparator(self, a: int, b: int) -> int:
        return (a > b) - (a < b)

    def end_stream(self, stream: str) -> None:
        """End a bounded stream: consumers get end-of-stream after the last record."""
        _end_stream(self._state, stream)

    def cleanup_policy(self, stream: str) -> CleanupPolicy:
        with self._state.cond:
            return self._state.stream(stream).spec.cleanup_policy

    def is_bounded(self, stream: str) -> bool:
        with self._state.cond:
            return self._state.stream(stream).spec.bounded

    def list_streams(self) -> list[str]:
        """Names of the system's streams, sorted."""
        with self._state.cond:
            return sorted(self._state.streams)

    def describe(self, stream: str) -> list[MemoryPartitionInfo]:  # type: ignore[override]
        """Per-partition metadata, size and ended flag (for ``weir log describe``)."""
        with self._state.cond:
            s = self._state.stream(stream)
            return [MemoryPartitionInfo(p, bytes=part.nbytes, ended=part.ended,
                                        metadata=PartitionMetadata(0, len(part.records) - 1,
                                                                   len(part.records)))
                    for p, part in enumerate(s.partitions)]


# --------------------------------------------------------------------------------------
# consumer
# --------------------------------------------------------------------------------------

class _Position:
    __slots__ = ("partition", "offset", "eos_sent")

    def __init__(self, partition: _Partition | None, offset: int):
        self.partition = partition
        self.offset = offset
        self.eos_sent = False


class MemorySystemConsumer(SystemConsumerBase):
    """Reads registered SSPs of one memory system; each consumer has its own positions. It
    takes an envelope factory per SSP (:meth:`set_envelope_factory`)."""

    takes_envelope_factory = True

    def __init__(self, system: str, fetch_max: int = 1000):
        if fetch_max < 1:
            raise SystemError_(f"memory system '{system}': fetch.max.records must be >= 1, "
                               f"got {fetch_max}")
        self.system = system
        self._state = _state(system)
        self._fetch_max = fetch_max
        self._positions: dict[SystemStreamPartition, _Position] = {}
        self._makes: dict[SystemStreamPartition, EnvelopeFactory] = {}
        self._started = False
        self._stopped = False

    def set_envelope_factory(self, ssp: SystemStreamPartition, make: EnvelopeFactory) -> None:
        """Build ``ssp``'s data records' envelopes with ``make`` (see
        :meth:`SystemConsumerBase.set_envelope_factory`); ``ssp`` must be registered."""
        if ssp not in self._positions:
            raise SystemError_(f"{ssp} is not registered with this consumer; register it "
                               f"before set_envelope_factory()")
        self._makes[ssp] = make

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        """Read ``ssp`` from ``offset`` (the first record to read). Registering an SSP twice
        keeps the lower offset, as Samza's SystemConsumers does."""
        if ssp.system != self.system:
            raise SystemError_(f"{ssp} belongs to system '{ssp.system}', not to memory "
                               f"system '{self.system}'")
        if offset < 0:
            raise SystemError_(f"{ssp}: cannot register at negative offset {offset}")
        if self._started:
            raise SystemError_(f"{ssp}: register before start(); this consumer is started")
        existing = self._positions.get(ssp)
        if existing is None or offset < existing.offset:
            self._positions[ssp] = _Position(None, offset)

    def start(self) -> None:
        """Start (or restart after :meth:`stop`): polls wait for records again."""
        with self._state.cond:
            for ssp, pos in self._positions.items():
                pos.partition = self._state.partition(ssp)
        self._stopped = False
        self._started = True

    def stop(self) -> None:
        """Wake every waiting poll; until the next :meth:`start`, polls return at once."""
        self._stopped = True
        with self._state.cond:
            self._state.cond.notify_all()

    def poll(self, ssps: Collection[SystemStreamPartition],
             timeout: float) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        if not self._started:
            raise SystemError_(f"memory system '{self.system}': call start() before poll()")
        positions = []
        for ssp in ssps:
            pos = self._positions.get(ssp)
            if pos is None:
                raise SystemError_(f"{ssp} is not registered with this consumer; register it "
                                   f"before start()")
            positions.append((ssp, pos))
        deadline = None
        cond = self._state.cond
        with cond:
            while True:
                out = self._take(positions)
                if out or self._stopped:
                    return out
                if deadline is None:
                    if timeout <= 0:
                        return out
                    deadline = time.monotonic() + timeout
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return out
                cond.wait(remaining)

    def _take(self, positions) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        out: dict[SystemStreamPartition, list[IncomingMessageEnvelope]] = {}
        fetch_max = self._fetch_max
        message = EnvelopeKind.MESSAGE
        makes = self._makes
        for ssp, pos in positions:
            part = pos.partition
            records = part.records
            start = pos.offset
            n = len(records)
            if start < n:
                stop = min(n, start + fetch_max)
                make = makes.get(ssp)
                if make is None:
                    batch = [IncomingMessageEnvelope(ssp, off, key, value, ts, size, message)
                             for off, (key, value, ts, size)
                             in zip(range(start, stop), records[start:stop])]
                else:
                    batch = [make(ssp, off, key, value, ts, size)
                             for off, (key, value, ts, size)
                             in zip(range(start, stop), records[start:stop])]
                pos.offset = stop
                if stop == n and part.ended and not pos.eos_sent and len(batch) < fetch_max:
                    batch.append(IncomingMessageEnvelope.end_of_stream(ssp, n))
                    pos.eos_sent = True
                out[ssp] = batch
            elif part.ended and not pos.eos_sent:
                out[ssp] = [IncomingMessageEnvelope.end_of_stream(ssp, max(n, start))]
                pos.eos_sent = True
        return out


# --------------------------------------------------------------------------------------
# producer
# --------------------------------------------------------------------------------------

def _as_bytes(value, what: str, envelope: OutgoingMessageEnvelope) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise SystemError_(
        f"stream '{envelope.system_stream}': the {what} must be bytes or None after "
        f"serialization, got {type(value).__name__}; configure a serde for the stream "
        f"(systems.<system>.streams.<stream>.samza.{'key' if what == 'key' else 'msg'}.serde)")


class MemorySystemProducer(SystemProducerBase):
    """Appends to the streams of one memory system. Records are visible on ``send``."""

    def __init__(self, system: str):
        self.system = system
        self._state = _state(system)
        self._sources: set[str] = set()
        self._round_robin: dict[str, int] = {}

    def register(self, source: str) -> None:
        self._sources.add(source)

    def start(self) -> None:
        """Nothing to start: the memory system has no connection."""

    def send(self, source: str, envelope: OutgoingMessageEnvelope) -> None:
        ss = envelope.system_stream
        key = _as_bytes(envelope.key, "key", envelope)
        value = _as_bytes(envelope.message, "message", envelope)
        ts = envelope.timestamp  # NO_TIMESTAMP stays NO_TIMESTAMP, as in the file log
        cond = self._state.cond
        with cond:
            stream = self._state.stream(ss.stream)
            parts = stream.partitions
            p = envelope.partition
            if p is None:
                p = self._choose_partition(ss.stream, envelope, key, len(parts))
            if not 0 <= p < len(parts):
                raise SystemError_(
                    f"stream '{ss}': partition {p} does not exist (partitions 0..{len(parts) - 1})")
            part = parts[p]
            if part.ended:
                raise SystemError_(f"stream '{ss}' partition {p} has ended; a bounded stream "
                                   f"takes no records after end_stream()")
            size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
            part.records.append((key, value, ts, size))
            part.nbytes += size
            cond.notify_all()

    def _choose_partition(self, stream: str, envelope: OutgoingMessageEnvelope,
                          key: bytes | None, count: int) -> int:
        pkey = envelope.partition_key
        if pkey is not None and not isinstance(pkey, (bytes, bytearray)):
            pkey = str(pkey).encode()
        pkey = pkey if pkey is not None else key
        if pkey is not None:
            return partition_for(bytes(pkey), count)
        n = self._round_robin.get(stream, 0)
        self._round_robin[stream] = n + 1
        return n % count

    def flush(self, source: str) -> None:
        """Every sent record is already visible; nothing is buffered."""

    def end_stream(self, stream: str) -> None:
        """End a bounded stream (see :meth:`MemorySystemAdmin.end_stream`)."""
        _end_stream(self._state, stream)

    def stop(self) -> None:
        """Nothing to release."""


# --------------------------------------------------------------------------------------
# factory
# --------------------------------------------------------------------------------------

class MemorySystemFactory(SystemFactoryBase):
    """``systems.<name>.factory=memory``: admins, consumers and producers over the streams of
    system ``<name>`` in this process."""

    process_local = True
    """Its streams live in this process: a job using it runs in one container process."""

    def get_admin(self, system: str, config: Mapping[str, str]) -> MemorySystemAdmin:
        return MemorySystemAdmin(system)

    def get_consumer(self, system: str, config: Mapping[str, str]) -> MemorySystemConsumer:
        return MemorySystemConsumer(system, MEMORY_FETCH_MAX_RECORDS.get(_config(config), system=system))

    def get_producer(self, system: str, config: Mapping[str, str]) -> MemorySystemProducer:
        return MemorySystemProducer(system)


def _config(config: Mapping[str, str]) -> Config:
    return config if isinstance(config, Config) else Config(config)
