"""TaskInstance: context, collector routing, commit order, errors, close."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from weir.engine.errors import EngineError, TaskError
from weir.engine.runloop.instance import (Coordinator, IgnoredExceptions, InstanceState, ProducerCollector,
                             TaskInstance, task_error)
from weir.engine.model import (IncomingMessageEnvelope, OutgoingMessageEnvelope, SystemStream,
                          SystemStreamPartition, partition_for)
from weir.engine.config.serdes import SerdeManager
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.memory import MemorySystemFactory, reset_memory_systems
from weir.engine.task import RequestScope
from weir.recovery.checkpoint import MemoryCheckpointManager
from weir.stores.builder import build_store
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.spec import StoreSpec

SYSTEM = "mem-instance"
IN = SystemStreamPartition(SYSTEM, "clicks", 0)
OUT = SystemStream(SYSTEM, "out")


@pytest.fixture
def memory_system():
    factory = MemorySystemFactory()
    admin = factory.get_admin(SYSTEM, {})
    admin.create_stream(StreamSpec("out", 4))
    yield factory, admin
    reset_memory_systems(SYSTEM)


def out_records(admin, partition=None):
    consumer = MemorySystemFactory().get_consumer(SYSTEM, {})
    parts = range(admin.partition_count("out")) if partition is None else [partition]
    ssps = [SystemStreamPartition(SYSTEM, "out", p) for p in parts]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    got = consumer.poll(ssps, 0)
    return {ssp.partition: [(e.key, e.message) for e in got.get(ssp, [])] for ssp in ssps}


class RecordingProducer:
    """A real memory producer that also records flushes and registrations into ``events``."""

    def __init__(self, events: list):
        self._inner = MemorySystemFactory().get_producer(SYSTEM, {})
        self.events = events

    def register(self, source):
        self.events.append(("register", source))
        self._inner.register(source)

    def start(self):
        self._inner.start()

    def send(self, source, envelope):
        self._inner.send(source, envelope)

    def flush(self, source):
        self.events.append(("producer.flush", source))
        self._inner.flush(source)

    def stop(self):
        self._inner.stop()


class MemoryStorage:
    """Real memory-engine stores behind the storage-manager interface, recording flushes."""

    def __init__(self, events: list, names=("counts",)):
        cfg = Config({f"stores.{n}.{k}": v for n in names
                      for k, v in (("factory", "memory"), ("key.serde", "string"),
                                   ("msg.serde", "int64"))})
        self._stores = {n: build_store(StoreSpec.from_config(cfg, n), Path("unused"),
                                       changelog=None, config=cfg) for n in names}
        self.events = events
        self.closed = False

    def stores(self):
        return self._stores

    def flush(self):
        for store in self._stores.values():
            store.flush()
        self.events.append(("stores.flush",))
        return {name: 7 for name in self._stores}

    def unsettled(self):
        return False

    def close(self):
        self.closed = True
        for store in self._stores.values():
            store.close()
        self.events.append(("stores.close",))


class RecordingCheckpoints(MemoryCheckpointManager):
    def __init__(self, events: list):
        super().__init__()
        self.events = events

    def write(self, task_name, checkpoint):
        self.events.append(("checkpoint.write", task_name))
        super().write(task_name, checkpoint)


class Counting:
    def init(self, context):
        self.context = context
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        key = envelope.key.decode()
        self.counts.put(key, (self.counts.get(key) or 0) + 1)
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message, key=envelope.key))

    def close(self):
        self.closed = True


def env(offset, key=b"k", message=b"m"):
    return IncomingMessageEnvelope(IN, offset, key, message)


def test_init_gives_the_task_its_context_and_stores(memory_system):
    events: list = []
    task = Counting()
    inst = TaskInstance("Partition 0", task, [IN], {"job.name": "j"},
                        storage=MemoryStorage(events))
    inst.init()
    assert task.context.task_name == "Partition 0"
    assert task.context.ssps == frozenset({IN})
    assert task.context.config["job.name"] == "j"
    assert inst.state is InstanceState.INITIALIZED
    with pytest.raises(EngineError, match="init runs once"):
        inst.init()


def test_unknown_store_names_the_store_and_its_config_key():
    class WantsTotals(Counting):
        def init(self, context):
            context.store("totals")
    inst = TaskInstance("Partition 0", WantsTotals(), [IN], storage=MemoryStorage([]))
    with pytest.raises(TaskError, match="failed in init") as info:
        inst.init()
    cause = info.value.__cause__
    assert isinstance(cause, ConfigError)
    assert "no store 'totals'" in str(cause) and "stores.totals.factory" in str(cause)
    assert "counts" in str(cause)


def test_commit_flushes_producers_then_stores_then_writes_the_checkpoint(memory_system):
    events: list = []
    producer = RecordingProducer(events)
    collector = ProducerCollector("Partition 0", {SYSTEM: producer}, None,
                                  lambda ss: 4)
    checkpoints = RecordingCheckpoints(events)
    inst = TaskInstance("Partition 0", Counting(), [IN], storage=MemoryStorage(events),
                        checkpoints=checkpoints, collector=collector,
                        last_processed={IN: 3}, checkpoint_extras=lambda: {"watermark": 5})
    inst.init()
    assert events == [("register", "Partition 0")]
    inst.process(env(4, b"a"), inst.coordinator)
    inst.mark_processed(IN, 4)
    checkpoint = inst.commit()
    assert inst.task.counts.get("a") == 1
    assert events[1:] == [("producer.flush", "Partition 0"), ("stores.flush",),
                          ("checkpoint.write", "Partition 0")]
    assert checkpoint == checkpoints.read_last("Partition 0")
    assert dict(checkpoint.input_offsets) == {("mem-instance", "clicks", 0): 4}
    assert dict(checkpoint.changelog_offsets) == {"counts": 7}
    assert dict(checkpoint.extras) == {"watermark": 5}
    assert inst.metrics.commits.count == 1 and inst.metrics.last_commit_ms > 0


def test_commit_without_checkpoint_manager_still_flushes(memory_system):
    events: list = []
    inst = TaskInstance("t", Counting(), [IN], storage=MemoryStorage(events),
                        collector=ProducerCollector("t", {SYSTEM: RecordingProducer(events)}))
    inst.init()
    assert inst.commit() is None
    assert ("stores.flush",) in events and ("producer.flush", "t") in events


def test_collector_uses_explicit_partition_then_partition_key_then_key(memory_system):
    _, admin = memory_system
    producer = MemorySystemFactory().get_producer(SYSTEM, {})
    collector = ProducerCollector("t", {SYSTEM: producer}, None, lambda ss: 4)
    collector.send(OutgoingMessageEnvelope(OUT, b"explicit", key=b"key", partition=2))
    collector.send(OutgoingMessageEnvelope(OUT, b"by-pkey", key=b"key", partition_key=b"user-9"))
    collector.send(OutgoingMessageEnvelope(OUT, b"by-str-pkey", key=b"key", partition_key="user-9"))
    collector.send(OutgoingMessageEnvelope(OUT, b"by-key", key=b"key"))
    records = out_records(admin)
    assert (b"key", b"explicit") in records[2]
    assert (b"key", b"by-pkey") in records[partition_for(b"user-9", 4)]
    assert (b"key", b"by-str-pkey") in records[partition_for(b"user-9", 4)]
    assert (b"key", b"by-key") in records[partition_for(b"key", 4)]
    assert collector.sent == 4


def test_collector_round_robins_messages_without_key(memory_system):
    _, admin = memory_system
    producer = MemorySystemFactory().get_producer(SYSTEM, {})
    collector = ProducerCollector("t", {SYSTEM: producer}, None, lambda ss: 4)
    for i in range(8):
        collector.send(OutgoingMessageEnvelope(OUT, b"%d" % i))
    records = out_records(admin)
    assert [len(records[p]) for p in range(4)] == [2, 2, 2, 2]
    assert records[0] == [(None, b"0"), (None, b"4")]


def test_collector_serializes_with_the_stream_serdes_and_hashes_the_serialized_key(memory_system):
    _, admin = memory_system
    serdes = SerdeManager(Config({f"systems.{SYSTEM}.samza.key.serde": "string",
                                  f"systems.{SYSTEM}.samza.msg.serde": "json"}))
    producer = MemorySystemFactory().get_producer(SYSTEM, {})
    collector = ProducerCollector("t", {SYSTEM: producer}, serdes, lambda ss: 4)
    collector.send(OutgoingMessageEnvelope(OUT, {"amount": 3}, key="alice"))
    collector.send(OutgoingMessageEnvelope(OUT, {"amount": 4}, key="bob", partition_key="alice"))
    records = out_records(admin, partition_for(b"alice", 4))[partition_for(b"alice", 4)]
    assert records == [(b"alice", b'{"amount":3}'), (b"bob", b'{"amount":4}')]


def test_collector_names_a_system_without_producer():
    collector = ProducerCollector("Partition 3", {}, None, lambda ss: 1)
    with pytest.raises(EngineError, match="Partition 3.*'other.out'.*systems.other.factory"):
        collector.send(OutgoingMessageEnvelope(SystemStream("other", "out"), b"x"))


def test_coordinator_keeps_the_widest_scope_and_rejects_other_values():
    coord = Coordinator()
    coord.commit()
    coord.commit(RequestScope.ALL_TASKS_IN_CONTAINER)
    coord.commit(RequestScope.CURRENT_TASK)
    coord.shutdown(RequestScope.CURRENT_TASK)
    assert coord.requested
    assert coord.take() == (RequestScope.ALL_TASKS_IN_CONTAINER, RequestScope.CURRENT_TASK)
    assert not coord.requested and coord.take() == (None, None)
    with pytest.raises(TypeError, match="RequestScope"):
        coord.shutdown("all")


def test_ignored_exceptions_match_dotted_names_bare_builtins_and_subclasses():
    import json
    policy = IgnoredExceptions(["json.decoder.JSONDecodeError", "KeyError"])
    assert policy.matches(json.JSONDecodeError("bad", "x", 0))
    assert policy.matches(KeyError("k"))
    assert not policy.matches(ValueError("v"))
    assert IgnoredExceptions(["ValueError"]).matches(json.JSONDecodeError("bad", "x", 0))
    assert IgnoredExceptions(["*"]).matches(RuntimeError())
    assert not IgnoredExceptions([])


def test_ignores_counts_per_exception_class():
    inst = TaskInstance("t", Counting(), [IN], {"task.ignored.exceptions": "KeyError"})
    assert inst.ignores(KeyError("x")) and not inst.ignores(ValueError("x"))
    snap = inst.metrics.snapshot()
    assert snap["exceptions-ignored"] == 1 and snap["exception-ignored-builtins.KeyError"] == 1


def test_task_error_names_task_ssp_offset_and_carries_the_traceback():
    def user_code():
        raise ValueError("bad amount")
    try:
        user_code()
    except ValueError as exc:
        err = task_error("Partition 2", exc, during="process", ssp=IN, offset=41)
    text = str(err)
    assert "task 'Partition 2'" in text and str(IN) in text and "offset 41" in text
    assert "ValueError: bad amount" in text and "user_code" in text
    assert "task.ignored.exceptions" in text
    assert (err.task_name, err.ssp, err.offset) == ("Partition 2", IN, 41)
    assert isinstance(err.__cause__, ValueError) and "user_code" in err.user_traceback


def test_close_closes_the_task_then_the_stores_once():
    events: list = []
    storage = MemoryStorage(events)
    task = Counting()
    inst = TaskInstance("t", task, [IN], storage=storage)
    inst.init()
    inst.close()
    inst.close()
    assert task.closed and storage.closed
    assert events.count(("stores.close",)) == 1
    assert inst.state is InstanceState.CLOSED


def test_close_failure_is_a_task_error_and_the_stores_still_close():
    class Failing(Counting):
        def close(self):
            raise OSError("disk gone")
    storage = MemoryStorage([])
    inst = TaskInstance("t", Failing(), [IN], storage=storage)
    inst.init()
    with pytest.raises(TaskError, match="failed in close: OSError: disk gone"):
        inst.close()
    assert storage.closed


def test_async_hooks_are_awaited_on_the_asyncio_thread():
    from weir.engine.runloop.asyncio_thread import AsyncioThread
    seen = {}

    class AsyncHooks:
        async def init(self, context):
            seen["init"] = threading.current_thread().name

        async def process(self, envelope, collector, coordinator):
            return None

        async def close(self):
            seen["close"] = threading.current_thread().name

    runner = AsyncioThread("weir-asyncio-test")
    try:
        inst = TaskInstance("t", AsyncHooks(), [IN], async_runner=runner)
        inst.init()
        inst.close()
    finally:
        runner.stop()
    assert seen == {"init": "weir-asyncio-test", "close": "weir-asyncio-test"}


def test_caught_up_filter_skips_envelopes_before_the_starting_offset():
    inst = TaskInstance("t", Counting(), [IN], starting_offsets={IN: 10})
    assert not inst.is_caught_up(env(9))
    assert inst.is_caught_up(env(10)) and inst.is_caught_up(env(11))


def test_collector_without_serializer_gives_passthrough_serdes_and_refuses_other_serializers():
    serdes = ProducerCollector("t", {}, None, lambda ss: 1).serdes_for(OUT)
    assert serdes.is_passthrough and serdes.key_serde is None and serdes.system_stream == OUT
    with pytest.raises(TypeError, match="ProducerCollector 't': serializer must be a SerdeManager"):
        ProducerCollector("t", {}, object())


def test_an_instance_refuses_a_collector_that_is_not_a_producer_collector():
    class Collector:
        def send(self, envelope):
            pass

    with pytest.raises(TypeError, match="task 'Partition 0': collector must be a ProducerCollector"):
        TaskInstance("Partition 0", Counting(), [IN], collector=Collector())


def test_control_started_is_none_for_an_instance_without_control():
    inst = TaskInstance("Partition 0", Counting(), [IN], storage=MemoryStorage([]))
    assert inst.control_started is None
