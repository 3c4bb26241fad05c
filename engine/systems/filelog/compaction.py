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
* transactions (docs/EXACTLY-ONCE.md): the cleanable range ends before the segment holding the
  first batch of a transaction that is still open at its end (no marker yet, or its marker is
  in a younger segment), so an open transaction is never compacted away. Inside the range the
  records of committed transactions are treated as plain records; records of aborted and
  fenced transactions are dropped (they never supersede anything), and so are batch headers
  and markers: a compacted segment holds plain records only;
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

from weir.stores.filesafety import fsync_dir
from weir.engine.systems.filelog._format import TAG_BATCH, TAG_CONTROL, ParseStop, parse_records
from weir.engine.systems.filelog._index import SegmentIndex
from weir.engine.systems.filelog._txn_format import BatchHeader, decode_frame
from weir.engine.systems.filelog._txn_view import Outcome, TxnView
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
    aborted_dropped: int = 0
    """Records of aborted or fenced transactions dropped."""
    open_transactions: int = 0
    """Transactions still open at the end of the cleanable range (it ended before them)."""
    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        txn = (f", {self.aborted_dropped:,} records of aborted transactions dropped"
               if self.aborted_dropped else "")
        held = (f", stopped before {self.open_transactions} open transaction(s)"
                if self.open_transactions else "")
        return (f"compacted {self.segments_before} -> {self.segments_after} segments, "
                f"{self.records_before:,} -> {self.records_after:,} records "
                f"({self.tombstones_dropped:,} tombstones dropped{txn}{held}), "
                f"{self.bytes_before:,} -> {self.bytes_after:,} bytes in {self.seconds:.2f} s")


_RECORD, _HEADER, _MARKER = 0, 1, 2


def _records(segment: Segment, index: SegmentIndex) -> tuple[bytes, list[tuple]]:
    """The segment's frames as one uncompressed buffer plus, per frame,
    ``(offset, key, is_tombstone, timestamp, size, kind, txn)``: ``size`` is the frame's bytes,
    ``kind`` a record, batch header or marker, and ``txn`` the header (or marker) object for
    those, or for a record inside a batch the offset of its batch's header (else -1)."""
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
    pos, ordinal = 0, 0
    batch_header, remaining = -1, 0
    offsets, count = index.offsets, index.record_count

    def make(c, o, k, v, t, s):
        return (o, k, v is None, t, s + 24, _RECORD, -1)

    while ordinal < count:
        before = len(out)
        pos, ordinal, why = parse_records(data, pos, offsets, ordinal, count, make, None, out)
        for i in range(before, len(out)):
            if remaining:
                out[i] = out[i][:6] + (batch_header,)
                remaining -= 1
        if why is not ParseStop.EXT:
            break
        try:
            frame = decode_frame(data, pos, verify=False)
        except ValueError as exc:
            raise ValueError(f"{segment.path}: record {ordinal} at byte {pos}: {exc}; "
                             f"compaction stopped before changing anything") from None
        size = 8 + int.from_bytes(data[pos:pos + 4], "little")
        offset = offsets[ordinal]
        if isinstance(frame, BatchHeader):
            out.append((offset, None, False, frame.timestamp, size, _HEADER, frame))
            batch_header, remaining = offset, frame.count
        else:
            out.append((offset, None, False, frame.timestamp, size, _MARKER, frame))
        pos += size
        ordinal += 1
    if pos != len(data) or ordinal != count:
        raise ValueError(f"{segment.path}: record {ordinal} at byte {pos} is damaged "
                         f"({why.value}); compaction stopped before changing anything")
    return data, out


_TAGS = (TAG_BATCH.to_bytes(4, "little"), TAG_CONTROL.to_bytes(4, "little"))


def _txn_frames(segment: Segment, index: SegmentIndex) -> list[tuple]:
    """The batch headers and markers of a segment (as :func:`_records` gives them); a segment
    whose bytes hold neither tag is not parsed."""
    with open(segment.path, "rb") as f:
        raw = f.read()
    if not index.compressed and not any(tag in raw for tag in _TAGS):
        return []
    _, frames = _records(segment, index)
    return [f for f in frames if f[5] != _RECORD]


def _outcomes(frames: list[list[tuple]], start: int, end: int) -> tuple[dict[int, Outcome],
                                                                         int | None, int]:
    """Feed the batch headers and markers of ``frames`` (per segment, in offset order) to a
    view; returns the outcome per batch header offset of every decided batch, the first offset
    of the earliest transaction still open at the end (None when none is), and how many are
    open."""
    view = TxnView(start)
    headers: list[tuple[int, BatchHeader]] = []
    for entries in frames:
        for offset, _, _, _, _, kind, txn in entries:
            if kind == _HEADER:
                view.on_batch(offset, txn)
                headers.append((offset, txn))
            elif kind == _MARKER:
                view.on_marker(offset, txn)
    view.scanned = end
    first_open = min((t.first_offset for t in view.open.values()), default=None)
    outcomes = {}
    for offset, header in headers:
        outcome = view.outcome(header.producer_id, header.epoch, offset)
        if outcome is not Outcome.OPEN:
            outcomes[offset] = outcome
    return outcomes, first_open, len(view.open)


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
    open_txns = 0
    outcomes: dict[int, Outcome] = {}
    txn_frames = [_txn_frames(segment, index) for segment, index in sealed]
    if any(txn_frames):
        outcomes, first_open, open_txns = _outcomes(txn_frames,
                                                    sealed[0][0].base if sealed else 0,
                                                    next_base)
        if first_open is not None:  # an open transaction is never compacted away
            keep = 0
            while keep < len(sealed) and (sealed[keep + 1][0].base if keep + 1 < len(sealed)
                                          else next_base) <= first_open:
                keep += 1
            if keep < len(sealed):
                next_base = sealed[keep][0].base
                sealed = sealed[:keep]
    report = CompactionReport(segments_before=len(sealed), open_transactions=open_txns)

    def visible(kind: int, txn) -> bool:
        """A plain record, or a record of a committed transaction."""
        if kind != _RECORD:
            return False
        return txn == -1 or outcomes.get(txn) is Outcome.COMMITTED

    latest: dict[bytes, int] = {}
    for segment, index in sealed:
        _, records = _records(segment, index)
        for offset, key, _, _, _, kind, txn in records:
            if key is not None and visible(kind, txn):
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
        for offset, key, tombstone, ts, size, kind, txn in records:
            if not visible(kind, txn):
                if kind == _RECORD:
                    report.aborted_dropped += 1
            elif key is None or (latest[key] == offset and not (tombstone and expired)):
                keep.append((offset, pos, pos + size, ts))
            elif latest[key] == offset:
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
