"""Systems: the interfaces, the durable file log, the in-memory system and the registry that
resolves ``systems.<name>.factory``."""

from .api import (
    CleanupPolicy,
    OffsetType,
    PartitionMetadata,
    StreamSpec,
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
)
from .changelog import SystemChangelogSink, SystemChangelogSource, ensure_changelog_stream
from .filelog import FileLogSystemFactory
from .memory import MemorySystemFactory, reset_memory_systems
from .registry import SystemRegistry

__all__ = ["CleanupPolicy", "OffsetType", "PartitionMetadata", "StreamSpec", "SystemAdmin",
           "SystemConsumer", "SystemFactory", "SystemProducer",
           "SystemChangelogSink", "SystemChangelogSource", "ensure_changelog_stream",
           "FileLogSystemFactory", "MemorySystemFactory", "reset_memory_systems", "SystemRegistry"]
