"""A changelog sink over a real system, for the changelog adapter tests."""

from __future__ import annotations

from weir.engine.model import SystemStreamPartition
from weir.engine.systems.changelog import SystemChangelogSink, ensure_changelog_stream

__all__ = ["open_sink"]


def open_sink(reg, stream: str = "store-changelog", partitions: int = 2,
              partition: int = 1) -> tuple[SystemChangelogSink, SystemStreamPartition]:
    """A sink of store ``store-a`` writing ``stream`` (created compacted with ``partitions``
    partitions if missing) partition ``partition`` of system ``reg.name``, and that SSP."""
    ensure_changelog_stream(reg.admin(reg.name), stream, partitions)
    producer = reg.producer(reg.name)
    producer.register("store-a")
    producer.start()
    ssp = SystemStreamPartition(reg.name, stream, partition)
    return SystemChangelogSink(producer, ssp, "store-a"), ssp
