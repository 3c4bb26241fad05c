"""The chooser seam's optional capabilities: the fast lane and priority tiers the consumer
multiplexer calls, with the base's defaults for a chooser that declares neither."""

from weir.engine.chooser import (NO_FAST_LANE, BaseMessageChooser, RoundRobinChooser,
                                 TieredPriorityChooser, chooser_capabilities, chooser_from_config)

from tests.engine.chooser._envelopes import ss


class ProtocolOnly:
    """A user chooser implementing only the MessageChooser protocol."""

    def register(self, ssp, offset): ...
    def start(self): ...
    def update(self, envelope): ...
    def choose(self): ...
    def stop(self): ...


class Reordering(RoundRobinChooser):
    def choose(self):
        return super().choose()


def test_a_protocol_only_chooser_gets_the_defaults_no_fast_lane_and_no_priorities():
    caps = chooser_capabilities(ProtocolOnly())
    assert isinstance(caps, BaseMessageChooser)
    assert caps.fast_lane() is NO_FAST_LANE and caps.priority_of(ss("a")) is None


def test_only_a_plain_round_robin_offers_its_fast_lane():
    lane = RoundRobinChooser().fast_lane()
    assert lane is not NO_FAST_LANE and len(lane) == 2
    assert Reordering().fast_lane() is NO_FAST_LANE


def test_the_default_chooser_offers_its_roots_fast_lane_and_its_priorities():
    plain = chooser_from_config({"task.inputs": "mem.a,mem.b"})
    assert plain.fast_lane() is not NO_FAST_LANE
    assert plain.priority_of(ss("a")) is None
    tiered = chooser_from_config({"task.inputs": "mem.a,mem.b",
                                  "task.chooser.priorities.mem.b": "4"})
    assert tiered.fast_lane() is NO_FAST_LANE
    assert (tiered.priority_of(ss("a")), tiered.priority_of(ss("b"))) == (0, 4)
    user = chooser_from_config({"task.inputs": "mem.a",
                                "task.chooser.class": f"{__name__}:ProtocolOnlyWithConfig"})
    assert user.fast_lane() is NO_FAST_LANE


class ProtocolOnlyWithConfig(ProtocolOnly):
    def __init__(self, config):
        self.config = config


def test_a_tiered_chooser_declares_the_priority_of_each_stream():
    chooser = TieredPriorityChooser({ss("b"): 2}, {2: RoundRobinChooser()},
                                    default=RoundRobinChooser())
    assert chooser_capabilities(chooser).priority_of(ss("b")) == 2
    assert chooser_capabilities(chooser).priority_of(ss("a")) is None
