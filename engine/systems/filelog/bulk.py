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

import functools
import operator
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, count as _count

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
    object is made per record beyond its key and value.

    A stretch of records of one shape (the same body length and key length, a value of at
    least one byte: fixed-width keys and values) is parsed a chunk per call, in C
    (:func:`_parse_uniform`); other records, and the first record that breaks a stretch, go
    through the record-at-a-time loop (:func:`_parse_each`), which decides what stops the
    parse (a partial or damaged record, a batch header). Both check every record's CRC."""
    want = min(stop, len(offsets)) - ordinal
    end = len(buf)
    count = framed = 0
    why = ParseStop.COUNT
    mv = memoryview(buf)
    window, each = _WINDOW_MIN, _EACH_MIN
    try:
        while count < want:
            n, nbytes = _parse_uniform(buf, mv, pos, min(want - count, window), end, out)
            if n:
                count += n
                framed += nbytes
                pos += nbytes + 8 * n
                if n == window:
                    window = min(window * 2, _WINDOW_MAX)
                    continue
                if count >= want:
                    break
            window = _WINDOW_MIN
            # Records of mixed shapes: try a chunk less and less often.
            each = _EACH_MIN if n >= _WINDOW_MIN else min(each * 4, _EACH_MAX)
            pos, n, nbytes, why = _parse_each(buf, mv, pos, min(want - count, each),
                                              end, out, offsets, ordinal + count)
            count += n
            framed += nbytes
            if why is not ParseStop.COUNT:
                break
    finally:
        mv.release()
    ctx[0] += framed - 16 * count
    return pos, ordinal + count, why


_WINDOW_MIN = 64
"""Records a chunk parse of :func:`_parse_uniform` first tries; it doubles while the records
keep their shape, up to :data:`_WINDOW_MAX`, and drops back after a record of another
shape."""
_WINDOW_MAX = 16_384
_EACH_MIN, _EACH_MAX = 16, 4096
"""Records :func:`_parse_each` parses one at a time before a chunk parse is tried again: at
first 16, four times more after each try that found no stretch of at least
:data:`_WINDOW_MIN` records (records of mixed shapes, such as variable-length keys, pay for
a try per 4,096 records at most)."""
_LEN_KLEN = struct.Struct("<I12xI")


def _first_not(value: object, items: Sequence[object]) -> int:
    """Index of the first item of ``items`` that is not equal to ``value``; ``len(items)``
    when there is none. Runs in C (no Python frame per item)."""
    return next(compress(_count(), map(value.__ne__, items)), len(items))


def _parse_uniform(buf: bytes, mv: memoryview, pos: int, most: int, end: int, out: dict
                   ) -> tuple[int, int]:
    """Parse up to ``most`` records from ``pos`` that have the shape of the record at
    ``pos``, a chunk per call: ``(records, bytes of their bodies)`` stored into ``out``; 0
    when the record at ``pos`` is not of a shape this handles (a null key, a tag, an empty or
    null value, a header cut short). Stops in front of the first record of another shape or
    whose CRC does not match, which :func:`_parse_each` then reads (and reports)."""
    if pos + 20 > end:
        return 0, 0
    length, klen = _LEN_KLEN.unpack_from(buf, pos)
    vlen = length - 16 - klen
    if klen >= TAG_MIN or vlen <= 0:
        return 0, 0
    stride = length + 8
    n = min(most, (end - pos) // stride)
    if n < 2 or _LEN_KLEN.unpack_from(buf, pos + stride) != (length, klen):
        return 0, 0  # the next record has another shape: not worth a chunk
    chunk = mv[pos:pos + n * stride]
    shape = _shapes(length, klen)
    lengths, checks, klens, keys, values = zip(*shape[0].iter_unpack(chunk))
    # A record of another length ends the stretch (the records after it are not where the
    # stride says); one of the same length but another key length is parsed one at a time.
    n = min(_first_not(length, lengths), _first_not(klen, klens))
    if n == 0:
        return 0, 0
    bodies = map(_FIRST, shape[1].iter_unpack(chunk[:n * stride]))
    computed = tuple(map(crc32c, bodies))
    if n < len(checks):
        checks = checks[:n]
    if computed != checks:
        n = _first_not(True, list(map(int.__eq__, computed, checks)))
        if n == 0:
            return 0, 0
        keys, values = keys[:n], values[:n]
    elif n < len(keys):
        keys, values = keys[:n], values[:n]
    out.update(zip(keys, values))
    return n, n * length


_FIRST = operator.itemgetter(0)


@functools.lru_cache(maxsize=64)
def _shapes(length: int, klen: int) -> tuple[struct.Struct, struct.Struct]:
    """The two structs of a record shape: its fields ``(length, crc, key_len, key, value)``,
    and its body (what the CRC covers)."""
    vlen = length - 16 - klen
    return (struct.Struct(f"<II8xI{klen}s4x{vlen}s"), struct.Struct(f"<8x{length}s"))


def _parse_each(buf: bytes, mv: memoryview, pos: int, want: int, end: int, out: dict,
                offsets: Sequence[int], ordinal: int) -> tuple[int, int, int, ParseStop]:
    """Parse up to ``want`` records one at a time: ``(pos, records, body bytes, why)``."""
    unpack_hdr = _HDR.unpack_from
    crc = crc32c
    null = NULL_LEN
    count = framed = 0
    why = ParseStop.COUNT
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
    return pos, count, framed, why


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
