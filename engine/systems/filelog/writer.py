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

Sharing (:class:`WriterSharing`): an **exclusive** writer (tools, the admin) is the only
writer of its partition for its whole life (``.writer.lock``). **Shared** writers (every
producer of a running job) let several processes append to one partition, as Kafka producers
do: each holds the partition's ``.producers.lock`` shared for its life (so no exclusive writer
and no deletion can start under it) and ``.append.lock`` exclusively while it writes its
buffer out. Under that lock it first catches up with what the others appended since its last
write (counting and checking their records; cutting off a torn record a crashed writer left),
rolls the segment when its buffer does not fit, then appends. Offsets returned by ``append``
are therefore provisional in a shared writer: records get their final offsets when written
out (:attr:`upcoming` is exact right after a flush for what this writer knows). The buffer is
written as one ``write`` under the lock, so records of one write-out -- a transactional batch
with them -- are never interleaved with another writer's.

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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import Enum

from weir.stores.filesafety import atomic_write, fsync_dir
from weir.stores.locking import read_holder

from weir.stores._crc import crc32c

from weir.engine.errors import CorruptRecordError, PartitionLockedError, SystemError_

from weir.engine.systems.filelog._files import (APPEND_LOCK, END_MARKER, PRODUCERS_LOCK,
                                                STREAM_META, WRITER_LOCK, FileLock, FlockFile,
                                                LockBusy, SegmentName, flock_holders)
from weir.engine.systems.filelog._format import NULL_LEN, ParseStop, TailState, classify_tail
from weir.engine.systems.filelog._txn_format import (HEADER_FRAME, ControlType,
                                                     encode_batch_header, encode_marker)
from weir.engine.systems.filelog._index import INDEX_INTERVAL, SegmentIndex, load_index
from weir.engine.systems.filelog.errors import (PartitionMissingError, StreamEndedError,
                                               StreamReplacedError)
from weir.engine.systems.filelog.retention import maintain
from weir.engine.systems.filelog.segment import Segment, build_index, list_segments, scan_plain
from weir.engine.systems.filelog._tail import HINT_INTERVAL, TailHint, load_tail_hint, remove_tail_hint
from weir.engine.systems.filelog.settings import StreamSettings
from weir.engine.systems.filelog.stream import StreamMeta, partition_dir, read_end_marker
from weir.engine.systems.linger import LINGER

__all__ = ["PartitionWriter", "WriterSharing"]

_log = logging.getLogger(__name__)

_TS_KLEN = struct.Struct("<qI").pack
_U32 = struct.Struct("<I").pack
_LEN_CRC = struct.Struct("<II").pack
_NULL = _U32(NULL_LEN)
_NEVER = 1 << 62


class WriterSharing(Enum):
    """Whether a :class:`PartitionWriter` is its partition's only writer."""

    EXCLUSIVE = "exclusive"
    """The only writer of the partition in any process, for its whole life (tools, the admin,
    bulk loads); refused while shared writers or another exclusive writer hold it."""
    SHARED = "shared"
    """One of any number of writers, in any processes, that append in turn (a running job's
    producers); refused while an exclusive writer holds the partition."""


class PartitionWriter:
    """Appends records to one partition: as its only writer, or as one of several processes'
    shared writers (see :class:`WriterSharing`; ``PartitionLockedError`` names the holder that
    stands in the way). Not thread-safe by itself: callers that share a writer between threads
    hold :attr:`mutex` around each call."""

    def __init__(self, root: str, meta: StreamMeta, partition: int,
                 settings: StreamSettings | None = None, *, buffer_bytes: int = 1 << 20,
                 system: str = "filelog", sharing: WriterSharing = WriterSharing.EXCLUSIVE,
                 append_lock_timeout_ms: int = 30_000, linger_ms: int | None = None):
        if not 0 <= partition < meta.partitions:
            raise SystemError_(f"stream '{meta.name}' has partitions 0..{meta.partitions - 1}, "
                               f"not {partition}")
        self.stream, self.partition, self.system = meta.name, partition, system
        self._meta = meta
        self._settings = settings or StreamSettings()
        self._segment_bytes = self._settings.segment_bytes
        # linger 0: every append is written out at once (an empty buffer); None: written
        # only when the buffer is full or flushed (tools); else the Linger writes it out.
        self._buffer_bytes = 0 if linger_ms == 0 else buffer_bytes
        self._linger_ms = linger_ms
        self._armed = not linger_ms  # never armed without a positive linger
        self._dir = partition_dir(root, meta.name, partition)
        meta_path = os.path.join(os.path.dirname(self._dir), STREAM_META)
        if not os.path.isdir(self._dir):
            if os.path.exists(meta_path):  # create_stream made it: something deleted it since
                raise PartitionMissingError(meta.name, partition, self._dir, meta_path)
            os.makedirs(self._dir, exist_ok=True)  # a writer without a created stream (tools)
        self._lock = FileLock(os.path.join(self._dir, WRITER_LOCK))
        self._producers = FlockFile(os.path.join(self._dir, PRODUCERS_LOCK))
        self._append: FlockFile | None = None
        self._append_timeout_s = append_lock_timeout_ms / 1000
        self._append_depth = 0
        self._maintain_due = False
        if sharing is WriterSharing.SHARED:
            self._take_shared()
            self._append = FlockFile(os.path.join(self._dir, APPEND_LOCK))
        else:
            self._take_exclusive()
        self._fd = -1
        self.mutex = threading.Lock()
        self._pending: list[bytes] = []
        self._push = self._pending.append
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self._last_compaction = time.monotonic()
        try:
            if self._append is None:
                self._open()
            else:  # housekeeping first: it needs only its own lock, and may take long
                maintain(self._dir, self._meta, self._settings, partition=partition,
                         system=self.system, compact=False, wait=False)
                with self._appending():
                    self._open(housekeeping=False)
        except BaseException:
            self._close_fd()
            self._release_locks()
            raise

    def _take_exclusive(self) -> None:
        meta, partition = self._meta, self.partition
        try:
            self._lock.acquire("writer")
        except LockBusy as busy:
            raise PartitionLockedError(
                f"stream '{meta.name}' partition {partition} already has a writer "
                f"(pid {busy.holder.get('pid', '?')} on host {busy.holder.get('host', '?')}, "
                f"since {busy.holder.get('since', '?')}, lock file {busy.path}); stop that "
                f"producer or send through it. The lock is released when its process exits",
                stream=meta.name, partition=partition, holder=busy.holder) from None
        if not self._producers.try_lock(shared=False):
            self._producers.close()
            self._lock.release()
            pids = flock_holders(self._producers.path)
            raise PartitionLockedError(
                f"stream '{meta.name}' partition {partition} is being written by the producers "
                f"of a running job or another writer (pid "
                f"{', '.join(map(str, pids)) if pids else 'unknown'}; lock file "
                f"{self._producers.path}); stop that job or tool first: this writer needs the "
                f"partition to itself", stream=meta.name, partition=partition,
                holder={"pids": pids})

    def _take_shared(self) -> None:
        if self._producers.try_lock(shared=True):
            return
        self._producers.close()
        holder = read_holder(self._lock.path)
        info = holder.as_dict() if holder is not None else {}
        raise PartitionLockedError(
            f"stream '{self._meta.name}' partition {self.partition} has an exclusive writer "
            f"(pid {info.get('pid', '?')} on host {info.get('host', '?')}, since "
            f"{info.get('since', '?')}: {info.get('command', 'a tool')}; lock file "
            f"{self._lock.path}); producers can write to it once that tool has finished",
            stream=self._meta.name, partition=self.partition, holder=info)

    def _release_locks(self) -> None:
        if self._append is not None:
            self._append.close()
        self._producers.close()
        self._lock.release()

    @contextmanager
    def _appending(self) -> Iterator[None]:
        """Hold the partition's append lock (shared writers take turns here)."""
        if self._append_depth:  # already held by this writer (end_stream writing out)
            self._append_depth += 1
            try:
                yield
            finally:
                self._append_depth -= 1
            return
        append = self._append
        if not append.lock(self._append_timeout_s):
            raise PartitionLockedError(
                f"stream '{self.stream}' partition {self.partition}: another producer has held "
                f"the append lock ({append.path}) for over {self._append_timeout_s:g} s; a "
                f"stopped or hung process holds it (pid "
                f"{', '.join(map(str, flock_holders(append.path))) or 'unknown'}); "
                f"resume or stop it, or raise systems.{self.system}.producer.append.lock."
                f"timeout.ms", stream=self.stream, partition=self.partition, holder={})
        self._append_depth = 1
        try:
            yield
        finally:
            self._append_depth = 0
            append.unlock()
            if self._maintain_due:
                self._maintain_after_roll()

    # -- opening ---------------------------------------------------------------------------
    def _open(self, *, housekeeping: bool = True) -> None:
        self._check_incarnation()
        self._ended = read_end_marker(self._dir)
        if housekeeping:
            maintain(self._dir, self._meta, self._settings, partition=self.partition,
                     system=self.system, compact=False, wait=False)
        segments = list_segments(self._dir)
        last = segments[-1] if segments else None
        if last is not None and not last.generation and not last.compressed:
            if not self._sealed(last):
                self._open_active(last)
                return
        self._create_active(self._end_of(last) if last is not None else 0)

    def _check_incarnation(self) -> None:
        """Refuse a stream deleted since :attr:`_meta` was read (by hand, or lock files gone):
        a writer that (re)opens the partition -- at start, or after another writer rolled or
        something replaced the active segment -- must not continue the old stream's offsets
        in a new stream of the same name. A meta without an incarnation (unknown) is not
        checked."""
        incarnation = self._meta.incarnation
        if not incarnation:
            return
        meta_path = os.path.join(os.path.dirname(self._dir), STREAM_META)
        try:
            with open(meta_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            current = None
        else:
            current = StreamMeta.from_json(data, meta_path).incarnation
        if current != incarnation:
            raise StreamReplacedError(self.stream, self.partition, incarnation, current,
                                      meta_path)

    def _sealed(self, segment: Segment) -> bool:
        """Whether the last plain segment was sealed by a writer that died before it created
        the next one (its index describes it whole). An index that describes fewer bytes than
        the file holds is stale (records were appended after it) and is removed: the segment
        is the active one."""
        try:
            size = os.stat(segment.path).st_size
        except FileNotFoundError:
            return False
        if not os.path.exists(segment.index_path):
            return False
        if load_index(segment.index_path, size) is not None:
            return True
        _log.info("stream '%s' partition %d: removing the stale index %s of the active "
                  "segment", self.stream, self.partition, segment.index_path)
        try:
            os.unlink(segment.index_path)
        except FileNotFoundError:
            pass
        return False

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
        self._inode = st.st_ino
        hint = load_tail_hint(segment.path, st)
        self._settle(st.st_size, hint)
        self._hint_at = (self._written if hint is not None and self._written == hint.position
                         else -1)

    def _settle(self, size: int, known: TailHint | None) -> None:
        """Walk the active segment from what is ``known`` (a tail hint, or this writer's own
        last write; from the start without it) to ``size``: count and check the records,
        collect sparse index entries, and cut off a torn final record or an incomplete batch
        that a crashed writer left. Damage followed by valid records is never cut off."""
        segment = self._segment
        scan = None
        if known is not None:  # walk only the tail; a hint that does not parse is ignored
            scan = scan_plain(self._fd, size, start=known.position, ordinal=known.ordinal,
                              sparse=list(known.sparse), max_timestamp=known.max_timestamp)
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
        self._sparse_written = len(self._sparse)

    def _catch_up(self) -> None:
        """Under the append lock (shared writers): learn what other writers appended since
        this one last wrote -- a new active segment when one of them rolled (or the active one
        was sealed), or records after this writer's last byte -- so that the buffer is written
        at the true end with the right offsets. The buffer's bookkeeping is left to
        :meth:`_write_shared`. Only a bounded stream can be ended while shared writers hold
        it (the producers and the admin refuse to end an unbounded one, and an exclusive
        writer cannot start beside a shared one), so only there is the end marker looked
        for."""
        if self._meta.bounded:
            ended = read_end_marker(self._dir)
            if ended is not None:
                self._ended = ended
                self._raise_ended()
        try:
            st = os.stat(self._segment.path)
            active = (st.st_ino == self._inode
                      and not os.path.exists(self._segment.index_path))
        except FileNotFoundError:
            active = False
        if not active:  # sealed (and maybe compressed or compacted) by another writer
            if not os.path.isdir(self._dir):
                raise PartitionMissingError(self._meta.name, self.partition, self._dir,
                                            os.path.join(os.path.dirname(self._dir),
                                                         STREAM_META))
            max_ts = self._max_ts
            self._close_fd()
            self._open(housekeeping=False)  # under the append lock: the roller maintains
            self._max_ts = max(self._max_ts, max_ts)  # an upper bound: the buffer's records
            return
        size = st.st_size
        if size == self._written:
            return
        if size < self._written:
            raise CorruptRecordError(
                f"the active segment is shorter ({size} bytes) than what this writer wrote to "
                f"it ({self._written} bytes): something outside the file log truncated it",
                stream=self.stream, partition=self.partition,
                offset=self._base + self._written_count, path=self._segment.path,
                position=size)
        max_ts = self._max_ts
        self._settle(size, TailHint(self._inode, self._written_count, self._written, max_ts,
                                    tuple(self._sparse)))
        self._max_ts = max(self._max_ts, max_ts)

    def _create_active(self, base: int) -> None:
        name = SegmentName(base, 0, False)
        self._segment = Segment(name, os.path.join(self._dir, name.file_name))
        self._fd = os.open(self._segment.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL,
                           0o644)
        fsync_dir(self._dir)
        self._inode = os.fstat(self._fd).st_ino
        self._set_position(base, 0, 0)
        self._sparse, self._next_index_at, self._max_ts = [], 0, -1
        self._sparse_written = 0
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
            pos = self._roll(len(body) + 8)
            end = pos + len(body) + 8
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
        elif not self._armed:
            self._arm()
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
        if not self._buffer_bytes:  # linger 0: the whole call is written out once, at its end
            flush_at = _NEVER
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
                    self._roll(len(body) + 8)
                    first += self._next - nxt  # a shared writer's offsets moved on
                    pos, nxt, base, next_index_at = (self._pos, self._next, self._base,
                                                     self._next_index_at)
                    flush_at = self._flush_at if self._buffer_bytes else _NEVER
                    sparse = self._sparse
                    own = True
                    end = pos + len(body) + 8
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
                    first += self._next - nxt  # a shared writer's offsets moved on
                    pos, nxt, base, next_index_at = (self._pos, self._next, self._base,
                                                     self._next_index_at)
                    flush_at, sparse = self._flush_at, self._sparse
                    own = True
        finally:
            if own:
                self._pos, self._next, self._next_index_at = pos, nxt, next_index_at
            if self._pending:
                if not self._buffer_bytes:
                    self._write_pending()
                elif not self._armed:
                    self._arm()
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
            pos = self._roll(HEADER_FRAME + nbytes)
            end = pos + HEADER_FRAME + nbytes
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
        elif not self._armed:
            self._arm()
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
            pos = self._roll(len(frame))
            end = pos + len(frame)
        if pos >= self._next_index_at:
            self._sparse.append((self._next - self._base, pos))
            self._next_index_at = pos + INDEX_INTERVAL
        self._push(frame)
        self._pos = end
        offset = self._next
        self._next = offset + 1
        if end >= self._flush_at:
            self._write_pending()
        elif not self._armed:
            self._arm()
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

    def _arm(self) -> None:
        """The buffer went from empty to not empty: write it out ``linger_ms`` from now."""
        self._armed = True
        LINGER.arm(self, self._linger_ms)

    def write_lingering(self) -> None:
        """The Linger's call (:mod:`weir.engine.systems.linger`), on its timer thread or on
        the run loop's when it goes idle: write the buffered records out, without fsync,
        under :attr:`mutex` (never between the halves of an append or inside a flush)."""
        with self.mutex:
            self._armed = False
            if self._pending and self._fd >= 0:
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
        if self._append is None:
            self._write_out()
        else:
            self._write_shared()

    def _write_shared(self) -> None:
        """A shared writer's write-out: under the append lock, catch up with the other
        writers, roll when the buffer does not fit, move the buffer's offsets and sparse
        entries to where it really lands, append."""
        count = self._next - self._base - self._written_count  # records buffered
        size = self._pos - self._written                         # their bytes
        start, first = self._written, self._written_count
        with self._appending():  # a timeout here leaves the buffer and its entries as they were
            own = self._sparse[self._sparse_written:]  # relative to the assumed start
            del self._sparse[self._sparse_written:]
            try:
                self._catch_up()
                if self._written and self._written + size > self._segment_bytes:
                    self._seal_and_create()
            except BaseException:
                self._sparse.extend(own)  # nothing written: the buffer stays as it was
                raise
            at, ordinal = self._written, self._written_count
            moved = [(o - first + ordinal, p - start + at) for o, p in own]
            if not moved or moved[0][1] != at:
                next_indexed = (self._sparse[-1][1] + INDEX_INTERVAL) if self._sparse else 0
                if at >= next_indexed:
                    moved.insert(0, (ordinal, at))
            self._sparse.extend(moved)
            self._pos, self._next = at + size, self._base + ordinal + count
            self._next_index_at = self._sparse[-1][1] + INDEX_INTERVAL
            self._write_out()

    def _write_out(self) -> None:
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
        self._sparse_written = len(self._sparse)
        self._pending.clear()

    # -- rolling ---------------------------------------------------------------------------
    def _roll(self, need: int) -> int:
        """Make room for a frame of ``need`` bytes that does not fit after :attr:`_pos`: seal
        the active segment (write, fsync, index) and start the next one. Returns the position
        the frame goes to. A shared writer does it under the append lock, after catching up:
        when another writer rolled already, the frame may fit in the segment that writer
        started, which is then not sealed (sealing it would leave a segment of a few records
        at every roll another writer saw coming too)."""
        if self._append is None:
            self._write_pending()
            self._seal_and_create()
            return self._pos
        with self._appending():
            if self._pending:
                self._write_pending()
            else:
                self._catch_up()
            if self._written and self._written + need > self._segment_bytes:
                self._seal_and_create()
        return self._pos

    def _seal_and_create(self) -> None:
        """Seal the active segment, whose records are all written (fsync, index), and start
        the next one."""
        self._sync()
        base, count = self._base, self._written_count
        SegmentIndex(base, 0, count, base + count, time.time_ns() // 1_000_000, self._max_ts,
                     self._written, range(base, base + count), self._sparse
                     ).write(self._segment.index_path)
        remove_tail_hint(self._segment.path)  # sealed: its index says it all
        self._close_fd()
        self._create_active(base + count)
        if self._append is not None and self._append_depth:
            self._maintain_due = True  # after the append lock is let go (see _appending)
        else:
            self._maintain_after_roll()

    def _maintain_after_roll(self) -> None:
        """Maintenance after a roll: compression, retention, compaction when due. A shared
        writer runs it after letting go of the append lock: on a big partition it can take
        longer than the other writers wait for that lock, and it needs only its own."""
        self._maintain_due = False
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
        if self._append is None:
            return self._end()
        with self._appending():
            ended = read_end_marker(self._dir)
            if ended is not None:  # another writer ended it
                self._ended = ended
                if self._pending:
                    self._raise_ended()
                return ended
            if self._pending:
                self._write_pending()
            else:
                self._catch_up()
            return self._end()

    def _end(self) -> int:
        self._write_pending()
        self._sync()
        self._write_hint()
        upcoming = self._next
        atomic_write(os.path.join(self._dir, END_MARKER),
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
            self._release_locks()

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
