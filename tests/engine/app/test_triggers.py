"""Triggers on their own: Samza's count, time-since-first-message, time-since-last-message, any
and repeat, as state machines over a window's elements and a processing-time clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from weir.engine.app.triggers import FINISHED, Triggers


def feed(trigger, times):
    state = trigger.start()
    for now in times:
        state = trigger.on_element(state, now)
    return state


def test_a_count_trigger_fires_at_its_count_and_then_is_finished():
    t = Triggers.count(3)
    assert not t.should_fire(feed(t, [0, 1]), 1)
    assert t.should_fire(feed(t, [0, 1, 2]), 2)
    assert t.deadline(feed(t, [0])) is None and not t.timed
    assert t.after_fire() is FINISHED


def test_time_since_first_message_fires_its_duration_after_the_first_element_only():
    t = Triggers.time_since_first_message(100)
    assert t.deadline(t.start()) is None            # nothing arrived: no timer
    state = feed(t, [1_000, 1_050, 1_090])          # later elements do not move it
    assert t.deadline(state) == 1_100
    assert not t.should_fire(state, 1_099) and t.should_fire(state, 1_100)
    assert t.durations() == (100,)


def test_time_since_last_message_moves_its_deadline_with_every_element():
    t = Triggers.time_since_last_message(timedelta(seconds=2))
    state = feed(t, [1_000, 2_500])
    assert t.deadline(state) == 4_500
    assert not t.should_fire(state, 4_000) and t.should_fire(state, 4_500)


def test_any_fires_when_one_of_its_triggers_fires_and_has_the_earliest_deadline():
    t = Triggers.any(Triggers.count(2), Triggers.time_since_first_message(50))
    state = feed(t, [10])
    assert t.deadline(state) == 60 and not t.should_fire(state, 59)
    assert t.should_fire(state, 60)                 # by time
    assert t.should_fire(feed(t, [10, 11]), 11)     # by count
    assert t.after_fire() is FINISHED               # every member stops, as in Samza


def test_repeat_starts_its_trigger_again_after_each_firing():
    t = Triggers.repeat(Triggers.any(Triggers.count(2), Triggers.time_since_first_message(50)))
    assert t.after_fire() == t.start()
    assert t.durations() == (50,) and t.timed
    assert t.describe() == "repeat(any(count(2), time_since_first_message(50 ms)))"


def test_trigger_states_are_plain_values_a_store_can_keep():
    import msgpack
    t = Triggers.repeat(Triggers.any(Triggers.count(2), Triggers.time_since_last_message(5)))
    state = feed(t, [1, 2])
    assert msgpack.unpackb(msgpack.packb(state)) == state


@pytest.mark.parametrize("make,match", [
    (lambda: Triggers.count(0), "positive integer"),
    (lambda: Triggers.count(2.5), "positive integer"),
    (lambda: Triggers.time_since_first_message(-5), "positive"),
    (lambda: Triggers.time_since_last_message("5s"), "timedelta"),
    (lambda: Triggers.any(), "at least one"),
    (lambda: Triggers.any(Triggers.count(1), 5), "takes triggers"),
    (lambda: Triggers.repeat(None), "takes a trigger"),
])
def test_bad_trigger_arguments_are_refused_with_the_fix(make, match):
    with pytest.raises(ValueError, match=match):
        make()
