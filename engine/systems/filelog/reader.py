"""Reading a partition from any process: sequential, tailing, across segments.

A :class:`PartitionReader` delivers records in offset order from a start offset. It reads
segment files with ``os.pread`` in large chunks and parses them with ``struct.unpack_from``
(``_format.parse_records``). It never takes a lock and never writes.

* **Tailing**: at the end of the active segment it re-reads from the first record it has not
  delivered on every call, so records appear as soon as the writer has written them. When the
  writer rolls, the reader finishes the old segment, then moves on.
* **Torn tail**: a partial last record of the active segment is "not there yet" (it is being
  written, or it was torn by a crash and the next writer will cut it off), never an error --
  unless the partition's end marker says records up to a later offset were written: then it is
  damage, not a tail.
* **Corruption**: a record that fails its length or CRC check anywhere else -- in a sealed
  segment, or in the active segment with valid records after it -- raises
  ``CorruptRecordError`` naming stream, partition, offset, file and byte position, whether the
  reader meets it while reading or while skipping to its start offset. A damaged record in
  the middle of a log is never taken for the end of the log.
* **Gaps**: compacted segments skip offsets; the reader just delivers the next record. A
  producer segment (generation 0, plain or zstd) has no gaps: when one ends before the next
  listed segment begins, the files between them are gone, and the reader raises
  ``CorruptRecordError`` at the first missing offset instead of jumping over them.
* **Out of range**: an offset before the oldest retained one (deleted by retention) is handled
  per :class:`~weir.engine.systems.filelog.settings.OffsetReset`. An offset *beyond the end* is
  always an error (:class:`~weir.engine.systems.filelog.errors.OffsetBeyondEndError`): the log
  lost records its readers had seen (cut, damaged or replaced files), and moving the reader
  back would process other records under offsets already processed.
* **End of stream**: :attr:`PartitionReader.ended` turns true once every record before the
  partition's end marker was delivered; a partition that cannot reach its marker (records
  missing or damaged before it) raises ``CorruptRecordError`` instead of waiting forever.

Example::

    >>> # reader = PartitionReader(root, "clicks", 0, offset=0)
    >>> # records = reader.read_records(1000)   # [LogRecord(offset, key, value, timestamp, size)]
"""

from __future__ import annotations

import logging
import os
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import NamedTuple

from weir.engine.errors import CorruptRecordError, StreamNotFoundError

from weir.engine.systems.filelog._cursor import Cursor, Step, skip_in_file
from weir.engine.systems.filelog._format import (ParseStop, TailState, classify_tail, parse_records,
                                                 skip_records)
from weir.engine.systems.filelog.errors import OffsetBeyondEndError, OffsetOutOfRangeError
from weir.engine.systems.filelog.segment import Segment, SegmentDamage, build_index, index_for, list_segments
from weir.engine.systems.filelog.settings import OffsetReset
from weir.engine.systems.filelog.stream import partition_dir, read_end_marker

__all__ = ["LogRecord", "PartitionReader", "partition_bounds"]

_log = logging.getLogger(__name__)
_NO_LIMIT = 1 << 62
_RACY_NS = 100_000_000


class LogRecord(NamedTuple):
    """One record read by tools: offset, key, value (None = tombstone), timestamp, and size
    (key plus value bytes)."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    size: int


def _make_record(ctx: object, offset: int, key, value, ts: int, size: int) -> LogRecord:
    return LogRecord(offset, key, value, ts, size)


class PartitionReader:
    """Reads one partition from ``offset`` on (see the module docstring)."""

    def __init__(self, root: str, stream: str, partition: int, offset: int, *,
                 read_bytes: int = 1 << 20, reset: OffsetReset = OffsetReset.OLDEST,
                 reset_key: str = "systems.<system>.consumer.auto.offset.reset",
                 system: str = "filelog", parse: Callable = parse_records):
        self.stream, self.partition, self.system = stream, partition, system
        self.parse = parse
        """The parse loop the cursors use (``_format.parse_records``, or restore's
        ``bulk.parse_into_dict`` with the same signature and checks)."""
        self.read_bytes = read_bytes
        self._dir = partition_dir(root, stream, partition)
        self._next = offset
        self._reset, self._reset_key = reset, reset_key
        self._cur: Cursor | None = None
        self._positioned = False
        self._end: int | None = None
        self._dir_mtime = -1
        self._no_segments = False
        self._tail: str | None = None
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
        try:
            return self._read(max_records, make, ctx, out)
        except FileNotFoundError:
            if os.path.isdir(self._dir):
                raise
            raise StreamNotFoundError(self.system, self.stream, (
                f"partition {self.partition}'s directory {self._dir} disappeared while it was "
                f"read, at offset {self._next} (the stream was deleted or moved); nothing was "
                f"skipped. Put the stream back from a backup; a stream created again under "
                f"this name is a new stream, which a job's checkpoints refuse until its state "
                f"is reset")) from None

    def _read(self, max_records: int, make: Callable, ctx: object, out: list) -> int:
        got = 0
        end_known = self._end is not None  # the marker was read before this call's reads
        while got < max_records and not self.ended:
            cur = self._cur
            if cur is None:
                # A partition found without segments is listed again only once its directory
                # changed (one stat per look while a stream stays empty, not a listing).
                if self._no_segments and not self._directory_may_have_changed():
                    if end_known and self._next < self._end:
                        self._raise_missing(None)
                    break
                cur = self._cur = self._open(self._next)
                self._no_segments = cur is None
                if cur is None:
                    if end_known and self._next < self._end:
                        self._raise_missing(None)
                    break
            n, step = cur.read(max_records - got, make, ctx, out)
            got += n
            if n:
                self._next = cur.next_offset
            if step is Step.COUNT:
                break
            if step is Step.END:
                if not cur.segment.generation and cur.next_offset < cur.limit < _NO_LIMIT:
                    self._raise_gap(cur)
                self._next = max(self._next, cur.limit)
                cur.close()
                self._cur = None
                continue
            # TAIL: nothing more in the active segment right now
            if self._directory_changed():
                if self._sealed_since(cur):
                    continue
                if self._end is None:
                    self._end = read_end_marker(self._dir)
            if self._end is not None and self._next >= self._end:
                self.ended = True
            elif end_known and self._end is not None and n == 0:
                # The writer wrote every record before the marker, then the marker: the
                # active segment cannot still be growing towards it.
                if self._sealed_since(cur):
                    continue
                self._raise_missing(cur)
            break
        return got

    def _raise_gap(self, cur: Cursor) -> None:
        """A producer segment (never compacted: its offsets have no gaps) ends before the
        next listed segment begins: the segment file(s) between them are gone."""
        missing = os.path.join(self._dir, f"{cur.next_offset:020d}.log")
        raise CorruptRecordError(
            f"records {cur.next_offset}..{cur.limit - 1} are missing: {cur.segment.path} ends "
            f"at offset {cur.next_offset - 1} but the next segment starts at {cur.limit}, so "
            f"the segment file that began at offset {cur.next_offset} ({missing}, or its "
            f"'.zst' form) was deleted or lost; only compacted '.g<n>' segments have gaps",
            stream=self.stream, partition=self.partition, offset=cur.next_offset,
            path=missing, position=0)

    def _raise_missing(self, cur: Cursor | None) -> None:
        """The partition ended at ``self._end`` but its records stop at ``self._next``."""
        assert self._end is not None
        if cur is not None:
            size = os.fstat(cur.fd).st_size
            position = cur.fpos + cur.bpos
            what = ("is damaged or cut short" if position < size
                    else "is missing: the file ends before it")
            path = cur.segment.path
        else:
            what, path, position = "is missing: the partition has no segment files", self._dir, 0
        raise CorruptRecordError(
            f"the partition was ended at offset {self._end} (its end-of-stream marker), but the "
            f"record at offset {self._next} {what}; the log lost records that were written",
            stream=self.stream, partition=self.partition, offset=self._next, path=path,
            position=position)

    def _directory_changed(self) -> bool:
        """Whether files may have been added to the partition directory since the last look
        (a roll, an end marker). Directory mtimes are coarse (a few ms): a change in the same
        tick as a look leaves the mtime as it was. So an mtime is remembered only when it was
        already older than :data:`_RACY_NS` at the look; a younger one means "look again"."""
        mtime = os.stat(self._dir).st_mtime_ns
        if mtime == self._dir_mtime:
            return False
        self._dir_mtime = mtime if time.time_ns() - mtime > _RACY_NS else -1
        return True

    def _directory_may_have_changed(self) -> bool:
        """:meth:`_directory_changed`, False while the directory does not exist."""
        try:
            return self._directory_changed()
        except FileNotFoundError:
            return False

    def _sealed_since(self, cur: Cursor) -> bool:
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
    def _open(self, offset: int, attempts: int = 5) -> Cursor | None:
        for _ in range(attempts):
            try:
                return self._open_once(offset)
            except FileNotFoundError:  # maintenance replaced a file between listing and open
                continue
        return self._open_once(offset)

    def _open_once(self, offset: int) -> Cursor | None:
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
            upcoming = _active_upcoming(segment, self.stream, self.partition)
            self._next = self._out_of_range(offset, segments[0].base, upcoming, segments)
            return self._open_once(self._next)
        self._positioned = True
        return cur

    def _position(self, segment: Segment, fd: int, limit: int, active: bool,
                  offset: int) -> Cursor | None:
        if active:
            cur = Cursor(self, segment, fd, range(segment.base, _NO_LIMIT), limit, True)
            target = offset - segment.base
            if cur.seek_plain(target, (0, 0), verify=True) < target:
                if self._positioned:
                    return cur
                damage = cur.stopped_by_damage()
                if damage is not None:
                    raise damage
                self._tail = cur.tail_description()
                return None
            return cur
        size = os.fstat(fd).st_size
        index = index_for(segment, size)
        if index is None:
            if segment.generation and not os.path.exists(segment.path):
                # compaction replaced the file after it was listed (its index goes last):
                # list again (``_open`` retries) and read the replacement
                raise FileNotFoundError(segment.path)
            if segment.generation:
                raise CorruptRecordError(
                    "the index of this compacted segment is missing or damaged, so its "
                    "offsets are unknown", stream=self.stream, partition=self.partition,
                    offset=offset, path=segment.index_path, position=0)
            try:
                index = build_index(segment, fd, size)
            except SegmentDamage as exc:
                raise CorruptRecordError(
                    f"sealed segment without a usable index: {exc}", stream=self.stream,
                    partition=self.partition, offset=segment.base + exc.ordinal,
                    path=segment.path, position=exc.position) from None
        cur = Cursor(self, segment, fd, index.offsets, limit, False)
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
            upcoming = _active_upcoming(segments[-1], self.stream, self.partition) \
                if segments else 0
        if offset > upcoming:
            tail = self._tail or (f"{self._dir} has no segment files" if not segments
                                  else f"the last segment is {segments[-1].path}")
            raise OffsetBeyondEndError(self.stream, self.partition, offset, oldest, upcoming,
                                       tail)
        if self._reset is OffsetReset.ERROR:
            raise OffsetOutOfRangeError(self.stream, self.partition, offset, oldest, upcoming,
                                        self._reset_key)
        target = oldest if self._reset is OffsetReset.OLDEST else upcoming
        _log.warning("stream '%s' partition %d: offset %d is outside [%d, %d]; continuing "
                     "from %d (%s=%s)", self.stream, self.partition, offset, oldest, upcoming,
                     target, self._reset_key, self._reset.value)
        return target


def _active_upcoming(segment: Segment, stream: str = "?", partition: int = -1) -> int:
    """base + the number of whole, intact records of an active segment. A damaged record with
    valid records after it raises ``CorruptRecordError``: it is not the end of the log."""
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        count, position, why = skip_in_file(fd, _NO_LIMIT, (0, 0), True)
        if why is ParseStop.BAD:
            size = os.fstat(fd).st_size
            if classify_tail(os.pread(fd, size - position, position), 0) is TailState.CORRUPT:
                raise CorruptRecordError(
                    "record failed its length/CRC check with valid records after it (damage "
                    "in the middle of the log, not a torn tail)", stream=stream,
                    partition=partition, offset=segment.base + count, path=segment.path,
                    position=position)
        return segment.base + count
    finally:
        os.close(fd)


def partition_bounds(root: str, stream: str, partition: int) -> tuple[int, int]:
    """``(oldest, upcoming)`` of a partition, by listing it and counting the active
    segment's whole records (for tools; the admin keeps an incremental cache)."""
    directory = partition_dir(root, stream, partition)
    segments = list_segments(directory) if os.path.isdir(directory) else []
    if not segments:
        return 0, 0
    return segments[0].base, _active_upcoming(segments[-1], stream, partition)
