import pytest

from weir.engine.chooser import BaseMessageChooser, ChooserError, RoundRobinChooser, TieredPriorityChooser

from tests.engine.chooser._envelopes import drain, env, ss, ssp


class RecordingChooser(RoundRobinChooser):
    """A real round robin that also records the lifecycle calls it receives."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def register(self, where, offset):
        self.calls.append(("register", where, offset))

    def start(self):
        self.calls.append(("start",))

    def stop(self):
        self.calls.append(("stop",))


def three_tiers(default=True):
    tiers = {10: RoundRobinChooser(), 5: RoundRobinChooser(), 0: RoundRobinChooser()}
    c = TieredPriorityChooser({ss("hi"): 10, ss("mid"): 5, ss("lo"): 0}, tiers,
                              default=RoundRobinChooser() if default else None)
    return c


def test_highest_priority_tier_is_chosen_first():
    c = three_tiers()
    for s in ("lo", "mid", "hi"):
        c.update(env(s))
    assert [e.ssp.stream for e in drain(c)] == ["hi", "mid", "lo"]


def test_falls_back_to_lower_tier_when_higher_tiers_are_empty():
    c = three_tiers()
    c.update(env("lo", 0))
    c.update(env("mid", 0))
    assert c.choose().ssp.stream == "mid"
    c.update(env("hi", 0))
    assert c.choose().ssp.stream == "hi"
    assert c.choose().ssp.stream == "lo"


def test_default_chooser_is_consulted_only_after_every_tier():
    c = three_tiers()
    c.update(env("other"))
    c.update(env("lo"))
    assert [e.ssp.stream for e in drain(c)] == ["lo", "other"]


def test_streams_of_one_tier_share_its_round_robin():
    c = TieredPriorityChooser({ss("a"): 1, ss("b"): 1}, {1: RoundRobinChooser()})
    c.update(env("b"))
    c.update(env("a"))
    c.update(env("a", partition=1))
    assert [str(e.ssp) for e in drain(c)] == ["mem.b#0", "mem.a#0", "mem.a#1"]


def test_update_of_unprioritised_stream_without_default_raises():
    c = three_tiers(default=False)
    with pytest.raises(ChooserError, match=r"mem\.other#0 .*no priority.*no default"):
        c.update(env("other"))


def test_register_of_unprioritised_stream_without_default_raises():
    c = three_tiers(default=False)
    with pytest.raises(ChooserError, match="no default"):
        c.register(ssp("other"), 0)


def test_priority_without_a_chooser_fails_at_construction():
    with pytest.raises(ChooserError, match=r"priorities \[7\] have no chooser"):
        TieredPriorityChooser({ss("a"): 7}, {0: RoundRobinChooser()})


def test_register_goes_to_the_owning_tier_and_lifecycle_to_all():
    hi, lo, default = RecordingChooser(), RecordingChooser(), RecordingChooser()
    c = TieredPriorityChooser({ss("hi"): 1, ss("lo"): 0}, {1: hi, 0: lo}, default=default)
    c.register(ssp("hi"), 3)
    c.register(ssp("other"), 4)
    c.start()
    c.stop()
    assert hi.calls == [("register", ssp("hi"), 3), ("start",), ("stop",)]
    assert lo.calls == [("start",), ("stop",)]
    assert default.calls == [("register", ssp("other"), 4), ("start",), ("stop",)]


def test_tiers_are_listed_highest_first():
    c = three_tiers()
    assert [p for p, _ in c.tiers] == [10, 5, 0]
    assert c.priority_of(ss("mid")) == 5 and c.priority_of(ss("other")) is None


def test_base_message_chooser_lifecycle_is_a_no_op():
    base = BaseMessageChooser()
    assert base.register(ssp("a"), 0) is None and base.start() is None and base.stop() is None
