"""The tail hint of an active segment (``<segment file>.tail``): where to resume counting.

An active (plain, generation 0) segment has no index: its record count is known only by
walking its records. The hint lets whoever needs that count -- the admin's partition metadata,
a writer reopening the partition -- walk only the segment's tail: it says "record ``ordinal``
of the segment starts at byte ``position``", plus what a walk from 0 would have collected
before it (the sparse index entries and the largest timestamp). All integers little-endian::

    magic "WLTH" | version u16 | reserved u16 | inode u64 | ordinal u64 | position u64
    | max_timestamp i64 | sparse_count u32 | sparse: sparse_count x (ordinal u64, position u64)
    | crc32c u32 of everything before it

The writer writes it after an fsync (so every record before ``position`` is durable), at most
once per :data:`HINT_INTERVAL` bytes and when it closes or ends the stream. It is a hint: it is
written without fsync, and a hint that is missing, damaged, of another file (``inode``) or past
the end of the file is ignored. A walk that starts at a hinted position and does not parse is
redone from byte 0 -- a hint can make start-up faster, never change what it finds.
"""

from __future__ import annotations

import os
import struct
from array import array
from dataclasses import dataclass

from weir.stores.filesafety import atomic_write
from weir.stores._crc import crc32c

__all__ = ["HINT_INTERVAL", "TailHint", "tail_path", "load_tail_hint", "remove_tail_hint"]

HINT_INTERVAL = 1 << 20
"""Bytes a writer syncs between two hints: a start-up walks at most about this much."""

_MAGIC = b"WLTH"
_VERSION = 1
_HEAD = struct.Struct("<4sHHQQQqI")


def tail_path(segment_path: str) -> str:
    return segment_path + ".tail"


@dataclass(frozen=True)
class TailHint:
    """Record ``ordinal`` of the segment (file ``inode``) starts at byte ``position``; the
    records before it have the index entries ``sparse`` and the largest timestamp
    ``max_timestamp``."""

    inode: int
    ordinal: int
    position: int
    max_timestamp: int
    sparse: tuple[tuple[int, int], ...]

    def encode(self) -> bytes:
        flat = array("Q")
        for ordinal, position in self.sparse:
            flat.append(ordinal)
            flat.append(position)
        body = _HEAD.pack(_MAGIC, _VERSION, 0, self.inode, self.ordinal, self.position,
                          self.max_timestamp, len(self.sparse)) + flat.tobytes()
        return body + struct.pack("<I", crc32c(body))

    @classmethod
    def decode(cls, data: bytes) -> "TailHint":
        """Raises ValueError when the bytes are not a whole, intact hint."""
        if len(data) < _HEAD.size + 4:
            raise ValueError("tail hint too short")
        if struct.unpack_from("<I", data, len(data) - 4)[0] != crc32c(memoryview(data)[:-4]):
            raise ValueError("tail hint checksum mismatch")
        magic, version, _, inode, ordinal, position, max_ts, n = _HEAD.unpack_from(data, 0)
        if magic != _MAGIC or version != _VERSION:
            raise ValueError(f"not a tail hint of version {_VERSION}")
        flat = array("Q")
        flat.frombytes(data[_HEAD.size:len(data) - 4])
        if len(flat) != 2 * n:
            raise ValueError("tail hint truncated")
        sparse = tuple((flat[i], flat[i + 1]) for i in range(0, len(flat), 2))
        return cls(inode, ordinal, position, max_ts, sparse)

    def write(self, segment_path: str) -> None:
        """Replace the hint atomically (:func:`weir.stores.filesafety.atomic_write`)."""
        atomic_write(tail_path(segment_path), self.encode())


def load_tail_hint(segment_path: str, st: os.stat_result) -> TailHint | None:
    """The hint of the segment whose ``fstat`` is ``st``, if there is a usable one."""
    try:
        with open(tail_path(segment_path), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        hint = TailHint.decode(data)
    except ValueError:
        return None
    if hint.inode != st.st_ino or hint.position > st.st_size:
        return None
    return hint


def remove_tail_hint(segment_path: str) -> None:
    try:
        os.unlink(tail_path(segment_path))
    except FileNotFoundError:
        pass
