"""Applications end to end, in this process: bounded inputs end every stage by themselves, and
the outputs equal a direct batch computation."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.engine.app._apps import (batch_sessions, batch_three_stage, batch_window_counts,
                                    make_events)
from tests.engine.app._pipeline import Pipeline

pytestmark = pytest.mark.timeout(120)


def window_counts(outputs) -> dict[tuple[str, int], int]:
    """Latest pane per (key, window start): outputs are at-least-once, panes may repeat."""
    latest = {}
    for key, pane, _ in outputs:
        latest[(pane["key"], pane["start"])] = pane["value"]
    assert all(k == pane_key for (pane_key, _), k in zip(latest, (k for k, _, _ in outputs)))
    return latest


def test_a_windowed_count_over_a_shuffle_equals_the_batch_count(tmp_path):
    events = make_events(1, 600, disorder_ms=0)
    p = Pipeline(tmp_path, "WindowedCounts")
    p.create("events", 3)
    p.produce("events", events, lambda i, e: i % 3)
    result = p.run()
    assert window_counts(p.outputs()) == batch_window_counts(events)
    assert len(p.outputs()) == len(batch_window_counts(events))   # each window fired once
    assert result.reason.startswith("ended (end-of-stream")


def test_a_three_stage_pipeline_over_bounded_inputs_ends_by_itself(tmp_path):
    events = make_events(2, 500, users=9)
    p = Pipeline(tmp_path, "ThreeStage")
    p.create("events", 2)
    p.produce("events", events, lambda i, e: i % 2)
    p.run()
    got = {pane["start"]: pane["value"] for _, pane, _ in p.outputs()}
    assert got == batch_three_stage(events)


def test_panes_carry_their_window_end_minus_one_as_event_time(tmp_path):
    events = make_events(3, 200)
    p = Pipeline(tmp_path, "WindowedCounts")
    p.create("events", 1)
    p.produce("events", events, lambda i, e: 0)
    p.run()
    for _, pane, ts in p.outputs():
        assert ts == pane["end"] - 1 and pane["late"] is False


def test_a_window_without_a_shuffle_fires_at_the_end_of_its_source(tmp_path):
    # Samza drops end-of-stream before the operator graph of a job without intermediate
    # streams, so such windows never flush; Weir's graph sees it.
    events = make_events(4, 300)
    p = Pipeline(tmp_path, "NoShuffleWindow")
    p.create("events", 2)
    p.produce("events", events, lambda i, e: i % 2)
    p.run()
    got = Counter()
    for _, pane, _ in p.outputs():
        got[(pane["key"].lower(), pane["start"])] += pane["value"]
    assert dict(got) == batch_window_counts(events)


def test_session_windows_equal_the_batch_sessions(tmp_path):
    events = make_events(5, 400, users=5, span_ms=37)
    p = Pipeline(tmp_path, "UserSessions", test__gap__ms=120)
    p.create("events", 2)
    p.produce("events", events, lambda i, e: i % 2)
    p.run()
    got = Counter((pane["key"], pane["start"], pane["end"], pane["value"])
                  for _, pane, _ in p.outputs())
    assert got == batch_sessions(events, 120)


def test_out_of_order_events_within_the_bound_are_all_on_time(tmp_path):
    events = make_events(6, 800, disorder_ms=150)
    p = Pipeline(tmp_path, "WindowedCounts", task__watermark__max__out__of__orderness__ms=150)
    p.create("events", 2)
    p.produce("events", events, lambda i, e: i % 2)
    p.run()
    assert window_counts(p.outputs()) == batch_window_counts(events)


def test_an_interval_join_pairs_events_of_a_key_within_the_bound(tmp_path):
    impressions = [{"ad": f"a{i % 5}", "ts": i * 40} for i in range(100)]
    clicks = [{"ad": f"a{i % 5}", "ts": i * 40 + 60} for i in range(0, 100, 3)]
    p = Pipeline(tmp_path, "ClickJoin")
    p.create("impressions", 2)
    p.create("clicks", 2)
    p.produce("impressions", impressions, lambda i, e: i % 2)
    p.produce("clicks", clicks, lambda i, e: i % 2)
    p.run()
    got = Counter((v["ad"], v["imp"], v["click"]) for _, v, _ in p.outputs())
    want = Counter((i["ad"], i["ts"], c["ts"]) for i in impressions for c in clicks
                   if i["ad"] == c["ad"] and abs(i["ts"] - c["ts"]) <= 100)
    assert got == want


def test_a_table_filled_by_a_bootstrap_stream_joins_every_order(tmp_path):
    rates = {"USD": 0.9, "GBP": 1.2}
    orders = [{"id": i, "cur": ["USD", "GBP", "XXX"][i % 3], "amount": i, "ts": i} for i in range(60)]
    p = Pipeline(tmp_path, "CurrencyTable")
    p.create("rates", 1)
    p.create("orders", 1)
    p.produce("rates", [{"c": c, "r": r} for c, r in rates.items()], lambda i, e: 0,
              key=lambda e: e["c"])
    p.produce("orders", orders, lambda i, e: 0, key=lambda o: o["id"])
    p.run()
    got = {v["id"]: v["eur"] for _, v, _ in p.outputs()}
    assert got == {o["id"]: (None if o["cur"] == "XXX" else o["amount"] * rates[o["cur"]])
                   for o in orders}
