"""SystemConsumers against the real memory system."""

from __future__ import annotations

import itertools
import logging
import threading

import pytest

from weir.engine.chooser import RoundRobinChooser, chooser_from_config
from weir.engine.consumers.consumers import Refill, SystemConsumers
from weir.engine.errors import DeserializationError, EngineError
from weir.engine.model import (EnvelopeKind, OutgoingMessageEnvelope, SystemStream,
                               SystemStreamPartition)
from weir.engine.config.serdes import SerdeManager
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.memory import (
    MemorySystemAdmin,
    MemorySystemConsumer,
    MemorySystemFactory,
    reset_memory_systems,
)
from weir.stores.config import Config

_names = itertools.count()


class RecordingConsumer(MemorySystemConsumer):
    """The real memory consumer, remembering which SSPs each poll asked for."""

    def __init__(self, system, fetch_max=1000):
        super().__init__(system, fetch_max)
        self.fetches: list[set] = []

    def poll(self, ssps, timeout):
        self.fetches.append(set(ssps))
        return super().poll(ssps, timeout)


class RawRecordingConsumer(RecordingConsumer):
    """A consumer that hands over envelopes with bytes (it takes no envelope factory): the
    multiplexer deserializes them, as it does for any third-party consumer."""

    takes_envelope_factory = False


class CountingAdmin(MemorySystemAdmin):
    def __init__(self, system):
        super().__init__(system)
        self.metadata_calls: list[list] = []

    def metadata(self, ssps):
        ssps = list(ssps)
        self.metadata_calls.append(ssps)
        return super().metadata(ssps)


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Mem:
    """One fresh memory system for a test: create streams, produce, build SystemConsumers."""

    def __init__(self, consumer_class=RecordingConsumer):
        self.consumer_class = consumer_class
        self.system = f"mem-sc-{next(_names)}"
        self.factory = MemorySystemFactory()
        self.admin = CountingAdmin(self.system)
        self.producer = self.factory.get_producer(self.system, {})

    def ssp(self, stream, partition=0):
        return SystemStreamPartition(self.system, stream, partition)

    def create(self, stream, partitions=1, bounded=False):
        self.admin.create_stream(StreamSpec(stream, partitions, bounded=bounded))

    def send(self, stream, partition, *messages, key=None):
        for m in messages:
            self.producer.send("test", OutgoingMessageEnvelope(
                SystemStream(self.system, stream), m if isinstance(m, bytes) else str(m).encode(),
                key=key, partition=partition))

    def config(self, **extra):
        return Config({k.replace("SYS", self.system): v.replace("SYS", self.system)
                       for k, v in extra.items()})

    def consumers(self, config, chooser=None, serdes=None, fetch_max=1000, clock=None,
                  registrations=()):
        self.consumer = self.consumer_class(self.system, fetch_max)
        kwargs = {"clock": clock} if clock else {}
        sc = SystemConsumers(chooser or chooser_from_config(config), {self.system: self.consumer},
                             {self.system: self.admin}, serdes, config, **kwargs)
        for where, offset in registrations:
            sc.register(where, offset)
        return sc


@pytest.fixture(params=[RecordingConsumer, RawRecordingConsumer], ids=["typed", "raw"])
def mem(request):
    """Every test runs twice: with a consumer that builds typed envelopes with the serdes'
    factory, and with one that hands over bytes for the multiplexer to deserialize."""
    m = Mem(request.param)
    yield m
    reset_memory_systems(m.system)


def choose_all(sc, limit=10_000):
    out = []
    while len(out) < limit and (e := sc.choose(timeout=0)) is not None:
        out.append(e)
    return out


def test_round_robin_across_ssps(mem):
    mem.create("s", 3)
    for p in range(3):
        mem.send("s", p, *[f"{p}-{i}" for i in range(3)])
    sc = mem.consumers(mem.config(**{"task.inputs": "SYS.s"}),
                       registrations=[(mem.ssp("s", p), 0) for p in range(3)])
    sc.start()
    got = [(e.ssp.partition, e.offset) for e in choose_all(sc)]
    assert got == [(p, o) for o in range(3) for p in range(3)]


def test_polls_only_ssps_whose_buffers_are_empty(mem):
    mem.create("s", 2)
    mem.send("s", 0, *range(5))
    sc = mem.consumers(mem.config(**{"task.inputs": "SYS.s"}),
                       registrations=[(mem.ssp("s", 0), 0), (mem.ssp("s", 1), 0)])
    sc.start()
    for _ in range(4):
        sc.choose(timeout=0)
    # Partition 0 got its 5 envelopes in the first poll; every later poll asks only for 1.
    assert mem.consumer.fetches[0] == {mem.ssp("s", 0), mem.ssp("s", 1)}
    assert all(f == {mem.ssp("s", 1)} for f in mem.consumer.fetches[1:])
    sc.choose(timeout=0)                             # the last buffered one: 0 is empty now
    sc.choose(timeout=0)
    assert mem.consumer.fetches[-1] == {mem.ssp("s", 0), mem.ssp("s", 1)}


def test_hands_the_chooser_one_envelope_per_ssp(mem):
    # RoundRobinChooser raises on a second envelope of one SSP, so a full run proves the rule.
    mem.create("s", 2)
    for p in range(2):
        mem.send("s", p, *range(50))
    sc = mem.consumers(mem.config(), chooser=RoundRobinChooser(),
                       registrations=[(mem.ssp("s", 0), 0), (mem.ssp("s", 1), 0)])
    sc.start()
    assert sc.counters.buffered == 98               # one of each SSP is in the chooser
    assert len(choose_all(sc)) == 100


def test_idle_choose_returns_none_after_one_bounded_poll(mem):
    mem.create("s", 1)
    sc = mem.consumers(mem.config(**{"task.inputs": "SYS.s"}), registrations=[(mem.ssp("s"), 0)])
    sc.start()
    before = sc.counters.polls
    assert sc.choose(timeout=0.001) is None
    assert sc.counters.polls == before + 1
    assert sc.counters.chose_null == 1 and sc.counters.empty_polls >= 1


def test_waiting_choose_wakes_when_a_message_arrives(mem):
    mem.create("s", 1)
    sc = mem.consumers(mem.config(), registrations=[(mem.ssp("s"), 0)])
    sc.start()
    sender = threading.Timer(0.05, lambda: mem.send("s", 0, "late"))
    sender.start()
    envelope = sc.choose(timeout=30)
    sender.join()
    assert envelope is not None and envelope.message == b"late"


def test_polls_at_least_every_poll_interval_while_messages_flow(mem):
    mem.create("busy", 1)
    mem.create("idle", 1)
    mem.send("busy", 0, *range(10))
    clock = FakeClock()
    sc = mem.consumers(mem.config(**{"task.poll.interval.ms": "50"}), clock=clock,
                       registrations=[(mem.ssp("busy"), 0), (mem.ssp("idle"), 0)])
    sc.start()
    polls = sc.counters.polls
    for _ in range(3):
        assert sc.choose(timeout=0).ssp.stream == "busy"
    assert sc.counters.polls == polls                # clock did not move: no poll
    clock.now += 0.06
    sc.choose(timeout=0)
    assert sc.counters.polls == polls + 1
    assert mem.consumer.fetches[-1] == {mem.ssp("idle")}


def test_stops_polling_an_ssp_after_its_end_of_stream(mem):
    mem.create("b", 2, bounded=True)
    mem.send("b", 0, "x")
    mem.admin.end_stream("b")
    sc = mem.consumers(mem.config(), registrations=[(mem.ssp("b", 0), 0), (mem.ssp("b", 1), 0)])
    sc.start()
    got = choose_all(sc)
    assert [(e.ssp.partition, e.is_end_of_stream) for e in got] == [(0, False), (1, True), (0, True)]
    assert sc.is_end_of_stream(mem.ssp("b", 0)) and sc.all_end_of_stream
    assert list(sc.ssps_to_poll()) == []
    polls = sc.counters.polls
    assert sc.choose(timeout=0.001) is None
    assert sc.counters.polls == polls


def test_consumer_starts_at_the_lowest_registered_offset(mem):
    mem.create("s", 1)
    mem.send("s", 0, *range(6))
    sc = mem.consumers(mem.config(), registrations=[(mem.ssp("s"), 4), (mem.ssp("s"), 2), (mem.ssp("s"), 5)])
    assert sc.registered == {mem.ssp("s"): 2}
    sc.start()
    assert [e.offset for e in choose_all(sc)] == [2, 3, 4, 5]


def test_register_of_an_ssp_without_consumer_is_refused(mem):
    sc = mem.consumers(mem.config())
    with pytest.raises(EngineError, match="no consumer for system 'elsewhere'"):
        sc.register(SystemStreamPartition("elsewhere", "s", 0), 0)


def test_register_after_start_is_refused(mem):
    mem.create("s", 1)
    sc = mem.consumers(mem.config(), registrations=[(mem.ssp("s"), 0)])
    sc.start()
    with pytest.raises(EngineError, match="after start"):
        sc.register(mem.ssp("s"), 0)


def test_refill_by_caller_holds_an_ssp_until_refilled(mem):
    mem.create("s", 2)
    mem.send("s", 0, "a0", "a1")
    mem.send("s", 1, "b0", "b1")
    sc = mem.consumers(mem.config(), registrations=[(mem.ssp("s", 0), 0), (mem.ssp("s", 1), 0)])
    sc.start()
    first = sc.choose(timeout=0, refill=Refill.BY_CALLER)
    second = sc.choose(timeout=0, refill=Refill.BY_CALLER)
    assert {first.ssp.partition, second.ssp.partition} == {0, 1}
    assert sc.choose(timeout=0, refill=Refill.BY_CALLER) is None
    sc.refill(first.ssp)
    assert sc.choose(timeout=0, refill=Refill.BY_CALLER).message == first.message[:-1] + b"1"


def test_messages_are_deserialized_before_the_chooser_sees_them(mem):
    mem.create("s", 1)
    mem.send("s", 0, b'{"n": 1}', key=b"k")
    cfg = mem.config(**{"systems.SYS.samza.msg.serde": "json", "systems.SYS.samza.key.serde": "string"})
    sc = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=[(mem.ssp("s"), 0)])
    sc.start()
    e = sc.choose(timeout=0)
    assert (e.key, e.message) == ("k", {"n": 1})


def test_deserialization_error_is_fatal_by_default_naming_ssp_and_offset(mem):
    mem.create("s", 1)
    mem.send("s", 0, b'{"n": 1}', b"not json", b'{"n": 3}')
    cfg = mem.config(**{"systems.SYS.samza.msg.serde": "json"})
    sc = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=[(mem.ssp("s"), 0)])
    with pytest.raises(DeserializationError) as err:
        sc.start()
        choose_all(sc)
    assert err.value.offset == 1 and err.value.ssp == mem.ssp("s")
    assert f"{mem.system}.s#0 offset 1" in str(err.value)
    assert "task.drop.deserialization.errors" in str(err.value)


def test_drop_deserialization_errors_drops_and_counts(mem):
    mem.create("s", 1)
    mem.send("s", 0, b'{"n": 1}', b"not json", b"{also not", b'{"n": 4}')
    cfg = mem.config(**{"systems.SYS.samza.msg.serde": "json",
                        "task.drop.deserialization.errors": "true"})
    sc = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=[(mem.ssp("s"), 0)])
    sc.start()
    assert [(e.offset, e.message) for e in choose_all(sc)] == [(0, {"n": 1}), (3, {"n": 4})]
    assert sc.counters.deserialization_errors == 2


def test_dropped_messages_are_logged_naming_partition_and_offset_at_most_every_10_s(
        mem, caplog):
    mem.create("s", 2)
    mem.send("s", 0, b'{"n": 1}', *[b"bad %d" % i for i in range(30)], b'{"n": 2}')
    mem.send("s", 1, b"also bad")
    cfg = mem.config(**{"systems.SYS.samza.msg.serde": "json",
                        "task.drop.deserialization.errors": "true"})
    clock = FakeClock()
    sc = mem.consumers(cfg, serdes=SerdeManager(cfg), clock=clock,
                       registrations=[(mem.ssp("s", 0), 0), (mem.ssp("s", 1), 0)])
    with caplog.at_level(logging.WARNING, logger="weir.consumers"):
        sc.start()
        assert [e.message for e in choose_all(sc)] == [{"n": 1}, {"n": 2}]
        first = [r.getMessage() for r in caplog.records]
        assert len(first) == 1  # one line, not 31
        assert f"{mem.system}.s#" in first[0] and "offset" in first[0]
        assert "task.drop.deserialization.errors" in first[0]
        clock.now += 11
        mem.send("s", 1, b"bad again")
        choose_all(sc)
        sc.stop()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "dropped 31 more message(s)" in lines[1]
    assert f"{mem.system}.s#1 offset 1" in lines[1]
    counters = sc.counters.snapshot()
    assert counters["deserialization_errors"] == 32
    assert counters["deserialization_errors_by_partition"] == {
        f"{mem.system}.s#0": 30, f"{mem.system}.s#1": 2}


def test_counters_snapshot_reports_activity(mem):
    mem.create("s", 1)
    mem.send("s", 0, *range(3))
    sc = mem.consumers(mem.config(), registrations=[(mem.ssp("s"), 0)])
    sc.start()
    choose_all(sc)
    snap = sc.counters.snapshot()
    assert snap["chooses"] == 3 and snap["polled"] == 3 and snap["buffered"] == 0
    assert snap["polls"] >= 2 and snap["chose_null"] == 1


# -- bootstrap ---------------------------------------------------------------------------

def bootstrap_setup(mem, codes_partitions=4, codes_per_partition=3, fetch_max=1, extra=None):
    mem.create("codes", codes_partitions)
    mem.create("rates", 2)
    mem.create("tx", 2)
    for p in range(codes_partitions):
        mem.send("codes", p, *[f"code-{p}-{i}" for i in range(codes_per_partition)])
    for p in range(2):
        mem.send("rates", p, *[f"rate-{p}-{i}" for i in range(2)])
        mem.send("tx", p, *[f"tx-{p}-{i}" for i in range(20)])
    cfg = mem.config(**{
        "task.inputs": "SYS.tx,SYS.codes,SYS.rates",
        "systems.SYS.streams.codes.samza.bootstrap": "true",
        "streams.rates-id.samza.system": "SYS", "streams.rates-id.samza.physical.name": "rates",
        "streams.rates-id.samza.bootstrap": "true", **(extra or {})})
    regs = ([(mem.ssp("codes", p), 0) for p in range(codes_partitions)]
            + [(mem.ssp("rates", p), 0) for p in range(2)] + [(mem.ssp("tx", p), 0) for p in range(2)])
    return cfg, regs


class GateCheckingChooser:
    """Wraps the DefaultChooser and fails if choose() is called while a lagging bootstrap
    stream has no envelope in it."""

    def __init__(self, inner):
        self.inner, self.sc, self.calls = inner, None, 0

    def register(self, ssp, offset):
        self.inner.register(ssp, offset)

    def start(self):
        self.inner.start()

    def stop(self):
        self.inner.stop()

    def update(self, envelope):
        self.inner.update(envelope)

    def choose(self):
        self.calls += 1
        lag = self.sc.bootstrap
        assert not lag.active or lag.ok_to_choose, "choose() called while bootstrap gated"
        return self.inner.choose()


def test_bootstrap_gating_across_two_bootstrap_streams_and_many_partitions(mem):
    cfg, regs = bootstrap_setup(mem)
    chooser = GateCheckingChooser(chooser_from_config(cfg))
    sc = mem.consumers(cfg, chooser=chooser, fetch_max=1, registrations=regs)
    chooser.sc = sc
    sc.start()
    got = choose_all(sc)
    first_tx = next(i for i, e in enumerate(got) if e.ssp.stream == "tx")
    assert {e.ssp.stream for e in got[:first_tx]} == {"codes", "rates"}
    assert first_tx == 4 * 3 + 2 * 2                 # every bootstrap record came first
    assert len(got) == first_tx + 40
    assert sc.counters.gated > 0 and chooser.calls > 0
    assert not sc.bootstrap.active


def test_bootstrap_heads_are_read_in_one_batched_call_per_system(mem):
    cfg, regs = bootstrap_setup(mem)
    sc = mem.consumers(cfg, registrations=regs)
    sc.start()
    bootstrap_calls = [c for c in mem.admin.metadata_calls]
    assert len(bootstrap_calls) == 1
    assert set(bootstrap_calls[0]) == {mem.ssp("codes", p) for p in range(4)} | {
        mem.ssp("rates", p) for p in range(2)}


def test_bootstrap_ssp_starting_past_its_head_is_caught_up_at_registration(mem):
    cfg, regs = bootstrap_setup(mem, codes_partitions=1, codes_per_partition=3)
    regs = [(w, 3 if w.stream == "codes" else (2 if w.stream == "rates" else o)) for w, o in regs]
    sc = mem.consumers(cfg, registrations=regs)
    sc.start()
    assert not sc.bootstrap.active
    assert sc.choose(timeout=0).ssp.stream == "tx"


def test_records_written_after_start_do_not_extend_the_bootstrap(mem):
    cfg, regs = bootstrap_setup(mem, codes_partitions=1, codes_per_partition=1)
    sc = mem.consumers(cfg, registrations=regs)
    sc.start()
    mem.send("codes", 0, "late code")
    got = choose_all(sc)
    assert not sc.bootstrap.active
    assert {e.ssp.stream for e in got[:5]} == {"codes", "rates"}
    assert len(got) == 1 + 1 + 4 + 40


def test_broadcast_bootstrap_ssp_registered_by_every_task(mem):
    # Two tasks share codes#0 (a broadcast input); one resumes at 2, the other starts at 0.
    mem.create("codes", 1)
    mem.create("tx", 1)
    mem.send("codes", 0, *range(4))
    mem.send("tx", 0, "t")
    cfg = mem.config(**{"task.inputs": "SYS.tx", "task.broadcast.inputs": "SYS.codes#0",
                        "systems.SYS.streams.codes.samza.bootstrap": "true"})
    sc = mem.consumers(cfg, fetch_max=1, registrations=[
        (mem.ssp("codes"), 2), (mem.ssp("codes"), 0), (mem.ssp("tx"), 0)])
    sc.start()
    got = [(e.ssp.stream, e.offset) for e in choose_all(sc)]
    assert got == [("codes", 0), ("codes", 1), ("codes", 2), ("codes", 3), ("tx", 0)]


def test_empty_bootstrap_stream_does_not_stall_the_job(mem):
    mem.create("codes", 2)
    mem.create("tx", 1)
    mem.send("tx", 0, "t")
    cfg = mem.config(**{"task.inputs": "SYS.tx,SYS.codes",
                        "systems.SYS.streams.codes.samza.bootstrap": "true"})
    sc = mem.consumers(cfg, registrations=[(mem.ssp("codes", 0), 0), (mem.ssp("codes", 1), 0),
                                           (mem.ssp("tx"), 0)])
    sc.start()
    assert sc.choose(timeout=0).ssp.stream == "tx"


def test_bootstrap_stream_reaching_end_of_stream_is_caught_up(mem):
    mem.create("codes", 1, bounded=True)
    mem.create("tx", 1)
    mem.send("codes", 0, "c0", "c1")
    mem.send("tx", 0, "t")
    mem.admin.end_stream("codes")
    cfg = mem.config(**{"task.inputs": "SYS.tx,SYS.codes",
                        "systems.SYS.streams.codes.samza.bootstrap": "true"})
    sc = mem.consumers(cfg, registrations=[(mem.ssp("codes"), 0), (mem.ssp("tx"), 0)])
    sc.start()
    got = [(e.ssp.stream, e.is_end_of_stream) for e in choose_all(sc)]
    assert got == [("codes", False), ("codes", False), ("codes", True), ("tx", False)]


def test_a_dropped_bootstrap_head_record_still_catches_its_partition_up(mem):
    # The last code present at start cannot be deserialized and is dropped: the partition
    # has been read to its head, so the job must go on instead of waiting for it forever.
    mem.create("codes", 1)
    mem.create("tx", 1)
    mem.send("codes", 0, b'"c0"', b"not json")
    mem.send("tx", 0, b'"t"')
    cfg = mem.config(**{"task.inputs": "SYS.tx,SYS.codes",
                        "systems.SYS.streams.codes.samza.bootstrap": "true",
                        "systems.SYS.samza.msg.serde": "json",
                        "task.drop.deserialization.errors": "true"})
    sc = mem.consumers(cfg, serdes=SerdeManager(cfg), fetch_max=1,
                       registrations=[(mem.ssp("codes"), 0), (mem.ssp("tx"), 0)])
    sc.start()
    got = [(e.ssp.stream, e.message) for e in choose_all(sc)]
    assert got == [("codes", "c0"), ("tx", "t")]
    assert not sc.bootstrap.active and sc.counters.deserialization_errors == 1


def test_choose_before_start_is_refused(mem):
    mem.create("s", 1)
    sc = mem.consumers(mem.config(), registrations=[(mem.ssp("s"), 0)])
    with pytest.raises(EngineError, match="before start"):
        sc.choose(timeout=0)


def test_from_registry_builds_consumers_admins_serdes_and_chooser(mem):
    from weir.engine.systems.registry import SystemRegistry

    mem.create("s", 1)
    mem.send("s", 0, b'"hi"')
    cfg = mem.config(**{"systems.SYS.factory": "memory", "systems.SYS.samza.msg.serde": "json",
                        "task.inputs": "SYS.s"})
    sc = SystemConsumers.from_registry(SystemRegistry(cfg), [mem.system])
    sc.register(mem.ssp("s"), 0)
    sc.start()
    assert sc.choose(timeout=0).message == "hi"
    sc.stop()


def _tiers(mem, clock, hi=(), lo=(), **extra):
    """SystemConsumers over streams hi (priority 2) and lo (priority 1) holding ``hi``/``lo``."""
    mem.create("hi", 1)
    mem.create("lo", 1)
    mem.send("hi", 0, *hi)
    mem.send("lo", 0, *lo)
    cfg = mem.config(**{"task.inputs": "SYS.hi,SYS.lo",
                        "systems.SYS.streams.hi.samza.priority": "2",
                        "systems.SYS.streams.lo.samza.priority": "1", **extra})
    return mem.consumers(cfg, clock=clock,
                         registrations=[(mem.ssp("hi"), 0), (mem.ssp("lo"), 0)])


def test_a_drained_high_priority_ssp_is_polled_again_before_a_lower_tier_is_served(mem):
    clock = FakeClock()
    sc = _tiers(mem, clock, ["h0"], [f"l{i}" for i in range(100)])  # poll interval: 50 ms
    sc.start()
    assert sc.choose(timeout=0).message == b"h0"      # hi's buffer is dry now
    mem.send("hi", 0, "h1")
    assert sc.choose(timeout=0).message == b"h1"      # hi polled again before choosing
    assert mem.consumer.fetches[-1] == {mem.ssp("hi")}
    fetches = len(mem.consumer.fetches)
    assert sc.choose(timeout=0).message == b"l0"      # rate-limited: no poll in the same ms
    mem.send("hi", 0, "h2")
    assert sc.choose(timeout=0).message == b"l1"
    assert len(mem.consumer.fetches) == fetches
    clock.now += 0.002                                # 2 ms later, far below the 50 ms
    assert sc.choose(timeout=0).message == b"h2"
    assert mem.consumer.fetches[-1] == {mem.ssp("hi")}
    assert sc.counters.tier_polls == 2
    assert [e.message for e in choose_all(sc)] == [f"l{i}".encode() for i in range(2, 100)]


def test_only_drained_ssps_above_the_lowest_tier_get_extra_polls(mem):
    clock = FakeClock()
    sc = _tiers(mem, clock, [f"h{i}" for i in range(5)], ["l0"])
    sc.start()
    for i in range(5):                                # lo is drained too, but ranks lowest
        clock.now += 0.002
        assert sc.choose(timeout=0).message == f"h{i}".encode()
    assert sc.counters.tier_polls == 0
    clock.now += 0.002
    assert sc.choose(timeout=0).message == b"l0"      # hi is dry: polled first, once
    assert sc.counters.tier_polls == 1
    single = Mem()
    try:
        single.create("s", 2)
        single.send("s", 0, *range(10))
        sc = single.consumers(single.config(**{"task.inputs": "SYS.s"}), clock=clock,
                              registrations=[(single.ssp("s", 0), 0), (single.ssp("s", 1), 0)])
        sc.start()
        polls = sc.counters.polls
        for _ in range(10):
            clock.now += 0.002
            sc.choose(timeout=0)
        assert sc.counters.tier_polls == 0 and sc.counters.polls == polls
    finally:
        reset_memory_systems(single.system)


def _uneven(mem, bounded=True):
    mem.create("s", 3, bounded=bounded)
    for p, n in ((0, 7), (1, 2), (2, 12)):
        mem.send("s", p, *[f"{p}-{i}" for i in range(n)])
    if bounded:
        mem.producer.end_stream("s")
    return [(mem.ssp("s", p), 0) for p in range(3)]


@pytest.mark.parametrize("limit", [1, 3, 64])
def test_choose_run_returns_what_successive_chooses_would_in_the_same_order(mem, limit):
    regs = _uneven(mem)
    config = mem.config(**{"task.inputs": "SYS.s"})
    one = mem.consumers(config, registrations=regs)
    one.start()
    expected = [(e.ssp.partition, e.offset, e.kind) for e in choose_all(one)]
    one.stop()
    runs = mem.consumers(config, registrations=regs)
    runs.start()
    got = []
    while True:
        batch = runs.choose_run(limit)
        assert len(batch) <= limit
        if not batch:
            e = runs.choose(timeout=0)
            if e is None:
                break
            batch = [e]
        got += [(e.ssp.partition, e.offset, e.kind) for e in batch]
    assert got == expected and len(got) >= 21
    assert runs.counters.chooses == one.counters.chooses


def _drain_by_runs(sc, limit):
    """Everything ``sc`` hands out, by ``choose_run`` and ``choose()`` when a run is empty;
    the run sizes alongside."""
    got, sizes = [], []
    while True:
        batch = sc.choose_run(limit)
        sizes.append(len(batch))
        if not batch:
            e = sc.choose(timeout=0)
            if e is None:
                return got, sizes
            batch = [e]
        got += batch


def _json_uneven(mem, *bad):
    """Three partitions of JSON messages, ``bad`` = (partition, index) pairs not JSON."""
    mem.create("s", 3, bounded=True)
    for p, n in ((0, 7), (1, 2), (2, 12)):
        mem.send("s", p, *[b"not json" if (p, i) in bad else b'{"p": %d, "i": %d}' % (p, i)
                           for i in range(n)], key=b"k%d" % p)
    mem.producer.end_stream("s")
    return [(mem.ssp("s", p), 0) for p in range(3)]


@pytest.mark.parametrize("limit", [1, 3, 64])
def test_choose_run_deserializes_streams_with_serdes_in_the_order_of_single_chooses(mem, limit):
    regs = _json_uneven(mem)
    cfg = mem.config(**{"task.inputs": "SYS.s", "systems.SYS.samza.msg.serde": "json",
                        "systems.SYS.samza.key.serde": "string"})
    one = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=regs)
    one.start()
    expected = [(e.ssp.partition, e.offset, e.kind, e.key, e.message) for e in choose_all(one)]
    runs = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=regs)
    runs.start()
    got, sizes = _drain_by_runs(runs, limit)
    assert [(e.ssp.partition, e.offset, e.kind, e.key, e.message) for e in got] == expected
    messages = [x for x in expected if x[2] is EnvelopeKind.MESSAGE]
    assert len(messages) == 21
    assert all(key == f"k{p}" and msg["p"] == p for p, _, _, key, msg in messages)
    assert sum(sizes) >= len(messages) // 2  # served by runs, not one choose() each
    assert runs.counters.chooses == one.counters.chooses


def test_choose_run_stops_in_front_of_a_bad_message_and_choose_raises_naming_its_offset(mem):
    regs = _json_uneven(mem, (2, 5))
    cfg = mem.config(**{"task.inputs": "SYS.s", "systems.SYS.samza.msg.serde": "json"})

    def until_error(next_batch):
        got = []
        with pytest.raises(DeserializationError) as err:
            while True:
                got += next_batch()
        assert err.value.ssp == mem.ssp("s", 2) and err.value.offset == 5
        return [(e.ssp.partition, e.offset) for e in got]

    one = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=regs)
    one.start()
    expected = until_error(lambda: [one.choose(timeout=0)])
    runs = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=regs)
    runs.start()
    # the same envelopes before the error as single chooses hand out, and none after it
    assert until_error(lambda: runs.choose_run(64) or [runs.choose(timeout=0)]) == expected
    assert max(o for p, o in expected if p == 2) < 5


def test_choose_run_with_dropped_deserialization_errors_hands_out_what_single_chooses_do(mem):
    regs = _json_uneven(mem, (0, 3), (2, 0), (2, 11))
    cfg = mem.config(**{"task.inputs": "SYS.s", "systems.SYS.samza.msg.serde": "json",
                        "task.drop.deserialization.errors": "true"})
    one = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=regs)
    one.start()
    expected = [(e.ssp.partition, e.offset, e.message) for e in choose_all(one)]
    runs = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=regs)
    runs.start()
    got, _ = _drain_by_runs(runs, 4)
    assert [(e.ssp.partition, e.offset, e.message) for e in got] == expected
    assert (0, 3) not in {(p, o) for p, o, _ in expected}
    assert runs.counters.deserialization_errors == one.counters.deserialization_errors == 3


def test_choose_run_serves_nothing_when_a_poll_is_due_or_the_chooser_is_not_round_robin(mem):
    regs = _uneven(mem, bounded=False)
    clock = FakeClock()
    sc = mem.consumers(mem.config(**{"task.inputs": "SYS.s"}), clock=clock, registrations=regs)
    sc.start()
    assert sc.choose_run(4)
    clock.now += 1.0  # past task.poll.interval.ms: choose() must poll first
    assert sc.choose_run(4) == []
    batching = mem.consumers(mem.config(**{"task.inputs": "SYS.s",
                                           "task.chooser.batch.size": "5"}), registrations=regs)
    batching.start()
    assert batching.choose_run(4) == []
    assert batching.choose(timeout=0) is not None


def test_consumers_refuse_serdes_that_are_not_a_serde_manager(mem):
    cfg = mem.config()
    with pytest.raises(TypeError, match="serdes must be a SerdeManager"):
        mem.consumers(cfg, serdes=object(), registrations=[(mem.ssp("s"), 0)])


def test_a_typed_consumer_builds_the_envelopes_the_chooser_hands_out(mem):
    mem.create("s", 1)
    mem.send("s", 0, b'{"n": 1}', b'{"n": 2}', key=b"k")
    cfg = mem.config(**{"systems.SYS.samza.msg.serde": "json", "systems.SYS.samza.key.serde": "string"})
    polled = []
    consumer_poll = mem.consumer_class.poll

    def recording_poll(self, ssps, timeout):
        result = consumer_poll(self, ssps, timeout)
        polled.extend(e for envelopes in result.values() for e in envelopes)
        return result

    mem.consumer_class = type("Polled", (mem.consumer_class,), {"poll": recording_poll})
    sc = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=[(mem.ssp("s"), 0)])
    sc.start()
    chosen = choose_all(sc)
    assert [(e.key, e.message) for e in chosen] == [("k", {"n": 1}), ("k", {"n": 2})]
    # typed: the task gets the very envelopes the consumer built (no raw envelope, no copy)
    same = [any(c is p for p in polled) for c in chosen]
    assert same == ([True, True] if mem.consumer.takes_envelope_factory else [False, False])


def test_a_bad_record_in_one_poll_does_not_change_how_later_polls_are_deserialized(mem):
    mem.create("s", 1)
    cfg = mem.config(**{"systems.SYS.samza.msg.serde": "json",
                        "task.drop.deserialization.errors": "true"})
    sc = mem.consumers(cfg, serdes=SerdeManager(cfg), fetch_max=2,
                       registrations=[(mem.ssp("s"), 0)])
    mem.send("s", 0, b'{"n": 0}', b"not json", b'{"n": 2}', b'{"n": 3}', b'{"n": 4}')
    sc.start()
    assert [(e.offset, e.message) for e in choose_all(sc)] == [
        (0, {"n": 0}), (2, {"n": 2}), (3, {"n": 3}), (4, {"n": 4})]
    mem.send("s", 0, b"{bad", b'{"n": 6}')
    assert [(e.offset, e.message) for e in choose_all(sc)] == [(6, {"n": 6})]
    assert sc.counters.deserialization_errors == 2


def test_a_key_that_does_not_deserialize_is_named_by_its_offset_in_either_path(mem):
    mem.create("s", 1)
    mem.send("s", 0, b"{}", key=b"k")
    mem.send("s", 0, b"{}", key=b"\xff\xfe")
    cfg = mem.config(**{"systems.SYS.samza.msg.serde": "json", "systems.SYS.samza.key.serde": "string"})
    sc = mem.consumers(cfg, serdes=SerdeManager(cfg), registrations=[(mem.ssp("s"), 0)])
    sc.start()
    with pytest.raises(DeserializationError, match="cannot deserialize the key with serde 'string'") as err:
        sc.choose(timeout=0)  # the refill behind offset 0 meets offset 1
    assert (err.value.ssp, err.value.offset) == (mem.ssp("s"), 1)
    assert isinstance(err.value.__cause__, UnicodeDecodeError)


@pytest.mark.parametrize("limit", [2, 7, 64, 1000])
@pytest.mark.parametrize("fetch_max", [3, 50])
def test_choose_run_takes_whole_rounds_in_the_order_of_single_chooses(mem, limit, fetch_max):
    mem.create("s", 4, bounded=True)
    for p, n in ((0, 40), (1, 41), (2, 9), (3, 77)):
        mem.send("s", p, *[f"{p}-{i}" for i in range(n)])
    mem.producer.end_stream("s")
    regs = [(mem.ssp("s", p), 0) for p in range(4)]
    config = mem.config(**{"task.inputs": "SYS.s"})
    one = mem.consumers(config, fetch_max=fetch_max, registrations=regs)
    one.start()
    expected = [(e.ssp.partition, e.offset, e.kind) for e in choose_all(one)]
    runs = mem.consumers(config, fetch_max=fetch_max, registrations=regs)
    runs.start()
    got, sizes = _drain_by_runs(runs, limit)
    assert [(e.ssp.partition, e.offset, e.kind) for e in got] == expected
    assert len(expected) == 40 + 41 + 9 + 77 + 4
    assert max(sizes) <= limit and sum(sizes) >= len(expected) // 2
    assert runs.counters.chooses == one.counters.chooses


@pytest.mark.parametrize("drop", ["false", "true"])
def test_file_log_records_are_typed_by_the_parse_and_a_bad_one_fails_or_drops_in_order(
        tmp_path, drop):
    from tests.engine.systems.filelog.conftest import SYSTEM, Log
    from weir.engine.systems.filelog import FileLogSystemFactory
    log = Log(str(tmp_path / "log"))
    log.create("s", 1, bounded=True)
    log.write([(b"a", b'{"n": 0}'), (b"b", b'{"n": 1}'), (b"c", b"not json"),
               (b"d", b'{"n": 3}')], "s")
    cfg = log.config.merged({f"systems.{SYSTEM}.samza.msg.serde": "json",
                             f"systems.{SYSTEM}.samza.key.serde": "string",
                             "task.drop.deserialization.errors": drop})
    factory = FileLogSystemFactory()
    consumer = factory.get_consumer(SYSTEM, cfg)
    assert consumer.takes_envelope_factory
    sc = SystemConsumers(chooser_from_config(cfg), {SYSTEM: consumer},
                         {SYSTEM: factory.get_admin(SYSTEM, cfg)}, SerdeManager(cfg), cfg)
    ssp = SystemStreamPartition(SYSTEM, "s", 0)
    sc.register(ssp, 0)
    sc.start()
    try:
        if drop == "true":
            got, _ = _drain_by_runs(sc, 64)
            assert [(e.offset, e.key, e.message) for e in got if not e.is_end_of_stream] == [
                (0, "a", {"n": 0}), (1, "b", {"n": 1}), (3, "d", {"n": 3})]
            assert sc.counters.deserialization_errors == 1
        else:
            got = []
            with pytest.raises(DeserializationError) as err:
                while True:
                    got += sc.choose_run(64) or [sc.choose(timeout=0)]
            assert (err.value.ssp, err.value.offset) == (ssp, 2)
            assert "cannot deserialize the message with serde 'json'" in str(err.value)
            # offset 1 is taken by the choose() that raises: its refill meets offset 2
            assert [(e.offset, e.message) for e in got] == [(0, {"n": 0})]
    finally:
        sc.stop()
