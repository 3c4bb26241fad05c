"""EndOfStreamStates and WatermarkStates, rule by rule (SAMZA-REFERENCE 2.5, 2.6), with the
checkpoint shapes and Weir's one departure (an ended upstream task no longer holds the
watermark back)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.engine.control import BadTaskCountError, WATERMARK_MAX, WATERMARK_NOT_EXIST
from weir.engine.control.states import EndOfStreamStates, WatermarkStates
from weir.engine.model import SystemStream, SystemStreamPartition

P0 = SystemStreamPartition("filelog", "int1", 0)
P1 = SystemStreamPartition("filelog", "int1", 1)
SRC = SystemStreamPartition("filelog", "source", 0)
INT1 = SystemStream("filelog", "int1")


# -- 2.5 end of stream ---------------------------------------------------------------------------

def test_eos_from_a_named_task_counts_it_and_ends_the_partition_when_all_expected_sent():
    eos = EndOfStreamStates({P0: 3})
    assert not eos.update(P0, "t0") and not eos.update(P0, "t1")
    assert eos.update(P0, "t2")
    assert eos.tasks(P0) == {"t0", "t1", "t2"}


def test_eos_without_a_task_name_ends_the_partition_at_once():
    eos = EndOfStreamStates({P0: 3})
    assert eos.update(P0, None) and eos.is_end_of_stream(P0)


def test_a_duplicate_eos_from_the_same_task_counts_once():
    eos = EndOfStreamStates({P0: 2})
    eos.update(P0, "t0")
    assert not eos.update(P0, "t0")


def test_stream_ended_means_every_tracked_partition_of_it_ended_and_is_vacuous_without_any():
    eos = EndOfStreamStates({P0: 1, P1: 1})
    eos.update(P0, "t")
    assert not eos.stream_ended(INT1) and not eos.all_end_of_stream()
    eos.update(P1, "t")
    assert eos.stream_ended(INT1) and eos.all_end_of_stream()
    assert eos.stream_ended(SystemStream("filelog", "untracked"))


def test_quirk_a_named_eos_on_a_source_partition_never_ends_it():
    eos = EndOfStreamStates({SRC: 0})
    with pytest.raises(BadTaskCountError):   # Weir: more senders than expected is an error
        eos.update(SRC, "t0")
    eos2 = EndOfStreamStates({SRC: 0})
    assert eos2.update(SRC, None)


def test_more_distinct_upstream_tasks_than_expected_is_a_bad_task_count():
    eos = EndOfStreamStates({P0: 1})
    eos.update(P0, "t0")
    with pytest.raises(BadTaskCountError, match="offset 9") as err:
        eos.update(P0, "t1", offset=9)
    assert (err.value.expected, err.value.got) == (1, 2)


def test_an_unknown_upstream_count_is_learned_from_the_first_task_count_and_then_enforced():
    eos = EndOfStreamStates({P0: None})
    assert not eos.update(P0, "t0")
    eos.expect(P0, 2)
    assert eos.update(P0, "t1")
    with pytest.raises(BadTaskCountError):
        eos.expect(P0, 3)


def test_eos_state_survives_its_checkpoint_round_trip():
    eos = EndOfStreamStates({P0: 3, P1: 1})
    eos.update(P0, "t0"); eos.update(P1, "t5")
    saved = {s: type(cp).from_json(cp.to_json()) for s, cp in eos.checkpoint().items()}
    again = EndOfStreamStates({P0: 3, P1: 1})
    again.restore(saved)
    assert again.tasks(P0) == {"t0"} and not again.is_end_of_stream(P0)
    assert again.is_end_of_stream(P1)


# -- 2.6 watermarks ----------------------------------------------------------------------------

def test_watermark_is_the_minimum_over_upstream_tasks_once_all_reported():
    wm = WatermarkStates({P0: 2})
    assert wm.update(P0, 4, "t0") == WATERMARK_NOT_EXIST
    assert wm.update(P0, 3, "t1") == 3


def test_a_lower_watermark_from_a_task_is_ignored():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 10, "t0")
    wm.update(P0, 20, "t1")
    wm.update(P0, 5, "t0")
    wm.update(P0, 30, "t1")
    assert wm.watermark(P0) == 10


def test_a_watermark_without_a_task_name_raises_the_partition_watermark_directly():
    wm = WatermarkStates({P0: 2})
    assert wm.update(P0, 7, None) == 7
    assert wm.update(P0, 5, None) == 7


def test_the_watermark_never_goes_backwards():
    wm = WatermarkStates({P0: 1})
    wm.update(P0, 10, "t0")
    wm.update(P0, 3, "t0")
    assert wm.watermark(P0) == 10


def test_a_quiet_upstream_task_holds_the_watermark_however_long_it_is_quiet():
    # Weir departs from Samza's idle timeout here: only the upstream task itself can say
    # that it is idle; a slow one holds the watermark, so its records are never late
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 10, "slow")
    for ts in range(20, 10_000, 1_000):
        wm.update(P0, ts, "fast")
    assert wm.watermark(P0) == 10


def test_an_upstream_task_that_declared_idle_is_left_out_until_it_is_active_again():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 10, "quiet")
    wm.update(P0, 50, "busy")
    assert wm.watermark(P0) == 10
    assert wm.set_idle(P0, "quiet", True) == 50
    assert wm.update(P0, 80, "busy") == 80 and wm.idle_tasks(P0) == {"quiet"}
    wm.set_idle(P0, "quiet", False)              # back, behind: holds the watermark where it is
    assert wm.update(P0, 120, "busy") == 80
    assert wm.update(P0, 100, "quiet") == 100


def test_a_watermark_from_an_idle_upstream_task_makes_it_active_again():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 10, "a"); wm.update(P0, 10, "b")
    wm.set_idle(P0, "a", True)
    assert wm.update(P0, 40, "b") == 40
    wm.update(P0, 45, "a")
    assert wm.idle_tasks(P0) == frozenset() and wm.update(P0, 90, "b") == 45


def test_an_upstream_task_idle_before_its_first_watermark_does_not_hold_the_partition():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 30, "busy")
    assert wm.watermark(P0) == WATERMARK_NOT_EXIST       # not every task reported yet
    assert wm.set_idle(P0, "empty", True) == 30


def test_a_partition_is_idle_when_every_upstream_task_that_has_not_ended_is_idle():
    wm = WatermarkStates({P0: 3})
    wm.update(P0, 5, "a"); wm.update(P0, 5, "b"); wm.update(P0, 5, "c")
    wm.set_idle(P0, "a", True)
    wm.end_of_stream(P0, "b")
    assert not wm.is_idle(P0)
    wm.update(P0, 9, "c")
    assert wm.set_idle(P0, "c", True) == 9          # every one idle: the largest they reached
    assert wm.is_idle(P0)
    wm.set_idle(P0, "b", True)                       # an ended task stays ended
    assert wm.idle_tasks(P0) == {"a", "c"}


def test_idle_tasks_are_left_out_only_while_a_quorum_is_active():
    wm = WatermarkStates({P0: 4}, quorum_pct=0.5)
    for task in ("t0", "t1", "t2", "t3"):
        wm.update(P0, 10, task)
    for task in ("t1", "t2", "t3"):
        wm.set_idle(P0, task, True)
    assert wm.update(P0, 50, "t0") == 10 and wm.quorum_count(P0) == 1   # 1 active < quorum 2
    wm.update(P0, 40, "t1")                                             # active again
    assert wm.watermark(P0) == 40 and wm.quorum_count(P0) == 2


def test_ended_upstream_tasks_count_towards_the_quorum():
    wm = WatermarkStates({P0: 4}, quorum_pct=0.75)
    for task in ("t0", "t1", "t2", "t3"):
        wm.update(P0, 10, task)
    wm.end_of_stream(P0, "t1"); wm.end_of_stream(P0, "t2"); wm.set_idle(P0, "t3", True)
    assert wm.update(P0, 60, "t0") == 60 and wm.quorum_count(P0) == 3


def test_quorum_size_is_truncated_expected_times_fraction():
    wm = WatermarkStates({P0: 3}, quorum_pct=0.5)   # int(1.5) = 1
    for task in ("t0", "t1", "t2"):
        wm.update(P0, 1, task)
    wm.set_idle(P0, "t0", True); wm.set_idle(P0, "t1", True)
    assert wm.update(P0, 9, "t2") == 9


def test_idle_upstream_tasks_survive_the_checkpoint_round_trip():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 8, "t0"); wm.update(P0, 20, "t1"); wm.set_idle(P0, "t0", True)
    saved = {s: type(cp).from_json(cp.to_json()) for s, cp in wm.checkpoint().items()}
    assert wm.checkpoint()[P0].to_json()["idle"] == ["t0"]
    again = WatermarkStates({P0: 2})
    again.restore(saved)
    assert again.idle_tasks(P0) == {"t0"} and again.update(P0, 30, "t1") == 30


def test_stream_watermark_is_the_minimum_over_the_tasks_partitions_or_minus_one():
    wm = WatermarkStates({P0: 1, P1: 1})
    wm.update(P0, 9, "t")
    wm.update(P1, 4, "t")
    assert wm.stream_watermark(INT1) == 4
    assert wm.stream_watermark(SystemStream("filelog", "other")) == WATERMARK_NOT_EXIST


def test_weir_departure_an_ended_upstream_task_no_longer_holds_the_watermark_back():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 100, "early")
    wm.update(P0, 5_000, "late")
    assert wm.watermark(P0) == 100
    wm.end_of_stream(P0, "early")
    assert wm.watermark(P0) == 5_000
    wm.end_of_stream(P0, "late")
    assert wm.watermark(P0) == WATERMARK_MAX


def test_a_restored_watermark_never_moves_backwards():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 8, "t0"); wm.update(P0, 9, "t1")
    saved = {s: type(cp).from_json(cp.to_json()) for s, cp in wm.checkpoint().items()}
    again = WatermarkStates({P0: 2})
    again.restore(saved)
    assert again.watermark(P0) == 8
    again.update(P0, 2, "t0")      # an older message re-read after the restore
    assert again.watermark(P0) == 8


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-5, 50)), max_size=40))
def test_watermark_is_monotonic_and_at_most_the_minimum_of_each_tasks_largest(updates):
    wm = WatermarkStates({P0: 3})
    seen: dict[str, int] = {}
    last = WATERMARK_NOT_EXIST
    for now, (task, ts) in enumerate(updates):
        current = wm.update(P0, ts, task)
        seen[task] = max(seen.get(task, ts), ts)
        assert current >= last
        last = current
        if len(seen) == 3:
            assert current == max(WATERMARK_NOT_EXIST, min(seen.values()))
        else:
            assert current == WATERMARK_NOT_EXIST
