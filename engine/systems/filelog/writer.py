"""The single writer of a log partition: lock, torn-tail repair, buffered appends, fsync policy
and segment roll.

Durability contract (what "acknowledged" means): a record is acknowledged when ``flush()``
returns after it was appended. An acknowledged record

* survives the writing process being killed (SIGKILL) at any later moment: ``flush()`` has
  handed it to the operating system;
* survives a machine crash or power loss when that ``flush()`` fsynced the file, which it does
  when ``fsync.every.records`` (default 1: every flush) or ``fsync.every.ms`` says so; segment
  rolls, ``end_stream()`` and ``close()`` always fsync.

Records appended but not yet flushed sit in the writer's buffer and die with the process. A
crash in the middle of a write leaves at most one partial record at the end of the active
segment; the next writer cuts it off (it was never acknowledged) and appends after the last
whole record, so offsets continue without gap or duplicate. Damage that is followed by valid
records is never cut off: opening the writer raises ``CorruptRecordError``.

Example::

    >>> import tempfile
    >>> from weir.engine.systems.filelog.stream import StreamMeta
    >>> root = tempfile.mkdtemp()
    >>> with PartitionWriter(root, StreamMeta("s", 1), 0) as w:
    ...     w.append(b"k", b"v", 1000), w.append(None, b"v2", -1)
    ...     w.flush()
    (0, 1)
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import time
from collections.abc import Iterable

from crc32c import crc32c

from weir.engine.errors import CorruptRecordError, PartitionLockedError, SystemError_

from weir.engine.systems.filelog._files import (END_MARKER, STREAM_META, WRITER_LOCK, FileLock, LockBusy, SegmentName, fsync_dir,
                     write_atomic)
from weir.engine.systems.filelog._format import NULL_LEN, ParseStop, TailState, classify_tail
from weir.engine.systems.filelog._txn_format import (HEADER_FRAME, ControlType,
                                                     encode_batch_header, encode_marker)
from weir.engine.systems.filelog._index import INDEX_INTERVAL, SegmentIndex, load_index
from weir.engine.systems.filelog.errors import PartitionMissingError, StreamEndedError
from weir.engine.systems.filelog.retention import maintain
from weir.engine.systems.filelog.segment import Segment, build_index, list_segments, scan_plain
from weir.engine.systems.filelog._tail import HINT_INTERVAL, TailHint, load_tail_hint, remove_tail_hint
from weir.engine.systems.filelog.settings import StreamSettings
from weir.engine.systems.filelog.stream import StreamMeta, partition_dir, read_end_marker

__all__ = ["PartitionWriter"]

_log = logging.getLogger(__name__)

_TS_KLEN = struct.Struct("<qI").pack
_U32 = struct.Struct("<I").pack
_LEN_CRC = struct.Struct("<II").pack
_NULL = _U32(NULL_LEN)


class PartitionWriter:
    """Appends records to one partition; at most one per partition across all processes
    (``PartitionLockedError`` names the holder otherwise). Not thread-safe by itself: callers
    that share a writer between threads hold :attr:`mutex` around each call."""

    def __init__(self, root: str, meta: StreamMeta, partition: int,
                 settings: StreamSettings | None = None, *, buffer_bytes: int = 1 << 20,
                 system: str = "filelog"):
        if not 0 <= partition < meta.partitions:
            raise SystemError_(f"stream '{meta.name}' has partitions 0..{meta.partitions - 1}, "
                               f"not {partition}")
        self.stream, self.partition, self.system = meta.name, partition, system
        self._meta = meta
        self._settings = settings or StreamSettings()
        self._segment_bytes = self._settings.segment_bytes
        self._buffer_bytes = buffer_bytes
        self._dir = partition_dir(root, meta.name, partition)
        meta_path = os.path.join(os.path.dirname(self._dir), STREAM_META)
        if not os.path.isdir(self._dir):
            if os.path.exists(meta_path):  # create_stream made it: something deleted it since
                raise PartitionMissingError(meta.name, partition, self._dir, meta_path)
            os.makedirs(self._dir, exist_ok=True)  # a writer without a created stream (tools)
        self._lock = FileLock(os.path.join(self._dir, WRITER_LOCK))
        try:
            self._lock.acquire("writer")
        except LockBusy as busy:
            raise PartitionLockedError(
                f"stream '{meta.name}' partition {partition} already has a writer "
                f"(pid {busy.holder.get('pid', '?')} on host {busy.holder.get('host', '?')}, "
                f"since {busy.holder.get('since', '?')}, lock file {busy.path}); stop that "
                f"producer or send through it. The lock is released when its process exits",
                stream=meta.name, partition=partition, holder=busy.holder) from None
        self._fd = -1
        self.mutex = threading.Lock()
        self._pending: list[bytes] = []
        self._push = self._pending.append
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self._last_compaction = time.monotonic()
        try:
            self._open()
        except BaseException:
            self._close_fd()
            self._lock.release()
            raise

    # -- opening ---------------------------------------------------------------------------
    def _open(self) -> None:
        self._ended = read_end_marker(self._dir)
        maintain(self._dir, self._meta, self._settings, partition=self.partition,
                 system=self.system, compact=False, wait=False)
        segments = list_segments(self._dir)
        if segments and not segments[-1].generation and not segments[-1].compressed:
            self._open_active(segments[-1])
        else:
            self._create_active(self._end_of(segments[-1]) if segments else 0)

    def _end_of(self, segment: Segment) -> int:
        """The offset after the last one a sealed segment covers."""
        fd = os.open(segment.path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            index = load_index(segment.index_path, size) or build_index(segment, fd, size)
        finally:
            os.close(fd)
        return index.next_offset

    def _open_active(self, segment: Segment) -> None:
        self._segment = segment
        self._fd = os.open(segment.path, os.O_RDWR | os.O_APPEND)
        st = os.fstat(self._fd)
        size, self._inode = st.st_size, st.st_ino
        scan = None
        hint = load_tail_hint(segment.path, st)
        if hint is not None:  # walk only the tail; a hint that does not parse is ignored
            scan = scan_plain(self._fd, size, start=hint.position, ordinal=hint.ordinal,
                              sparse=list(hint.sparse), max_timestamp=hint.max_timestamp)
            if scan.stop is ParseStop.BAD:
                scan = None
        if scan is None:
            scan = scan_plain(self._fd, size)
        if scan.end < size:
            rest = os.pread(self._fd, size - scan.end, scan.end)
            if classify_tail(rest, 0) is TailState.CORRUPT:
                raise CorruptRecordError(
                    "a damaged record is followed by valid records in the active segment, so "
                    "the writer will not cut it off", stream=self.stream,
                    partition=self.partition, offset=segment.base + scan.count,
                    path=segment.path, position=scan.end)
        end, count = scan.whole_end, scan.whole_count
        if end < size:
            what = ("an incomplete transactional batch" if scan.open_batch is not None
                    else "a torn final record")
            _log.warning("stream '%s' partition %d: cutting off %s at offset %d (%d bytes at "
                         "byte %d of %s) left by a crashed writer", self.stream, self.partition,
                         what, segment.base + count, size - end, end, segment.path)
            os.ftruncate(self._fd, end)
            os.fsync(self._fd)
        self._set_position(segment.base, count, end)
        self._sparse = [entry for entry in scan.sparse if entry[1] < end]
        self._next_index_at = (self._sparse[-1][1] + INDEX_INTERVAL) if self._sparse else 0
        self._max_ts = scan.max_timestamp
        self._hint_at = end if hint is not None and end == hint.position else -1

    def _create_active(self, base: int) -> None:
        name = SegmentName(base, 0, False)
        self._segment = Segment(name, os.path.join(self._dir, name.file_name))
        self._fd = os.open(self._segment.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL,
                           0o644)
        fsync_dir(self._dir)
        self._inode = os.fstat(self._fd).st_ino
        self._set_position(base, 0, 0)
        self._sparse, self._next_index_at, self._max_ts = [], 0, -1
        self._hint_at = -1

    # -- state -----------------------------------------------------------------------------
    def _set_position(self, base: int, count: int, size: int) -> None:
        """Records in the file: ``count`` of them in ``size`` bytes; nothing buffered.
        ``_written``/``_written_count`` describe the file, ``_pos``/``_next`` include the
        buffered records (position and offset of the next record to append)."""
        self._base = base
        self._written, self._written_count = size, count
        self._pos, self._next = size, base + count
        self._flush_at = size + self._buffer_bytes

    @property
    def upcoming(self) -> int:
        """The offset the next appended record gets."""
        return self._next

    @property
    def closed(self) -> bool:
        return self._fd < 0

    @property
    def ended(self) -> bool:
        return self._ended is not None

    @property
    def path(self) -> str:
        return self._segment.path

    # -- appending -------------------------------------------------------------------------
    def append(self, key: bytes | None, value: bytes | None, timestamp: int = -1) -> int:
        """Buffer one record; returns its offset. Not durable before :meth:`flush`."""
        if self._ended is not None:
            self._raise_ended()
        # Concatenation beats b"".join for records this small (one value copy either way).
        if key is None:
            body = _TS_KLEN(timestamp, NULL_LEN)
        else:
            body = _TS_KLEN(timestamp, len(key)) + key
        body = body + _NULL if value is None else body + _U32(len(value)) + value
        pos = self._pos
        end = pos + len(body) + 8
        if end > self._segment_bytes and pos:
            self._roll()
            pos = 0
            end = len(body) + 8
        if pos >= self._next_index_at:
            self._sparse.append((self._next - self._base, pos))
            self._next_index_at = pos + INDEX_INTERVAL
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        push = self._push
        push(_LEN_CRC(len(body), crc32c(body)))
        push(body)
        self._pos = end
        offset = self._next
        self._next = offset + 1
        if end >= self._flush_at:
            self._write_pending()
        return offset

    def append_all(self, items: Iterable[tuple[bytes | None, bytes | None]],
                   timestamp: int = -1, *, require_keys: bool = False) -> int:
        """Buffer ``(key, value)`` records, all with ``timestamp``; returns how many.

        The same records, offsets and bytes as one :meth:`append` per record, in one call (a
        changelog write-down hands over hundreds at once). With ``require_keys`` a null key
        raises ``SystemError_``. A failing record (null key, non-bytes key or value) raises
        after the records before it were buffered, as the same ``append`` calls would.
        """
        if self._ended is not None:
            self._raise_ended()
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        push, head, u32, len_crc, null = self._push, _TS_KLEN, _U32, _LEN_CRC, _NULL
        segment_bytes, interval = self._segment_bytes, INDEX_INTERVAL
        pos, nxt, base = self._pos, self._next, self._base
        next_index_at, flush_at, sparse = self._next_index_at, self._flush_at, self._sparse
        first = nxt
        own = True  # whether the locals, not the attributes, hold the current position
        try:
            for key, value in items:
                if key is None:
                    if require_keys:
                        raise SystemError_(f"stream '{self.stream}' partition "
                                           f"{self.partition}: record {nxt - first} of the "
                                           f"batch has a null key; every record of this "
                                           f"batch needs a key")
                    body = head(timestamp, NULL_LEN)
                else:
                    body = head(timestamp, len(key)) + key
                body = body + null if value is None else body + u32(len(value)) + value
                end = pos + len(body) + 8
                if end > segment_bytes and pos:
                    self._pos, self._next, self._next_index_at = pos, nxt, next_index_at
                    own = False
                    self._roll()
                    pos, base, next_index_at = 0, self._base, self._next_index_at
                    flush_at, sparse = self._flush_at, self._sparse
                    own = True
                    end = len(body) + 8
                if pos >= next_index_at:
                    sparse.append((nxt - base, pos))
                    next_index_at = pos + interval
                push(len_crc(len(body), crc32c(body)))
                push(body)
                pos = end
                nxt += 1
                if end >= flush_at:
                    self._pos, self._next, self._next_index_at = pos, nxt, next_index_at
                    own = False
                    self._write_pending()
                    flush_at = self._flush_at
                    own = True
        finally:
            if own:
                self._pos, self._next, self._next_index_at = pos, nxt, next_index_at
        return nxt - first

    def append_batch(self, producer_id: int, epoch: int, sequence: int, records: list[bytes],
                     count: int, nbytes: int, max_timestamp: int = -1,
                     now_ms: int | None = None) -> int:
        """Buffer a transactional batch: a header, then ``count`` framed records (``records``
        joined, ``nbytes`` bytes; see ``_txn_format.py``). Returns the header's offset; the
        records get the offsets after it. The batch is never split: when it does not fit in
        the active segment (and the segment is not empty) the segment rolls first, and the
        only sparse index entry it can get is its header's."""
        if self._ended is not None:
            self._raise_ended()
        header = encode_batch_header(producer_id, epoch, sequence, count, nbytes,
                                     time.time_ns() // 1_000_000 if now_ms is None else now_ms)
        pos = self._pos
        end = pos + HEADER_FRAME + nbytes
        if end > self._segment_bytes and pos:
            self._roll()
            pos = 0
            end = HEADER_FRAME + nbytes
        if pos >= self._next_index_at:
            self._sparse.append((self._next - self._base, pos))
            self._next_index_at = pos + INDEX_INTERVAL
        if max_timestamp > self._max_ts:
            self._max_ts = max_timestamp
        self._push(header)
        self._pending.extend(records)
        self._pos = end
        offset = self._next
        self._next = offset + 1 + count
        if end >= self._flush_at:
            self._write_pending()
        return offset

    def append_marker(self, producer_id: int, epoch: int, type_: ControlType, sequence: int,
                      now_ms: int | None = None) -> int:
        """Buffer a marker closing ``producer_id``'s open transaction in this partition;
        returns its offset."""
        if self._ended is not None:
            self._raise_ended()
        frame = encode_marker(producer_id, epoch, type_, sequence,
                              time.time_ns() // 1_000_000 if now_ms is None else now_ms)
        pos = self._pos
        end = pos + len(frame)
        if end > self._segment_bytes and pos:
            self._roll()
            pos = 0
            end = len(frame)
        if pos >= self._next_index_at:
            self._sparse.append((self._next - self._base, pos))
            self._next_index_at = pos + INDEX_INTERVAL
        self._push(frame)
        self._pos = end
        offset = self._next
        self._next = offset + 1
        if end >= self._flush_at:
            self._write_pending()
        return offset

    def flush(self, *, sync: bool = False) -> None:
        """Write every buffered record to the file, then fsync per the fsync policy (always
        with ``sync``). Records appended before this call are acknowledged when it returns."""
        self._write_pending()
        if self._unsynced and (sync or self._fsync_due()):
            self._sync()

    def write_buffered(self) -> None:
        """Write the buffered records to the file without fsync: readers (in any process)
        see them at once; they become durable at the next :meth:`flush` that fsyncs."""
        self._write_pending()

    def _fsync_due(self) -> bool:
        every_records, every_ms = (self._settings.fsync_every_records,
                                   self._settings.fsync_every_ms)
        return ((0 < every_records <= self._unsynced)
                or (every_ms > 0 and (time.monotonic() - self._last_sync) * 1000 >= every_ms))

    def _sync(self) -> None:
        os.fdatasync(self._fd)
        self._unsynced = 0
        self._last_sync = time.monotonic()
        if self._written - self._hint_at >= max(HINT_INTERVAL, self._written >> 6):
            self._write_hint()

    def _write_hint(self) -> None:
        """Note where the durable records end (:mod:`._tail`), so a later start-up walks only
        what came after. Called after an fsync with nothing buffered."""
        if self._hint_at == self._written:
            return
        try:
            TailHint(self._inode, self._written_count, self._written, self._max_ts,
                     tuple(self._sparse)).write(self._segment.path)
        except OSError as exc:  # a hint is an optimization: never fail a write for it
            _log.debug("stream '%s' partition %d: tail hint not written: %s", self.stream,
                       self.partition, exc)
            return
        self._hint_at = self._written

    def _write_pending(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            try:  # leave no partial record behind; the records stay buffered for a retry
                os.ftruncate(self._fd, self._written)
            except OSError:
                pass
            raise SystemError_(f"stream '{self.stream}' partition {self.partition}: writing "
                               f"{len(data)} bytes to {self._segment.path} failed ({exc}); "
                               f"free disk space and flush again") from exc
        finally:
            view.release()
        written = self._next - self._base - self._written_count
        self._written += len(data)
        self._written_count += written
        self._unsynced += written
        self._flush_at = self._written + self._buffer_bytes
        self._pending.clear()

    # -- rolling ---------------------------------------------------------------------------
    def _roll(self) -> None:
        """Seal the active segment (write, fsync, index) and start the next one."""
        self._write_pending()
        self._sync()
        base, count = self._base, self._written_count
        SegmentIndex(base, 0, count, base + count, time.time_ns() // 1_000_000, self._max_ts,
                     self._written, range(base, base + count), self._sparse
                     ).write(self._segment.index_path)
        remove_tail_hint(self._segment.path)  # sealed: its index says it all
        self._close_fd()
        self._create_active(base + count)
        compact = (self._settings.compaction_interval_ms > 0 and
                   (time.monotonic() - self._last_compaction) * 1000
                   >= self._settings.compaction_interval_ms)
        try:
            report = maintain(self._dir, self._meta, self._settings, partition=self.partition,
                              system=self.system, compact=compact, wait=False)
        except Exception:  # housekeeping must not fail an append; the admin's run will raise
            _log.exception("stream '%s' partition %d: maintenance after a segment roll failed",
                           self.stream, self.partition)
        else:
            if report is not None and report.compacted:
                self._last_compaction = time.monotonic()

    # -- ending and closing ----------------------------------------------------------------
    def end_stream(self) -> int:
        """Flush, fsync and write this partition's end-of-stream marker (atomically).
        Returns the upcoming offset recorded in it. Idempotent."""
        if self._ended is not None:
            return self._ended
        self._write_pending()
        self._sync()
        self._write_hint()
        upcoming = self._next
        write_atomic(os.path.join(self._dir, END_MARKER),
                     json.dumps({"upcoming": upcoming,
                                 "ended_ms": time.time_ns() // 1_000_000}).encode())
        self._ended = upcoming
        return upcoming

    def _raise_ended(self) -> None:
        raise StreamEndedError(self.stream, self.partition, self._ended or 0,
                               os.path.join(self._dir, END_MARKER))

    def close(self) -> None:
        """Flush and fsync everything, then release the partition."""
        if self._fd < 0:
            return
        try:
            self._write_pending()
            if self._unsynced:
                self._sync()
            self._write_hint()
        finally:
            self._close_fd()
            self._lock.release()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> "PartitionWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PartitionWriter({self.stream!r}, partition={self.partition}, "
                f"upcoming={self.upcoming})")
