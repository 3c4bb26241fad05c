"""Inputs of the application shapes (tests/engine/app/_apps.py) that the Spark application
tests run both embedded and on Spark, or through the stage runners without Spark."""

from __future__ import annotations

from tests.engine.app._apps import make_events
from tests.engine.app._pipeline import Pipeline

__all__ = ["feed_three_stage", "feed_click_join", "feed_currency_table"]


def feed_three_stage(p: Pipeline) -> None:
    p.create("events", 3)
    p.produce("events", make_events(2, 400, users=9), lambda i, e: i % 3)


def feed_click_join(p: Pipeline) -> None:
    impressions = [{"ad": f"a{i % 5}", "ts": i * 40} for i in range(100)]
    clicks = [{"ad": f"a{i % 5}", "ts": i * 40 + 60} for i in range(0, 100, 3)]
    p.create("impressions", 2)
    p.create("clicks", 2)
    p.produce("impressions", impressions, lambda i, e: i % 2)
    p.produce("clicks", clicks, lambda i, e: i % 2)


def feed_currency_table(p: Pipeline) -> None:
    rates = {"USD": 0.9, "GBP": 1.2}
    orders = [{"id": i, "cur": ["USD", "GBP", "XXX"][i % 3], "amount": i, "ts": i}
              for i in range(60)]
    p.create("rates", 1)
    p.create("orders", 1)
    p.produce("rates", [{"c": c, "r": r} for c, r in rates.items()], lambda i, e: 0,
              key=lambda e: e["c"])
    p.produce("orders", orders, lambda i, e: 0, key=lambda o: o["id"])
