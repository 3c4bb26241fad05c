"""The file log's SystemAdmin: stream creation, partition metadata, ending, maintenance.

``metadata(ssps)`` lists each requested partition's directory once and counts the records of
its active segment incrementally (a cache remembers how far each active file was scanned), so
repeated calls cost one ``listdir`` and one ``stat`` per partition plus the new bytes.

Example::

    >>> import tempfile
    >>> from weir.engine.model import SystemStreamPartition as SSP
    >>> admin = FileLogAdmin(FileLogSettings("filelog", tempfile.mkdtemp()))
    >>> admin.create_stream(StreamSpec("clicks", 2))
    True
    >>> admin.metadata([SSP("filelog", "clicks", 1)])[SSP("filelog", "clicks", 1)]
    PartitionMetadata(oldest=0, newest=-1, upcoming=0)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from weir.stores.filesafety import fsync_dir
from weir.engine.errors import CorruptRecordError, PartitionLockedError, StreamNotFoundError, SystemError_
from weir.engine.model import SystemStreamPartition

from weir.engine.systems.api import (CleanupPolicy, PartitionInfo, PartitionMetadata, StreamSpec,
                                     SystemAdminBase)
from weir.engine.systems.filelog import _shared
from weir.engine.systems.filelog.deletion import (DeletedStream, delete_stream, hold_partitions,
                                                 release_partitions)
from weir.engine.systems.filelog._format import ParseStop, TailState, classify_tail
from weir.engine.systems.filelog._txn_view import OpenTransaction
from weir.engine.systems.filelog.reader import Mode, PartitionReader
from weir.engine.systems.filelog.retention import MaintenanceReport, Retention
from weir.engine.systems.filelog.segment import Segment, build_index, index_for, list_segments, scan_plain
from weir.engine.systems.filelog._tail import load_tail_hint
from weir.engine.systems.filelog.settings import (CONSUMER_RESET, FileLogSettings, IsolationLevel,
                                                  StreamSettings)
from weir.engine.systems.filelog.stream import (TRANSACTIONAL_FORMAT, StreamMeta, create_stream,
                                                list_streams, load_meta, partition_dir,
                                                read_end_marker, stream_dir)
from weir.engine.systems.filelog.writer import PartitionWriter, WriterSharing

__all__ = ["FileLogAdmin"]


@dataclass(slots=True)
class _ActiveScan:
    path: str
    inode: int
    position: int
    count: int


class FileLogAdmin(SystemAdminBase):
    """``SystemAdmin`` of a file log system rooted at ``settings.root``."""

    deletes_streams = True
    renames_streams = True

    def __init__(self, settings: FileLogSettings):
        self.settings = settings
        self.system = settings.system
        self.root = settings.root
        self._scans: dict[str, _ActiveScan] = {}

    # -- SystemAdmin -----------------------------------------------------------------------
    def metadata(self, ssps: Iterable[SystemStreamPartition]
                 ) -> dict[SystemStreamPartition, PartitionMetadata]:
        out: dict[SystemStreamPartition, PartitionMetadata] = {}
        counts: dict[str, int] = {}
        identities: dict[str, str | None] = {}
        done: dict[tuple[str, int], PartitionMetadata] = {}
        for ssp in ssps:
            if ssp in out:
                continue
            stream, partition = ssp.stream, ssp.partition
            if stream not in counts:
                meta = self.stream_meta(stream)
                counts[stream], identities[stream] = meta.partitions, meta.identity
            if not 0 <= partition < counts[stream]:
                raise SystemError_(f"stream '{self.system}.{stream}' has partitions "
                                   f"0..{counts[stream] - 1}, not {partition}; check the job's "
                                   f"inputs or the partition count")
            key = (stream, partition)
            if key not in done:
                oldest, upcoming = self._bounds(stream, partition)
                done[key] = PartitionMetadata(oldest, upcoming - 1, upcoming,
                                              identities[stream])
            out[ssp] = done[key]
        return out

    def identities(self, ssps: Iterable[SystemStreamPartition]
                   ) -> dict[SystemStreamPartition, str | None]:
        """Each partition's identity (its stream's ``incarnation``; None for streams created
        before identities existed), from ``stream.json`` alone: no record counting."""
        metas: dict[str, StreamMeta] = {}
        out: dict[SystemStreamPartition, str | None] = {}
        for ssp in ssps:
            meta = metas.get(ssp.stream)
            if meta is None:
                meta = metas[ssp.stream] = self.stream_meta(ssp.stream)
            out[ssp] = meta.identity
        return out

    def cleanup_policy(self, stream: str) -> CleanupPolicy:
        """The stream's cleanup policy, from its ``stream.json``."""
        return self.stream_meta(stream).cleanup_policy

    def partition_count(self, stream: str) -> int:
        return self.stream_meta(stream).partitions

    def stream_exists(self, stream: str) -> bool:
        try:
            self.stream_meta(stream)
        except StreamNotFoundError:
            return False
        return True

    def create_stream(self, spec: StreamSpec) -> bool:
        compression = self.settings.for_stream(spec.name, spec.config).compression.value
        return create_stream(self.root, spec, self.system, compression)

    def offset_comparator(self, a: int, b: int) -> int:
        return (a > b) - (a < b)

    # -- beyond the protocol ---------------------------------------------------------------
    def stream_meta(self, stream: str) -> StreamMeta:
        return load_meta(self.root, stream, self.system)

    def stream_settings(self, stream: str) -> StreamSettings:
        return self.settings.for_stream(stream, self.stream_meta(stream).config)

    def is_bounded(self, stream: str) -> bool:
        return self.stream_meta(stream).bounded

    def min_compaction_lag_ms(self, stream: str) -> int:
        """The stream's ``compaction.min.lag.ms``."""
        return self.stream_settings(stream).compaction_min_lag_ms

    def describe(self, stream: str) -> list[PartitionInfo]:
        """Segments, bytes and the end marker of each partition, from its directory."""
        out = []
        for p in range(self.partition_count(stream)):
            directory = partition_dir(self.root, stream, p)
            try:
                segments = list_segments(directory)
            except FileNotFoundError:
                segments = []
            size = sum(os.path.getsize(seg.path) for seg in segments
                       if os.path.exists(seg.path))
            ended = os.path.isdir(directory) and read_end_marker(directory) is not None
            out.append(PartitionInfo(p, len(segments), size, ended))
        return out

    def list_streams(self) -> list[str]:
        return list_streams(self.root)

    def stream_path(self, stream: str) -> str:
        return stream_dir(self.root, stream)

    def end_stream(self, stream: str) -> dict[int, int]:
        """End a bounded stream: flush and write every partition's end marker. Producers of
        this process share their writers with the admin, and producers of other processes
        take turns with it (a shared writer: the marker goes after every record written out
        before it; their later records are refused with StreamEndedError).
        Returns the upcoming offset per partition."""
        meta = self.stream_meta(stream)
        if not meta.bounded:
            raise SystemError_(f"stream '{self.system}.{stream}' is not bounded, so it cannot "
                               f"end; create bounded streams with StreamSpec(bounded=True)")
        ends = {}
        for partition in range(meta.partitions):
            writer = _shared.acquire(self.root, stream, partition,
                                     lambda p=partition: self.writer(
                                         stream, p, meta=meta, sharing=WriterSharing.SHARED))
            try:
                with writer.mutex:
                    ends[partition] = writer.end_stream()
            finally:
                _shared.release(writer)
        return ends

    close_stream = end_stream

    def delete_stream(self, stream: str) -> DeletedStream:
        """Delete the stream and its files; refused while a partition has a writer or a
        maintenance run (see :mod:`weir.engine.systems.filelog.deletion`)."""
        return delete_stream(self.root, stream, self.system)

    def compact(self, stream: str, partition: int | None = None, *, progress: bool = False
                ) -> list[MaintenanceReport]:
        """Compact a ``compact`` stream now (cleanup and compression run first). With
        ``progress`` a progress bar and a one-line summary go to stderr."""
        meta = self.stream_meta(stream)
        if meta.cleanup_policy is not CleanupPolicy.COMPACT:
            raise SystemError_(f"stream '{self.system}.{stream}' has cleanup policy "
                               f"{meta.cleanup_policy.value}; only compact streams are compacted")
        return self._retention(meta).compact(partition, progress=progress)

    def apply_retention(self, stream: str, partition: int | None = None, *,
                        progress: bool = False) -> list[MaintenanceReport]:
        """Clean up, compress and delete expired sealed segments now."""
        return self._retention(self.stream_meta(stream)).apply(partition, progress=progress)

    def rename_stream(self, stream: str, new_name: str) -> str:
        """Move a stream aside under ``new_name`` (same root), records and all; nothing is
        deleted. Refuses (``PartitionLockedError``) while a writer or maintenance holds any
        partition, and (``SystemError_``) when ``new_name`` exists. Returns the new path.
        Readers that have files open keep reading them; a stream created later under the old
        name is a new incarnation (a new identity)."""
        meta = self.stream_meta(stream)
        target = stream_dir(self.root, new_name)
        if os.path.exists(target):
            raise SystemError_(f"cannot move stream '{self.system}.{stream}' to {target}: that "
                               f"path exists; choose another name")

        def locked(partition: int, role: str, who: str, holder: dict) -> PartitionLockedError:
            return PartitionLockedError(
                f"cannot move stream '{self.system}.{stream}' aside: partition {partition} has "
                f"a live {role} ({who}); stop it first", stream=stream, partition=partition,
                holder=holder)

        locks = hold_partitions(self.root, stream, meta.partitions, f"rename to {new_name}",
                                locked)
        try:
            os.rename(stream_dir(self.root, stream), target)
            fsync_dir(self.root)
        finally:
            release_partitions(locks)
        self._scans = {k: v for k, v in self._scans.items()
                       if not k.startswith(stream_dir(self.root, stream) + os.sep)}
        return target

    def _retention(self, meta: StreamMeta) -> Retention:
        return Retention(self.root, meta, self.settings.for_stream(meta.name, meta.config),
                         self.system)

    def writer(self, stream: str, partition: int, *, meta: StreamMeta | None = None,
               sharing: WriterSharing = WriterSharing.EXCLUSIVE) -> PartitionWriter:
        """A writer of one partition (exclusive by default: the partition's only writer while
        it is open; close it when done)."""
        meta = meta or self.stream_meta(stream)
        return PartitionWriter(self.root, meta, partition,
                               self.settings.for_stream(stream, meta.config),
                               buffer_bytes=self.settings.producer_buffer_bytes,
                               system=self.system, sharing=sharing,
                               append_lock_timeout_ms=self.settings.append_lock_timeout_ms)

    def reader(self, stream: str, partition: int, offset: int, *,
               isolation: IsolationLevel = IsolationLevel.READ_COMMITTED,
               annotate: bool = False) -> PartitionReader:
        """A reader of one partition from ``offset`` (records as ``LogRecord``); it reads
        committed unless told otherwise (``annotate``: markers and flagged records too, for
        tools)."""
        meta = self.stream_meta(stream)
        if not 0 <= partition < meta.partitions:
            raise SystemError_(f"stream '{self.system}.{stream}' has partitions "
                               f"0..{meta.partitions - 1}, not {partition}")
        return PartitionReader(self.root, stream, partition, offset,
                               read_bytes=self.settings.consumer_read_bytes,
                               reset=self.settings.auto_offset_reset,
                               reset_key=CONSUMER_RESET.key(system=self.system),
                               isolation=isolation, annotate=annotate, system=self.system)

    def open_transactions(self, stream: str, partition: int | None = None
                          ) -> dict[int, tuple[int, list[OpenTransaction]]]:
        """Per partition: its last stable offset and the transactions open in it (for tools:
        it walks the partition's frames from its oldest offset, jumping over batches). A
        stream that never held a transactional batch (format 1) has none: its last stable
        offset is its upcoming offset."""
        meta = self.stream_meta(stream)
        parts = range(meta.partitions) if partition is None else [partition]
        out: dict[int, tuple[int, list[OpenTransaction]]] = {}
        for p in parts:
            oldest, upcoming = self._bounds(stream, p)
            if meta.format < TRANSACTIONAL_FORMAT:
                out[p] = (upcoming, [])
                continue
            scout = PartitionReader(self.root, stream, p, oldest,
                                    read_bytes=self.settings.consumer_read_bytes,
                                    mode=Mode.SCOUT, system=self.system)
            try:
                while True:
                    before = scout.position
                    scout.read(1 << 20, None, None, [])
                    if scout.position == before:
                        break
                view = scout.view
                view.scanned = max(view.scanned, scout.position)
                out[p] = (view.lso(), sorted(view.open.values(),
                                             key=lambda t: t.first_offset))
            finally:
                scout.close()
        return out

    # -- bounds ----------------------------------------------------------------------------
    def _bounds(self, stream: str, partition: int) -> tuple[int, int]:
        directory = partition_dir(self.root, stream, partition)
        try:
            segments = list_segments(directory)
        except FileNotFoundError:
            return 0, 0
        if not segments:
            return 0, 0
        last = segments[-1]
        if last.generation or last.compressed:  # no active segment (yet)
            return segments[0].base, self._sealed_end(last)
        return segments[0].base, last.base + self._active_count(last)

    def _active_count(self, segment: Segment) -> int:
        directory = os.path.dirname(segment.path)
        try:
            fd = os.open(segment.path, os.O_RDONLY)
        except FileNotFoundError:
            self._scans.pop(directory, None)
            return 0
        try:
            st = os.fstat(fd)
            cached = self._scans.get(directory)
            hinted = False
            if (cached is None or cached.path != segment.path or cached.inode != st.st_ino
                    or cached.position > st.st_size):
                # The writer's tail hint (._tail) spares the walk over what it already counted.
                hint = load_tail_hint(segment.path, st)
                hinted = hint is not None
                cached = self._scans[directory] = _ActiveScan(
                    segment.path, st.st_ino, *((hint.position, hint.ordinal) if hinted
                                               else (0, 0)))
            if st.st_size > cached.position:
                scan = scan_plain(fd, st.st_size, start=cached.position, ordinal=cached.count,
                                  sparse=[])
                if hinted and scan.stop is ParseStop.BAD:  # a hint never decides: walk it all
                    cached.position = cached.count = 0
                    scan = scan_plain(fd, st.st_size, sparse=[])
                if scan.stop is ParseStop.BAD:
                    rest = os.pread(fd, st.st_size - scan.end, scan.end)
                    if classify_tail(rest, 0) is TailState.CORRUPT:
                        stream = os.path.basename(os.path.dirname(directory))
                        raise CorruptRecordError(
                            "record failed its length/CRC check with valid records after it "
                            "(damage in the middle of the log, not a torn tail)",
                            stream=stream, partition=int(os.path.basename(directory)),
                            offset=segment.base + scan.count, path=segment.path,
                            position=scan.end)
                # an incomplete transactional batch at the end is not there yet: count up to
                # its header and look at it again next time
                cached.position, cached.count = scan.whole_end, scan.whole_count
            return cached.count
        finally:
            os.close(fd)

    @staticmethod
    def _sealed_end(segment: Segment) -> int:
        fd = os.open(segment.path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            index = index_for(segment, size) or build_index(segment, fd, size)
        finally:
            os.close(fd)
        return index.next_offset
