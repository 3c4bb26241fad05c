"""The index file of a sealed segment (``<segment file>.idx``).

It makes ``offset -> file position`` a bisect and carries what retention and compaction need.
All integers little-endian::

    magic "WLIX" | version u16 | flags u16 | base u64 | record_count u64 | next_offset u64
    | sealed_ms i64 | max_timestamp i64 | data_size u64 | sparse_count u32 | reserved u32
    | offsets: record_count x i64          (only with FLAG_DENSE: compacted segments)
    | sparse:  sparse_count x (ordinal u64, position u64)
    | crc32c u32 of everything before it

``ordinal`` is a record's number inside the segment (from 0). A sparse entry says where the
record with that ordinal starts: a byte position in a plain file (one entry every ~64 KiB), or
the position of the zstd frame it begins (one entry per frame) in a compressed file.
``data_size`` is the size of the segment file described: an index whose size does not match
its segment is stale and ignored. Plain and compressed producer segments work without an
index (it is rebuilt by scanning); compacted segments need theirs for their offsets.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from weir.stores._crc import crc32c

from weir.stores.filesafety import atomic_write

__all__ = ["FLAG_DENSE", "FLAG_ZSTD", "INDEX_INTERVAL", "SegmentIndex", "load_index",
           "index_path"]

FLAG_DENSE = 1
FLAG_ZSTD = 2
INDEX_INTERVAL = 64 * 1024
"""Bytes of records between two sparse entries of a plain segment."""

_MAGIC = b"WLIX"
_VERSION = 1
_HEAD = struct.Struct("<4sHHQQQqqQII")


def index_path(segment_path: str) -> str:
    return segment_path + ".idx"


@dataclass(frozen=True)
class SegmentIndex:
    """A sealed segment's index. ``offsets`` is the offset of each record (a ``range`` for a
    plain segment); ``sparse`` is a list of ``(ordinal, position)`` in ordinal order."""

    base: int
    flags: int
    record_count: int
    next_offset: int
    sealed_ms: int
    max_timestamp: int
    data_size: int
    offsets: Sequence[int]
    sparse: list[tuple[int, int]]

    @property
    def dense(self) -> bool:
        return bool(self.flags & FLAG_DENSE)

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_ZSTD)

    def encode(self) -> bytes:
        parts = [_HEAD.pack(_MAGIC, _VERSION, self.flags, self.base, self.record_count,
                            self.next_offset, self.sealed_ms, self.max_timestamp,
                            self.data_size, len(self.sparse), 0)]
        if self.dense:
            parts.append(array("q", self.offsets).tobytes())
        flat = array("Q")
        for ordinal, position in self.sparse:
            flat.append(ordinal)
            flat.append(position)
        parts.append(flat.tobytes())
        body = b"".join(parts)
        return body + struct.pack("<I", crc32c(body))

    def write(self, path: str) -> None:
        atomic_write(path, self.encode())

    @classmethod
    def decode(cls, data: bytes) -> "SegmentIndex":
        """Raises ValueError when the bytes are not a whole, intact index."""
        if len(data) < _HEAD.size + 4:
            raise ValueError("index too short")
        if struct.unpack_from("<I", data, len(data) - 4)[0] != crc32c(memoryview(data)[:-4]):
            raise ValueError("index checksum mismatch")
        (magic, version, flags, base, count, next_offset, sealed_ms, max_ts, data_size,
         n_sparse, _) = _HEAD.unpack_from(data, 0)
        if magic != _MAGIC or version != _VERSION:
            raise ValueError(f"not an index of version {_VERSION}")
        pos = _HEAD.size
        offsets: Sequence[int]
        if flags & FLAG_DENSE:
            dense = array("q")
            dense.frombytes(data[pos:pos + 8 * count])
            pos += 8 * count
            offsets = dense
        else:
            offsets = range(base, base + count)
        flat = array("Q")
        flat.frombytes(data[pos:pos + 16 * n_sparse])
        if len(offsets) != count or len(flat) != 2 * n_sparse:
            raise ValueError("index truncated")
        sparse = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
        return cls(base, flags, count, next_offset, sealed_ms, max_ts, data_size, offsets, sparse)


def load_index(path: str, data_size: int) -> SegmentIndex | None:
    """The index at ``path`` if it exists, is intact and describes a segment file of
    ``data_size`` bytes; None otherwise."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        index = SegmentIndex.decode(data)
    except ValueError:
        return None
    return index if index.data_size == data_size else None
