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
    assert wm.update(P0, 4, "t0", now_ms=0) == WATERMARK_NOT_EXIST
    assert wm.update(P0, 3, "t1", now_ms=0) == 3


def test_a_lower_watermark_from_a_task_is_ignored_and_does_not_count_as_activity():
    wm = WatermarkStates({P0: 2}, idle_timeout_ms=100)
    wm.update(P0, 10, "t0", now_ms=0)
    wm.update(P0, 10, "t1", now_ms=0)
    wm.update(P0, 5, "t0", now_ms=90)            # ignored, t0's last update stays 0
    wm.update(P0, 30, "t1", now_ms=150)          # min is 10 = current: idle rule applies
    assert wm.watermark(P0) == 30                # t0 idle since 0 (< 150 - 100) is left out


def test_a_watermark_without_a_task_name_raises_the_partition_watermark_directly():
    wm = WatermarkStates({P0: 2})
    assert wm.update(P0, 7, None, now_ms=0) == 7
    assert wm.update(P0, 5, None, now_ms=0) == 7


def test_the_watermark_never_goes_backwards():
    wm = WatermarkStates({P0: 1})
    wm.update(P0, 10, "t0", now_ms=0)
    wm.update(P0, 3, "t0", now_ms=1)
    assert wm.watermark(P0) == 10


def test_before_every_task_reported_nothing_advances_unless_idle_timeout_and_quorum():
    wm = WatermarkStates({P0: 4}, idle_timeout_ms=100, quorum_pct=0.5, now_ms=0)
    wm.update(P0, 10, "t0", now_ms=50)
    wm.update(P0, 12, "t1", now_ms=60)
    assert wm.watermark(P0) == WATERMARK_NOT_EXIST       # partition younger than the timeout
    wm.update(P0, 13, "t1", now_ms=100)                  # 100 - 0 >= 100 and 2 >= quorum 2
    assert wm.watermark(P0) == 10


def test_idle_tasks_are_left_out_only_while_a_quorum_is_active():
    wm = WatermarkStates({P0: 4}, idle_timeout_ms=100, quorum_pct=0.5, now_ms=0)
    for task in ("t0", "t1", "t2", "t3"):
        wm.update(P0, 10, task, now_ms=0)
    assert wm.watermark(P0) == 10
    wm.update(P0, 50, "t0", now_ms=150)       # others idle: 1 active < quorum 2
    assert wm.watermark(P0) == 10 and wm.quorum_count(P0) == 1
    wm.update(P0, 40, "t1", now_ms=160)       # 2 active: the minimum over them
    assert wm.watermark(P0) == 40 and wm.quorum_count(P0) == 2


def test_quorum_size_is_truncated_expected_times_fraction():
    wm = WatermarkStates({P0: 3}, idle_timeout_ms=10, quorum_pct=0.5)   # int(1.5) = 1
    for task in ("t0", "t1", "t2"):
        wm.update(P0, 1, task, now_ms=0)
    wm.update(P0, 9, "t2", now_ms=100)
    assert wm.watermark(P0) == 9


def test_refresh_leaves_idle_tasks_out_without_a_new_message():
    wm = WatermarkStates({P0: 2}, idle_timeout_ms=100)
    wm.update(P0, 10, "t0", now_ms=0)
    wm.update(P0, 50, "t1", now_ms=80)
    assert wm.watermark(P0) == 10
    assert wm.refresh(P0, now_ms=150) == 50       # t0 idle since 0, t1 active since 80


def test_stream_watermark_is_the_minimum_over_the_tasks_partitions_or_minus_one():
    wm = WatermarkStates({P0: 1, P1: 1})
    wm.update(P0, 9, "t", now_ms=0)
    wm.update(P1, 4, "t", now_ms=0)
    assert wm.stream_watermark(INT1) == 4
    assert wm.stream_watermark(SystemStream("filelog", "other")) == WATERMARK_NOT_EXIST


def test_weir_departure_an_ended_upstream_task_no_longer_holds_the_watermark_back():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 100, "early", now_ms=0)
    wm.update(P0, 5_000, "late", now_ms=0)
    assert wm.watermark(P0) == 100
    wm.end_of_stream(P0, "early", now_ms=1)
    assert wm.watermark(P0) == 5_000
    wm.end_of_stream(P0, "late", now_ms=2)
    assert wm.watermark(P0) == WATERMARK_MAX


def test_a_restored_watermark_never_moves_backwards():
    wm = WatermarkStates({P0: 2})
    wm.update(P0, 8, "t0", now_ms=0); wm.update(P0, 9, "t1", now_ms=0)
    saved = {s: type(cp).from_json(cp.to_json()) for s, cp in wm.checkpoint().items()}
    again = WatermarkStates({P0: 2})
    again.restore(saved, now_ms=5)
    assert again.watermark(P0) == 8
    again.update(P0, 2, "t0", now_ms=6)      # an older message re-read after the restore
    assert again.watermark(P0) == 8


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-5, 50)), max_size=40))
def test_watermark_is_monotonic_and_at_most_the_minimum_of_each_tasks_largest(updates):
    wm = WatermarkStates({P0: 3})
    seen: dict[str, int] = {}
    last = WATERMARK_NOT_EXIST
    for now, (task, ts) in enumerate(updates):
        current = wm.update(P0, ts, task, now_ms=now)
        seen[task] = max(seen.get(task, ts), ts)
        assert current >= last
        last = current
        if len(seen) == 3:
            assert current == max(WATERMARK_NOT_EXIST, min(seen.values()))
        else:
            assert current == WATERMARK_NOT_EXIST
