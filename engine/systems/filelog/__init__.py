"""The durable file log system (``filelog``): partitioned, segmented, CRC-checked record files
that any number of processes read while one writer per partition appends.

See ``docs/FILELOG.md`` for the format, the guarantees and the configuration.
"""

from .admin import FileLogAdmin
from .consumer import FileLogConsumer
from .errors import OffsetOutOfRangeError, StreamConflictError, StreamEndedError
from .factory import FileLogSystemFactory
from .producer import FileLogProducer
from .reader import LogRecord, PartitionReader
from .retention import MaintenanceReport, Retention
from .settings import Compression, FileLogSettings, OffsetReset, StreamSettings
from .stream import StreamMeta
from .writer import PartitionWriter

__all__ = [
    "FileLogSystemFactory",
    "FileLogAdmin",
    "FileLogConsumer",
    "FileLogProducer",
    "PartitionWriter",
    "PartitionReader",
    "LogRecord",
    "Retention",
    "MaintenanceReport",
    "FileLogSettings",
    "StreamSettings",
    "StreamMeta",
    "Compression",
    "OffsetReset",
    "StreamConflictError",
    "OffsetOutOfRangeError",
    "StreamEndedError",
]
