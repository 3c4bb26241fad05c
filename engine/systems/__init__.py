"""Systems: the interfaces, the durable file log and the in-memory system."""

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

__all__ = ["CleanupPolicy", "OffsetType", "PartitionMetadata", "StreamSpec", "SystemAdmin",
           "SystemConsumer", "SystemFactory", "SystemProducer"]
