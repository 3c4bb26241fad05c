"""Errors of the file log beyond the engine's shared ones (``weir.engine.errors``).

Raised elsewhere in this package: :class:`~weir.engine.errors.StreamNotFoundError`,
:class:`~weir.engine.errors.CorruptRecordError` and :class:`~weir.engine.errors.PartitionLockedError`.
"""

from __future__ import annotations

import os

from weir.engine.errors import SystemError_

__all__ = ["StreamConflictError", "OffsetOutOfRangeError", "OffsetBeyondEndError",
           "StreamEndedError", "PartitionMissingError", "StreamMetaMissingError",
           "StreamReplacedError"]


class StreamConflictError(SystemError_):
    """``create_stream`` of an existing stream with a different partition count."""

    def __init__(self, stream: str, existing: int, requested: int, path: str):
        super().__init__(
            f"stream '{stream}' already exists with {existing} partitions, not {requested} "
            f"({path}); use the existing count, or delete the stream directory to recreate it "
            f"(its records are lost)")
        self.stream, self.existing, self.requested = stream, existing, requested


class OffsetOutOfRangeError(SystemError_):
    """A consumer asked for an offset outside ``[oldest, upcoming]`` of a partition and
    ``systems.<system>.consumer.auto.offset.reset`` is ``error``."""

    def __init__(self, stream: str, partition: int, offset: int, oldest: int, upcoming: int,
                 key: str):
        super().__init__(
            f"stream '{stream}' partition {partition}: offset {offset} is outside the retained "
            f"range [{oldest}, {upcoming}] (records before {oldest} were deleted by retention, "
            f"or the stream was recreated); set {key}=oldest or upcoming, or reset the "
            f"checkpoint of this input")
        self.stream, self.partition, self.offset = stream, partition, offset
        self.oldest, self.upcoming = oldest, upcoming


class OffsetBeyondEndError(OffsetOutOfRangeError):
    """A consumer asked for an offset past the end of a partition: the log lost records that
    were there when the offset was recorded (a cut, damaged or replaced segment). Never reset
    automatically, whatever ``auto.offset.reset`` says: reading from another offset would
    process other records under offsets a checkpoint already counts."""

    def __init__(self, stream: str, partition: int, offset: int, oldest: int, upcoming: int,
                 tail: str):
        SystemError_.__init__(
            self,
            f"stream '{stream}' partition {partition}: offset {offset} is beyond the end of the "
            f"log, which now ends before offset {upcoming} ({tail}). Records that were read "
            f"before are gone (a cut, damaged or replaced segment file) and nothing was reset. "
            f"Put the partition's files back from a backup; if the stream was replaced on "
            f"purpose, start the job's state over with `weir checkpoint reset <job config> "
            f"--yes` (moves checkpoints, stores and changelogs aside together)")
        self.stream, self.partition, self.offset = stream, partition, offset
        self.oldest, self.upcoming, self.tail = oldest, upcoming, tail


class StreamEndedError(SystemError_):
    """A write to a partition of a bounded stream that has been ended."""

    def __init__(self, stream: str, partition: int, upcoming: int, marker: str):
        super().__init__(
            f"stream '{stream}' partition {partition} has ended at offset {upcoming} "
            f"({marker}); a bounded stream takes no records after end_stream. Write to a new "
            f"stream, or delete the marker file if the end was a mistake")
        self.stream, self.partition, self.upcoming = stream, partition, upcoming


class PartitionMissingError(SystemError_):
    """A partition's directory is gone although its stream exists: its records were deleted
    outside Weir. A writer never makes it again: the partition would start over at offset 0
    and reuse offsets that checkpoints already count (a job would skip the new records)."""

    def __init__(self, stream: str, partition: int, path: str, meta_path: str):
        super().__init__(
            f"stream '{stream}' partition {partition}: its directory {path} is missing although "
            f"the stream exists ({meta_path}), so its records were deleted outside Weir; "
            f"nothing was written. Put the directory back from a backup. To replace the stream "
            f"on purpose, delete it with `weir log delete {stream} --yes` (its other partitions' "
            f"records are lost) and create it again: jobs that read it then refuse it until "
            f"their state is reset")
        self.stream, self.partition, self.path = stream, partition, path


class StreamReplacedError(SystemError_):
    """The stream a writer has open was deleted (and maybe created again under the same name)
    since the writer opened it: the writer's records and offsets belong to the old stream, so
    it writes nothing into what is there now."""

    def __init__(self, stream: str, partition: int, incarnation: str, current: str | None,
                 meta_path: str):
        now = (f"a new stream of that name exists (incarnation {current})" if current
               else f"{meta_path} is gone")
        super().__init__(
            f"stream '{stream}' partition {partition}: the stream this writer opened "
            f"(incarnation {incarnation}) was deleted since ({now}); its buffered records were "
            f"not written. Restart the producer (the job) so that it opens the stream as it is "
            f"now; a job that read the old stream refuses the new one until its state is reset")
        self.stream, self.partition = stream, partition
        self.incarnation, self.current = incarnation, current


class StreamMetaMissingError(SystemError_):
    """``create_stream`` over a stream directory whose partitions hold records but whose
    ``stream.json`` is gone: a new description would adopt the old records under another
    identity (and maybe another partition count or boundedness), so nothing is created."""

    def __init__(self, stream: str, path: str, partitions: list[str]):
        super().__init__(
            f"cannot create stream '{stream}': {path} is missing but the stream's directory "
            f"still holds records (partition(s) {', '.join(partitions)}); nothing was created. "
            f"Put stream.json back from a backup (the records are intact). To start a new "
            f"stream under this name instead, move the directory "
            f"{os.path.dirname(path)} aside first")
        self.stream, self.path, self.partitions = stream, path, partitions
