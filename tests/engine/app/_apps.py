"""Applications for the high-level API tests (named in configs as ``module:Name``), the input
generators and the direct batch computations their outputs are checked against."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from typing import Any

from weir.engine.app import KV, StreamApplication, Windows, count, summing
from weir.engine.app.windows import Aggregate

__all__ = ["WindowedCounts", "ThreeStage", "UserSessions", "ClickJoin", "CurrencyTable",
           "NoShuffleWindow", "make_events", "batch_window_counts", "batch_three_stage",
           "batch_sessions", "SlowUpstreamCounts"]


def _size(app, default: int) -> int:
    return int(app.config.get("test.window.ms", default))


class WindowedCounts(StreamApplication):
    """events -> map -> partition_by(user) -> tumbling count per user -> out."""

    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="json")
        (events.map(lambda e: {**e, "user": e["user"].lower()})
               .partition_by(lambda e: e["user"], name="by-user")
               .window(Windows.tumbling(_size(app, 1000)), name="per-user")
               .send_to(app.output("filelog.out", key_serde="json", msg_serde="json",
                                   partitions=2)))


class ThreeStage(StreamApplication):
    """Stage 0 repartitions by user, stage 1 counts per user and second and repartitions the
    panes by second, stage 2 counts active users per second."""

    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="json")
        per_user = (events.partition_by(lambda e: e["user"], name="by-user")
                          .window(Windows.tumbling(_size(app, 1000)), name="per-user"))
        (per_user.partition_by(lambda pane: pane.start, lambda pane: pane.value, name="by-second")
                 .window(Windows.tumbling(_size(app, 1000), aggregate=count()), name="users")
                 .send_to(app.output("filelog.out", key_serde="json", msg_serde="json",
                                     partitions=2)))


class NoShuffleWindow(StreamApplication):
    """A one-stage application: a window straight on the input (keys already partitioned)."""

    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="json")
        (events.window(Windows.tumbling(1000, key=lambda e: e["user"]), name="direct")
               .send_to(app.output("filelog.out", key_serde="json", msg_serde="json",
                                   partitions=2)))


class UserSessions(StreamApplication):
    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="json")
        lateness = int(app.config.get("test.lateness.ms", 0))
        (events.partition_by(lambda e: e["user"], name="by-user")
               .window(Windows.session(int(app.config.get("test.gap.ms", 300)),
                                       aggregate=count(), allowed_lateness_ms=lateness),
                       name="sessions")
               .send_to(app.output("filelog.out", key_serde="json", msg_serde="json",
                                   partitions=2)))


class ClickJoin(StreamApplication):
    """Impressions joined with clicks of the same ad within 100 ms."""

    def describe(self, app):
        impressions = app.input("filelog.impressions", timestamp=lambda e: e["ts"],
                                msg_serde="json")
        clicks = app.input("filelog.clicks", timestamp=lambda e: e["ts"], msg_serde="json")
        left = impressions.partition_by(lambda e: e["ad"], lambda e: e, name="imp-by-ad")
        right = clicks.partition_by(lambda e: e["ad"], lambda e: e, name="click-by-ad")
        (left.join(right, key=lambda kv: kv.key, fn=lambda a, b: {"ad": a.key, "imp": a.value["ts"],
                                                                   "click": b.value["ts"]},
                   within_ms=100, name="imp-click")
             .send_to(app.output("filelog.out", msg_serde="json", partitions=1)))


class CurrencyTable(StreamApplication):
    """Rates fill a table; orders join it (left join: unknown currencies get None)."""

    def describe(self, app):
        rates = app.input("filelog.rates", kv=True, key_serde="string", msg_serde="json")
        orders = app.input("filelog.orders", timestamp=lambda o: o.value["ts"], kv=True,
                           key_serde="string", msg_serde="json")
        table = app.table("rates")
        rates.send_to(table)
        (orders.join_table(table, key=lambda o: o.value["cur"],
                           fn=lambda o, row: {"id": o.value["id"],
                                              "eur": None if row is None else o.value["amount"] * row["r"]},
                           how="left")
               .send_to(app.output("filelog.out", key_serde="string", msg_serde="json",
                                   partitions=1),
                        key=lambda r: str(r["id"]), value=lambda r: r))


def make_events(seed: int, n: int, *, users: int = 7, disorder_ms: int = 0,
                span_ms: int = 20) -> list[dict[str, Any]]:
    """``n`` events, event time growing by ``span_ms`` per event, shuffled within
    ``disorder_ms`` (so a watermark bound of ``disorder_ms`` makes none late)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ts = i * span_ms + (rng.randrange(disorder_ms + 1) - disorder_ms if disorder_ms else 0)
        out.append({"user": f"U{rng.randrange(users)}", "ts": max(0, ts), "i": i})
    return out


def batch_window_counts(events, size_ms: int = 1000) -> dict[tuple[str, int], int]:
    """(user, window start) -> count, computed directly."""
    out: Counter = Counter()
    for e in events:
        out[(e["user"].lower(), e["ts"] - e["ts"] % size_ms)] += 1
    return dict(out)


def batch_three_stage(events, size_ms: int = 1000) -> dict[int, int]:
    """window start -> number of users active in it."""
    users = defaultdict(set)
    for e in events:
        users[e["ts"] - e["ts"] % size_ms].add(e["user"])
    return {start: len(us) for start, us in users.items()}


def batch_sessions(events, gap_ms: int) -> Counter:
    """Counter of (user, start, end, count) sessions."""
    by_user = defaultdict(list)
    for e in events:
        by_user[e["user"]].append(e["ts"])
    out: Counter = Counter()
    for user, times in by_user.items():
        times.sort()
        start, last, n = times[0], times[0], 1
        for t in times[1:]:
            if t < last + gap_ms:
                last, n = max(last, t), n + 1
            else:
                out[(user, start, last + gap_ms, n)] += 1
                start, last, n = t, t, 1
        out[(user, start, last + gap_ms, n)] += 1
    return out


_unused = (summing, Aggregate, KV)


def _pause_then(e: dict) -> dict:
    """Test data may carry a pause: ``{"pause": ms}`` stalls the task that maps it that long
    (a slow upstream task: busy, not idle)."""
    if e.get("pause"):
        time.sleep(e["pause"] / 1000)
    return {**e, "user": e["user"].lower()}


class SlowUpstreamCounts(StreamApplication):
    """events -> map (pausing on ``{"pause": ms}`` elements) -> partition_by(user) ->
    tumbling count per user -> out."""

    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="json")
        (events.map(_pause_then)
               .partition_by(lambda e: e["user"], name="by-user")
               .window(Windows.tumbling(_size(app, 1000)), name="per-user")
               .send_to(app.output("filelog.out", key_serde="json", msg_serde="json",
                                   partitions=2)))


class MergedCounts(StreamApplication):
    """Two inputs merged, repartitioned by user, counted per window."""

    def describe(self, app):
        a = app.input("filelog.a", timestamp=lambda e: e["ts"], msg_serde="json")
        b = app.input("filelog.b", timestamp=lambda e: e["ts"], msg_serde="json")
        (a.merge(b).partition_by(lambda e: e["user"].lower(), name="by-user")
                   .window(Windows.tumbling(_size(app, 1000)), name="per-user")
                   .send_to(app.output("filelog.out", key_serde="json", msg_serde="json",
                                       partitions=2)))


def distinct(value) -> Aggregate:
    """The sorted distinct ``value(element)``s: an idempotent aggregate (a record counted twice
    after a crash changes nothing)."""
    def add(acc, element):
        v = value(element)
        return acc if v in acc else sorted([*acc, v])
    return Aggregate(list, add, lambda a, b: sorted(set(a) | set(b)), result=len)


class DistinctThreeStage(StreamApplication):
    """ThreeStage with idempotent aggregates: distinct events per user and window, then
    distinct users per window. Intermediate streams are at-least-once; these results stay
    exact when an upstream task sends records again after a crash."""

    def describe(self, app):
        events = app.input("filelog.events", timestamp=lambda e: e["ts"], msg_serde="json")
        per_user = (events.partition_by(lambda e: e["user"], name="by-user")
                          .window(Windows.tumbling(_size(app, 1000),
                                                   aggregate=distinct(lambda kv: kv.value["i"])),
                                  name="per-user"))
        (per_user.partition_by(lambda pane: pane.start, lambda pane: pane.key, name="by-second")
                 .window(Windows.tumbling(_size(app, 1000),
                                          aggregate=distinct(lambda kv: kv.value)), name="users")
                 .send_to(app.output("filelog.out", key_serde="json", msg_serde="json",
                                     partitions=2)))


class TumblingWindowExample(StreamApplication):
    """hello-samza's cookbook TumblingWindowExample, ported: page views repartitioned by user,
    counted per user in tumbling windows on processing time (Samza's windows), written as
    ``{"userId", "count"}``. The window is ``test.window.ms`` (hello-samza: 5 s)."""

    def describe(self, app):
        page_views = app.input("filelog.pageview-tumbling-input", kv=True, key_serde="string",
                               msg_serde="json")
        (page_views
            .partition_by(lambda kv: kv.value["userId"], lambda kv: kv.value, name="userId")
            .window(Windows.keyed_tumbling_window(lambda kv: kv.key, _size(app, 5_000),
                                                  lambda: 0, lambda m, prev_count: prev_count + 1),
                    name="count")
            .map(lambda pane: KV(pane.key, {"userId": pane.key, "count": pane.value,
                                            "timing": pane.timing.value}))
            .send_to(app.output("filelog.pageview-tumbling-output", key_serde="string",
                                msg_serde="json", partitions=2)))


class EventTimeViewsWithLateOutput(StreamApplication):
    """The same count on event time (the record timestamps), with the window's late elements
    sent to an output of their own."""

    def describe(self, app):
        page_views = app.input("filelog.pageview-tumbling-input", kv=True, key_serde="string",
                               msg_serde="json")
        panes = (page_views
                 .partition_by(lambda kv: kv.value["userId"], lambda kv: kv.value, name="userId")
                 .window(Windows.tumbling(_size(app, 5_000)), name="count"))
        panes.send_to(app.output("filelog.pageview-tumbling-output", key_serde="string",
                                 msg_serde="json", partitions=2))
        panes.late_elements().send_to(app.output("filelog.late-views", key_serde="string",
                                                 msg_serde="json", partitions=2))
