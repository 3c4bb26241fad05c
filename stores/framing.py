"""The record-batch frame shared by Weir's changelog files.

A *frame* holds one batch of changelog records, ``keys[i] -> values[i]`` (``None`` value = a
tombstone)::

    frame   = u32 payload_len | u32 crc32c(payload) | u32 record_count | payload
    payload = msgpack [keys: array of bin, values: array of (bin | nil)]

(all integers big-endian). :class:`weir.testing.FileChangelog` appends frames to one
file; the Spark state provider (``weir.engine.spark``) writes the changelog and the snapshot of
each state version as a zstd stream of the same frames, so a store's changes have one encoding
and one checksum rule wherever they are kept. A frame never has zero records, so zero-filled
bytes never pass for one; a frame is valid only when its CRC matches.

Example::

    >>> frame = encode_frame([b"a", b"b"], [b"1", None])
    >>> decode_frame(frame, 0)
    ((b'a', b'b'), (b'1', None), 25)
"""

from __future__ import annotations

import struct

from weir.stores import _crc as crc32c
import msgpack

__all__ = ["FRAME_HEADER", "encode_frame", "decode_frame", "parse_frame_header", "FrameError"]

FRAME_HEADER = struct.Struct(">III")
"""``(payload_len, crc32c, record_count)`` in front of every frame's payload."""


class FrameError(ValueError):
    """A frame that does not parse: short, zero records, or a CRC mismatch. ``position`` is
    the frame's byte position in the buffer it was read from."""

    def __init__(self, message: str, position: int):
        super().__init__(message)
        self.position = position


def encode_frame(keys: list[bytes], values: list[bytes | None]) -> bytes:
    """One frame holding ``keys[i] -> values[i]``; ``keys`` must not be empty."""
    if not keys:
        raise ValueError("a frame holds at least one record")
    payload = msgpack.packb((keys, values))
    return FRAME_HEADER.pack(len(payload), crc32c.crc32c(payload), len(keys)) + payload


def parse_frame_header(data: bytes | memoryview, pos: int) -> tuple[int, int] | None:
    """``(record count, end)`` of a valid frame at ``pos`` in ``data``, else None."""
    if pos + FRAME_HEADER.size > len(data):
        return None
    length, crc, count = FRAME_HEADER.unpack_from(data, pos)
    start = pos + FRAME_HEADER.size
    end = start + length
    if count == 0 or end > len(data) or crc32c.crc32c(data[start:end]) != crc:
        return None
    return count, end


def decode_frame(data: bytes | memoryview, pos: int
                 ) -> tuple[tuple[bytes, ...], tuple[bytes | None, ...], int]:
    """``(keys, values, end)`` of the frame at ``pos``; :class:`FrameError` when it is not a
    valid frame (short, zero records, CRC mismatch, or a payload that does not decode)."""
    if pos + FRAME_HEADER.size > len(data):
        raise FrameError(f"frame header cut short at byte {pos}", pos)
    length, crc, count = FRAME_HEADER.unpack_from(data, pos)
    start = pos + FRAME_HEADER.size
    end = start + length
    if end > len(data):
        raise FrameError(f"frame at byte {pos} says {length} payload bytes but only "
                         f"{len(data) - start} follow", pos)
    payload = data[start:end]
    if count == 0 or crc32c.crc32c(payload) != crc:
        raise FrameError(f"frame at byte {pos} fails its CRC-32C check", pos)
    try:
        keys, values = msgpack.unpackb(payload, use_list=False)
    except Exception as exc:  # a CRC collision on garbage: still damage
        raise FrameError(f"frame at byte {pos} does not decode: {exc}", pos) from exc
    if len(keys) != count or len(values) != count:
        raise FrameError(f"frame at byte {pos} says {count} records but holds {len(keys)} keys "
                         f"and {len(values)} values", pos)
    return keys, values, end
