import pytest

from weir.engine.chooser import (
    BOOTSTRAP_PRIORITY,
    BaseMessageChooser,
    ChooserSpec,
    DefaultChooser,
    Tiebreak,
    chooser_from_config,
)
from weir.engine.systems.api import PartitionMetadata
from weir.stores.config import Config, ConfigError, find_declared

from tests.engine.chooser._envelopes import drain, env, ss, ssp


class FavouriteFirstChooser(BaseMessageChooser):
    """A user chooser: the stream named in config first, else arrival order."""

    built = []

    def __init__(self, config):
        self.favourite = config["favourite.stream"]
        self.held = []
        FavouriteFirstChooser.built.append(self)

    def update(self, envelope):
        self.held.append(envelope)

    def choose(self):
        for e in self.held:
            if e.ssp.stream == self.favourite:
                self.held.remove(e)
                return e
        return self.held.pop(0) if self.held else None


def test_with_nothing_configured_it_is_plain_round_robin():
    c = chooser_from_config({"task.inputs": "mem.a,mem.b"})
    assert c.describe() == "RoundRobin"
    arrivals = [env("b", partition=0), env("a"), env("b", partition=1)]
    for e in arrivals:
        c.update(e)
    assert drain(c) == arrivals


def test_tiebreak_time_orders_a_tier_by_event_time():
    c = chooser_from_config({"task.inputs": "mem.a,mem.b", "task.chooser.tiebreak": "time"})
    assert c.describe() == "TimeAligned"
    c.update(env("a", timestamp=9))
    c.update(env("b", timestamp=3))
    assert [e.ssp.stream for e in drain(c)] == ["b", "a"]


def test_bad_tiebreak_names_the_key():
    with pytest.raises(ConfigError, match="task.chooser.tiebreak.*roundrobin, time"):
        chooser_from_config({"task.chooser.tiebreak": "random"})


def test_batch_size_is_read_from_samza_key_too():
    spec = ChooserSpec.from_config(Config({"task.consumer.batch.size": "7"}))
    assert spec.batch_size == 7
    assert chooser_from_config({"task.consumer.batch.size": "7"}).describe() == "Batching(RoundRobin, 7)"


def test_weir_batch_key_wins_over_samza_key():
    spec = ChooserSpec.from_config(Config({"task.consumer.batch.size": "7",
                                           "task.chooser.batch.size": "3"}))
    assert spec.batch_size == 3


def test_batch_size_zero_or_negative_turns_batching_off():
    assert ChooserSpec.from_config(Config({"task.chooser.batch.size": "-4"})).batch_size == 0
    assert chooser_from_config({"task.chooser.batch.size": "0"}).describe() == "RoundRobin"


@pytest.mark.parametrize("key", [
    "task.chooser.priorities.mem.b",
    "systems.mem.streams.b.samza.priority",
    "streams.bee.samza.priority",
])
def test_priority_is_detected_from_each_config_form(key):
    cfg = {"task.inputs": "mem.a,mem.b", key: "4"}
    if key.startswith("streams.bee"):
        cfg.update({"streams.bee.samza.system": "mem", "streams.bee.samza.physical.name": "b"})
    c = chooser_from_config(cfg)
    assert c.priorities == {ss("a"): 0, ss("b"): 4}
    c.update(env("a"))
    c.update(env("b"))
    assert [e.ssp.stream for e in drain(c)] == ["b", "a"]


def test_system_default_stream_priority_applies_to_every_stream_of_the_system():
    c = chooser_from_config({"task.inputs": "mem.a,other.b",
                             "systems.mem.default.stream.samza.priority": "2"})
    assert c.priorities == {ss("a"): 2, ss("b", "other"): 0}


def test_weir_priority_key_wins_over_samza_priority():
    spec = ChooserSpec.from_config(Config({
        "task.inputs": "mem.a", "task.chooser.priorities.mem.a": "1",
        "systems.mem.streams.a.samza.priority": "9"}))
    assert spec.priorities == {ss("a"): 1}


def test_negative_priority_means_not_prioritised():
    spec = ChooserSpec.from_config(Config({"task.inputs": "mem.a",
                                           "systems.mem.streams.a.samza.priority": "-1"}))
    assert spec.priorities == {} and not spec.uses_priority


def test_bad_priority_names_key_and_origin():
    cfg = Config({"task.inputs": "mem.a", "systems.mem.streams.a.samza.priority": "high"},
                 origins={"systems.mem.streams.a.samza.priority": "job.properties:4"})
    with pytest.raises(ConfigError, match=r"samza\.priority' \(set at job\.properties:4\)"):
        chooser_from_config(cfg)


def test_bootstrap_streams_get_the_highest_priority():
    c = chooser_from_config({"task.inputs": "mem.tx,mem.codes",
                             "systems.mem.streams.codes.samza.bootstrap": "TRUE"})
    assert c.priorities == {ss("tx"): 0, ss("codes"): BOOTSTRAP_PRIORITY}
    c.update(env("tx"))
    c.update(env("codes"))
    assert [e.ssp.stream for e in drain(c)] == ["codes", "tx"]


def test_explicit_priority_orders_bootstrap_streams_but_keeps_them_above_all_others():
    c = chooser_from_config({
        "task.inputs": "mem.tx,mem.codes,mem.rates",
        "systems.mem.streams.codes.samza.bootstrap": "true",
        "systems.mem.streams.rates.samza.bootstrap": "true",
        "systems.mem.streams.codes.samza.priority": "0",
        "systems.mem.streams.rates.samza.priority": "3",
        "systems.mem.streams.tx.samza.priority": "1000"})
    for s in ("tx", "codes", "rates"):
        c.update(env(s))
    assert [e.ssp.stream for e in drain(c)] == ["rates", "codes", "tx"]


def test_non_bootstrap_priority_may_not_reach_the_bootstrap_priority():
    with pytest.raises(ConfigError, match="reserved for bootstrap streams"):
        chooser_from_config({"task.inputs": "mem.a",
                             "task.chooser.priorities.mem.a": str(BOOTSTRAP_PRIORITY)})


def test_streams_that_are_not_inputs_are_ignored():
    spec = ChooserSpec.from_config(Config({
        "task.inputs": "mem.a",
        "systems.mem.streams.b.samza.bootstrap": "true",
        "systems.mem.streams.b.samza.priority": "3"}))
    assert spec.bootstrap_streams == frozenset() and spec.priorities == {}


def test_broadcast_inputs_count_as_inputs():
    spec = ChooserSpec.from_config(Config({
        "task.inputs": "mem.a", "task.broadcast.inputs": "mem.codes#[0-3]",
        "systems.mem.streams.codes.samza.bootstrap": "true"}))
    assert spec.bootstrap_streams == {ss("codes")}


def test_batching_sits_inside_each_tier_and_never_delays_a_higher_priority():
    c = chooser_from_config({"task.inputs": "mem.hi,mem.lo", "task.chooser.batch.size": "10",
                             "task.chooser.priorities.mem.hi": "1"})
    assert c.describe() == ("Tiered[1: Batching(RoundRobin, 10), 0: Batching(RoundRobin, 10), "
                            "default: Batching(RoundRobin, 10)]")
    c.update(env("lo", 0))
    assert c.choose().ssp.stream == "lo"     # lo starts a batch
    c.update(env("hi", 0))
    c.update(env("lo", 1))
    assert [e.ssp.stream for e in drain(c)] == ["hi", "lo"]


def test_with_bootstrap_heads_the_default_chooser_gates_outermost():
    cfg = {"task.inputs": "mem.tx,mem.codes", "systems.mem.streams.codes.samza.bootstrap": "true"}
    c = chooser_from_config(cfg, bootstrap_heads={ssp("codes"): PartitionMetadata(0, 0, 1)})
    assert c.describe().startswith("Bootstrapping(Tiered[")
    c.register(ssp("codes"), 0)
    c.register(ssp("tx"), 0)
    c.start()
    c.update(env("tx"))
    assert c.choose() is None
    c.update(env("codes"))
    assert [e.ssp.stream for e in drain(c)] == ["codes", "tx"]


def test_user_chooser_class_is_built_per_tier_with_the_config():
    FavouriteFirstChooser.built.clear()
    cfg = {"task.inputs": "mem.a,mem.b,mem.c", "favourite.stream": "c",
           "task.chooser.class": f"{__name__}:FavouriteFirstChooser",
           "task.chooser.priorities.mem.a": "5"}
    c = chooser_from_config(cfg)
    assert len(FavouriteFirstChooser.built) == 3        # tier 5, tier 0, default
    assert c.describe() == "Tiered[5: FavouriteFirst, 0: FavouriteFirst, default: FavouriteFirst]"
    for s in "bca":
        c.update(env(s))
    assert [e.ssp.stream for e in drain(c)] == ["a", "c", "b"]


def test_samza_round_robin_factory_name_means_the_built_in():
    spec = ChooserSpec.from_config(Config({
        "task.chooser.class": "org.apache.samza.system.chooser.RoundRobinChooserFactory"}))
    assert spec.user_class is None and spec.tiebreak is Tiebreak.ROUND_ROBIN


def test_unloadable_chooser_class_names_key_and_origin():
    cfg = Config({"task.chooser.class": "no_such_module:Nope"},
                 origins={"task.chooser.class": "job.properties:9"})
    with pytest.raises(ConfigError, match=r"task\.chooser\.class' \(set at job\.properties:9\).*cannot load"):
        chooser_from_config(cfg)


def test_class_that_is_not_a_chooser_is_refused():
    with pytest.raises(ConfigError, match="not a chooser class"):
        chooser_from_config({"task.chooser.class": "collections:OrderedDict"})


def test_tiebreak_and_class_together_are_refused():
    with pytest.raises(ConfigError, match="remove one of the two"):
        chooser_from_config({"task.chooser.class": f"{__name__}:FavouriteFirstChooser",
                             "task.chooser.tiebreak": "time", "favourite.stream": "x"})


@pytest.mark.parametrize("key", [
    "task.chooser.class", "task.chooser.tiebreak", "task.chooser.batch.size",
    "task.consumer.batch.size", "task.chooser.priorities.mem.my.stream",
    "systems.mem.streams.my.stream.samza.priority", "streams.s1.samza.priority",
    "systems.mem.default.stream.samza.priority", "systems.mem.streams.x.samza.bootstrap",
    "streams.s1.samza.bootstrap"])
def test_every_chooser_key_is_declared(key):
    assert find_declared(key) is not None


def test_default_chooser_can_be_built_from_a_spec_directly():
    c = DefaultChooser(ChooserSpec(inputs=(ss("a"),), priorities={ss("a"): 2}))
    assert c.priorities == {ss("a"): 2}
