"""Systems: the interfaces, the durable file log, the in-memory system and the registry that
resolves ``systems.<name>.factory``."""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

# Loaded on first use: importing weir.engine.systems.api must not import every system (a job
# imports the file log when its registry resolves it, and never the memory system it does not
# use).
_LAZY = {
    "CleanupPolicy": "weir.engine.systems.api",
    "FileLogSystemFactory": "weir.engine.systems.filelog",
    "MemorySystemFactory": "weir.engine.systems.memory",
    "OffsetType": "weir.engine.systems.api",
    "PartitionMetadata": "weir.engine.systems.api",
    "StreamSpec": "weir.engine.systems.api",
    "SystemAdmin": "weir.engine.systems.api",
    "SystemChangelogSink": "weir.engine.systems.changelog",
    "SystemChangelogSource": "weir.engine.systems.changelog",
    "SystemConsumer": "weir.engine.systems.api",
    "SystemFactory": "weir.engine.systems.api",
    "SystemProducer": "weir.engine.systems.api",
    "SystemRegistry": "weir.engine.systems.registry",
    "ensure_changelog_stream": "weir.engine.systems.changelog",
    "reset_memory_systems": "weir.engine.systems.memory",
}

__all__ = ["CleanupPolicy", "OffsetType", "PartitionMetadata", "StreamSpec", "SystemAdmin",
           "SystemConsumer", "SystemFactory", "SystemProducer",
           "SystemChangelogSink", "SystemChangelogSource", "ensure_changelog_stream",
           "FileLogSystemFactory", "MemorySystemFactory", "reset_memory_systems", "SystemRegistry"]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
