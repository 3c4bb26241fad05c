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
* **Transactions** (docs/EXACTLY-ONCE.md): ``isolation`` chooses what a reader sees of them.
  ``READ_COMMITTED`` (the default) delivers plain records and records of committed
  transactions up to the last stable offset, skipping aborted and fenced batches whole; it
  runs a *scout* (a second reader in :attr:`Mode.SCOUT` feeding a
  :class:`~weir.engine.systems.filelog._txn_view.TxnView`) ahead of its position, started the
  first time it meets a batch header or marker, so a log without transactions costs nothing
  extra. ``READ_UNCOMMITTED`` delivers every data record of whole batches. Batch headers and
  markers are never delivered, except to annotating tools (``annotate=True``: markers through
  ``make_marker``, and with ``READ_UNCOMMITTED`` the records of batches that did not commit
  through ``make_flagged``).
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

from weir.engine.systems.filelog._cursor import Cursor, Mode, Step, skip_in_file
from weir.engine.systems.filelog._format import ParseStop, TailState, classify_tail, parse_records
from weir.engine.systems.filelog._txn_format import BatchHeader, Marker
from weir.engine.systems.filelog._txn_view import OpenTransaction, Outcome, TxnView
from weir.engine.systems.filelog.errors import OffsetBeyondEndError, OffsetOutOfRangeError
from weir.engine.systems.filelog.segment import Segment, SegmentDamage, build_index, index_for, list_segments
from weir.engine.systems.filelog.settings import IsolationLevel, OffsetReset
from weir.engine.systems.filelog.stream import partition_dir, read_end_marker

__all__ = ["LogRecord", "PartitionReader", "partition_bounds", "Mode"]

_log = logging.getLogger(__name__)
_NO_LIMIT = 1 << 62
_RACY_NS = 100_000_000
_SCOUT_STEP = 1 << 16
"""Frames the scout walks per look ahead (a batch counts one)."""


class LogRecord(NamedTuple):
    """One record read by tools: offset, key, value (None = tombstone), timestamp, and size
    (key plus value bytes). ``txn`` is None for a record that is visible as such; annotating
    readers set it to the :class:`Marker` of a marker (key and value None) or to the
    :class:`Outcome` of a record whose transaction did not commit (read_uncommitted)."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    size: int
    txn: Marker | Outcome | None = None


def _make_record(ctx: object, offset: int, key, value, ts: int, size: int) -> LogRecord:
    return LogRecord(offset, key, value, ts, size)


def _make_marker_record(ctx: object, offset: int, marker: Marker) -> LogRecord:
    return LogRecord(offset, None, None, marker.timestamp, 0, marker)


def _make_flagged_record(ctx: object, offset: int, key, value, ts: int, size: int,
                         status: Outcome) -> LogRecord:
    return LogRecord(offset, key, value, ts, size, status)


class PartitionReader:
    """Reads one partition from ``offset`` on (see the module docstring)."""

    def __init__(self, root: str, stream: str, partition: int, offset: int, *,
                 read_bytes: int = 1 << 20, reset: OffsetReset = OffsetReset.OLDEST,
                 reset_key: str = "systems.<system>.consumer.auto.offset.reset",
                 isolation: IsolationLevel = IsolationLevel.READ_COMMITTED,
                 annotate: bool = False, make_marker: Callable | None = None,
                 make_flagged: Callable | None = None,
                 on_held_back: Callable[[OpenTransaction], None] | None = None,
                 mode: Mode | None = None, system: str = "filelog",
                 parse: Callable = parse_records):
        self.stream, self.partition, self.system = stream, partition, system
        self.root = root
        self.parse = parse
        """The parse loop the cursors use (``_format.parse_records``, or restore's
        ``bulk.parse_into_dict`` with the same signature and checks; both stop in front of a
        batch header or marker, which the cursor handles per the reader's isolation)."""
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
        self.isolation = isolation
        self.annotate = annotate
        self.make_marker = make_marker or _make_marker_record
        self.make_flagged = make_flagged or _make_flagged_record
        self._on_held_back = on_held_back
        # A read_committed reader reads as read_uncommitted (the same on a log without
        # transactions, at no cost) until it meets a batch header or a marker; then it starts
        # its scout and reads committed from there.
        self.mode = mode or Mode.UNCOMMITTED
        self.view: TxnView | None = TxnView(offset) if self.mode is Mode.SCOUT else None
        self._scout: PartitionReader | None = None
        self._scout_error: BaseException | None = None
        self._stale_checked: dict[tuple[int, int, int, int], float] = {}

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
        if self._scout is not None:
            self._scout.close()

    # -- transactions ----------------------------------------------------------------------
    def held_back_by(self) -> OpenTransaction | None:
        """The open transaction this reader waits for, if it waits for one."""
        view = self.view
        if view is None or self.mode is not Mode.COMMITTED:
            return None
        txn = view.blocking()
        return txn if txn is not None and txn.first_offset <= self._next else None

    def _start_scout(self, offset: int) -> TxnView:
        """Start the scout at ``offset`` (a frame the delivery has not passed)."""
        scout = PartitionReader(self.root, self.stream, self.partition, offset,
                                read_bytes=self.read_bytes, reset=self._reset,
                                reset_key=self._reset_key, mode=Mode.SCOUT,
                                system=self.system)
        self._scout = scout
        self.view = scout.view
        return scout.view

    def upgrade(self, offset: int) -> bool:
        """Met the first frame of a transaction at ``offset``: a read_committed reader starts
        reading committed from here. True when the mode changed."""
        if self.mode is Mode.UNCOMMITTED and self.isolation is IsolationLevel.READ_COMMITTED:
            self._start_scout(offset)
            self.mode = Mode.COMMITTED
            return True
        return False

    def _look_ahead(self) -> None:
        """Let the scout walk on (up to :data:`_SCOUT_STEP` frames). Damage it meets is kept
        and raised when the delivery is held back at it."""
        scout = self._scout
        if scout is None or self._scout_error is not None:
            return
        try:
            scout.read(_SCOUT_STEP, None, None, [])
        except Exception as exc:  # noqa: BLE001 - raised where the delivery reaches it
            self._scout_error = exc
        view = scout.view
        if scout.position > view.scanned:
            view.scanned = scout.position

    def stable_ordinal(self, cur: Cursor) -> int:
        """The ordinal in ``cur``'s segment of the last stable offset, looking further ahead
        when the delivery has reached it."""
        view = self.view
        if view is None:
            view = self._start_scout(cur.offsets[cur.ordinal] if cur.ordinal < len(cur.offsets)
                                     else self._next)
        stable = cur.ordinal_of(view.lso())
        if stable <= cur.ordinal:
            self._look_ahead()
            stable = cur.ordinal_of(view.lso())
            if stable <= cur.ordinal and self._scout_error is not None:
                # Held back at the damage, or by a transaction whose marker can only lie
                # beyond it: nothing past the damage can ever be read, so waiting would block
                # for good (a flipped byte in a marker must not look like an open transaction).
                raise self._scout_error
        return stable

    def peek_outcome(self, header: BatchHeader, offset: int) -> Outcome:
        """Annotating read_uncommitted readers: what became of the batch at ``offset`` as far
        as the log tells now (OPEN while undecided)."""
        view = self.view
        if view is None:
            view = self._start_scout(offset)
        if view.scanned <= offset or view.blocking() is not None:
            self._look_ahead()
        return view.outcome(header.producer_id, header.epoch, offset)

    def _fence_stale(self) -> bool:
        """The delivery is held back by an open transaction: if its producer state proves it
        resolved (a newer epoch was claimed and the state no longer has that transaction
        open), the batches are a zombie's, written after the markers that resolved it: fence
        them. Looks at most every 50 ms per transaction."""
        txn = self.held_back_by()
        if txn is None:
            return False
        key = (txn.producer_id, txn.epoch, txn.sequence, txn.first_offset)
        now = time.monotonic()
        if self._stale_checked.get(key, 0.0) > now:
            return False
        self._stale_checked[key] = now + 0.05
        from weir.engine.systems.filelog.producer_state import is_resolved_elsewhere
        if not is_resolved_elsewhere(self.root, txn.producer_id, txn.epoch, txn.sequence):
            return False
        self.view.fence(txn.producer_id)
        return True

    def _held_back(self) -> None:
        txn = self.held_back_by()
        if txn is not None and self._on_held_back is not None:
            self._on_held_back(txn)

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
            nxt = cur.next_offset
            if nxt > self._next:
                self._next = nxt
            if step is Step.COUNT:
                break
            if step is Step.END:
                if not cur.segment.generation and cur.next_offset < cur.limit < _NO_LIMIT:
                    self._raise_gap(cur)
                self._next = max(self._next, cur.limit)
                cur.close()
                self._cur = None
                continue
            if step is Step.BLOCKED:
                if self.mode is Mode.COMMITTED:
                    if self._fence_stale():
                        continue
                    self._held_back()
                break
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
            cur.seek_in_frame(target)
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
        count, position, why, _ = skip_in_file(fd, _NO_LIMIT, (0, 0), True)
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
