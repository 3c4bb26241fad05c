"""A position inside one open segment file of a partition (used by ``reader.py``).

A cursor reads a plain segment with ``os.pread`` from the first record it has not delivered
(so a tail that was cut off and rewritten is read afresh), or a compressed one frame by frame,
and parses with its reader's ``parse`` (``_format.parse_records``, or restore's
``bulk.parse_into_dict``). It reports why it stopped: it delivered what was
asked (COUNT), its sealed segment has nothing more (END), its active segment has nothing more
yet (TAIL), or the next record lies at or after the last stable offset of a ``read_committed``
reader (BLOCKED).

Batch headers and markers (``_txn_format.py``) are handled here, per the reader's
:class:`Mode`: delivering readers never hand them out; a ``read_committed`` reader asks its
:class:`~weir.engine.systems.filelog._txn_view.TxnView` whether a batch committed and skips
an aborted or fenced batch whole; the scout of such a reader feeds them to the view and jumps
over every batch. A batch is read only once it is whole in the file.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING

import zstandard

from weir.engine.errors import CorruptRecordError

from weir.engine.systems.filelog._format import MAX_BODY, ParseStop, TailState, classify_tail
from weir.engine.systems.filelog._txn_format import (HEADER_FRAME, MARKER_FRAME, BatchHeader,
                                                     Marker, OpenBatch, decode_frame, frame_need,
                                                     scan_frames, walk_frames)
from weir.engine.systems.filelog._txn_view import Outcome
from weir.engine.systems.filelog.segment import Segment

if TYPE_CHECKING:
    from weir.engine.systems.filelog.reader import PartitionReader

__all__ = ["Step", "Mode", "Cursor", "skip_in_file"]

_SKIP_CHUNK = 4 << 20
_AGAIN = object()


class Step(Enum):
    COUNT = "count"      # delivered what was asked
    END = "end"          # the (sealed) segment has nothing more
    TAIL = "tail"        # the active segment has nothing more yet
    BLOCKED = "blocked"  # read_committed: the next record is at or after the last stable offset


class Mode(Enum):
    """What a reader does with the frames of transactions."""

    UNCOMMITTED = "read_uncommitted"  # every data record of whole batches
    COMMITTED = "read_committed"      # committed and plain records, up to the LSO
    SCOUT = "scout"                   # no records: batch headers and markers for a TxnView


class Cursor:
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
        self.batch: OpenBatch | None = None
        """The batch a seek landed inside (its remaining records are decided on first read)."""
        self.flag: tuple[Outcome, int] | None = None
        """Annotating readers: the outcome of the batch being delivered and the ordinal after
        it, while it is not a committed one."""

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
        """The offset after the last frame consumed from this segment (or its first)."""
        return self.offsets[self.ordinal - 1] + 1 if self.ordinal else self.segment.base

    def ordinal_of(self, offset: int) -> int:
        """The ordinal of the first frame at or after ``offset`` in this segment."""
        return bisect_left(self.offsets, offset)

    # -- reading ---------------------------------------------------------------------------
    def read(self, max_n: int, make: Callable, ctx: object, out: list) -> tuple[int, Step]:
        """Deliver up to ``max_n`` records (the scout: step over up to ``max_n`` frames)."""
        reader = self.reader
        zst = self.segment.compressed
        parse = scan_frames if reader.mode is Mode.SCOUT else reader.parse
        got = 0
        refreshed = retried = False
        while True:
            mode = reader.mode  # a read_committed reader changes mode at its first batch
            start = self.ordinal
            limit = self.limit_ordinal
            if mode is Mode.COMMITTED and start < limit:
                stable = reader.stable_ordinal(self)
                if stable < limit:
                    limit = stable
            if self.batch is not None:
                step = self._resume_batch(mode, limit)
                if step is _AGAIN:
                    continue
                if step is not None:
                    return got, step
                start = self.ordinal
            if start >= limit:
                return got, (Step.END if start >= self.limit_ordinal else Step.BLOCKED)
            stop = min(start + max_n - got, limit)
            pmake = make
            flag = self.flag
            if flag is not None:
                status, until = flag
                if start >= until:
                    self.flag = None
                else:
                    stop = min(stop, until)
                    pmake = _flagging(reader.make_flagged, status)
            buf = self.buf
            pos, self.ordinal, why = parse(buf, self.bpos, self.offsets, start, stop, pmake,
                                           ctx, out)
            got += self.ordinal - start  # records parsed (``out`` may be a dict: restore)
            self.bpos = pos
            if why is ParseStop.COUNT:
                if self.ordinal >= self.limit_ordinal:
                    return got, Step.END
                if got >= max_n:
                    return got, Step.COUNT
                continue  # stopped at the LSO or the end of a flagged batch: look again
            if why is ParseStop.EXT:
                step = self._frame(pos, mode, ctx, out)
                if isinstance(step, Step):
                    return got, step
                got += step
                if self.buf is not buf:  # jumped past the buffer: the next read is a new one
                    refreshed = retried = False
                if got >= max_n:
                    return got, Step.COUNT
                continue
            if zst:
                if why is ParseStop.BAD or pos < len(buf):
                    raise self._corrupt(f"record failed its length/CRC check at byte {pos} of "
                                        f"zstd frame {self.fpos - 1}",
                                        self.frames[self.fpos - 1][1] if self.fpos else 0)
                if self.fpos >= len(self.frames):
                    return got, Step.END
                self.load_frame(self.fpos)
                continue
            leftover = len(buf) - pos
            if why is ParseStop.BAD:
                if refreshed or retried or not self.active:
                    return got, self._bad_plain()
                retried = True
                leftover = 0  # a torn tail may have been cut off and rewritten: read afresh
            elif refreshed:  # PARTIAL after reading up to the end of the file
                return got, self._eof_plain(leftover)
            want = reader.read_bytes
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

    # -- frames of transactions ------------------------------------------------------------
    def _frame(self, pos: int, mode: Mode, ctx: object, out: list) -> int | Step:
        """Handle the batch header or marker at ``self.buf[pos]`` (its CRC was checked by the
        parse that stopped there). Returns how many items it delivered, or the Step to stop
        with (the batch is not whole yet: TAIL; undecided: BLOCKED)."""
        reader = self.reader
        buf = self.buf
        try:
            frame = decode_frame(buf, pos, verify=False)
        except ValueError as exc:
            raise self._corrupt(str(exc), self._position_of(pos)) from None
        offset = self.offsets[self.ordinal]
        if mode is Mode.UNCOMMITTED and reader.upgrade(offset):
            return 0  # read committed from this frame on: the caller looks again
        if isinstance(frame, Marker):
            self.bpos = pos + MARKER_FRAME
            self.ordinal += 1
            if mode is Mode.SCOUT:
                reader.view.on_marker(offset, frame)
            elif reader.annotate:
                out.append(reader.make_marker(ctx, offset, frame))
                return 1
            return 0
        header: BatchHeader = frame
        bend = pos + HEADER_FRAME + header.nbytes
        if not self._whole(bend):
            if self.active and not self.segment.compressed:
                # being written (or torn: the next writer cuts it off): read afresh next time
                self.fpos, self.buf, self.bpos = self._position_of(pos), b"", 0
                return Step.TAIL
            raise self._corrupt(f"the transactional batch at offset {offset} is cut short "
                                f"(its header says {header.count} records, {header.nbytes} "
                                f"bytes)", self._position_of(pos))
        end_ordinal = self.ordinal + 1 + header.count
        if mode is Mode.SCOUT:
            reader.view.on_batch(offset, header)
            self._jump(bend, end_ordinal)
            return 1
        if mode is Mode.COMMITTED:
            outcome = reader.view.outcome(header.producer_id, header.epoch, offset)
            if outcome is Outcome.OPEN:
                return Step.BLOCKED
            if outcome is not Outcome.COMMITTED:
                self._jump(bend, end_ordinal)  # aborted or fenced: never visible
                return 0
        elif reader.annotate:  # read_uncommitted, flagging what did not commit (tools)
            outcome = reader.peek_outcome(header, offset)
            if outcome is not Outcome.COMMITTED:
                self.flag = (outcome, end_ordinal)
        self.bpos, self.ordinal = pos + HEADER_FRAME, self.ordinal + 1
        return 0

    def _resume_batch(self, mode: Mode, limit: int) -> Step | object | None:
        """A seek landed inside ``self.batch``: decide its remaining records."""
        batch = self.batch
        if self.ordinal >= batch.end_ordinal:
            self.batch = None
            return None
        header, header_offset = batch.header, self.offsets[batch.ordinal]
        if mode is Mode.UNCOMMITTED and self.reader.upgrade(header_offset):
            return _AGAIN  # decide this batch in committed mode
        if mode is Mode.SCOUT:
            self.reader.view.on_batch(header_offset, header)
        elif mode is Mode.COMMITTED:
            if self.ordinal >= limit:
                return Step.BLOCKED
            outcome = self.reader.view.outcome(header.producer_id, header.epoch, header_offset)
            if outcome is Outcome.OPEN:
                return Step.BLOCKED
            self.batch = None
            if outcome is Outcome.COMMITTED:
                return None
        else:
            self.batch = None
            if self.reader.annotate:
                outcome = self.reader.peek_outcome(header, header_offset)
                if outcome is not Outcome.COMMITTED:
                    self.flag = (outcome, batch.end_ordinal)
            return None
        self.batch = None
        if self.segment.compressed:
            self.bpos, self.ordinal = batch.end_position, batch.end_ordinal
        else:
            self.fpos, self.buf, self.bpos = batch.end_position, b"", 0
            self.ordinal = batch.end_ordinal
        return None

    def _whole(self, bend: int) -> bool:
        """Whether a batch ending at ``bend`` (in buffer coordinates) is whole in the file."""
        if bend <= len(self.buf):
            return True
        if self.segment.compressed:
            return False
        return self.fpos + bend <= os.fstat(self.fd).st_size

    def _jump(self, bend: int, end_ordinal: int) -> None:
        """Go past a whole batch ending at ``bend`` (buffer coordinates)."""
        self.ordinal = end_ordinal
        if bend <= len(self.buf):
            self.bpos = bend
        else:
            self.fpos, self.buf, self.bpos = self.fpos + bend, b"", 0

    def _position_of(self, pos: int) -> int:
        """The file position (plain) or the frame's position (zstd) of buffer position
        ``pos``, for error messages and re-reads."""
        if self.segment.compressed:
            return self.frames[self.fpos - 1][1] if self.fpos else 0
        return self.fpos + pos

    # -- plain segments --------------------------------------------------------------------
    def _file_pos(self) -> int:
        return self.fpos + self.bpos

    def _eof_plain(self, leftover: int) -> Step:
        if self.active:
            return Step.TAIL
        if leftover:
            raise self._corrupt("the sealed segment ends inside a record", self._file_pos())
        return Step.END

    def _bad_plain(self) -> Step:
        position = self._file_pos()
        if self.active:
            size = os.fstat(self.fd).st_size
            rest = os.pread(self.fd, size - position, position)
            if classify_tail(rest, 0) is not TailState.CORRUPT:
                self.fpos, self.buf, self.bpos = position, b"", 0  # read afresh next time
                return Step.TAIL
        raise self._corrupt("record failed its length/CRC check", position)

    def _corrupt(self, message: str, position: int) -> CorruptRecordError:
        offset = (self.offsets[self.ordinal] if self.ordinal < len(self.offsets)
                  else self.segment.base + self.ordinal)
        return CorruptRecordError(message, stream=self.reader.stream,
                                  partition=self.reader.partition, offset=offset,
                                  path=self.segment.path, position=position)

    def seek_plain(self, ordinal: int, hint: tuple[int, int], *, verify: bool = False) -> int:
        """Position at ``ordinal`` starting from ``hint = (ordinal, position)`` (never inside
        a batch); returns the ordinal reached (smaller if the file ends first or a record on
        the way fails its checks: :meth:`stopped_by_damage` tells which). Landing inside a
        batch sets :attr:`batch`."""
        self.ordinal, self.fpos, _, self.batch = skip_in_file(self.fd, ordinal, hint, verify)
        self.buf, self.bpos = b"", 0
        return self.ordinal

    def seek_in_frame(self, ordinal: int) -> None:
        """Compressed segments: position at ``ordinal`` inside the loaded zstd frame (which
        starts outside any batch)."""
        self.bpos, self.ordinal, _, self.batch = walk_frames(self.buf, 0, len(self.buf),
                                                              self.ordinal, ordinal)

    def stopped_by_damage(self) -> CorruptRecordError | None:
        """After a :meth:`seek_plain` of an active segment that stopped short: the error to
        raise when what stopped it is damage in the middle of the log (a record that fails
        its checks with a valid record after it), None when the file simply ends there (a
        torn tail is the end of the log, as a crashed writer leaves it)."""
        position = self.fpos
        size = os.fstat(self.fd).st_size
        if position >= size:
            return None
        rest = os.pread(self.fd, size - position, position)
        if classify_tail(rest, 0) is not TailState.CORRUPT:
            return None
        return self._corrupt("record failed its length/CRC check with valid records after it "
                             "(damage in the middle of the log, not a torn tail)", position)

    def tail_description(self) -> str:
        """Where the records of this active segment end, for error messages."""
        size = os.fstat(self.fd).st_size
        extra = size - self.fpos
        torn = f", followed by {extra} bytes of a torn or damaged record" if extra > 0 else ""
        return (f"{self.segment.path} holds records up to offset "
                f"{self.segment.base + self.ordinal - 1} (byte {self.fpos}{torn})")

    # -- compressed segments ---------------------------------------------------------------
    def load_frame(self, number: int) -> None:
        cpos = self.frames[number][1]
        cend = self.frames[number + 1][1] if number + 1 < len(self.frames) else self.data_size
        try:
            self.buf = zstandard.ZstdDecompressor().decompress(os.pread(self.fd, cend - cpos, cpos))
        except zstandard.ZstdError as exc:
            self.ordinal = self.frames[number][0]
            raise self._corrupt(f"zstd frame {number} does not decompress ({exc})", cpos) from None
        self.ordinal, self.bpos, self.fpos = self.frames[number][0], 0, number + 1


def _flagging(make_flagged: Callable, status: Outcome) -> Callable:
    """A ``make`` that builds each record with ``make_flagged`` and the batch's outcome."""
    def make(c, o, k, v, t, s):
        return make_flagged(c, o, k, v, t, s, status)
    return make


def skip_in_file(fd: int, ordinal: int, hint: tuple[int, int], verify: bool
                 ) -> tuple[int, int, ParseStop, OpenBatch | None]:
    """Step over whole frames of a plain segment file from ``hint = (ordinal, position)``
    (never inside a batch) until ``ordinal``; returns the ``(ordinal, position)`` reached, why
    it stopped (COUNT: reached ``ordinal``; PARTIAL: the file ends, or a batch is not whole
    yet; BAD: the frame at ``position`` fails its framing, or its CRC when ``verify``) and the
    batch it stopped inside (positions in file coordinates), if any."""
    at_ordinal, pos = hint
    why = ParseStop.COUNT
    batch: OpenBatch | None = None
    chunk_size = _SKIP_CHUNK
    while at_ordinal < ordinal:
        chunk = os.pread(fd, chunk_size, pos)
        new_pos, reached, why, inner = walk_frames(chunk, 0, len(chunk), at_ordinal, ordinal,
                                                   verify=verify)
        batch = None if inner is None else OpenBatch(inner.header, inner.ordinal,
                                                     inner.end_ordinal,
                                                     inner.end_position + pos)
        moved = reached > at_ordinal
        at_ordinal = reached
        pos += new_pos
        if not moved:
            if why is ParseStop.PARTIAL and len(chunk) == chunk_size:
                need = frame_need(chunk)  # one record, or one batch, larger than the chunk
                if need > chunk_size:
                    chunk_size = need
                    continue
            break
        chunk_size = _SKIP_CHUNK
        if why is ParseStop.COUNT and at_ordinal < ordinal:
            why = ParseStop.PARTIAL  # the chunk ended; the next pread goes on
    if at_ordinal >= ordinal:
        why = ParseStop.COUNT
    return at_ordinal, pos, why, batch
