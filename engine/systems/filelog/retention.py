"""Maintenance of sealed segments: clean-up, indexes, compression, retention and compaction.

Everything here runs under the partition's maintenance lock (``.maintenance.lock``), never
touches the active (last) segment, and can run while the writer appends and readers read:
files are only ever added whole (index first) and removed after their replacement is in
place; a reader that has a removed file open keeps reading it.

* **Retention** (cleanup policy ``delete``): delete the oldest sealed segments while the
  partition holds more than ``retention.bytes``, and those sealed more than ``retention.ms``
  ago. The partition's oldest offset moves forward; a consumer behind it continues per
  ``systems.<system>.consumer.auto.offset.reset`` (default: from the oldest offset).
* **Compaction** (cleanup policy ``compact``): see ``compaction.py``.

The writer runs :func:`maintain` when it opens and after each segment roll (without waiting
for the lock); :class:`Retention` runs it on demand for a whole stream.

Example::

    >>> # Retention(root, load_meta(root, "clicks", "filelog"), settings).compact()
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field


from weir.stores.filesafety import fsync_dir, pid_alive
from weir.engine.errors import PartitionLockedError, SystemError_

from weir.engine.systems.api import CleanupPolicy
from weir.engine.systems.filelog._files import MAINTENANCE_LOCK, FileLock, LockBusy, parse_segment_name
from weir.engine.systems.filelog._index import SegmentIndex
from weir.engine.systems.filelog.compaction import CompactionReport, compact_sealed
from weir.engine.systems.filelog.segment import Segment, build_index, compress_segment, index_for, list_segments, remove_segment
from weir.engine.systems.filelog.settings import Compression, StreamSettings
from weir.engine.systems.filelog.stream import partition_dir

__all__ = ["MaintenanceReport", "maintain", "Retention"]

_log = logging.getLogger(__name__)
_TMP_RE = re.compile(r"\.(\d+)(?:\.\d+)?\.tmp$")
_LOCK_WAIT_S = 30.0


@dataclass
class MaintenanceReport:
    partition: int
    cleaned_files: int = 0
    indexed: int = 0
    compressed: int = 0
    deleted_segments: int = 0
    deleted_bytes: int = 0
    compaction: CompactionReport | None = None

    @property
    def compacted(self) -> bool:
        return self.compaction is not None


def maintain(partition_dir: str, meta, settings: StreamSettings, *, partition: int,
             system: str = "filelog", compact: bool = False, wait: bool = False,
             now_ms: int | None = None) -> MaintenanceReport | None:
    """Clean up, index, compress, then apply retention (delete streams) or compaction
    (compact streams, when ``compact``). Returns None when the lock is busy and not
    ``wait``; with ``wait`` it waits up to 30 s, then raises PartitionLockedError."""
    if not os.path.isdir(partition_dir):
        return MaintenanceReport(partition)
    lock = FileLock(os.path.join(partition_dir, MAINTENANCE_LOCK))
    deadline = time.monotonic() + (_LOCK_WAIT_S if wait else 0.0)
    while True:
        try:
            lock.acquire("maintenance")
            break
        except LockBusy as busy:
            if time.monotonic() >= deadline:
                if not wait:
                    return None
                raise PartitionLockedError(
                    f"stream '{meta.name}' partition {partition}: maintenance is running in "
                    f"pid {busy.holder.get('pid', '?')} on {busy.holder.get('host', '?')} "
                    f"({busy.path}); try again when it finishes", stream=meta.name,
                    partition=partition, holder=busy.holder) from None
            time.sleep(0.05)
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    report = MaintenanceReport(partition)
    try:
        _maintain_locked(partition_dir, meta, settings, partition, compact, now_ms, report)
    except ValueError as exc:
        raise SystemError_(f"stream '{meta.name}' partition {partition}: {exc}; restore the "
                           f"segment from a backup or remove it") from exc
    finally:
        lock.release()
    return report


def _maintain_locked(partition_dir: str, meta, settings: StreamSettings, partition: int,
                     compact: bool, now_ms: int, report: MaintenanceReport) -> None:
    _cleanup(partition_dir, report)
    zstd = settings.compression is Compression.ZSTD
    delete = meta.cleanup_policy is CleanupPolicy.DELETE
    if not (zstd or compact or (delete and (settings.retention_bytes >= 0
                                            or settings.retention_ms >= 0))):
        return  # nothing that needs the sealed segments' indexes
    segments = list_segments(partition_dir)
    sealed = _indexed(segments[:-1], report)
    if zstd:
        sealed = [_compress(seg, idx, settings.compression_level, report)
                  for seg, idx in sealed]
    if delete:
        _apply_retention(sealed, segments[-1] if segments else None, settings, now_ms,
                         report)
    elif compact and sealed:
        level = (settings.compression_level if settings.compression is Compression.ZSTD
                 else None)
        report.compaction = compact_sealed(
            sealed, segments[-1].base, segment_bytes=settings.segment_bytes,
            tombstone_retention_ms=settings.tombstone_retention_ms,
            min_lag_ms=settings.compaction_min_lag_ms, level=level, now_ms=now_ms)
        _log.info("stream '%s' partition %d: %s", meta.name, partition,
                  report.compaction.summary())


def _cleanup(partition_dir: str, report: MaintenanceReport) -> None:
    """Remove what interrupted work left behind: temp files of dead processes, files
    superseded by a compressed or compacted copy, indexes without a segment, and segments
    wholly covered by a merged compaction output before them."""
    names = os.listdir(partition_dir)
    present = set(names)
    listed = list_segments(partition_dir)
    best = {seg.name.file_name for seg in listed}
    doomed: list[str] = []
    for name in names:
        tmp = _TMP_RE.search(name)
        if tmp:
            pid = int(tmp.group(1))
            if pid != os.getpid() and not pid_alive(pid):
                doomed.append(name)
            continue
        if name.endswith(".idx"):
            if name[:-4] not in present:
                doomed.append(name)
            continue
        if name.endswith(".tail"):  # an active segment's hint: gone with it or once sealed
            if name[:-5] not in present or name[:-5] + ".idx" in present:
                doomed.append(name)
            continue
        parsed = parse_segment_name(name)
        if parsed is None or name in best:
            continue
        winner = next((s for s in listed if s.base == parsed.base), None)
        if winner is None:  # a compacted file whose index is gone: unreadable, keep for the operator
            _log.warning("%s has no index; it cannot be read and is left in place",
                         os.path.join(partition_dir, name))
        elif (parsed.generation, parsed.compressed) < (winner.generation, winner.compressed):
            doomed.extend((name, name + ".idx"))
    cover_end = -1  # end of the range covered by the latest merged compaction output
    for seg, after in zip(listed, listed[1:]):
        if after.base <= cover_end:  # [seg.base, after.base) lies inside that output
            doomed.extend((seg.name.file_name, seg.name.file_name + ".idx"))
            continue
        if seg.generation:
            index = _quiet_index(seg)
            if index is not None:
                cover_end = max(cover_end, index.next_offset)
    for name in dict.fromkeys(doomed):
        try:
            os.unlink(os.path.join(partition_dir, name))
            report.cleaned_files += 1
        except FileNotFoundError:
            pass
    if doomed:
        fsync_dir(partition_dir)


def _quiet_index(segment: Segment) -> SegmentIndex | None:
    try:
        return index_for(segment, os.path.getsize(segment.path))
    except FileNotFoundError:
        return None


def _indexed(sealed: list[Segment], report: MaintenanceReport) -> list[tuple[Segment, SegmentIndex]]:
    """Each sealed segment with its index, writing the index of a producer segment that has
    none (a crash between roll steps, or an index deleted by hand)."""
    out = []
    for segment in sealed:
        fd = os.open(segment.path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            index = index_for(segment, size)
            if index is None:
                if segment.generation:
                    raise ValueError(f"{segment.path}: the index of a compacted segment is "
                                     f"missing or damaged; its offsets cannot be recovered")
                index = build_index(segment, fd, size)
                index.write(segment.index_path)
                report.indexed += 1
        finally:
            os.close(fd)
        out.append((segment, index))
    return out


def _compress(segment: Segment, index: SegmentIndex, level: int,
              report: MaintenanceReport) -> tuple[Segment, SegmentIndex]:
    if segment.compressed:
        return segment, index
    target = compress_segment(segment, index, level)
    report.compressed += 1
    return target, index_for(target, os.path.getsize(target.path))  # type: ignore[return-value]


def _apply_retention(sealed: list[tuple[Segment, SegmentIndex]], active: Segment | None,
                     settings: StreamSettings, now_ms: int, report: MaintenanceReport) -> None:
    doomed: list[tuple[Segment, SegmentIndex]] = []
    if settings.retention_ms >= 0:
        for seg, idx in sealed:
            if now_ms - idx.sealed_ms < settings.retention_ms:
                break
            doomed.append((seg, idx))
    if settings.retention_bytes >= 0:
        total = sum(idx.data_size for _, idx in sealed)
        total += os.path.getsize(active.path) if active is not None else 0
        total -= sum(idx.data_size for _, idx in doomed)
        for seg, idx in sealed[len(doomed):]:
            if total <= settings.retention_bytes:
                break
            doomed.append((seg, idx))
            total -= idx.data_size
    for seg, idx in doomed:  # oldest first: the oldest offset only ever moves forward
        remove_segment(seg, sync=False)
        report.deleted_segments += 1
        report.deleted_bytes += idx.data_size
    if doomed and active is not None:
        fsync_dir(os.path.dirname(active.path))


@dataclass
class Retention:
    """On-demand maintenance of one stream (all partitions, or one).

    ``apply()`` cleans up, compresses and applies retention; ``compact()`` also compacts a
    ``compact`` stream. Both wait (up to 30 s) for a maintenance run in progress, show a
    progress bar on stderr with ``progress=True``, and end with :meth:`summary` (logged, and
    printed with ``progress``)."""

    root: str
    meta: object
    settings: StreamSettings
    system: str = "filelog"
    reports: list[MaintenanceReport] = field(default_factory=list)
    seconds: float = 0.0

    def _run(self, compact: bool, partition: int | None, progress: bool
             ) -> list[MaintenanceReport]:
        parts = range(self.meta.partitions) if partition is None else [partition]
        started = time.monotonic()
        self.reports = []

        def one(p: int) -> None:
            self.reports.append(maintain(partition_dir(self.root, self.meta.name, p), self.meta,
                                         self.settings, partition=p, system=self.system,
                                         compact=compact, wait=True))
        if progress:
            from rich.console import Console  # only when drawing (start-up imports no rich)
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)

            console = Console(stderr=True)
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console, transient=True) as bar:
                task = bar.add_task(f"{'compacting' if compact else 'maintaining'} "
                                    f"{self.meta.name}", total=len(parts))
                for p in parts:
                    one(p)
                    bar.advance(task)
        else:
            for p in parts:
                one(p)
        self.seconds = time.monotonic() - started
        _log.info("%s", self.summary())
        if progress:
            console.print(self.summary(), highlight=False, soft_wrap=True)
        return self.reports

    def apply(self, partition: int | None = None, *, progress: bool = False
              ) -> list[MaintenanceReport]:
        return self._run(False, partition, progress)

    def compact(self, partition: int | None = None, *, progress: bool = False
                ) -> list[MaintenanceReport]:
        return self._run(self.meta.cleanup_policy is CleanupPolicy.COMPACT, partition, progress)

    def summary(self) -> str:
        """One line: what the last run did to the stream."""
        reports = self.reports
        line = [f"stream '{self.meta.name}': {len(reports)} partition(s)"]
        runs = [r.compaction for r in reports if r.compaction is not None]
        if runs:
            line.append(f"compacted {sum(c.segments_before for c in runs)} -> "
                        f"{sum(c.segments_after for c in runs)} segments, "
                        f"{sum(c.records_before for c in runs):,} -> "
                        f"{sum(c.records_after for c in runs):,} records "
                        f"({sum(c.tombstones_dropped for c in runs):,} tombstones dropped), "
                        f"{sum(c.bytes_before for c in runs):,} -> "
                        f"{sum(c.bytes_after for c in runs):,} bytes")
        line.append(f"deleted {sum(r.deleted_segments for r in reports)} segment(s) "
                    f"({sum(r.deleted_bytes for r in reports):,} bytes)")
        line.append(f"compressed {sum(r.compressed for r in reports)}, cleaned "
                    f"{sum(r.cleaned_files for r in reports)} file(s) in {self.seconds:.2f} s")
        return "; ".join(line)
