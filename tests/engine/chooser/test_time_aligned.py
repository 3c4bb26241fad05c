import pytest

from weir.engine.chooser import ChooserError, TimeAlignedChooser

from tests.engine.chooser._envelopes import drain, env, eos


def test_smallest_event_timestamp_first():
    c = TimeAlignedChooser()
    c.update(env("a", timestamp=300))
    c.update(env("b", timestamp=100))
    c.update(env("c", timestamp=200))
    assert [e.ssp.stream for e in drain(c)] == ["b", "c", "a"]


def test_equal_timestamps_go_in_arrival_order():
    c = TimeAlignedChooser()
    for s in "cab":
        c.update(env(s, timestamp=5))
    assert [e.ssp.stream for e in drain(c)] == ["c", "a", "b"]


def test_untimestamped_envelopes_fall_back_to_arrival_order():
    c = TimeAlignedChooser()
    c.update(env("x"))                  # no timestamp, arrives first
    c.update(env("a", timestamp=10))
    c.update(env("y"))                  # no timestamp, arrives after a
    assert [e.ssp.stream for e in drain(c)] == ["x", "a", "y"]


def test_untimestamped_waits_for_earlier_arrivals_with_timestamps():
    c = TimeAlignedChooser()
    c.update(env("a", timestamp=50))
    c.update(env("b", timestamp=10))
    c.update(env("x"))
    # b has the smallest timestamp; x arrived after a and b, so both go first.
    assert [e.ssp.stream for e in drain(c)] == ["b", "a", "x"]


def test_fast_stream_does_not_run_ahead_in_event_time():
    c = TimeAlignedChooser()
    c.update(env("fast", 0, timestamp=0))
    c.update(env("slow", 0, timestamp=0))
    chosen = []
    for _ in range(12):
        e = c.choose()
        chosen.append((e.ssp.stream, e.timestamp))
        step = 10 if e.ssp.stream == "fast" else 30
        c.update(env(e.ssp, e.offset + 1, timestamp=e.timestamp + step))
    timestamps = [t for _, t in chosen]
    assert timestamps == sorted(timestamps)


def test_untimestamped_ssp_cannot_starve_timestamped_ones():
    c = TimeAlignedChooser()
    c.update(env("timed", 0, timestamp=1_000))
    c.update(env("untimed", 0))
    seen = set()
    for _ in range(4):
        e = c.choose()
        seen.add(e.ssp.stream)
        if e.ssp.stream == "untimed":
            c.update(env(e.ssp, e.offset + 1))
    assert seen == {"timed", "untimed"}


def test_end_of_stream_envelopes_are_ordered_by_arrival():
    c = TimeAlignedChooser()
    c.update(eos("a", 7))
    c.update(env("b", timestamp=1))
    assert [e.ssp.stream for e in drain(c)] == ["a", "b"]


def test_second_envelope_for_same_ssp_raises():
    c = TimeAlignedChooser()
    c.update(env("a", 0, timestamp=1))
    with pytest.raises(ChooserError, match="TimeAlignedChooser"):
        c.update(env("a", 1, timestamp=2))
