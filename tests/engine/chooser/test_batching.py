import pytest

from weir.engine.chooser import BatchingChooser, ChooserError, RoundRobinChooser

from tests.engine.chooser._envelopes import env


def run(chooser, streams, picks):
    """Keep every SSP supplied (refill right after it is chosen) and record ``picks`` choices."""
    for s in streams:
        chooser.update(env(s, 0))
    out = []
    for _ in range(picks):
        e = chooser.choose()
        out.append(e.ssp.stream)
        chooser.update(env(e.ssp, e.offset + 1))
    return "".join(out)


def test_serves_the_same_ssp_up_to_batch_size_then_falls_back():
    assert run(BatchingChooser(RoundRobinChooser(), 3), "abc", 9) == "aaabbbccc"


def test_batch_size_one_leaves_every_choice_to_the_wrapped_chooser():
    assert run(BatchingChooser(RoundRobinChooser(), 1), "abc", 6) == "abcabc"


def test_batch_ends_early_when_wrapped_chooser_picks_another_ssp():
    c = BatchingChooser(RoundRobinChooser(), 5)
    c.update(env("a", 0))
    c.update(env("b", 0))
    assert c.choose().ssp.stream == "a"      # a's next envelope has not arrived yet
    assert c.choose().ssp.stream == "b"      # the wrapped chooser picks b: new batch
    c.update(env("a", 1))
    c.update(env("b", 1))
    assert c.choose().ssp.stream == "b"      # b is preferred now


def test_batch_is_not_reset_when_wrapped_chooser_returns_none():
    # Samza quirk 3, copied: the preferred SSP stays sticky across an empty choose().
    c = BatchingChooser(RoundRobinChooser(), 3)
    c.update(env("a", 0))
    assert c.choose().offset == 0
    assert c.choose() is None
    c.update(env("b", 0))
    c.update(env("a", 1))                     # arrives after b, but continues a's batch
    assert [c.choose().ssp.stream for _ in range(2)] == ["a", "b"]


def test_batch_resets_are_counted():
    c = BatchingChooser(RoundRobinChooser(), 2)
    run(c, "ab", 6)
    assert c.batch_resets == 3
    assert c.batched == 0


def test_second_envelope_for_the_preferred_ssp_raises():
    c = BatchingChooser(RoundRobinChooser(), 3)
    c.update(env("a", 0))
    c.choose()
    c.update(env("a", 1))
    with pytest.raises(ChooserError):
        c.update(env("a", 2))


def test_batch_size_below_one_is_refused():
    with pytest.raises(ChooserError, match="at least 1"):
        BatchingChooser(RoundRobinChooser(), 0)
