"""The durable file log system (``filelog``): partitioned, segmented, CRC-checked record files
that any number of processes read while one writer per partition appends.

See ``docs/FILELOG.md`` for the format, the guarantees and the configuration.
"""

from weir.engine.systems.filelog.admin import FileLogAdmin
from weir.engine.systems.filelog.consumer import FileLogConsumer
from weir.engine.systems.filelog.deletion import DeletedStream
from weir.engine.systems.filelog.errors import (OffsetBeyondEndError, OffsetOutOfRangeError, StreamConflictError,
                                               StreamEndedError, PartitionMissingError,
                                               StreamMetaMissingError, StreamReplacedError)
from weir.engine.systems.filelog.factory import FileLogSystemFactory
from weir.engine.systems.filelog.producer import FileLogProducer
from weir.engine.systems.filelog.reader import LogRecord, PartitionReader
from weir.engine.systems.filelog.retention import MaintenanceReport, Retention
from weir.engine.systems.filelog.settings import Compression, FileLogSettings, OffsetReset, StreamSettings
from weir.engine.systems.filelog.stream import StreamMeta
from weir.engine.systems.filelog.writer import PartitionWriter, WriterSharing

__all__ = [
    "FileLogSystemFactory",
    "FileLogAdmin",
    "FileLogConsumer",
    "FileLogProducer",
    "PartitionWriter",
    "WriterSharing",
    "PartitionReader",
    "LogRecord",
    "Retention",
    "MaintenanceReport",
    "FileLogSettings",
    "StreamSettings",
    "StreamMeta",
    "DeletedStream",
    "Compression",
    "OffsetReset",
    "StreamConflictError",
    "OffsetOutOfRangeError",
    "OffsetBeyondEndError",
    "StreamEndedError",
    "PartitionMissingError",
    "StreamMetaMissingError",
    "StreamReplacedError",
]
