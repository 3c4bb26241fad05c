"""Reading a changelog partition in large batches, for restore: :func:`read_changelog`.

Restore replays a store's changelog below its serdes and cache; it needs the records as
``(key, value)`` pairs in offset order, fast, and nothing else (no envelopes, timestamps or
deserialization). This is the **one** function through which restore reads file-log changelog
segments directly (below :class:`~weir.engine.systems.changelog.SystemChangelogSource` and the
consumer): it is where anything the log adds between a writer and its readers -- transaction
markers, aborted records -- has to be honoured for restore.

It reads with a :class:`~weir.engine.systems.filelog.reader.PartitionReader`, so every property
of the readers holds: plain segments are read with ``pread`` in large chunks, zstd segments
frame by frame (never decompressed to a temporary copy), compacted segments through their
index (offsets with gaps), and a record that fails its length or CRC check raises
``CorruptRecordError`` naming stream, partition, offset, file and byte position -- damage is
never read as the end of the log.

A :class:`ChangelogLocation` names a partition by its file-log root; it pickles, so a restore
worker process can read the segments itself (:func:`changelog_parts` splits a range at
segment boundaries for several workers).

Example::

    >>> import tempfile
    >>> from weir.engine.systems.filelog.stream import StreamMeta
    >>> from weir.engine.systems.filelog.writer import PartitionWriter
    >>> root = tempfile.mkdtemp()
    >>> with PartitionWriter(root, StreamMeta("cl", 1), 0) as w:
    ...     _ = w.append_all([(b"a", b"1"), (b"b", b"2"), (b"a", None)]); w.flush()
    >>> [(b.last, b.pairs) for b in read_changelog(ChangelogLocation(root, "cl", 0), 0, 2)]
    [(2, [(b'a', b'1'), (b'b', b'2'), (b'a', None)])]
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

from weir.engine.systems.filelog.reader import PartitionReader, partition_bounds
from weir.engine.systems.filelog.segment import list_segments
from weir.engine.systems.filelog.settings import OffsetReset
from weir.engine.systems.filelog.stream import partition_dir

__all__ = ["ChangelogBatch", "ChangelogLocation", "changelog_parts", "read_changelog"]

BATCH_RECORDS = 65_536
"""Records per batch handed to the caller (about 8 MiB of 120-byte records)."""

_READ_BYTES = 8 << 20


@dataclass(frozen=True)
class ChangelogLocation:
    """One file-log partition, by root directory; picklable (restore worker processes)."""

    root: str
    stream: str
    partition: int

    def __str__(self) -> str:
        return f"{partition_dir(self.root, self.stream, self.partition)}"


@dataclass(frozen=True, slots=True)
class ChangelogBatch:
    """Consecutive records of a changelog range: ``pairs`` in offset order (``None`` value: a
    tombstone), ``last`` the offset of the last one, ``nbytes`` their key and value bytes."""

    pairs: list[tuple[bytes, bytes | None]]
    last: int
    nbytes: int


def _pair(ctx: object, offset: int, key: bytes, value: bytes | None, ts: int, size: int
          ) -> tuple[bytes, bytes | None]:
    return key, value


def read_changelog(location: ChangelogLocation, start: int, end: int, *,
                   batch_records: int = BATCH_RECORDS) -> Iterator[ChangelogBatch]:
    """The records of ``location`` with ``start <= offset <= end`` that exist now, in offset
    order, as batches of up to ``batch_records``. ``start`` below the partition's oldest
    offset reads from the oldest; a range whose tail was compacted away simply ends early.
    Raises the readers' ``CorruptRecordError`` at a damaged record."""
    if end < start:
        return
    reader = PartitionReader(location.root, location.stream, location.partition, start,
                             read_bytes=_READ_BYTES, reset=OffsetReset.OLDEST)
    try:
        while True:
            position = reader.position
            if position > end:
                return
            # Offsets only grow, so at most ``end - position + 1`` records lie in the range.
            want = min(batch_records, end - position + 1)
            out: list[tuple[bytes, bytes | None]] = []
            got = reader.read(want, _pair, None, out)
            if not got:
                return
            nbytes = sum(map(len, filter(None, chain.from_iterable(out))))
            yield ChangelogBatch(out, reader.position - 1, nbytes)
            if reader.ended:
                return
    finally:
        reader.close()


def changelog_parts(location: ChangelogLocation, start: int, end: int, parts: int
                    ) -> list[tuple[int, int]]:
    """Split ``[start, end]`` into up to ``parts`` consecutive sub-ranges at segment
    boundaries, of similar size in bytes (for several restore workers); ``[(start, end)]``
    when the range lies in one segment or ``parts <= 1``."""
    if parts <= 1 or end < start:
        return [(start, end)]
    directory = partition_dir(location.root, location.stream, location.partition)
    try:
        segments = list_segments(directory)
    except FileNotFoundError:
        return [(start, end)]
    inside = []  # (base, bytes) of the segments overlapping the range
    for i, segment in enumerate(segments):
        limit = segments[i + 1].base if i + 1 < len(segments) else None
        if (limit is not None and limit <= start) or segment.base > end:
            continue
        try:
            size = os.path.getsize(segment.path)
        except FileNotFoundError:
            return [(start, end)]
        inside.append((max(segment.base, start), size))
    if len(inside) <= 1:
        return [(start, end)]
    total = sum(size for _, size in inside)
    count = min(parts, len(inside))
    # Candidate cuts: each segment base after the first, with the bytes before it.
    candidates, before = [], 0
    for (base, _), previous in zip(inside[1:], inside):
        before += previous[1]
        candidates.append((base, before))
    cuts: list[int] = []
    for k in range(1, count):
        ideal = total * k / count
        options = [c for c in candidates if not cuts or c[0] > cuts[-1]]
        if not options:
            break
        base = min(options, key=lambda c: abs(c[1] - ideal))[0]
        cuts.append(base)
    bounds = [start, *cuts]
    return [(lo, bounds[i + 1] - 1 if i + 1 < len(bounds) else end)
            for i, lo in enumerate(bounds)]


def partition_range(location: ChangelogLocation) -> tuple[int, int]:
    """``(oldest, upcoming)`` of the partition (for tools and tests)."""
    return partition_bounds(location.root, location.stream, location.partition)
