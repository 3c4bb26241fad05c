"""What a system tells about one of its streams, as far as its admin can: cleanup policy,
bounded or not, per partition the segments, bytes and whether it ended, the last stable
offsets of a file-log stream that has held transactions, and the one-row summary of
``weir log list``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weir.stores.units import human_bytes

from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import CleanupPolicy, PartitionInfo, SystemAdminBase

__all__ = ["StreamSummary", "summary", "partition_details", "policy_of", "traits",
           "stable_offsets", "value_text", "human_bytes"]


def traits(admin: SystemAdminBase, stream: str) -> str:
    """``", compact, bounded"`` where the admin tells."""
    policy, bounded = policy_of(admin, stream)
    if policy is None:
        return ""
    return f", {policy.value}" + (", bounded" if bounded else "")


def policy_of(admin: SystemAdminBase, stream: str) -> tuple[CleanupPolicy | None, bool | None]:
    """The stream's cleanup policy and whether it is bounded (None: the admin does not
    tell)."""
    return admin.cleanup_policy(stream), admin.is_bounded(stream)


def stable_offsets(admin: SystemAdminBase, stream: str) -> dict[int, Any]:
    """The file log's last stable offsets, for a stream that has held transactions (other
    systems have no transactions: nothing)."""
    from weir.engine.systems.filelog.admin import FileLogAdmin
    if not isinstance(admin, FileLogAdmin) or admin.stream_meta(stream).format < 2:
        return {}
    return admin.open_transactions(stream)


def partition_details(admin: SystemAdminBase, stream: str) -> dict[int, PartitionInfo]:
    """Segments, bytes and ended flag per partition, where the system can tell
    (``admin.describe``)."""
    return {info.partition: info for info in admin.describe(stream)}


def value_text(value: object, fmt: str = "{}") -> str:
    """``value`` formatted with ``fmt``; ``-`` when it is None (not known)."""
    return "-" if value is None else fmt.format(value)


@dataclass(frozen=True)
class StreamSummary:
    """One row of ``weir log list``; ``None`` where the system cannot tell."""

    stream: str
    partitions: int
    records: int
    bytes: int | None
    cleanup_policy: CleanupPolicy | None
    bounded: bool | None
    ended_partitions: int | None

    @property
    def records_exact(self) -> bool:
        """Offsets retained = records, except in a compacted stream (compaction leaves gaps)."""
        return self.cleanup_policy is not CleanupPolicy.COMPACT

    def as_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "partitions": self.partitions, "records": self.records,
                "records_exact": self.records_exact, "bytes": self.bytes,
                "cleanup_policy": self.cleanup_policy.value if self.cleanup_policy else None,
                "bounded": self.bounded, "ended_partitions": self.ended_partitions}

    @property
    def ended_text(self) -> str:
        if self.ended_partitions is None:
            return "-"
        if self.ended_partitions == 0:
            return "no" if self.bounded is not False else "-"
        if self.ended_partitions == self.partitions:
            return "yes"
        return f"{self.ended_partitions}/{self.partitions}"


def summary(admin: SystemAdminBase, system: str, stream: str) -> StreamSummary:
    """The :class:`StreamSummary` of ``stream``."""
    count = admin.partition_count(stream)
    metadata = admin.metadata([SystemStreamPartition(system, stream, p) for p in range(count)])
    records = sum(md.upcoming - md.oldest for md in metadata.values())
    details = partition_details(admin, stream)
    unknown = PartitionInfo(-1)
    sizes = [details.get(p, unknown).bytes for p in range(count)]
    ended = [details.get(p, unknown).ended for p in range(count)]
    policy, bounded = policy_of(admin, stream)
    return StreamSummary(
        stream, count, records, None if None in sizes else sum(sizes), policy, bounded,
        None if None in ended else sum(1 for e in ended if e))


