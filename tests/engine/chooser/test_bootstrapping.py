from weir.engine.chooser import BootstrapLag, BootstrappingChooser, RoundRobinChooser, TieredPriorityChooser
from weir.engine.systems.api import PartitionMetadata

from tests.engine.chooser._envelopes import drain, env, eos, ss, ssp


def head(newest, oldest=0):
    """Metadata of a partition whose last record at start is ``newest``."""
    return PartitionMetadata(oldest, newest, newest + 1)


def prioritised(bootstrap=("codes",), others=("tx",)):
    """Bootstrap streams above the others, as the DefaultChooser builds it."""
    prio = {ss(s): 1 for s in bootstrap} | {ss(s): 0 for s in others}
    return TieredPriorityChooser(prio, {1: RoundRobinChooser(), 0: RoundRobinChooser()},
                                 default=RoundRobinChooser())


def started(chooser, registrations):
    for where, offset in registrations.items():
        chooser.register(where, offset)
    chooser.start()
    return chooser


def test_everything_is_held_back_while_a_lagging_stream_has_no_envelope():
    c = started(BootstrappingChooser(prioritised(), {ssp("codes"): head(2)}),
                {ssp("codes"): 0, ssp("tx"): 0})
    c.update(env("tx", 0))
    assert c.choose() is None
    assert c.gated == 1


def test_choosing_resumes_when_every_lagging_stream_has_an_envelope():
    c = started(BootstrappingChooser(prioritised(), {ssp("codes"): head(2)}),
                {ssp("codes"): 0, ssp("tx"): 0})
    c.update(env("tx", 0))
    c.update(env("codes", 0))
    assert c.choose().ssp.stream == "codes"
    assert c.choose() is None                      # codes still lags, nothing of it held


def choose_refilling(chooser, last_offset):
    """Choose until None; after each bootstrap envelope offer that SSP's next one (up to
    ``last_offset``), as SystemConsumers does from its buffer."""
    out = []
    while (e := chooser.choose()) is not None:
        out.append(e)
        if e.ssp.stream != "tx" and e.offset < last_offset:
            chooser.update(env(e.ssp, e.offset + 1))
    return out


def test_gating_across_two_bootstrap_streams_and_many_partitions():
    heads = {ssp(s, p): head(1) for s in ("codes", "rates") for p in range(4)}
    c = started(BootstrappingChooser(prioritised(("codes", "rates")), heads),
                {w: 0 for w in heads} | {ssp("tx"): 0})
    c.update(env("tx", 0))
    for p in range(4):
        c.update(env("codes", 0, p))
    assert c.choose() is None                      # rates lags with nothing held
    c.update(env("rates", 0, 2))
    first = choose_refilling(c, last_offset=1)
    # codes and rates#2 are done; rates#0,1,3 still lag with nothing held: tx must wait.
    assert {e.ssp.stream for e in first} == {"codes", "rates"}
    assert len(first) == 10 and c.lag.lagging_partitions(ss("rates")) == 3
    for p in (0, 1, 3):
        c.update(env("rates", 0, p))
    rest = choose_refilling(c, last_offset=1)
    assert [e.ssp.stream for e in rest] == ["rates"] * 6 + ["tx"]
    assert not c.lag.active


def test_ssp_starting_at_or_past_upcoming_is_caught_up_at_registration():
    c = started(BootstrappingChooser(prioritised(), {ssp("codes", 0): head(4), ssp("codes", 1): head(4)}),
                {ssp("codes", 0): 5, ssp("codes", 1): 9, ssp("tx"): 0})
    assert not c.lag.active
    c.update(env("tx", 0))
    assert c.choose().ssp.stream == "tx"


def test_ssp_starting_at_its_newest_record_still_lags_until_that_record():
    c = started(BootstrappingChooser(prioritised(), {ssp("codes"): head(4)}), {ssp("codes"): 4})
    assert c.lag.is_lagging(ssp("codes"))
    c.update(env("codes", 4))
    c.choose()
    assert not c.lag.active


def test_partition_empty_at_start_is_caught_up():
    # Fix for Samza quirk 4: an empty bootstrap partition would otherwise stall the job.
    empty = PartitionMetadata(7, 6, 7)
    c = started(BootstrappingChooser(prioritised(), {ssp("codes"): empty}), {ssp("codes"): 0})
    assert not c.lag.active


def test_catches_up_when_chosen_offset_reaches_the_head():
    c = started(BootstrappingChooser(prioritised(), {ssp("codes"): head(1)}),
                {ssp("codes"): 0, ssp("tx"): 0})
    c.update(env("codes", 0))
    c.update(env("tx", 0))
    assert c.choose().offset == 0 and c.lag.is_lagging(ssp("codes"))
    assert c.choose() is None
    c.update(env("codes", 1))
    assert c.choose().ssp.stream == "codes"
    assert not c.lag.active
    assert c.choose().ssp.stream == "tx"


def test_end_of_stream_catches_a_lagging_ssp_up():
    c = started(BootstrappingChooser(prioritised(), {ssp("codes"): head(10)}),
                {ssp("codes"): 0, ssp("tx"): 0})
    c.update(env("tx", 0))
    c.update(eos("codes", 3))
    assert c.choose().is_end_of_stream
    assert c.choose().ssp.stream == "tx"


def test_lowest_registered_offset_wins_for_an_ssp_registered_by_several_tasks():
    # Broadcast + bootstrap: every task registers the same SSP at its own offset.
    lag = BootstrapLag({ssp("codes"): head(4)})
    for offset in (5, 2, 9):
        lag.register(ssp("codes"), offset)
    lag.start()
    assert lag.is_lagging(ssp("codes"))            # 2 < upcoming 5


def test_bootstrap_partitions_that_are_not_registered_are_ignored():
    heads = {ssp("codes", p): head(3) for p in range(4)}
    c = started(BootstrappingChooser(prioritised(), heads), {ssp("codes", 1): 0, ssp("tx"): 0})
    assert c.lag.lagging_ssps == {ssp("codes", 1)}
    assert c.lag.lagging_partitions(ss("codes")) == 1


def test_messages_written_after_start_do_not_extend_the_bootstrap():
    c = started(BootstrappingChooser(prioritised(), {ssp("codes"): head(0)}),
                {ssp("codes"): 0, ssp("tx"): 0})
    c.update(env("codes", 0))
    c.choose()
    c.update(env("codes", 1))                      # written after start
    c.update(env("tx", 0))
    assert [e.ssp.stream for e in drain(c)] == ["codes", "tx"]
    assert not c.lag.active


def test_once_caught_up_the_chooser_passes_straight_through():
    c = started(BootstrappingChooser(RoundRobinChooser(), {ssp("codes"): head(0)}),
                {ssp("codes"): 0})
    c.update(env("codes", 0))
    c.choose()
    c.update(env("tx", 0))
    c.update(env("codes", 1))
    assert [e.ssp.stream for e in drain(c)] == ["tx", "codes"]
    assert c.gated == 0
