"""Systems: the interfaces, the durable file log, the in-memory system and the registry that
resolves ``systems.<name>.factory``."""

from weir.engine.systems.api import (
    CleanupPolicy,
    OffsetType,
    PartitionMetadata,
    StreamSpec,
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
)
from weir.engine.systems.changelog import SystemChangelogSink, SystemChangelogSource, ensure_changelog_stream
from weir.engine.systems.filelog import FileLogSystemFactory
from weir.engine.systems.memory import MemorySystemFactory, reset_memory_systems
from weir.engine.systems.registry import SystemRegistry

__all__ = ["CleanupPolicy", "OffsetType", "PartitionMetadata", "StreamSpec", "SystemAdmin",
           "SystemConsumer", "SystemFactory", "SystemProducer",
           "SystemChangelogSink", "SystemChangelogSource", "ensure_changelog_stream",
           "FileLogSystemFactory", "MemorySystemFactory", "reset_memory_systems", "SystemRegistry"]
