"""Frames of transactions in the file log: batch headers and markers, and walking frames.

Both are ordinary frames of the record format (``length | crc | body``, CRC-32C of the body;
see ``_format.py``) whose ``key_len`` field holds a tag no key length can have. All integers
little-endian::

    batch header  timestamp i64 | 0xFFFFFFFE | producer_id u32 | epoch u16 | flags u16
                  | sequence u32 | count u32 | bytes u32                           (40-byte frame)
    marker        timestamp i64 | 0xFFFFFFFD | producer_id u32 | epoch u16 | type u16
                  | sequence u32                                                   (32-byte frame)

A batch header is followed by ``count`` plain records (``bytes`` bytes in all) that belong to
the open transaction of ``producer_id`` at ``epoch``; a marker (type 0 abort, 1 commit) closes
it. Every frame takes one offset. See docs/EXACTLY-ONCE.md.

Walking frames (:func:`walk_frames`) is what seeking and counting do: it steps over records by
their length, jumps over a batch whole, and knows the batch it stops in. A batch is entered or
jumped only when all of it lies in the bytes given: a batch that is not complete yet (being
written, or torn by a crash) is where the walk stops, like a partial record.

Example::

    >>> from weir.engine.systems.filelog._format import encode_record
    >>> batch = encode_record(b"k", b"v") + encode_record(b"k2", b"v2")
    >>> frames = (encode_batch_header(7, 1, 3, 2, len(batch), 1000) + batch
    ...           + encode_marker(7, 1, ControlType.COMMIT, 3, 1001))
    >>> walk_frames(frames, 0, len(frames), 0, 2)[:3]
    (66, 2, <ParseStop.COUNT: 'count'>)
    >>> decode_frame(frames, len(frames) - MARKER_FRAME)
    Marker(producer_id=7, epoch=1, type=<ControlType.COMMIT: 1>, sequence=3, timestamp=1001)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from weir.stores._crc import crc32c

from weir.engine.systems.filelog._format import (BATCH_BODY, CONTROL_BODY, MAX_BODY, MIN_BODY,
                                                 NULL_LEN, TAG_BATCH, TAG_CONTROL, TAG_MIN,
                                                 ParseStop)

__all__ = [
    "ControlType",
    "BatchHeader",
    "Marker",
    "OpenBatch",
    "HEADER_FRAME",
    "MARKER_FRAME",
    "MAX_PRODUCER_ID",
    "MAX_EPOCH",
    "encode_batch_header",
    "encode_marker",
    "decode_frame",
    "frame_kind",
    "walk_frames",
    "scan_frames",
    "frame_need",
    "FrameKind",
]

HEADER_FRAME = 8 + BATCH_BODY
"""Bytes of a batch header frame (40)."""

MARKER_FRAME = 8 + CONTROL_BODY
"""Bytes of a marker frame (32)."""

MAX_PRODUCER_ID = 0xFFFFFFFF
MAX_EPOCH = 0xFFFF

_LEN_CRC = struct.Struct("<II")
_BATCH = struct.Struct("<qIIHHIII")     # timestamp, tag, pid, epoch, flags, sequence, count, bytes
_CONTROL = struct.Struct("<qIIHHI")     # timestamp, tag, pid, epoch, type, sequence
_HDR = struct.Struct("<IIqI")           # length, crc, timestamp, key_len


class ControlType(IntEnum):
    """What a marker does to its producer's open transaction."""

    ABORT = 0
    COMMIT = 1


class FrameKind(IntEnum):
    RECORD = 0
    BATCH = 1
    MARKER = 2
    UNKNOWN = 3


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The header of a batch: ``count`` records, ``nbytes`` bytes, of the transaction of
    ``producer_id`` at ``epoch`` (the producer's transaction number ``sequence``)."""

    producer_id: int
    epoch: int
    sequence: int
    count: int
    nbytes: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class Marker:
    """A commit or abort marker of ``producer_id``'s open transaction, written at ``epoch``."""

    producer_id: int
    epoch: int
    type: ControlType
    sequence: int
    timestamp: int

    @property
    def committed(self) -> bool:
        return self.type is ControlType.COMMIT


@dataclass(frozen=True, slots=True)
class OpenBatch:
    """The batch a walk stopped inside: its header, the ordinal of the header frame in its
    segment, the ordinal after its last record, and the position after its last record (in
    the coordinates of the bytes walked)."""

    header: BatchHeader
    ordinal: int
    end_ordinal: int
    end_position: int


def encode_batch_header(producer_id: int, epoch: int, sequence: int, count: int, nbytes: int,
                        timestamp: int, flags: int = 0) -> bytes:
    """The framed header of a batch of ``count`` records of ``nbytes`` bytes."""
    body = _BATCH.pack(timestamp, TAG_BATCH, producer_id, epoch, flags, sequence & 0xFFFFFFFF,
                       count, nbytes)
    return _LEN_CRC.pack(BATCH_BODY, crc32c(body)) + body


def encode_marker(producer_id: int, epoch: int, type_: ControlType, sequence: int,
                  timestamp: int) -> bytes:
    """The framed marker closing ``producer_id``'s open transaction."""
    body = _CONTROL.pack(timestamp, TAG_CONTROL, producer_id, epoch, int(type_),
                         sequence & 0xFFFFFFFF)
    return _LEN_CRC.pack(CONTROL_BODY, crc32c(body)) + body


def frame_kind(key_len: int) -> FrameKind:
    """What a frame is, from its ``key_len`` field."""
    if key_len < TAG_MIN or key_len == NULL_LEN:
        return FrameKind.RECORD
    if key_len == TAG_BATCH:
        return FrameKind.BATCH
    if key_len == TAG_CONTROL:
        return FrameKind.MARKER
    return FrameKind.UNKNOWN


def decode_frame(buf: bytes, pos: int, *, verify: bool = True) -> BatchHeader | Marker:
    """The batch header or marker framed at ``buf[pos:]``. Raises ValueError when the frame is
    not whole, fails its CRC (with ``verify``), has the wrong length for its kind or an
    unknown tag."""
    if pos + 20 > len(buf):
        raise ValueError("the frame is cut short")
    length, check, _, tag = _HDR.unpack_from(buf, pos)
    end = pos + 8 + length
    if end > len(buf):
        raise ValueError("the frame is cut short")
    if verify:
        with memoryview(buf) as mv:
            if crc32c(mv[pos + 8:end]) != check:
                raise ValueError("the frame failed its CRC check")
    if tag == TAG_BATCH:
        if length != BATCH_BODY:
            raise ValueError(f"a batch header of {length} bytes (expected {BATCH_BODY})")
        ts, _, pid, epoch, _flags, seq, count, nbytes = _BATCH.unpack_from(buf, pos + 8)
        return BatchHeader(pid, epoch, seq, count, nbytes, ts)
    if tag == TAG_CONTROL:
        if length != CONTROL_BODY:
            raise ValueError(f"a marker of {length} bytes (expected {CONTROL_BODY})")
        ts, _, pid, epoch, type_, seq = _CONTROL.unpack_from(buf, pos + 8)
        try:
            kind = ControlType(type_)
        except ValueError:
            raise ValueError(f"a marker of unknown type {type_}") from None
        return Marker(pid, epoch, kind, seq, ts)
    raise ValueError(f"a frame of unknown kind (tag 0x{tag:08x}); a newer Weir wrote it, or it "
                     f"is damaged")


def walk_frames(buf: bytes, pos: int, end: int, ordinal: int, target: int, *,
                verify: bool = False, batch: OpenBatch | None = None
                ) -> tuple[int, int, ParseStop, OpenBatch | None]:
    """Step over frames of ``buf[pos:end]`` from ``ordinal`` until ``target``; returns
    ``(pos, ordinal, why, batch)``: where the walk stopped, why (COUNT: reached ``target``;
    PARTIAL: the bytes end inside a frame, or a batch is not complete in them; BAD: the frame
    at ``pos`` fails its framing, or its CRC when ``verify``), and the batch the walk stopped
    inside (None outside a batch). ``batch`` is the batch the walk starts in, if any.

    A batch that ends before ``target`` is jumped whole (one step) unless ``verify`` asks to
    check its records' CRCs; a batch that ``target`` lies in is entered (its header stepped)
    and walked record by record. Either only when the whole batch is in ``buf[pos:end]``.
    """
    unpack = _HDR.unpack_from
    why = ParseStop.COUNT
    mv = memoryview(buf) if verify else None
    try:
        while ordinal < target:
            if batch is not None and ordinal >= batch.end_ordinal:
                batch = None
            if pos + 20 > end:
                why = ParseStop.PARTIAL
                break
            length, check, _, tag = unpack(buf, pos)
            rend = pos + 8 + length
            if length < MIN_BODY or length > MAX_BODY:
                why = ParseStop.BAD
                break
            if rend > end:
                why = ParseStop.PARTIAL
                break
            if mv is not None and crc32c(mv[pos + 8:rend]) != check:
                why = ParseStop.BAD
                break
            if tag == TAG_BATCH and batch is None:
                if length != BATCH_BODY:
                    why = ParseStop.BAD
                    break
                ts, _, pid, epoch, _f, seq, count, nbytes = _BATCH.unpack_from(buf, pos + 8)
                bend = rend + nbytes
                if bend > end:
                    why = ParseStop.PARTIAL  # not complete (yet): nothing of it is read
                    break
                after = ordinal + 1 + count
                if after <= target and mv is None:
                    pos, ordinal = bend, after  # the whole batch in one step
                    continue
                batch = OpenBatch(BatchHeader(pid, epoch, seq, count, nbytes, ts), ordinal,
                                  after, bend)
            elif tag >= TAG_MIN and tag != NULL_LEN and (
                    batch is not None or (tag != TAG_CONTROL and tag != TAG_BATCH)):
                # an unknown kind of frame, or a header or marker inside a batch (which holds
                # only records), is damage: never stepped over
                why = ParseStop.BAD
                break
            pos = rend
            ordinal += 1
    finally:
        if mv is not None:
            mv.release()
    if batch is not None and ordinal >= batch.end_ordinal:
        batch = None
    return pos, ordinal, why, batch


def scan_frames(buf: bytes, pos: int, offsets, ordinal: int, stop: int, make=None, ctx=None,
                out=None) -> tuple[int, int, ParseStop]:
    """The scout's step: like :func:`~weir.engine.systems.filelog._format.parse_records` (same
    arguments and result), but it builds nothing: plain records are checked (framing and CRC)
    and stepped over, and it stops in front of a batch header or marker (EXT) for its caller."""
    unpack = _HDR.unpack_from
    end = len(buf)
    why = ParseStop.COUNT
    crc = crc32c
    n = 0
    limit = stop - ordinal
    with memoryview(buf) as mv:
        while n < limit:
            if pos + 20 > end:
                why = ParseStop.PARTIAL
                break
            length, check, _, tag = unpack(buf, pos)
            rend = pos + 8 + length
            if rend > end:
                why = ParseStop.PARTIAL if length <= MAX_BODY else ParseStop.BAD
                break
            if length < MIN_BODY or crc(mv[pos + 8:rend]) != check:
                why = ParseStop.BAD
                break
            if tag >= TAG_MIN and tag != NULL_LEN:
                why = ParseStop.EXT
                break
            pos = rend
            n += 1
    return pos, ordinal + n, why


def frame_need(buf: bytes) -> int:
    """Bytes needed from the start of ``buf`` to hold its first frame whole, or its whole
    batch when it is a batch header (for reading past a chunk)."""
    if len(buf) < 20:
        return 20
    length, _, _, tag = _HDR.unpack_from(buf, 0)
    if tag == TAG_BATCH and length == BATCH_BODY and len(buf) >= HEADER_FRAME:
        return HEADER_FRAME + _BATCH.unpack_from(buf, 8)[7]
    return 8 + min(length, MAX_BODY)
