"""Record framing of the file log: encode, parse, and classify a damaged tail.

One record, all integers little-endian::

    offset  size  field
    0       4     length    u32: number of bytes that follow the CRC field (the *body*)
    4       4     crc       u32: CRC-32C (Castagnoli) of the body, i.e. of bytes [8, 8 + length)
    8       8     timestamp i64: milliseconds since the epoch, -1 (NO_TIMESTAMP) when absent
    16      4     key_len   u32: key length, 0xFFFFFFFF = null key
    20      k     key
    20+k    4     value_len u32: value length, 0xFFFFFFFF = null value (a tombstone)
    24+k    v     value

So the body is ``timestamp | key_len | key | value_len | value``, ``length = 16 + k + v``
(a null counts 0 bytes) and a whole record takes ``8 + length`` bytes. The CRC does not cover
the length field itself: a damaged length makes the CRC check run over the wrong bytes and fail,
and the key/value lengths must add up to ``length``.

Records carry no offset: in a plain segment the n-th record (from 0) has offset ``base + n``;
a compacted segment keeps the offsets of its records in its index (``_index.py``).

``key_len`` values from :data:`TAG_MIN` up (other than ``0xFFFFFFFF``) cannot be a key's length
(a key is shorter than its body); two of them tag the frames of transactions, which are not
data records (:data:`TAG_BATCH`, :data:`TAG_CONTROL`; see ``_txn_format.py`` and
docs/EXACTLY-ONCE.md). They take an offset like a record. :func:`parse_records` stops in front
of such a frame (:attr:`ParseStop.EXT`) and leaves it to its caller.

Example::

    >>> frame = encode_record(b"k", None, 7)
    >>> len(frame), decode_all(frame)
    (25, [(b'k', None, 7)])
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from enum import Enum

from weir.stores._crc import crc32c

__all__ = [
    "NULL_LEN",
    "TAG_MIN",
    "TAG_BATCH",
    "TAG_CONTROL",
    "BATCH_BODY",
    "CONTROL_BODY",
    "HEADER_SIZE",
    "MIN_RECORD",
    "MIN_BODY",
    "MAX_BODY",
    "ParseStop",
    "encode_record",
    "encode_parts",
    "parse_records",
    "skip_records",
    "body_ok",
    "decode_all",
    "TailState",
    "classify_tail",
]

NULL_LEN = 0xFFFFFFFF
"""Key or value length meaning null."""

TAG_MIN = 0x80000000
"""``key_len`` values from here up (other than :data:`NULL_LEN`) tag frames that are not data
records."""

TAG_BATCH = 0xFFFFFFFE
"""``key_len`` of a transactional batch header."""

TAG_CONTROL = 0xFFFFFFFD
"""``key_len`` of a control record (a transaction's commit or abort marker)."""

BATCH_BODY = 32
"""Body length of a batch header: timestamp, tag, producer id, epoch, flags, sequence, count,
bytes."""

CONTROL_BODY = 24
"""Body length of a control record: timestamp, tag, producer id, epoch, type, sequence."""

HEADER_SIZE = 20
"""length + crc + timestamp + key_len: the fixed prefix of every record."""

MIN_RECORD = 24
"""The smallest whole record: the header plus the value length."""

MIN_BODY = 16
"""Body of a record with empty (or null) key and value."""

MAX_BODY = 0x7FFFFFFF
"""Largest body accepted (2 GiB - 1); anything larger is damage, not data."""

_COPY_CRC = 2048
"""Bodies shorter than this are CRC-checked on a bytes copy, longer ones through a memoryview
(a view costs more than copying a few hundred bytes; it saves copying large records)."""

_HDR = struct.Struct("<IIqI")       # length, crc, timestamp, key_len
_U32 = struct.Struct("<I")
_LEN_CRC = struct.Struct("<II")
_TS_KLEN = struct.Struct("<qI")


class ParseStop(Enum):
    """Why a parse loop stopped."""

    COUNT = "count"        # parsed as many records as asked
    PARTIAL = "partial"    # the buffer ends inside a record (or exactly at its end)
    BAD = "bad"            # the record at the stop position failed its length or CRC check
    EXT = "ext"            # the (intact) frame at the stop position is a batch header or marker


def encode_parts(key: bytes | None, value: bytes | None, timestamp: int) -> tuple[bytes, bytes]:
    """The record as ``(length+crc prefix, body)``; joined they are the framed record."""
    if key is None:
        head = _TS_KLEN.pack(timestamp, NULL_LEN)
        key = b""
    else:
        head = _TS_KLEN.pack(timestamp, len(key))
    if value is None:
        body = b"".join((head, key, b"\xff\xff\xff\xff"))
    else:
        body = b"".join((head, key, _U32.pack(len(value)), value))
    return _LEN_CRC.pack(len(body), crc32c(body)), body


def encode_record(key: bytes | None, value: bytes | None, timestamp: int = -1) -> bytes:
    """One framed record (see the module docstring for the layout)."""
    prefix, body = encode_parts(key, value, timestamp)
    return prefix + body


def parse_records(buf: bytes, pos: int, offsets: Sequence[int], ordinal: int, stop: int,
                  make: Callable, ctx: object, out: list) -> tuple[int, int, ParseStop]:
    """Parse whole, CRC-checked records from ``buf[pos:]`` into ``out``.

    The record with ordinal ``i`` in its segment has offset ``offsets[i]`` (a ``range`` for a
    plain segment, an array for a compacted one); records ``ordinal`` up to ``stop``
    (exclusive) are wanted. Each record becomes ``make(ctx, offset, key, value, timestamp,
    size)`` appended to ``out``; ``size`` is the key's plus the value's bytes (Samza's
    envelope size; the record takes ``size + 24`` bytes in the file). Returns
    ``(pos, ordinal, why)`` where ``pos``/``ordinal`` point at the first record not consumed
    and ``why`` is COUNT (reached ``stop``), PARTIAL (the buffer ends inside or right after a
    record), BAD (the record at ``pos`` failed its length or CRC check) or EXT (the frame at
    ``pos`` passed its CRC check but is a batch header or a marker, not a data record: the
    caller decides; an unknown tag is EXT too and the caller refuses it).

    This is the consumers' hot loop: one ``unpack_from``, one CRC and two slices per record.
    A value's length field is read only when it can be null (the body ends right after it):
    otherwise the CRC-checked body length fixes where the value ends. Telling frames apart
    costs nothing: keyed records take the first branch of the same comparison as before.
    """
    unpack_hdr = _HDR.unpack_from
    mv = memoryview(buf)
    append = out.append
    crc = crc32c
    null = NULL_LEN
    end = len(buf)
    before = len(out)
    why = ParseStop.COUNT
    try:
        for offset in offsets[ordinal:stop]:
            length, check, ts, klen = unpack_hdr(buf, pos)
            rend = pos + 8 + length
            if rend > end:
                why = ParseStop.PARTIAL if length <= MAX_BODY else ParseStop.BAD
                break
            # A small body is checked on a copy (cheaper than a memoryview slice), a large
            # one through the view (no copy).
            if crc(buf[pos + 8:rend] if length < _COPY_CRC else mv[pos + 8:rend]) != check:
                why = ParseStop.BAD
                break
            if klen < 0x80000000:
                p = pos + 20 + klen
                key = buf[pos + 20:p]
                p += 4
            elif klen == null:
                key = None
                p = pos + 24
            else:
                why = ParseStop.EXT
                break
            if p < rend:
                value = buf[p:rend]
            elif p == rend:
                vlen = _U32.unpack_from(buf, p - 4)[0]
                if vlen == 0:
                    value = b""
                elif vlen == null:
                    value = None
                else:
                    why = ParseStop.BAD
                    break
            else:
                why = ParseStop.BAD
                break
            append(make(ctx, offset, key, value, ts, length - 16))
            pos = rend
    except struct.error:  # fewer than 20 bytes left: the header itself is partial
        why = ParseStop.PARTIAL
    finally:
        mv.release()
    return pos, ordinal + len(out) - before, why


def skip_records(buf: bytes, pos: int, end: int, count: int, *, verify: bool = False
                 ) -> tuple[int, int, ParseStop]:
    """Step over up to ``count`` whole records in ``buf[pos:end]`` checking their framing
    (and their CRC when ``verify``). Returns ``(pos, skipped, why)``."""
    unpack_lc = _LEN_CRC.unpack_from
    skipped = 0
    why = ParseStop.COUNT
    mv = memoryview(buf) if verify else None
    try:
        while skipped < count:
            if pos + 24 > end:
                why = ParseStop.PARTIAL
                break
            length, check = unpack_lc(buf, pos)
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
            pos = rend
            skipped += 1
    finally:
        if mv is not None:
            mv.release()
    return pos, skipped, why


def body_ok(buf: bytes, start: int, end: int, check: int) -> bool:
    """CRC and inner lengths of the body ``buf[start:end]`` (a batch header or a marker has
    its fixed length)."""
    with memoryview(buf) as mv:
        if crc32c(mv[start:end]) != check:
            return False
    klen = _U32.unpack_from(buf, start + 8)[0]
    if klen == TAG_BATCH:
        return end - start == BATCH_BODY
    if klen == TAG_CONTROL:
        return end - start == CONTROL_BODY
    if TAG_MIN <= klen < NULL_LEN:
        return False
    p = start + 12 + (0 if klen == NULL_LEN else klen)
    if p + 4 > end:
        return False
    vlen = _U32.unpack_from(buf, p)[0]
    return p + 4 + (0 if vlen == NULL_LEN else vlen) == end


def decode_all(buf: bytes) -> list[tuple[bytes | None, bytes | None, int]]:
    """Every data record of a buffer holding whole frames, as ``(key, value, timestamp)``;
    batch headers and markers are stepped over. Raises ValueError at the first bad or partial
    record (for tools and tests)."""
    out: list = []
    pos = 0
    while True:
        pos, _, why = parse_records(buf, pos, range(len(buf)), 0, len(buf),
                                    lambda c, o, k, v, t, s: (k, v, t), None, out)
        if why is not ParseStop.EXT:
            break
        pos += 8 + _U32.unpack_from(buf, pos)[0]
    if pos != len(buf):
        raise ValueError(f"bad or partial record at byte {pos} ({why.value})")
    return out


_MAX_GARBAGE = 16 << 20
"""A damaged tail longer than this is never treated as torn: no single write is that long
unless it is one record, and a record's own length field would then mark it as torn."""


class TailState(Enum):
    """What follows the last good record of an active segment."""

    CLEAN = "clean"        # nothing
    TORN = "torn"          # an incomplete or damaged final record: a crash mid-write
    CORRUPT = "corrupt"    # damage followed by at least one valid record


def classify_tail(buf: bytes, pos: int) -> TailState:
    """Classify ``buf[pos:]``, the bytes after the last good record of an active segment.

    TORN when they are only the beginning of a record (shorter than its header or its declared
    length, or a complete record with a bad CRC that ends exactly at the end of the file),
    zero fill (power loss after the size grew), or garbage in which no valid record starts.
    CORRUPT when a valid record starts anywhere after the damaged one -- also when the damaged
    record's length field points past the end of the file (a flipped length in the middle of
    a log looks like that): truncating there would lose records, so the operator must decide.
    """
    end = len(buf)
    if pos >= end:
        return TailState.CLEAN
    if end - pos < MIN_RECORD:
        return TailState.TORN
    length = _LEN_CRC.unpack_from(buf, pos)[0]
    if MIN_BODY <= length <= MAX_BODY and pos + 8 + length >= end:
        if pos + 8 + length == end:
            return TailState.TORN  # a whole last record with a bad CRC: nothing can follow
        # Declared longer than the file: a record cut short, unless valid records follow
        # (then the length field itself is damaged). A single record longer than the scan
        # limit that was torn is only searched in its first part.
        window = buf[:min(end, pos + 1 + _MAX_GARBAGE)]
        return TailState.CORRUPT if _find_valid_record(window, pos + 1) >= 0 else TailState.TORN
    if buf.count(0, pos) == end - pos:
        return TailState.TORN
    if end - pos > _MAX_GARBAGE:
        return TailState.CORRUPT
    return TailState.CORRUPT if _find_valid_record(buf, pos + 1) >= 0 else TailState.TORN


def _find_valid_record(buf: bytes, start: int) -> int:
    """The first position ``>= start`` where a complete record with a good CRC begins, or -1.
    Only used on the rare repair path. The length field of every position is read in C
    (four ``array`` views, one per alignment); only positions whose length fits are checked."""
    end = len(buf)
    last = end - MIN_RECORD  # the last position a whole record can start at
    if last < start:
        return -1
    unpack_lc = _LEN_CRC.unpack_from
    candidates: list[int] = []
    for shift in range(4):
        first = start + shift
        count = (end - first) // 4
        if count <= 0:
            continue
        words = array("I")
        words.frombytes(buf[first:first + 4 * count])
        if sys.byteorder != "little":
            words.byteswap()
        room = end - first
        candidates.extend(first + 4 * i for i in
                          [i for i, length in enumerate(words) if MIN_BODY <= length <= room]
                          if first + 4 * i <= last
                          and first + 4 * i + 8 + words[i] <= end)
    unpack_u32 = _U32.unpack_from
    for q in sorted(candidates):
        length, check = unpack_lc(buf, q)
        # the inner lengths first (cheap), the CRC only for framing that adds up
        klen = unpack_u32(buf, q + 16)[0]
        if klen == TAG_BATCH or klen == TAG_CONTROL:  # a batch header or a marker is valid too
            if body_ok(buf, q + 8, q + 8 + length, check):
                return q
            continue
        p = q + 20 + (0 if klen == NULL_LEN else klen)
        if p + 4 > q + 8 + length:
            continue
        vlen = unpack_u32(buf, p)[0]
        if p + 4 + (0 if vlen == NULL_LEN else vlen) != q + 8 + length:
            continue
        if body_ok(buf, q + 8, q + 8 + length, check):
            return q
    return -1
