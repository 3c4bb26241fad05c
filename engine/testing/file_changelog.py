"""A small file-backed changelog: a ChangelogSink and ChangelogSource in one object.

For tests, examples and benchmarks (``from weir.testing import FileChangelog``); the real
changelog is a stream written through a system
producer. Records get offsets 0, 1, 2, ... in append order. Records reach the file in
*batches*: ``append_columns(keys, values)`` (what the logged layer calls for every write-down)
and ``append_all(pairs)`` frame their records as one batch at once; single ``append`` calls are
collected and framed at ``flush()``, every 1,024 records, or before any read. Framed batches sit in the OS page cache until
``flush()``, which also fsyncs: after ``flush()`` returns every appended record is durable.
Nothing per record stays on the Python heap, so a long interval between flushes costs no
memory and no garbage-collector time.

File format (``WCLG`` magic, version 1)::

    file   = b"WCLG\\x00\\x00\\x00\\x01" batch*
    batch  = u32 payload_len | u32 crc32c(payload) | u32 record_count | payload
    payload = msgpack [keys: array of bin, values: array of (bin | nil)]   (nil = tombstone)

(a batch is a :mod:`weir.stores.framing` frame, the encoding the Spark state provider's
changelog and snapshot files use too.)

A batch is all-or-nothing: a crash mid-write leaves a torn final batch, which the next open
detects (short read or CRC mismatch) and truncates, together with anything after it that is not
a valid batch (a power cut can leave zero-filled blocks at the end; a batch never has zero
records, so zeros never pass for one). A bad batch followed *anywhere* by a valid one is
corruption, not a torn write (whatever its length field says), and raises
:class:`~weir.stores.errors.StoreError` naming the file and byte position.

Example::

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "counts.changelog"
    >>> with FileChangelog(path) as log:
    ...     log.append(b"a", b"1"); log.append(b"a", None); log.flush()
    ...     list(log.read(0, log.newest_offset()))
    [(0, b'a', b'1'), (1, b'a', None)]
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from pathlib import Path

from weir.stores import _crc as crc32c
import msgpack

from weir.stores.changelog import NO_OFFSET, Changelog, ChangelogRecord
from weir.stores.errors import StoreClosedError, StoreError
from weir.stores.filesafety import fsync_dir
from weir.stores.framing import FRAME_HEADER as _HEADER
from weir.stores.framing import encode_frame, parse_frame_header

__all__ = ["FileChangelog"]

_MAGIC = b"WCLG\x00\x00\x00\x01"
_PENDING_LIMIT = 1_024


class FileChangelog(Changelog):
    """Append-only file of framed record batches; see the module docstring."""

    def __init__(self, path: str | os.PathLike[str], *, name: str | None = None):
        self.path = Path(path)
        self.name = name or self.path.name
        self._pending_keys: list[bytes] = []
        self._pending_values: list[bytes | None] = []
        # One entry per batch in the file: its first offset, byte position and record count.
        self._batch_offsets: list[int] = []
        self._batch_positions: list[int] = []
        self._batch_counts: list[int] = []
        self._next_offset = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        end = self._scan()
        self._file = open(self.path, "r+b" if self.path.exists() else "w+b")
        if end == 0:
            self._file.write(_MAGIC)
            end = len(_MAGIC)
            # flush() fsyncs the file; its name must survive a power cut as well.
            fsync_dir(self.path.parent)
        self._file.truncate(end)
        self._file.seek(end)
        self._end = end
        self._closed = False

    # -- opening -----------------------------------------------------------------------------
    def _scan(self) -> int:
        """Index the batches of an existing file; return where the next batch goes (0 = new)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return 0
        with open(self.path, "rb") as f:
            data = f.read()
        if len(data) < len(_MAGIC) and _MAGIC.startswith(data):
            return 0  # torn while the file was being created: start afresh
        if not data.startswith(_MAGIC):
            raise StoreError(f"{self.path} is not a Weir file changelog (bad magic {data[:8]!r}); "
                             f"move it away or point the changelog elsewhere", store=self.name)
        pos = len(_MAGIC)
        size = len(data)
        while pos < size:
            frame = self._parse_frame(data, pos)
            if frame is None:
                later = self._next_good_frame(data, pos + 1)
                if later is not None:
                    raise StoreError(
                        f"corrupt batch at byte {pos} of {self.path} (offset {self._next_offset}) "
                        f"followed by a valid batch at byte {later}; the changelog is damaged: "
                        f"restore it from a copy or rebuild the store from its source",
                        store=self.name)
                break  # torn final batch from a crash mid-write: dropped by truncation
            count, end = frame
            self._index(pos, count)
            pos = end
        return pos

    @staticmethod
    def _parse_frame(data: bytes, pos: int) -> tuple[int, int] | None:
        """``(record count, end)`` of a valid batch at ``pos``, else None. An all-zero header
        has a matching CRC (crc32c of nothing is 0) but no records: not a batch."""
        return parse_frame_header(data, pos)

    @classmethod
    def _next_good_frame(cls, data: bytes, start: int) -> int | None:
        """Byte position of the first valid batch at or after ``start``, if any.

        A torn tail is at most the last batch plus what a power cut zero-filled, and a corrupt
        batch is followed by the next batch within its own length, so either way this looks
        at about one batch's worth of positions."""
        parse, last = cls._parse_frame, len(data) - _HEADER.size
        for pos in range(start, last + 1):
            if parse(data, pos) is not None:
                return pos
        return None

    def _index(self, pos: int, count: int) -> None:
        self._batch_offsets.append(self._next_offset)
        self._batch_positions.append(pos)
        self._batch_counts.append(count)
        self._next_offset += count

    # -- ChangelogSink -----------------------------------------------------------------------
    def append(self, key: bytes, value: bytes | None) -> None:
        """Buffer one record (``value`` None = tombstone). Durable after ``flush()``."""
        if self._closed:
            raise self._closed_error()
        keys = self._pending_keys
        keys.append(key)
        self._pending_values.append(value)
        if len(keys) >= _PENDING_LIMIT:
            self._write_pending()

    def append_columns(self, keys: list[bytes], values: list[bytes | None]) -> None:
        """Append ``keys[i] -> values[i]`` for every i as one batch (the logged layer's call)."""
        self._check_open()
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        if self._pending_keys:
            self._write_pending()
        if keys:
            self._write_batch(keys, values)

    def append_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Append ``(key, value)`` pairs as one batch."""
        items = items if isinstance(items, list) else list(items)
        self.append_columns([k for k, _ in items], [v for _, v in items])

    def flush(self) -> None:
        """Write pending records as one batch and fsync the file."""
        self._check_open()
        self._write_pending()
        self._file.flush()
        os.fsync(self._file.fileno())

    def _write_pending(self) -> None:
        if self._pending_keys:
            self._check_open()
            keys, values = self._pending_keys, self._pending_values
            self._pending_keys, self._pending_values = [], []
            self._write_batch(keys, values)

    def _write_batch(self, keys: list[bytes], values: list[bytes | None]) -> None:
        frame = encode_frame(keys, values)
        self._file.write(frame)
        self._index(self._end, len(keys))
        self._end += len(frame)

    # -- ChangelogSource ---------------------------------------------------------------------
    def oldest_offset(self) -> int:
        """Always 0: this changelog is never trimmed or compacted."""
        return 0

    def newest_offset(self) -> int:
        """Offset of the last record appended, or ``NO_OFFSET`` when there is none."""
        total = self._next_offset + len(self._pending_keys)
        return total - 1 if total else NO_OFFSET

    def read(self, start: int, end: int) -> Iterator[ChangelogRecord]:
        """Records with ``start <= offset <= end``, in offset order."""
        self._check_open()
        self._write_pending()
        self._file.flush()
        if end < start or start >= self._next_offset:
            return iter(())
        return self._read(max(start, 0), min(end, self._next_offset - 1))

    def _read(self, start: int, end: int) -> Iterator[ChangelogRecord]:
        first = bisect_right(self._batch_offsets, start) - 1
        with open(self.path, "rb") as f:
            for i in range(first, len(self._batch_offsets)):
                base = self._batch_offsets[i]
                if base > end:
                    return
                f.seek(self._batch_positions[i])
                length, crc, count = _HEADER.unpack(f.read(_HEADER.size))
                payload = f.read(length)
                if crc32c.crc32c(payload) != crc:
                    raise StoreError(f"corrupt batch at byte {self._batch_positions[i]} of "
                                     f"{self.path} (offsets {base}..{base + count - 1}); the "
                                     f"file changed under us", store=self.name)
                keys, values = msgpack.unpackb(payload, use_list=False)
                lo = max(start - base, 0)
                hi = min(end - base + 1, count)
                for j in range(lo, hi):
                    yield base + j, keys[j], values[j]

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def size_bytes(self) -> int:
        """Bytes of the framed batches (records still collected by ``append`` excluded)."""
        return self._end

    def close(self) -> None:
        """Flush (write + fsync) and close the file. A second close does nothing."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._file.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"file changelog {self.path} used after close(); open a new "
                                f"FileChangelog on it", store=self.name)

    def __enter__(self) -> "FileChangelog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FileChangelog {self.path} next_offset={self._next_offset}>"
