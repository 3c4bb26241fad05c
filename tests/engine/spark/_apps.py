"""Applications whose shapes Spark refuses (tests/engine/spark/test_appplan.py)."""

from __future__ import annotations

from weir.app import StreamApplication, Windows

__all__ = ["IntermediateAndSource", "UnevenShuffles"]


class IntermediateAndSource(StreamApplication):
    """Stage 1 merges an intermediate stream with a source stream."""

    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="json")
        extra = app.input("filelog.extra", timestamp=lambda e: e["ts"], msg_serde="json")
        (events.partition_by(lambda e: e["user"], name="by-user")
               .merge(extra)
               .window(Windows.tumbling(1000), name="per-user")
               .send_to(app.output("filelog.out", key_serde="json", msg_serde="json",
                                   partitions=2)))


class UnevenShuffles(StreamApplication):
    """Stage 1 merges two intermediate streams of different partition counts."""

    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="json")
        a = events.partition_by(lambda e: e["user"], name="by-user", partitions=2)
        b = events.partition_by(lambda e: e["user"], name="by-user-3", partitions=3)
        (a.merge(b).window(Windows.tumbling(1000), name="per-user")
          .send_to(app.output("filelog.out", key_serde="json", msg_serde="json", partitions=2)))
