"""Segments: listing a partition's segment files, scanning them, indexing and compressing them.

A partition is a sequence of segments ordered by base offset; the last one is the *active*
segment, the only one that grows. A listed segment covers the offsets from its base up to the
next listed base (the active one up to the partition's upcoming offset). When a directory holds
several files for one base (a compression or compaction was interrupted before it removed the
input), the highest generation wins, and a compressed file beats a plain one of the same
generation: they hold the same records, so either is a correct view.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import zstandard
from weir.stores.filesafety import atomic_write, fsync_dir
from weir.stores._crc import crc32c

from weir.engine.systems.filelog._files import SegmentName, parse_segment_name
from weir.engine.systems.filelog._format import (MAX_BODY, MIN_BODY, TAG_BATCH, TAG_MIN, NULL_LEN,
                                                 ParseStop, body_ok, skip_records)
from weir.engine.systems.filelog._index import FLAG_DENSE, FLAG_ZSTD, INDEX_INTERVAL, SegmentIndex, index_path, load_index

__all__ = [
    "Segment",
    "ScanResult",
    "list_segments",
    "scan_plain",
    "index_for",
    "build_index",
    "compress_segment",
    "write_segment",
    "record_ends",
    "inside_batches",
    "remove_segment",
    "FRAME_BYTES",
    "SegmentDamage",
]

FRAME_BYTES = 1 << 20
"""Uncompressed bytes of records per zstd frame of a compressed segment."""

_SCAN_CHUNK = 4 << 20
_LEN_CRC_TS = struct.Struct("<IIq")
_LEN_CRC_TS_TAG = struct.Struct("<IIqI")
_BATCH_COUNT_BYTES = struct.Struct("<II")  # count, bytes: the last 8 bytes of a batch header


class SegmentDamage(ValueError):
    """A segment does not parse to its end: record ``ordinal`` (from 0 in the segment), at
    byte ``position`` of the file, is damaged or cut short."""

    def __init__(self, message: str, *, ordinal: int, position: int):
        super().__init__(message)
        self.ordinal, self.position = ordinal, position


@dataclass(frozen=True, slots=True)
class Segment:
    """One listed segment file."""

    name: SegmentName
    path: str

    @property
    def base(self) -> int:
        return self.name.base

    @property
    def generation(self) -> int:
        return self.name.generation

    @property
    def compressed(self) -> bool:
        return self.name.compressed

    @property
    def index_path(self) -> str:
        return index_path(self.path)

    def sibling(self, generation: int, compressed: bool) -> "Segment":
        """Another file name for this base in the same directory."""
        name = SegmentName(self.base, generation, compressed)
        return Segment(name, os.path.join(os.path.dirname(self.path), name.file_name))


def list_segments(partition_dir: str) -> list[Segment]:
    """The partition's segments in base order, one per base (see the module docstring).
    A compacted file whose index is not there yet is an unfinished compaction: skipped."""
    names = os.listdir(partition_dir)
    present = set(names)
    best: dict[int, SegmentName] = {}
    for file_name in names:
        parsed = parse_segment_name(file_name)
        if parsed is None or (parsed.generation and file_name + ".idx" not in present):
            continue
        current = best.get(parsed.base)
        if current is None or (parsed.generation, parsed.compressed) > (current.generation,
                                                                       current.compressed):
            best[parsed.base] = parsed
    return [Segment(name, os.path.join(partition_dir, name.file_name))
            for _, name in sorted(best.items())]


@dataclass(slots=True)
class ScanResult:
    """Result of scanning a plain segment: where the valid records end, how many there are,
    sparse index entries, the largest timestamp, and why the scan stopped.

    ``open_batch`` is ``(ordinal, position)`` of the header of a transactional batch that the
    valid records end inside of (its header says more records than follow): a batch being
    written, or torn by a crash. Readers do not read it; a writer cuts it off there."""

    end: int
    count: int
    sparse: list[tuple[int, int]]
    max_timestamp: int
    stop: ParseStop
    open_batch: tuple[int, int] | None = None

    @property
    def whole_end(self) -> int:
        """Where the whole frames end: before an incomplete final batch."""
        return self.open_batch[1] if self.open_batch is not None else self.end

    @property
    def whole_count(self) -> int:
        """How many whole frames there are: without an incomplete final batch."""
        return self.open_batch[0] if self.open_batch is not None else self.count


def scan_plain(fd: int, size: int, *, start: int = 0, ordinal: int = 0,
               sparse: list[tuple[int, int]] | None = None, max_timestamp: int = -1
               ) -> ScanResult:
    """Walk the records of a plain segment from byte ``start`` (record ``ordinal``) to
    ``size``, checking framing and CRC, collecting one sparse entry per
    :data:`INDEX_INTERVAL` bytes -- never inside a transactional batch, so a reader that
    seeks from an entry always meets the header of the batch it lands in. ``start`` must not
    be inside a batch. Stops at the first bad or partial record (``stop`` is BAD or PARTIAL)
    or at ``size`` (``stop`` is COUNT); ``open_batch`` says when the records end inside a
    batch. The inner key/value lengths are not checked here (readers check them)."""
    sparse = [] if sparse is None else sparse
    next_indexed = (sparse[-1][1] + INDEX_INTERVAL) if sparse else 0
    unpack = _LEN_CRC_TS_TAG.unpack_from
    counts = _BATCH_COUNT_BYTES.unpack_from
    batch_end = -1           # ordinal after the last record of the batch being walked
    batch_at = (0, 0)        # (ordinal, position) of its header
    pos = start

    def result(end: int, n: int, why: ParseStop) -> ScanResult:
        open_batch = batch_at if n < batch_end else None
        return ScanResult(end, n, sparse, max_timestamp, why, open_batch)

    while pos < size:
        chunk = os.pread(fd, min(_SCAN_CHUNK, size - pos), pos)
        end = len(chunk)
        at = 0
        stop = None
        with memoryview(chunk) as mv:
            while at + 24 <= end:
                length, check, ts, tag = unpack(chunk, at)
                rend = at + 8 + length
                if rend > end:
                    break
                if length < MIN_BODY or crc32c(mv[at + 8:rend]) != check:
                    stop = ParseStop.BAD
                    break
                if ordinal >= batch_end:  # not inside a batch: a place readers may seek to
                    if pos + at >= next_indexed:
                        sparse.append((ordinal, pos + at))
                        next_indexed = pos + at + INDEX_INTERVAL
                    if tag == TAG_BATCH:
                        count, _ = counts(chunk, rend - 8)
                        batch_end, batch_at = ordinal + 1 + count, (ordinal, pos + at)
                if ts > max_timestamp and (tag < TAG_MIN or tag == NULL_LEN):
                    max_timestamp = ts
                ordinal += 1
                at = rend
        if stop is None and at + 24 <= end:  # a record longer than the chunk
            length = unpack(chunk, at)[0]
            if length > MAX_BODY:
                stop = ParseStop.BAD
            elif pos + at + 8 + length <= size and at == 0:
                record = os.pread(fd, 8 + length, pos)
                if len(record) < 8 + length:
                    return result(pos, ordinal, ParseStop.PARTIAL)
                if not body_ok(record, 8, 8 + length, unpack(record, 0)[1]):
                    return result(pos, ordinal, ParseStop.BAD)
                if ordinal >= batch_end and pos >= next_indexed:
                    sparse.append((ordinal, pos))
                    next_indexed = pos + INDEX_INTERVAL
                max_timestamp = max(max_timestamp, unpack(record, 0)[2])
                ordinal += 1
                at = len(record)
        pos += at
        if stop is not None:
            return result(pos, ordinal, stop)
        if at == 0:  # not even one whole record before the end of the file
            return result(pos, ordinal, ParseStop.PARTIAL)
    return result(pos, ordinal, ParseStop.COUNT)


def index_for(segment: Segment, size: int) -> SegmentIndex | None:
    """The segment's stored index if it is intact and matches the file's size."""
    return load_index(segment.index_path, size)


def build_index(segment: Segment, fd: int, size: int, *, sealed_ms: int | None = None
                ) -> SegmentIndex:
    """Rebuild the index of a producer-written (generation 0) sealed segment by scanning it.
    Raises :class:`SegmentDamage` (a ValueError) if the segment does not parse to its end."""
    if segment.generation:
        raise ValueError("a compacted segment's offsets exist only in its index")
    if sealed_ms is None:
        sealed_ms = int(os.fstat(fd).st_mtime * 1000)
    if not segment.compressed:
        scan = scan_plain(fd, size)
        if scan.stop is not ParseStop.COUNT:
            raise SegmentDamage(f"record {scan.count} at byte {scan.end} is "
                                f"{'cut short' if scan.stop is ParseStop.PARTIAL else 'damaged'}",
                                ordinal=scan.count, position=scan.end)
        if scan.open_batch is not None:
            ordinal, position = scan.open_batch
            raise SegmentDamage(f"the transactional batch at record {ordinal} (byte {position}) "
                                f"is cut short", ordinal=ordinal, position=position)
        return SegmentIndex(segment.base, 0, scan.count, segment.base + scan.count, sealed_ms,
                            scan.max_timestamp, size, range(segment.base, segment.base + scan.count),
                            scan.sparse)
    data = os.pread(fd, size, 0)
    sparse: list[tuple[int, int]] = []
    count, max_ts, pos = 0, -1, 0
    while pos < len(data):
        dobj = zstandard.ZstdDecompressor().decompressobj()
        plain = dobj.decompress(data[pos:])
        frame_len = len(data) - pos - len(dobj.unused_data)
        sparse.append((count, pos))
        at, n, why = 0, 0, ParseStop.COUNT
        while at < len(plain):
            length, _, ts = _LEN_CRC_TS.unpack_from(plain, at)
            at, n, why = skip_records(plain, at, len(plain), 1, verify=True)
            if n == 0:
                raise SegmentDamage(f"record {count} in frame at byte {pos} is bad",
                                    ordinal=count, position=pos)
            max_ts = max(max_ts, ts)
            count += 1
        pos += frame_len
    return SegmentIndex(segment.base, FLAG_ZSTD, count, segment.base + count, sealed_ms, max_ts,
                        size, range(segment.base, segment.base + count), sparse)


def inside_batches(data: bytes, ends: Sequence[int]) -> list[bool] | None:
    """For each frame of ``data`` (frame ``i`` ends at ``ends[i]``): whether it is a record
    inside a transactional batch (not a place a reader may start from). None when ``data``
    holds no batch (the common case, checked without a loop per frame)."""
    if _TAG_BATCH_BYTES not in data:
        return None
    out = [False] * len(ends)
    start, remaining = 0, 0
    for i, end in enumerate(ends):
        if remaining:
            out[i] = True
            remaining -= 1
        elif _LEN_CRC_TS_TAG.unpack_from(data, start)[3] == TAG_BATCH:
            remaining = _BATCH_COUNT_BYTES.unpack_from(data, end - 8)[0]
        start = end
    return out


_TAG_BATCH_BYTES = struct.pack("<I", TAG_BATCH)


def record_ends(data: bytes, path: str) -> list[int]:
    """End position of each record of a buffer of whole records (ValueError if damaged)."""
    ends: list[int] = []
    pos, size = 0, len(data)
    while pos < size:
        pos, n, why = skip_records(data, pos, size, 1)
        if n == 0:
            raise ValueError(f"{path}: bad record at byte {pos} ({why.value})")
        ends.append(pos)
    return ends


def write_segment(target: Segment, data: bytes, ends: list[int], offsets: Sequence[int], *,
                  dense: bool, next_offset: int, sealed_ms: int, max_timestamp: int,
                  level: int | None, inside: Sequence[bool] | None = None) -> Segment:
    """Write a sealed segment holding the records ``data`` (record ``i`` ends at ``ends[i]``
    and has offset ``offsets[i]``): its index first, then the data file (temp, fsync,
    rename, fsync dir), so the data file is never visible without its index. With ``level``
    the records are zstd-compressed in frames of about :data:`FRAME_BYTES`. ``inside[i]``
    (see :func:`inside_batches`) marks records inside a transactional batch: no sparse entry
    and no zstd frame starts at one."""
    sparse: list[tuple[int, int]] = []
    start = 0
    if level is None:
        chunks = [data]
        last = -INDEX_INTERVAL
        for ordinal, end in enumerate(ends):
            if start - last >= INDEX_INTERVAL and not (inside and inside[ordinal]):
                sparse.append((ordinal, start))
                last = start
            start = end
        size = len(data)
    else:
        compressor = zstandard.ZstdCompressor(level=level, write_content_size=True)
        chunks, size, first = [], 0, 0
        for ordinal, end in enumerate(ends):
            last = ordinal == len(ends) - 1
            if last or (end - start >= FRAME_BYTES and not (inside and inside[ordinal + 1])):
                frame = compressor.compress(data[start:end])
                sparse.append((first, size))
                chunks.append(frame)
                size += len(frame)
                start, first = end, ordinal + 1
    flags = (FLAG_DENSE if dense else 0) | (FLAG_ZSTD if level is not None else 0)
    if not dense:
        offsets = range(target.base, target.base + len(ends))
    SegmentIndex(target.base, flags, len(ends), next_offset, sealed_ms, max_timestamp, size,
                 offsets, sparse).write(target.index_path)
    atomic_write(target.path, chunks)
    return target


def compress_segment(segment: Segment, index: SegmentIndex, level: int) -> Segment:
    """Replace a sealed plain segment by its zstd-compressed copy (frames of whole records,
    one sparse index entry per frame), then remove the plain file. Returns the new segment.
    The caller holds the partition's maintenance lock."""
    with open(segment.path, "rb") as f:
        data = f.read()
    if len(data) != index.data_size:
        raise ValueError(f"{segment.path} is {len(data)} bytes, its index says {index.data_size}")
    ends = record_ends(data, segment.path)
    if len(ends) != index.record_count:
        raise ValueError(f"{segment.path}: {len(ends)} records, its index says "
                         f"{index.record_count}")
    target = write_segment(segment.sibling(segment.generation, True), data, ends, index.offsets,
                           dense=index.dense, next_offset=index.next_offset,
                           sealed_ms=index.sealed_ms, max_timestamp=index.max_timestamp,
                           level=level, inside=inside_batches(data, ends))
    remove_segment(segment)
    return target


def remove_segment(segment: Segment, *, sync: bool = True) -> None:
    """Delete a segment file, its index and tail hint (a reader that has it open keeps reading)."""
    for path in (segment.path, segment.index_path, segment.path + ".tail"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if sync:
        fsync_dir(os.path.dirname(segment.path))
