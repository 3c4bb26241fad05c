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
    >>> [(b.last, b.records, b.pairs) for b in read_changelog(ChangelogLocation(root, "cl", 0), 0, 2)]
    [(2, 3, {b'a': None, b'b': b'2'})]
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from weir.stores._crc import crc32c
from weir.stores.changelog import ChangelogBatch

from weir.engine.errors import OpenTransactionError, SystemError_
from weir.engine.systems.filelog._format import MAX_BODY, NULL_LEN, TAG_MIN, ParseStop
from weir.engine.systems.filelog.reader import PartitionReader
from weir.engine.systems.filelog.segment import list_segments
from weir.engine.systems.filelog.settings import OffsetReset
from weir.engine.systems.filelog.stream import partition_dir

__all__ = ["ChangelogLocation", "changelog_parts", "parse_into_dict",
           "read_changelog"]

BATCH_RECORDS = 65_536
"""Records per batch handed to the caller (about 8 MiB of 120-byte records)."""

_READ_BYTES = 8 << 20
_HDR = struct.Struct("<IIqI")
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class ChangelogLocation:
    """One file-log partition, by root directory; picklable (restore worker processes)."""

    root: str
    stream: str
    partition: int

    def __str__(self) -> str:
        return f"{partition_dir(self.root, self.stream, self.partition)}"


def parse_into_dict(buf: bytes, pos: int, offsets: Sequence[int], ordinal: int, stop: int,
                    make: object, ctx: list[int], out: dict) -> tuple[int, int, ParseStop]:
    """:func:`~weir.engine.systems.filelog._format.parse_records` for restore: the same
    signature, framing and CRC checks, but each record is stored as ``out[key] = value`` (the
    last value of a key wins) and ``ctx[0]`` grows by the records' key and value bytes. No
    object is made per record beyond its key and value."""
    unpack_hdr = _HDR.unpack_from
    mv = memoryview(buf)
    crc = crc32c
    null = NULL_LEN
    end = len(buf)
    count = 0
    framed = 0
    why = ParseStop.COUNT
    want = min(stop, len(offsets)) - ordinal
    try:
        while count < want:
            length, check, ts, klen = unpack_hdr(buf, pos)
            rend = pos + 8 + length
            if rend > end:
                why = ParseStop.PARTIAL if length <= MAX_BODY else ParseStop.BAD
                break
            if crc(mv[pos + 8:rend]) != check:
                why = ParseStop.BAD
                break
            p = pos + 24
            if klen >= TAG_MIN:
                if klen != null:  # a batch header or marker: the cursor decides (isolation)
                    why = ParseStop.EXT
                    break
                raise SystemError_(f"a changelog record at offset {offsets[ordinal + count]} has "
                                   f"no key; a changelog holds only keyed records")
            key = buf[p - 4:p - 4 + klen]
            p += klen
            if p < rend:
                out[key] = buf[p:rend]
            elif p == rend:
                vlen = _U32.unpack_from(buf, p - 4)[0]
                if vlen == 0:
                    out[key] = b""
                elif vlen == null:
                    out[key] = None
                else:
                    why = ParseStop.BAD
                    break
            else:
                why = ParseStop.BAD
                break
            framed += length
            count += 1
            pos = rend
    except struct.error:  # fewer than 20 bytes left: the header itself is partial
        why = ParseStop.PARTIAL
    finally:
        mv.release()
    ctx[0] += framed - 16 * count
    return pos, ordinal + count, why


def read_changelog(location: ChangelogLocation, start: int, end: int, *,
                   batch_records: int = BATCH_RECORDS,
                   into: dict | None = None) -> Iterator[ChangelogBatch]:
    """The records of ``location`` with ``start <= offset <= end`` that exist now, in offset
    order, in batches of up to ``batch_records``: each batch holds the last value of each key
    it read. With ``into``, every batch stores its records in that one dict (the caller
    collects a run without copying). ``start`` below the partition's oldest offset reads from
    the oldest; a range whose tail was compacted away simply ends early. Raises the readers'
    ``CorruptRecordError`` at a damaged record."""
    if end < start:
        return
    reader = PartitionReader(location.root, location.stream, location.partition, start,
                             read_bytes=_READ_BYTES, reset=OffsetReset.OLDEST,
                             parse=parse_into_dict)
    try:
        while True:
            position = reader.position
            if position > end:
                return
            # Offsets only grow, so at most ``end - position + 1`` records lie in the range.
            want = min(batch_records, end - position + 1)
            out = into if into is not None else {}
            nbytes = [0]
            got = reader.read(want, None, nbytes, out)
            if not got:
                held = reader.held_back_by()
                if held is not None and held.first_offset <= end:
                    # restore must never rebuild part of a state (docs/EXACTLY-ONCE.md)
                    raise OpenTransactionError(
                        f"changelog {location.stream} partition {location.partition}: reading "
                        f"up to offset {end} is held back at offset {held.first_offset} by an "
                        f"open transaction of producer {held.producer_id} (epoch {held.epoch}, "
                        f"transaction {held.sequence}); the job that owns it completes it when "
                        f"it starts: start that job, or, when its process is gone, complete it "
                        f"now with `weir log transactions {location.stream} --resolve`",
                        stream=location.stream, partition=location.partition,
                        producer_id=held.producer_id, first_offset=held.first_offset)
                return
            yield ChangelogBatch(out, reader.position - 1, got, nbytes[0])
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
