"""A position inside one open segment file of a partition (used by ``reader.py``).

A cursor reads a plain segment with ``os.pread`` from the first record it has not delivered
(so a tail that was cut off and rewritten is read afresh), or a compressed one frame by frame,
and parses with its reader's ``parse`` (``_format.parse_records``). It reports why it stopped: it delivered what was
asked (COUNT), its sealed segment has nothing more (END), or its active segment has nothing
more yet (TAIL).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING

import zstandard

from weir.engine.errors import CorruptRecordError

from weir.engine.systems.filelog._format import MAX_BODY, ParseStop, TailState, classify_tail, skip_records
from weir.engine.systems.filelog.segment import Segment

if TYPE_CHECKING:
    from weir.engine.systems.filelog.reader import PartitionReader

__all__ = ["Step", "Cursor", "skip_in_file"]

_SKIP_CHUNK = 4 << 20


class Step(Enum):
    COUNT = "count"    # delivered what was asked
    END = "end"        # the (sealed) segment has nothing more
    TAIL = "tail"      # the active segment has nothing more yet


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
    def read_plain(self, max_n: int, make: Callable, ctx: object, out: list) -> tuple[int, Step]:
        got = 0
        refreshed = retried = False
        while True:
            buf = self.buf
            start = self.ordinal
            if start >= self.limit_ordinal:
                return got, Step.END
            pos, self.ordinal, why = self.reader.parse(buf, self.bpos, self.offsets, start,
                                                   min(start + max_n - got, self.limit_ordinal),
                                                   make, ctx, out)
            got += self.ordinal - start
            self.bpos = pos
            if why is ParseStop.COUNT:
                return got, (Step.END if self.ordinal >= self.limit_ordinal else Step.COUNT)
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
        """Position at ``ordinal`` starting from ``hint = (ordinal, position)``; returns the
        ordinal reached (smaller if the file ends first or a record on the way fails its
        checks: :meth:`stopped_by_damage` tells which)."""
        self.ordinal, self.fpos, _ = skip_in_file(self.fd, ordinal, hint, verify)
        self.buf, self.bpos = b"", 0
        return self.ordinal

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
    def read_zst(self, max_n: int, make: Callable, ctx: object, out: list) -> tuple[int, Step]:
        got = 0
        while True:
            start = self.ordinal
            if start >= self.limit_ordinal:
                return got, Step.END
            pos, self.ordinal, why = self.reader.parse(self.buf, self.bpos, self.offsets, start,
                                                   min(start + max_n - got, self.limit_ordinal),
                                                   make, ctx, out)
            got += self.ordinal - start
            self.bpos = pos
            if why is ParseStop.COUNT:
                return got, (Step.END if self.ordinal >= self.limit_ordinal else Step.COUNT)
            if why is ParseStop.BAD or pos < len(self.buf):
                raise self._corrupt(f"record failed its length/CRC check at byte {pos} of "
                                    f"zstd frame {self.fpos - 1}",
                                    self.frames[self.fpos - 1][1] if self.fpos else 0)
            if self.fpos >= len(self.frames):
                return got, Step.END
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

    def read(self, max_n: int, make: Callable, ctx: object, out: list) -> tuple[int, Step]:
        if self.segment.compressed:
            return self.read_zst(max_n, make, ctx, out)
        return self.read_plain(max_n, make, ctx, out)


def skip_in_file(fd: int, ordinal: int, hint: tuple[int, int], verify: bool
                  ) -> tuple[int, int, ParseStop]:
    """Step over whole records of a plain segment file from ``hint = (ordinal, position)``
    until ``ordinal``; returns the ``(ordinal, position)`` reached and why it stopped
    (COUNT: reached ``ordinal``; PARTIAL: the file ends; BAD: the record at ``position``
    fails its framing, or its CRC when ``verify``)."""
    at_ordinal, pos = hint
    why = ParseStop.COUNT
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
        if why is ParseStop.COUNT and at_ordinal < ordinal:
            why = ParseStop.PARTIAL  # the chunk ended; the next pread goes on
    if at_ordinal >= ordinal:
        why = ParseStop.COUNT
    return at_ordinal, pos, why
