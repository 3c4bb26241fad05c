"""Admission of a job's input into micro-batches: the chooser's rules across batches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from weir.engine.chooser.spec import BOOTSTRAP_PRIORITY
from weir.engine.spark.jobplan import JobPlan, TaskPlan, admit, parse_ssp_key, ssp_key

CODES0, CODES1 = ("log", "codes", 0), ("log", "codes", 1)
TX, OLD = ("log", "tx", 0), ("log", "old", 0)
TIERS = {CODES0: BOOTSTRAP_PRIORITY, CODES1: BOOTSTRAP_PRIORITY, TX: 2, OLD: 1}


def test_nothing_but_bootstrap_partitions_is_admitted_while_one_lags():
    heads = {CODES0: 5, CODES1: 3, TX: 100, OLD: 100}
    start = {CODES0: 0, CODES1: 3, TX: 0, OLD: 0}
    end = admit(start, heads, {CODES0: 5, CODES1: 3}, TIERS, 0)
    assert end == {CODES0: 5, CODES1: 3, TX: 0, OLD: 0}
    assert admit(end, heads, {CODES0: 5, CODES1: 3}, TIERS, 0) == {
        CODES0: 5, CODES1: 3, TX: 100, OLD: 100}


def test_bootstrap_reads_only_up_to_the_head_it_had_at_start():
    heads = {CODES0: 9, TX: 10}                 # codes grew to 9 after the query started at 4
    end = admit({CODES0: 0, TX: 0}, heads, {CODES0: 4}, TIERS, 0)
    assert end == {CODES0: 4, TX: 0}
    assert admit(end, heads, {CODES0: 4}, TIERS, 0) == {CODES0: 9, TX: 10}


def test_a_budget_goes_to_the_highest_tier_first_and_is_shared_fairly_inside_a_tier():
    heads = {TX: 100, OLD: 100, ("log", "tx", 1): 100}
    tiers = {TX: 2, ("log", "tx", 1): 2, OLD: 1}
    end = admit({TX: 0, OLD: 0, ("log", "tx", 1): 0}, heads, {}, tiers, 10)
    assert end == {TX: 5, ("log", "tx", 1): 5, OLD: 0}
    end = admit({TX: 98, OLD: 0, ("log", "tx", 1): 99}, heads, {}, tiers, 10)
    assert end == {TX: 100, ("log", "tx", 1): 100, OLD: 7}


def test_a_bootstrap_budget_is_shared_between_lagging_partitions():
    heads = {CODES0: 50, CODES1: 50, TX: 10}
    end = admit({CODES0: 0, CODES1: 0, TX: 0}, heads, {CODES0: 50, CODES1: 50}, TIERS, 20)
    assert end == {CODES0: 10, CODES1: 10, TX: 0}


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(-1, 3)),
                min_size=1, max_size=6), st.integers(0, 40))
def test_admission_never_passes_a_head_never_moves_back_and_respects_the_budget(parts, limit):
    ssps = [("log", "s", i) for i in range(len(parts))]
    start = {s: min(a, b) for s, (a, b, _) in zip(ssps, parts)}
    heads = {s: max(a, b) for s, (a, b, _) in zip(ssps, parts)}
    tiers = {s: t for s, (_, _, t) in zip(ssps, parts)}
    end = admit(start, heads, {}, tiers, limit)
    assert all(start[s] <= end[s] <= heads[s] for s in ssps)
    moved = sum(end[s] - start[s] for s in ssps)
    if limit:
        assert moved <= limit
        # a lower tier only moves when every higher tier is at its head
        for s in ssps:
            if end[s] > start[s]:
                assert all(end[o] == heads[o] for o in ssps if tiers[o] > tiers[s])
    else:
        assert end == heads


def test_a_plan_round_trips_through_json_and_names_partitions_stably():
    plan = JobPlan("j", "j-1", "/ck", {"a": "1"}, {"a": "f:1"}, "/dir",
                   (TaskPlan(0, "Partition 0", (CODES0, TX)),),
                   frozenset({("log", "codes")}), {("log", "tx"): 2}, 100)
    assert JobPlan.from_json(plan.to_json()) == plan
    assert plan.tier(CODES0) == BOOTSTRAP_PRIORITY and plan.tier(TX) == 2 and plan.tier(OLD) == -1
    assert parse_ssp_key(ssp_key(TX)) == TX
    assert parse_ssp_key(ssp_key(("sys", "a/b", 3))) == ("sys", "a/b", 3)
