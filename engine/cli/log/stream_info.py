"""What a system tells about one of its streams, as far as its admin can: cleanup policy,
bounded or not, per partition the segments, bytes and whether it ended, the last stable
offsets of a file-log stream that has held transactions, and the one-row summary of
``weir log list``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from weir.stores.units import human_bytes

from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import CleanupPolicy

__all__ = ["StreamSummary", "summary", "partition_details", "policy_of", "traits",
           "stable_offsets", "attr_text", "human_bytes"]


def traits(admin: Any, stream: str) -> str:
    """``", compact, bounded"`` where the admin tells."""
    policy, bounded = policy_of(admin, stream)
    if policy is None:
        return ""
    return f", {policy.value}" + (", bounded" if bounded else "")


def policy_of(admin: Any, stream: str) -> tuple[CleanupPolicy | None, bool | None]:
    """The stream's cleanup policy and whether it is bounded, where the admin tells (file
    log: ``stream_meta``; memory: ``stream_spec``; else ``cleanup_policy`` alone)."""
    for name in ("stream_meta", "stream_spec"):
        describe = getattr(admin, name, None)
        if callable(describe):
            m = describe(stream)
            return m.cleanup_policy, m.bounded
    policy = getattr(admin, "cleanup_policy", None)
    return (policy(stream), None) if callable(policy) else (None, None)


def stable_offsets(admin: Any, stream: str) -> dict[int, Any]:
    """The file log's last stable offsets, for a stream that has held transactions."""
    meta = getattr(admin, "stream_meta", None)
    if not callable(meta) or getattr(meta(stream), "format", 1) < 2:
        return {}
    return admin.open_transactions(stream)


@dataclass(frozen=True, slots=True)
class _PartitionFiles:
    partition: int
    segments: int
    bytes: int
    ended: bool


def partition_details(admin: Any, stream: str, count: int) -> dict[int, Any]:
    """Segments, bytes and ended flag per partition, where the system can tell: an admin's
    ``describe(stream)`` (memory), or the file log's partition directories."""
    describe = getattr(admin, "describe", None)
    if callable(describe):
        return {info.partition: info for info in describe(stream)}
    stream_path = getattr(admin, "stream_path", None)
    if not callable(stream_path):
        return {}
    from weir.engine.systems.filelog.segment import list_segments
    from weir.engine.systems.filelog.stream import read_end_marker
    out = {}
    for p in range(count):
        directory = os.path.join(stream_path(stream), str(p))
        try:
            segments = list_segments(directory)
        except FileNotFoundError:
            segments = []
        size = sum(os.path.getsize(seg.path) for seg in segments if os.path.exists(seg.path))
        ended = os.path.isdir(directory) and read_end_marker(directory) is not None
        out[p] = _PartitionFiles(p, len(segments), size, ended)
    return out


def attr_text(info: Any, name: str, fmt: str = "{}") -> str:
    """Attribute ``name`` of ``info`` formatted with ``fmt``; ``-`` when it has none."""
    value = getattr(info, name, None)
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


def summary(admin: Any, system: str, stream: str) -> StreamSummary:
    """The :class:`StreamSummary` of ``stream``."""
    count = admin.partition_count(stream)
    metadata = admin.metadata([SystemStreamPartition(system, stream, p) for p in range(count)])
    records = sum(md.upcoming - md.oldest for md in metadata.values())
    details = partition_details(admin, stream, count)
    sizes = [getattr(details.get(p), "bytes", None) for p in range(count)]
    ended = [getattr(details.get(p), "ended", None) for p in range(count)]
    policy, bounded = policy_of(admin, stream)
    return StreamSummary(
        stream, count, records, None if None in sizes else sum(sizes), policy, bounded,
        None if None in ended else sum(1 for e in ended if e))


