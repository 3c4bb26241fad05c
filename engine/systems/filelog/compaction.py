"""Log compaction of a partition of a ``compact`` stream: keep the latest record per key.

Only sealed segments are compacted; the active segment is read by nobody here and never
rewritten (a record in it may still be lost to a power failure if it was not fsynced, so it
must not be what makes an older value disposable).

Rules:

* only the *cleanable* prefix of the sealed segments is compacted: those sealed at least
  ``compaction.min.lag.ms`` ago (Kafka's min compaction lag). Younger segments are neither
  rewritten nor allowed to supersede anything. A store changelog relies on this: after a
  crash, restore rebuilds the state *at the last checkpoint* and reverts the records written
  after it, so a committed value must not be removed because a write that was never
  committed replaced it. With commits more frequent than the lag, records written since the
  last commit are always in young segments;
* a record survives when it is the latest one of its key among the cleanable segments;
  records with a null key are kept (they cannot be superseded);
* a surviving tombstone (null value) is dropped once its segment was sealed at least
  ``compaction.tombstone.retention.ms`` ago, so readers that were behind still see the delete;
* surviving records keep their offsets: a compacted segment has gaps, and its index lists the
  offset of every record;
* consecutive segments are merged while the result stays under ``segment.bytes``. The output of
  inputs ``[B0, B1, ...)`` is named ``B0.g<gen>.log`` with a generation above every input's, so
  it takes precedence over ``B0``'s old file; it covers offsets up to the base of the segment
  after the group. Inputs are deleted after the output (index first, then data) is durable.
  Groups are rewritten oldest first, so an old value is always gone before the tombstone that
  deleted it can be dropped. A crash at any point leaves a readable partition: a reader stops
  reading a segment at the next listed base, and compaction never changes an offset's record.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import zstandard

from weir.engine.systems.filelog._files import fsync_dir
from weir.engine.systems.filelog._format import parse_records
from weir.engine.systems.filelog._index import SegmentIndex
from weir.engine.systems.filelog.segment import Segment, remove_segment, write_segment

__all__ = ["CompactionReport", "compact_sealed"]

_log = logging.getLogger(__name__)


@dataclass
class CompactionReport:
    """What one compaction of one partition did."""

    segments_before: int = 0
    segments_after: int = 0
    records_before: int = 0
    records_after: int = 0
    tombstones_dropped: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        return (f"compacted {self.segments_before} -> {self.segments_after} segments, "
                f"{self.records_before:,} -> {self.records_after:,} records "
                f"({self.tombstones_dropped:,} tombstones dropped), {self.bytes_before:,} -> "
                f"{self.bytes_after:,} bytes in {self.seconds:.2f} s")


def _records(segment: Segment, index: SegmentIndex) -> tuple[bytes, list[tuple]]:
    """The segment's records as one uncompressed buffer plus
    ``(offset, key, is_tombstone, timestamp, size)`` per record."""
    with open(segment.path, "rb") as f:
        raw = f.read()
    if index.compressed:
        parts, sparse = [], index.sparse
        for i, (_, cpos) in enumerate(sparse):
            cend = sparse[i + 1][1] if i + 1 < len(sparse) else len(raw)
            parts.append(zstandard.ZstdDecompressor().decompress(raw[cpos:cend]))
        data = b"".join(parts)
    else:
        data = raw
    out: list[tuple] = []
    pos, ordinal, why = parse_records(data, 0, index.offsets, 0, index.record_count,
                                      lambda c, o, k, v, t, s: (o, k, v is None, t, s + 24),
                                      None, out)
    if pos != len(data) or ordinal != index.record_count:
        raise ValueError(f"{segment.path}: record {ordinal} at byte {pos} is damaged "
                         f"({why.value}); compaction stopped before changing anything")
    return data, out


def compact_sealed(sealed: list[tuple[Segment, SegmentIndex]], next_base: int, *,
                   segment_bytes: int, tombstone_retention_ms: int, min_lag_ms: int,
                   level: int | None, now_ms: int | None = None) -> CompactionReport:
    """Compact the cleanable prefix of the sealed segments (in base order; ``next_base`` is
    the base of the segment after the last, i.e. the active one): those sealed at least
    ``min_lag_ms`` before ``now_ms``. The caller holds the maintenance lock."""
    started = time.monotonic()
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    cleanable = 0
    while cleanable < len(sealed) and sealed[cleanable][1].sealed_ms + min_lag_ms <= now_ms:
        cleanable += 1
    if cleanable < len(sealed):
        next_base = sealed[cleanable][0].base
        sealed = sealed[:cleanable]
    report = CompactionReport(segments_before=len(sealed))
    latest: dict[bytes, int] = {}
    for segment, index in sealed:
        _, records = _records(segment, index)
        for offset, key, _, _, _ in records:
            if key is not None:
                latest[key] = offset
    group: list[tuple[Segment, SegmentIndex]] = []
    kept_parts: list[bytes] = []
    kept_ends: list[int] = []
    kept_offsets: list[int] = []
    kept_bytes = 0
    max_ts = -1
    changed = False

    def emit(group_end: int) -> None:
        nonlocal kept_bytes, max_ts, changed
        if changed or len(group) > 1:
            first = group[0][0]
            target = first.sibling(max(s.generation for s, _ in group) + 1, level is not None)
            write_segment(target, b"".join(kept_parts), kept_ends, kept_offsets, dense=True,
                          next_offset=group_end, sealed_ms=max(i.sealed_ms for _, i in group),
                          max_timestamp=max_ts, level=level)
            for segment, _ in group:
                remove_segment(segment, sync=False)
            fsync_dir(os.path.dirname(target.path))
            report.bytes_after += os.path.getsize(target.path)
        else:
            report.bytes_after += group[0][1].data_size
        report.segments_after += 1
        group.clear()
        kept_parts.clear()
        kept_ends.clear()
        kept_offsets.clear()
        kept_bytes, max_ts, changed = 0, -1, False

    for n, (segment, index) in enumerate(sealed):
        report.bytes_before += index.data_size
        data, records = _records(segment, index)
        report.records_before += len(records)
        expired = index.sealed_ms + tombstone_retention_ms <= now_ms
        keep: list[tuple[int, int, int, int]] = []  # (offset, start, end, timestamp)
        pos = 0
        for offset, key, tombstone, ts, size in records:
            if key is None or (latest[key] == offset and not (tombstone and expired)):
                keep.append((offset, pos, pos + size, ts))
            elif key is not None and latest[key] == offset:
                report.tombstones_dropped += 1
            pos += size
        seg_bytes = sum(end - start for _, start, end, _ in keep)
        if group and kept_bytes + seg_bytes > segment_bytes:
            emit(segment.base)
        group.append((segment, index))
        changed = changed or len(keep) != len(records)
        for offset, start, end, ts in keep:
            kept_parts.append(data[start:end])
            kept_bytes += end - start
            kept_ends.append(kept_bytes)
            kept_offsets.append(offset)
            if ts > max_ts:
                max_ts = ts
        report.records_after += len(keep)
    if group:
        emit(next_base)
    report.seconds = time.monotonic() - started
    return report
