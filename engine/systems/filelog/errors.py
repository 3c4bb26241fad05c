"""Errors of the file log beyond the engine's shared ones (``weir.engine.errors``).

Raised elsewhere in this package: :class:`~weir.engine.errors.StreamNotFoundError`,
:class:`~weir.engine.errors.CorruptRecordError` and :class:`~weir.engine.errors.PartitionLockedError`.
"""

from __future__ import annotations

from weir.engine.errors import SystemError_

__all__ = ["StreamConflictError", "OffsetOutOfRangeError", "StreamEndedError"]


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


class StreamEndedError(SystemError_):
    """A write to a partition of a bounded stream that has been ended."""

    def __init__(self, stream: str, partition: int, upcoming: int, marker: str):
        super().__init__(
            f"stream '{stream}' partition {partition} has ended at offset {upcoming} "
            f"({marker}); a bounded stream takes no records after end_stream. Write to a new "
            f"stream, or delete the marker file if the end was a mistake")
        self.stream, self.partition, self.upcoming = stream, partition, upcoming
