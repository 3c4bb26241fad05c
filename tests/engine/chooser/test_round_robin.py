import pytest

from weir.engine.chooser import ChooserError, RoundRobinChooser

from tests.engine.chooser._envelopes import drain, env


def test_returns_envelopes_in_arrival_order():
    c = RoundRobinChooser()
    c.start()
    arrivals = [env("b"), env("a"), env("c"), env("a", partition=1)]
    for e in arrivals:
        c.update(e)
    assert drain(c) == arrivals


def test_choose_on_empty_returns_none():
    c = RoundRobinChooser()
    assert c.choose() is None
    c.update(env("a"))
    c.choose()
    assert c.choose() is None


def test_second_envelope_for_same_ssp_raises_naming_ssp_and_offset():
    c = RoundRobinChooser()
    c.update(env("a", 0))
    with pytest.raises(ChooserError, match=r"mem\.a#0 offset 1"):
        c.update(env("a", 1))


def test_ssp_can_be_updated_again_once_its_envelope_is_chosen():
    c = RoundRobinChooser()
    c.update(env("a", 0))
    assert c.choose().offset == 0
    c.update(env("a", 1))
    assert c.choose().offset == 1


def test_refilled_ssp_goes_behind_every_waiting_ssp():
    c = RoundRobinChooser()
    for s in "abc":
        c.update(env(s, 0))
    order = []
    for i in range(9):
        e = c.choose()
        order.append(e.ssp.stream)
        c.update(env(e.ssp, e.offset + 1))
    assert order == list("abcabcabc")


def test_buffered_counts_held_envelopes():
    c = RoundRobinChooser()
    c.update(env("a"))
    c.update(env("b"))
    assert c.buffered == 2
    c.choose()
    assert c.buffered == 1
