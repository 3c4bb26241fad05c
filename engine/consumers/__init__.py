"""Reading a container's inputs: :class:`SystemConsumers` polls every input partition, feeds
the chooser and hands the run loop one envelope at a time; ``offsets`` decides where each
partition starts (checkpoint, reset, ``samza.offset.default``)."""

from weir.engine.consumers.consumers import ConsumerCounters, Refill, SystemConsumers
from weir.engine.consumers.offsets import (
    CaughtUpFilter,
    MissingMetadataError,
    OffsetPolicy,
    offset_policy,
    starting_offsets,
)

__all__ = ["ConsumerCounters", "Refill", "SystemConsumers",
           "CaughtUpFilter", "MissingMetadataError", "OffsetPolicy", "offset_policy",
           "starting_offsets"]
