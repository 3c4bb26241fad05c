"""The applications and the low-level task of bench/app_windows.py and bench/latency.py (named
in configs)."""

from __future__ import annotations

from weir.engine.app import StreamApplication, Windows, count
from weir.engine.model import OutgoingMessageEnvelope, SystemStream

__all__ = ["WINDOW_MS", "LATENCY_WINDOW_MS", "ShuffledWindowCount", "DirectWindowCount",
           "LatencyViews"]

WINDOW_MS = 60_000
LATENCY_WINDOW_MS = 1_000
OUT = SystemStream("filelog", "counts")


class ShuffledWindowCount(StreamApplication):
    """map -> partition_by(user) -> keyed tumbling one-minute count -> counts."""

    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="msgpack")
        (events.map(lambda e: e["user"])
               .partition_by(lambda user: user, lambda user: 1, name="by-user")
               .window(Windows.tumbling(WINDOW_MS, aggregate=count()), name="per-minute")
               .send_to(app.output("filelog.counts", key_serde="string", msg_serde="msgpack")))


class DirectWindowCount:
    """The same count as one low-level task without a shuffle (its input is already
    partitioned by user): the counts live in the same kind of store (RocksDB, keyed
    ``(window end, window start, user)``) and are emitted when the input ends."""

    def init(self, context):
        self.store = context.store("counts")

    def process(self, envelope, collector, coordinator):
        event = envelope.message
        user, ts = event["user"], event["ts"]
        start = ts - ts % WINDOW_MS
        key = (start + WINDOW_MS, start, user)
        store = self.store
        store.put(key, (store.get(key) or 0) + 1)

    def on_end_of_stream(self, collector, coordinator):
        with self.store.all() as it:
            rows = list(it)
        for (end, start, user), n in rows:
            collector.send(OutgoingMessageEnvelope(
                OUT, {"key": user, "start": start, "end": end, "value": n}, key=user,
                timestamp=end - 1))
            self.store.delete((end, start, user))


class LatencyViews(StreamApplication):
    """bench/latency.py's application, the pageviews shape: views (MessagePack maps with the
    user and the producer's scheduled send time: ``ts``, wall clock ms, the event time;
    ``at``, monotonic ns) -> ``partition_by(user)`` -> every view to ``lat-records`` (the
    records through the shuffle), and a keyed tumbling one-second count per user to
    ``lat-panes`` (the panes, fired when the watermark passes their end)."""

    def describe(self, app):
        views = app.input("filelog.lat-views", timestamp=lambda v: v["ts"], msg_serde="msgpack")
        by_user = views.partition_by(lambda v: v["user"], name="by-user")
        by_user.send_to(app.output("filelog.lat-records", key_serde="string",
                                   msg_serde="msgpack"))
        (by_user.window(Windows.tumbling(LATENCY_WINDOW_MS, aggregate=count()), name="per-second")
                .send_to(app.output("filelog.lat-panes", key_serde="string", msg_serde="msgpack")))
