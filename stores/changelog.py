"""The seams through which stores write their changes and recovery reads them back.

A logged store appends every change to a :class:`ChangelogSink`; ``value is None`` is a
tombstone (delete). ``flush()`` makes every appended change durable in the changelog before it
returns: the commit path flushes stores (and so their sinks) before writing a checkpoint.

Recovery reads a changelog through a :class:`ChangelogSource`. Offsets are non-negative
integers (record numbers); ``newest_offset()`` returns :data:`NO_OFFSET` for an empty log.

Both are abstract base classes that declare **every** capability: the required ones are
abstract, the optional ones have a documented default that says "this changelog cannot do
better" (as Kafka Streams' ``StateStore`` and Quix Streams' ``StorePartition`` declare theirs).
Callers call a capability; they never probe for it with ``getattr``:

=========================  ==========================================================="""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

__all__ = ["ChangelogSink", "ChangelogSource", "Changelog", "ChangelogRecord", "ChangelogBatch",
           "NO_OFFSET", "Unavailable", "NO_BULK_READER", "UNKNOWN_IDENTITY", "BulkReader",
           "ForwardingSink", "ForwardingSource", "ForwardingChangelog", "batched",
           "SINK_CAPABILITIES", "SOURCE_CAPABILITIES"]

NO_OFFSET: int = -1
"""The newest offset of an empty changelog (no record yet)."""

ChangelogRecord = tuple[int, bytes, "bytes | None"]
"""``(offset, key, value)``; ``value`` None is a tombstone."""

BulkReader = Callable[..., Iterator["ChangelogBatch"]]
"""A picklable ``reader(start, end, into=None)`` yielding :class:`ChangelogBatch` es."""

_BATCH_RECORDS = 65_536
"""Records per batch of the default :meth:`ChangelogSource.read_batches`."""


class Unavailable(enum.Enum):
    """What a changelog answers for an optional capability it does not have."""

    NO_BULK_READER = "no bulk reader"
    """:meth:`ChangelogSource.bulk_reader`: no reader a restore worker process can call (the
    records are read in this process, through :meth:`ChangelogSource.read_batches`)."""
    UNKNOWN_IDENTITY = "unknown identity"
    """:meth:`ChangelogSource.identity`: the system cannot tell this partition from one of a
    stream deleted and created again under the same name."""

    def __repr__(self) -> str:
        return self.name


NO_BULK_READER: Literal[Unavailable.NO_BULK_READER] = Unavailable.NO_BULK_READER
UNKNOWN_IDENTITY: Literal[Unavailable.UNKNOWN_IDENTITY] = Unavailable.UNKNOWN_IDENTITY


@dataclass(frozen=True, slots=True)
class ChangelogBatch:
    """Consecutive records of a changelog range, as restore replays them: ``pairs`` (a
    ``(key, value)`` list in offset order, or a dict of each key's last value; ``None`` is a
    tombstone), ``last`` (offset of the last record), ``records`` (how many records the batch
    read) and ``nbytes`` (their key and value bytes)."""

    pairs: Any
    last: int
    records: int
    nbytes: int


def batched(records: Iterable[ChangelogRecord], size: int = _BATCH_RECORDS
            ) -> Iterator[ChangelogBatch]:
    """``records`` as :class:`ChangelogBatch` es of up to ``size`` records.

    >>> [(b.last, b.records, b.nbytes) for b in batched([(0, b"a", b"1"), (1, b"b", None)], 1)]
    [(0, 1, 2), (1, 1, 1)]
    """
    pairs: list = []
    nbytes = last = 0
    for last, key, value in records:
        pairs.append((key, value))
        nbytes += len(key) + (len(value) if value is not None else 0)
        if len(pairs) >= size:
            yield ChangelogBatch(pairs, last, len(pairs), nbytes)
            pairs, nbytes = [], 0
    if pairs:
        yield ChangelogBatch(pairs, last, len(pairs), nbytes)


class ChangelogSink(ABC):
    """Where a logged store appends its changes. ``append`` and ``flush`` are required; the
    batch appends default to one ``append`` per change."""

    __slots__ = ()

    @abstractmethod
    def append(self, key: bytes, value: bytes | None) -> None:
        """Append one change (``value`` None: a tombstone)."""

    @abstractmethod
    def flush(self) -> None:
        """Make every appended change durable in the changelog."""

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> Any:
        """Append ``(key, value)`` changes in order. Default: one ``append`` per change."""
        append = self.append
        for key, value in items:
            append(key, value)

    def append_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> Any:
        """``append_all`` of two parallel lists (``values[i]`` is the value of ``keys[i]``).
        Default: ``append_all`` of the zipped lists."""
        return self.append_all(list(zip(keys, values)))


class ChangelogSource(ABC):
    """Where restore reads a changelog partition back. The offsets and ``read`` are required;
    every other capability has the default its docstring names."""

    __slots__ = ()

    @abstractmethod
    def oldest_offset(self) -> int:
        """The first retained offset."""

    @abstractmethod
    def newest_offset(self) -> int:
        """The last record's offset, :data:`NO_OFFSET` when there is none."""

    @abstractmethod
    def read(self, start: int, end: int) -> Iterator[ChangelogRecord]:
        """Records with ``start <= offset <= end`` in offset order."""

    def read_batches(self, start: int, end: int, *, into: dict | None = None
                     ) -> Iterator[ChangelogBatch]:
        """The records of ``[start, end]`` in :class:`ChangelogBatch` es (restore's read). A
        source with a faster path may store each batch's pairs into ``into`` (a dict: the
        last value of each key). Default: :meth:`read`'s records grouped, ``into`` unused."""
        return batched(self.read(start, end))

    def bulk_reader(self) -> BulkReader | Literal[Unavailable.NO_BULK_READER]:
        """A picklable ``reader(start, end, into=None)`` with the batches of
        :meth:`read_batches`, for a restore worker process. Default: :data:`NO_BULK_READER`."""
        return NO_BULK_READER

    def split(self, start: int, end: int, parts: int) -> list[tuple[int, int]]:
        """``[start, end]`` cut into up to ``parts`` ranges that several :meth:`bulk_reader`
        calls can read independently. Default: ``[(start, end)]``."""
        return [(start, end)]

    def identity(self) -> str | Literal[Unavailable.UNKNOWN_IDENTITY]:
        """The partition's identity (changes when the stream is deleted and created again;
        recorded in a store's ``OFFSET`` file). Default: :data:`UNKNOWN_IDENTITY`."""
        return UNKNOWN_IDENTITY

    def min_compaction_lag_ms(self) -> int | None:
        """How long after a record is written compaction may remove the values it supersedes.
        Default: None (the system does not say)."""
        return None

    @property
    def partition(self) -> int | None:
        """The changelog partition, named in restore's errors. Default: None (not known)."""
        return None

    def probe(self, offset: int) -> None:
        """Read what the partition holds at ``offset`` once and raise the system's error if it
        is damaged there (restore calls it when the changelog ends before the checkpoint, to
        tell a cut changelog from one damaged at its end). Default: nothing (the source cannot
        tell)."""
        return None


class Changelog(ChangelogSink, ChangelogSource):
    """A changelog partition that is both the sink a store writes and the source restore
    reads."""

    __slots__ = ()


SINK_CAPABILITIES: tuple[str, ...] = ("append", "flush", "append_all", "append_columns")
"""Every member of :class:`ChangelogSink` (what :class:`ForwardingSink` forwards)."""

SOURCE_CAPABILITIES: tuple[str, ...] = (
    "oldest_offset", "newest_offset", "read", "read_batches", "bulk_reader", "split",
    "identity", "min_compaction_lag_ms", "partition", "probe")
"""Every member of :class:`ChangelogSource` (what :class:`ForwardingSource` forwards)."""


class _SinkForwarding(ChangelogSink):
    """Every sink capability forwarded to ``self.sink`` (declared by the concrete class)."""

    __slots__ = ()
    sink: ChangelogSink

    def append(self, key: bytes, value: bytes | None) -> None:
        self.sink.append(key, value)

    def flush(self) -> None:
        self.sink.flush()

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> Any:
        return self.sink.append_all(items)

    def append_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> Any:
        return self.sink.append_columns(keys, values)


class _SourceForwarding(ChangelogSource):
    """Every source capability forwarded to ``self.source`` (declared by the concrete class)."""

    __slots__ = ()
    source: ChangelogSource

    def oldest_offset(self) -> int:
        return self.source.oldest_offset()

    def newest_offset(self) -> int:
        return self.source.newest_offset()

    def read(self, start: int, end: int) -> Iterator[ChangelogRecord]:
        return self.source.read(start, end)

    def read_batches(self, start: int, end: int, *, into: dict | None = None
                     ) -> Iterator[ChangelogBatch]:
        return self.source.read_batches(start, end, into=into)

    def bulk_reader(self) -> BulkReader | Literal[Unavailable.NO_BULK_READER]:
        return self.source.bulk_reader()

    def split(self, start: int, end: int, parts: int) -> list[tuple[int, int]]:
        return self.source.split(start, end, parts)

    def identity(self) -> str | Literal[Unavailable.UNKNOWN_IDENTITY]:
        return self.source.identity()

    def min_compaction_lag_ms(self) -> int | None:
        return self.source.min_compaction_lag_ms()

    @property
    def partition(self) -> int | None:
        return self.source.partition

    def probe(self, offset: int) -> None:
        self.source.probe(offset)


class ForwardingSink(_SinkForwarding):
    """A sink that forwards every capability to ``sink``; subclasses override what they
    change."""

    __slots__ = ("sink",)

    def __init__(self, sink: ChangelogSink):
        self.sink = _checked(sink, ChangelogSink, "sink")


class ForwardingSource(_SourceForwarding):
    """A source that forwards every capability to ``source``; subclasses override what they
    change."""

    __slots__ = ("source",)

    def __init__(self, source: ChangelogSource):
        self.source = _checked(source, ChangelogSource, "source")


class ForwardingChangelog(_SinkForwarding, _SourceForwarding, Changelog):
    """A changelog whose sink capabilities go to ``sink`` and source capabilities to
    ``source``; subclasses override what they change."""

    __slots__ = ("sink", "source")

    def __init__(self, sink: ChangelogSink, source: ChangelogSource):
        self.sink = _checked(sink, ChangelogSink, "sink")
        self.source = _checked(source, ChangelogSource, "source")


def _checked(obj: Any, kind: type, what: str) -> Any:
    if not isinstance(obj, kind):
        raise TypeError(f"a changelog {what} must be a {kind.__module__}.{kind.__qualname__} "
                        f"(declaring every capability, with defaults for the optional ones); "
                        f"got {type(obj).__qualname__}")
    return obj


def _declared(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ if klass not in (ABC, object)
            for name in vars(klass) if not name.startswith("_")}


def _check_forwarding() -> None:
    """Every declared capability is listed and forwarded: a capability added to an ABC but
    not to a forwarding base fails here, at import, not in a restore that silently takes the
    slow path."""
    for abc, listed, forwarding in ((ChangelogSink, SINK_CAPABILITIES, _SinkForwarding),
                                    (ChangelogSource, SOURCE_CAPABILITIES, _SourceForwarding)):
        if _declared(abc) != set(listed):
            raise TypeError(f"{abc.__name__} declares {sorted(_declared(abc))} but lists "
                            f"{sorted(listed)}: keep the capability list in step")
        missing = [name for name in listed if name not in vars(forwarding)]
        if missing:
            raise TypeError(f"{forwarding.__name__} does not forward {missing}")


_check_forwarding()
