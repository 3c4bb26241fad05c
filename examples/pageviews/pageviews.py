"""Page views per user per minute, and user sessions: the README's high-level example.

Page views arrive partitioned by page (whatever the producers chose). The application
normalizes them, drops robots, repartitions by user, and keeps two event-time windows per
user in RocksDB: a tumbling one-minute count, and sessions that close after 30 minutes
without a view. Both fire when the watermark passes their end, whatever the order in which
the views of different partitions arrive (up to five seconds late is on time here).
"""

from weir.app import StreamApplication, Windows, count


class PageViews(StreamApplication):
    def describe(self, app):
        views = app.input("filelog.pageviews", timestamp=lambda v: v["ts"], msg_serde="json")
        by_user = (views
                   .filter(lambda v: not v.get("robot"))
                   .map(lambda v: {"user": v["user"].lower(), "page": v["page"], "ts": v["ts"]})
                   .partition_by(lambda v: v["user"], name="by-user"))
        (by_user.window(Windows.tumbling(60_000, aggregate=count()), name="per-minute")
                .send_to(app.output("filelog.views-per-minute", key_serde="string",
                                    msg_serde="json", partitions=4)))
        (by_user.window(Windows.session(30 * 60_000, aggregate=count()), name="sessions")
                .send_to(app.output("filelog.sessions", key_serde="string", msg_serde="json",
                                    partitions=4)))
