"""Reading a partition from any process: sequential, tailing, across segments.

A :class:`PartitionReader` delivers records in offset order from a start offset. It reads
segment files with ``os.pread`` in large chunks and parses them with ``struct.unpack_from``
(``_format.parse_records``). It never takes a lock and never writes.

* **Tailing**: at the end of the active segment it re-reads from the first record it has not
  delivered on every call, so records appear as soon as the writer has written them. When the
  writer rolls, the reader finishes the old segment, then moves on.
* **Torn tail**: a partial last record is "not there yet" (it is being written, or it was torn
  by a crash and the next writer will cut it off), never an error.
* **Corruption**: a record that fails its CRC in a sealed segment, or in the active segment
  with valid records after it, raises ``CorruptRecordError`` naming stream, partition, offset
  and byte position.
* **Gaps**: compacted segments skip offsets; the reader just delivers the next record.
* **Out of range**: an offset before the oldest retained one (deleted by retention) or beyond
  the end is handled per :class:`~engine.systems.filelog.settings.OffsetReset`.
* **End of stream**: :attr:`PartitionReader.ended` turns true once every record before the
  partition's end marker was delivered.

Example::

    >>> # reader = PartitionReader(root, "clicks", 0, offset=0)
    >>> # records = reader.read_records(1000)   # [LogRecord(offset, key, value, timestamp, size)]
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from enum import Enum
from typing import NamedTuple

import zstandard

from engine.errors import CorruptRecordError

from ._format import MAX_BODY, ParseStop, TailState, classify_tail, parse_records, skip_records
from .errors import OffsetOutOfRangeError
from .segment import Segment, build_index, index_for, list_segments
from .settings import OffsetReset
from .stream import partition_dir, read_end_marker

__all__ = ["LogRecord", "PartitionReader", "partition_bounds"]

_log = logging.getLogger(__name__)
_NO_LIMIT = 1 << 62
_SKIP_CHUNK = 4 << 20


class LogRecord(NamedTuple):
    """One record read by tools: offset, key, value (None = tombstone), timestamp, framed size."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    size: int


def _make_record(ctx: object, offset: int, key, value, ts: int, size: int) -> LogRecord:
    return LogRecord(offset, key, value, ts, size)


class _Step(Enum):
    COUNT = "count"    # delivered what was asked
    END = "end"        # the (sealed) segment has nothing more
    TAIL = "tail"      # the active segment has nothing more yet


class _Cursor:
    """Position inside one open segment file."""

    def __init__(self, reader: "PartitionReader", segment: Segment, fd: int,
                 offsets: Sequence[int], limit: int, active: bool):
        self.reader, self.segment, self.fd = reader, segment, fd
        self.offsets, self.active = offsets, active
        self.set_limit(limit)
        self.ordinal = 0
        self.buf = b""
        self.bpos = 0
        self.fpos = 0              # plain: file position of buf[0]; zstd: frame number
        self.frames: list[tuple[int, int]] = []
        self.data_size = 0

    def set_limit(self, limit: int) -> None:
        """Records at offsets ``>= limit`` belong to the next segment: stop before them."""
        self.limit = limit
        self.limit_ordinal = min(bisect_left(self.offsets, limit), len(self.offsets))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def next_offset(self) -> int:
        """The offset after the last record delivered from this segment (or its first)."""
        return self.offsets[self.ordinal - 1] + 1 if self.ordinal else self.segment.base

    # -- plain segments --------------------------------------------------------------------
    def read_plain(self, max_n: int, make: Callable, ctx: object, out: list) -> tuple[int, _Step]:
        got = 0
        refreshed = retried = False
        while True:
            buf = self.buf
            start = self.ordinal
            if start >= self.limit_ordinal:
                return got, _Step.END
            pos, self.ordinal, why = parse_records(buf, self.bpos, self.offsets, start,
                                                   min(start + max_n - got, self.limit_ordinal),
                                                   make, ctx, out)
            got += self.ordinal - start
            self.bpos = pos
            if why is ParseStop.COUNT:
                return got, (_Step.END if self.ordinal >= self.limit_ordinal else _Step.COUNT)
            leftover = len(buf) - pos
            if why is ParseStop.BAD:
                if refreshed or retried or not self.active:
                    return got, self._bad_plain()
                retried = True
                leftover = 0  # a torn tail may have been cut off and rewritten: read afresh
            elif refreshed:  # PARTIAL after reading up to the end of the file
                return got, self._eof_plain(leftover)
            want = self.reader.read_bytes
            if leftover >= 4:
                length = int.from_bytes(buf[pos:pos + 4], "little")
                if length <= MAX_BODY:
                    want = max(want, 8 + length)
            fpos = self._file_pos()
            fresh = os.pread(self.fd, want, fpos)
            self.fpos, self.buf, self.bpos = fpos, fresh, 0
            refreshed = len(fresh) < want
            if leftover and len(fresh) <= leftover:
                return got, self._eof_plain(len(fresh))

    def _file_pos(self) -> int:
        return self.fpos + self.bpos

    def _eof_plain(self, leftover: int) -> _Step:
        if self.active:
            return _Step.TAIL
        if leftover:
            raise self._corrupt("the sealed segment ends inside a record", self._file_pos())
        return _Step.END

    def _bad_plain(self) -> _Step:
        position = self._file_pos()
        if self.active:
            size = os.fstat(self.fd).st_size
            rest = os.pread(self.fd, size - position, position)
            if classify_tail(rest, 0) is not TailState.CORRUPT:
                self.fpos, self.buf, self.bpos = position, b"", 0  # read afresh next time
                return _Step.TAIL
        raise self._corrupt("record failed its length/CRC check", position)

    def _corrupt(self, message: str, position: int) -> CorruptRecordError:
        offset = (self.offsets[self.ordinal] if self.ordinal < len(self.offsets)
                  else self.segment.base + self.ordinal)
        return CorruptRecordError(message, stream=self.reader.stream,
                                  partition=self.reader.partition, offset=offset,
                                  path=self.segment.path, position=position)

    def seek_plain(self, ordinal: int, hint: tuple[int, int], *, verify: bool = False) -> int:
        """Position at ``ordinal`` starting from ``hint = (ordinal, position)``; returns the
        ordinal reached (smaller if the file ends first)."""
        self.ordinal, self.fpos = _skip_in_file(self.fd, ordinal, hint, verify)
        self.buf, self.bpos = b"", 0
        return self.ordinal

    # -- compressed segments ---------------------------------------------------------------
    def read_zst(self, max_n: int, make: Callable, ctx: object, out: list) -> tuple[int, _Step]:
        got = 0
        while True:
            start = self.ordinal
            if start >= self.limit_ordinal:
                return got, _Step.END
            pos, self.ordinal, why = parse_records(self.buf, self.bpos, self.offsets, start,
                                                   min(start + max_n - got, self.limit_ordinal),
                                                   make, ctx, out)
            got += self.ordinal - start
            self.bpos = pos
            if why is ParseStop.COUNT:
                return got, (_Step.END if self.ordinal >= self.limit_ordinal else _Step.COUNT)
            if why is ParseStop.BAD or pos < len(self.buf):
                raise self._corrupt(f"record failed its length/CRC check at byte {pos} of "
                                    f"zstd frame {self.fpos - 1}",
                                    self.frames[self.fpos - 1][1] if self.fpos else 0)
            if self.fpos >= len(self.frames):
                return got, _Step.END
            self.load_frame(self.fpos)

    def load_frame(self, number: int) -> None:
        cpos = self.frames[number][1]
        cend = self.frames[number + 1][1] if number + 1 < len(self.frames) else self.data_size
        try:
            self.buf = zstandard.ZstdDecompressor().decompress(os.pread(self.fd, cend - cpos, cpos))
        except zstandard.ZstdError as exc:
            self.ordinal = self.frames[number][0]
            raise self._corrupt(f"zstd frame {number} does not decompress ({exc})", cpos) from None
        self.ordinal, self.bpos, self.fpos = self.frames[number][0], 0, number + 1

    def read(self, max_n: int, make: Callable, ctx: object, out: list) -> tuple[int, _Step]:
        if self.segment.compressed:
            return self.read_zst(max_n, make, ctx, out)
        return self.read_plain(max_n, make, ctx, out)


class PartitionReader:
    """Reads one partition from ``offset`` on (see the module docstring)."""

    def __init__(self, root: str, stream: str, partition: int, offset: int, *,
                 read_bytes: int = 1 << 20, reset: OffsetReset = OffsetReset.OLDEST,
                 reset_key: str = "systems.<system>.consumer.auto.offset.reset"):
        self.stream, self.partition = stream, partition
        self.read_bytes = read_bytes
        self._dir = partition_dir(root, stream, partition)
        self._next = offset
        self._reset, self._reset_key = reset, reset_key
        self._cur: _Cursor | None = None
        self._positioned = False
        self._end: int | None = None
        self.ended = False

    @property
    def position(self) -> int:
        """The smallest offset not delivered yet."""
        return self._next

    @property
    def end_offset(self) -> int | None:
        """The upcoming offset recorded by the end marker, once seen."""
        return self._end

    def close(self) -> None:
        if self._cur is not None:
            self._cur.close()
            self._cur = None

    def read_records(self, max_records: int) -> list[LogRecord]:
        out: list[LogRecord] = []
        self.read(max_records, _make_record, None, out)
        return out

    def read(self, max_records: int, make: Callable, ctx: object, out: list) -> int:
        """Append up to ``max_records`` records, each built as
        ``make(ctx, offset, key, value, timestamp, size)``, to ``out``; returns how many."""
        got = 0
        while got < max_records and not self.ended:
            cur = self._cur
            if cur is None:
                cur = self._cur = self._open(self._next)
                if cur is None:
                    break
            n, step = cur.read(max_records - got, make, ctx, out)
            got += n
            if n:
                self._next = cur.next_offset
            if step is _Step.COUNT:
                break
            if step is _Step.END:
                self._next = max(self._next, cur.limit)
                cur.close()
                self._cur = None
                continue
            # TAIL: nothing more in the active segment right now
            if not self._sealed_since(cur):
                self._check_end()
                break
        return got

    def _sealed_since(self, cur: _Cursor) -> bool:
        """Whether the writer rolled past ``cur``'s segment; if so it becomes sealed with the
        next base as its limit (the caller reads it to its end once more)."""
        segments = list_segments(self._dir)
        i = bisect_right([s.base for s in segments], cur.segment.base)
        if i >= len(segments):
            return False
        cur.active = False
        cur.set_limit(segments[i].base)
        return True

    def _check_end(self) -> None:
        if self._end is None:
            self._end = read_end_marker(self._dir)
        if self._end is not None and self._next >= self._end:
            self.ended = True

    # -- positioning -----------------------------------------------------------------------
    def _open(self, offset: int, attempts: int = 5) -> _Cursor | None:
        for _ in range(attempts):
            try:
                return self._open_once(offset)
            except FileNotFoundError:  # maintenance replaced a file between listing and open
                continue
        return self._open_once(offset)

    def _open_once(self, offset: int) -> _Cursor | None:
        segments = list_segments(self._dir) if os.path.isdir(self._dir) else []
        if not segments:
            if offset != 0 and not self._positioned:
                self._next = offset = self._out_of_range(offset, 0, 0, segments)
            self._check_end()
            return None
        if offset < segments[0].base:
            self._next = offset = self._out_of_range(offset, segments[0].base, None, segments)
        bases = [s.base for s in segments]
        i = max(bisect_right(bases, offset) - 1, 0)
        segment = segments[i]
        active = i == len(segments) - 1
        limit = _NO_LIMIT if active else segments[i + 1].base
        fd = os.open(segment.path, os.O_RDONLY)
        try:
            cur = self._position(segment, fd, limit, active, offset)
        except BaseException:
            os.close(fd)
            raise
        if cur is None:  # beyond the end of the active segment
            os.close(fd)
            upcoming = _active_upcoming(segment)
            self._next = self._out_of_range(offset, segments[0].base, upcoming, segments)
            return self._open_once(self._next)
        self._positioned = True
        return cur

    def _position(self, segment: Segment, fd: int, limit: int, active: bool,
                  offset: int) -> _Cursor | None:
        if active:
            cur = _Cursor(self, segment, fd, range(segment.base, _NO_LIMIT), limit, True)
            target = offset - segment.base
            if cur.seek_plain(target, (0, 0), verify=True) < target:
                return None if not self._positioned else cur
            return cur
        size = os.fstat(fd).st_size
        index = index_for(segment, size)
        if index is None:
            if segment.generation:
                raise CorruptRecordError(
                    "the index of this compacted segment is missing or damaged, so its "
                    "offsets are unknown", stream=self.stream, partition=self.partition,
                    offset=offset, path=segment.index_path, position=0)
            try:
                index = build_index(segment, fd, size)
            except ValueError as exc:
                raise CorruptRecordError(str(exc), stream=self.stream, partition=self.partition,
                                         offset=None, path=segment.path, position=0) from None
        cur = _Cursor(self, segment, fd, index.offsets, limit, False)
        cur.data_size = size
        target = bisect_left(index.offsets, offset)
        sparse = index.sparse
        k = bisect_right(sparse, (target, _NO_LIMIT)) - 1
        if segment.compressed:
            cur.frames = sparse
            if not sparse:
                cur.ordinal, cur.fpos = target, 0
                return cur
            cur.load_frame(max(k, 0))
            first = cur.ordinal
            new_pos, skipped, _ = skip_records(cur.buf, 0, len(cur.buf), target - first)
            cur.bpos, cur.ordinal = new_pos, first + skipped
            return cur
        cur.seek_plain(target, sparse[k] if k >= 0 else (0, 0))
        return cur

    def _out_of_range(self, offset: int, oldest: int, upcoming: int | None,
                      segments: list[Segment]) -> int:
        if upcoming is None:
            upcoming = _active_upcoming(segments[-1]) if segments else 0
        if self._reset is OffsetReset.ERROR:
            raise OffsetOutOfRangeError(self.stream, self.partition, offset, oldest, upcoming,
                                        self._reset_key)
        target = oldest if self._reset is OffsetReset.OLDEST else upcoming
        _log.warning("stream '%s' partition %d: offset %d is outside [%d, %d]; continuing "
                     "from %d (%s=%s)", self.stream, self.partition, offset, oldest, upcoming,
                     target, self._reset_key, self._reset.value)
        return target


def _skip_in_file(fd: int, ordinal: int, hint: tuple[int, int], verify: bool
                  ) -> tuple[int, int]:
    """Step over whole records of a plain segment file from ``hint = (ordinal, position)``
    until ``ordinal``; returns the ``(ordinal, position)`` reached."""
    at_ordinal, pos = hint
    while at_ordinal < ordinal:
        chunk = os.pread(fd, _SKIP_CHUNK, pos)
        new_pos, skipped, why = skip_records(chunk, 0, len(chunk), ordinal - at_ordinal,
                                             verify=verify)
        at_ordinal += skipped
        pos += new_pos
        if skipped == 0:
            if why is ParseStop.PARTIAL and len(chunk) == _SKIP_CHUNK:  # one huge record
                big = os.pread(fd, 8 + int.from_bytes(chunk[:4], "little"), pos)
                new_pos, skipped, why = skip_records(big, 0, len(big), 1, verify=verify)
                if skipped:
                    at_ordinal += 1
                    pos += new_pos
                    continue
            break
    return at_ordinal, pos


def _active_upcoming(segment: Segment) -> int:
    """base + the number of whole, intact records of an active segment."""
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        return segment.base + _skip_in_file(fd, _NO_LIMIT, (0, 0), True)[0]
    finally:
        os.close(fd)


def partition_bounds(root: str, stream: str, partition: int) -> tuple[int, int]:
    """``(oldest, upcoming)`` of a partition, by listing it and counting the active
    segment's whole records (for tools; the admin keeps an incremental cache)."""
    directory = partition_dir(root, stream, partition)
    segments = list_segments(directory) if os.path.isdir(directory) else []
    if not segments:
        return 0, 0
    return segments[0].base, _active_upcoming(segments[-1])
