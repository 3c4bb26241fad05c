"""The system SPI's declared capabilities (docs/ARCHITECTURE.md, "Seams"): the built-in systems
derive from the bases, a user system written to the bare protocols is adapted where it is
loaded and gets the defaults, and a missing capability is a typed error naming the system."""

from __future__ import annotations

import sys
import types
import uuid

import pytest

from weir.engine.errors import StreamNotFoundError, UnsupportedOperationError
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import (CleanupPolicy, StreamSpec, SystemAdminBase,
                                     SystemConsumerBase, SystemFactoryBase, SystemProducerBase,
                                     partition_identities)
from weir.engine.systems.changelog import (SystemChangelogSink, SystemChangelogSource,
                                           ensure_changelog_stream)
from weir.engine.systems.filelog import FileLogSystemFactory
from weir.engine.systems.filelog.transactions import TransactionalProducer
from weir.engine.systems.foreign import ForeignAdmin, ForeignFactory
from weir.engine.systems.memory import MemorySystemFactory, reset_memory_systems
from weir.engine.systems.registry import SystemRegistry, process_local_systems
from weir.stores.config import Config, ConfigError


class DuckAdmin:
    """A user admin written to the SystemAdmin protocol only (no base class)."""

    def __init__(self, inner):
        self.inner = inner

    def metadata(self, ssps):
        return self.inner.metadata(ssps)

    def partition_count(self, stream):
        return self.inner.partition_count(stream)

    def stream_exists(self, stream):
        return self.inner.stream_exists(stream)

    def create_stream(self, spec):
        return self.inner.create_stream(spec)

    def offset_comparator(self, a, b):
        return self.inner.offset_comparator(a, b)


class DuckConsumer:
    def __init__(self, inner):
        self.inner = inner

    def register(self, ssp, offset):
        self.inner.register(ssp, offset)

    def start(self):
        self.inner.start()

    def poll(self, ssps, timeout):
        return self.inner.poll(ssps, timeout)

    def stop(self):
        self.inner.stop()


class DuckProducer:
    def __init__(self, inner):
        self.inner = inner
        self.sent = 0

    def register(self, source):
        self.inner.register(source)

    def start(self):
        self.inner.start()

    def send(self, source, envelope):
        self.sent += 1
        self.inner.send(source, envelope)

    def flush(self, source):
        self.inner.flush(source)

    def stop(self):
        self.inner.stop()


class DuckFactory:
    """A user factory written to the SystemFactory protocol, over the memory system."""

    def get_admin(self, system, config):
        return DuckAdmin(MemorySystemFactory().get_admin(system, config))

    def get_consumer(self, system, config):
        return DuckConsumer(MemorySystemFactory().get_consumer(system, config))

    def get_producer(self, system, config):
        return DuckProducer(MemorySystemFactory().get_producer(system, config))


@pytest.fixture
def duck(monkeypatch):
    """A registry whose system ``duck-<id>`` is :class:`DuckFactory`, named in config."""
    module = types.ModuleType("weir_duck_systems")
    module.DuckFactory = DuckFactory
    monkeypatch.setitem(sys.modules, "weir_duck_systems", module)
    system = f"duck-{uuid.uuid4().hex[:8]}"
    yield SystemRegistry(Config({f"systems.{system}.factory": "weir_duck_systems:DuckFactory"})), system
    reset_memory_systems(system)


def test_the_built_in_systems_derive_from_the_bases(tmp_path):
    config = {"systems.fl.root": str(tmp_path)}
    filelog = FileLogSystemFactory()
    assert isinstance(filelog, SystemFactoryBase) and not filelog.process_local
    assert isinstance(filelog.get_admin("fl", config), SystemAdminBase)
    assert isinstance(filelog.get_consumer("fl", config), SystemConsumerBase)
    assert isinstance(filelog.get_producer("fl", config), SystemProducerBase)
    assert issubclass(TransactionalProducer, SystemProducerBase)
    memory = MemorySystemFactory()
    assert isinstance(memory, SystemFactoryBase) and memory.process_local
    assert isinstance(memory.get_admin("m", {}), SystemAdminBase)
    assert isinstance(memory.get_consumer("m", {}), SystemConsumerBase)
    assert isinstance(memory.get_producer("m", {}), SystemProducerBase)


def test_a_duck_typed_user_factory_is_adapted_where_it_is_loaded(duck):
    reg, system = duck
    assert isinstance(reg.factory(system), ForeignFactory)
    admin = reg.admin(system)
    assert isinstance(admin, ForeignAdmin) and admin.system == system
    assert isinstance(reg.consumer(system), SystemConsumerBase)
    assert isinstance(reg.producer(system), SystemProducerBase)
    assert process_local_systems(reg.config, [system]) == []


def test_a_duck_typed_admin_gets_the_defaults_and_its_required_methods_work(duck):
    reg, system = duck
    admin = reg.admin(system)
    assert admin.create_stream(StreamSpec("s", 3, CleanupPolicy.DELETE))
    assert reg.partition_counts([SystemStream(system, "s")]) == {SystemStream(system, "s"): 3}
    assert admin.root is None and admin.stream_path("s") is None
    assert admin.cleanup_policy("s") is None and admin.is_bounded("s") is None
    assert admin.min_compaction_lag_ms("s") is None and list(admin.describe("s")) == []
    ssp = SystemStreamPartition(system, "s", 0)
    assert partition_identities(admin, [ssp]) == {ssp: admin.metadata([ssp])[ssp].identity}


def test_a_missing_stream_is_named_by_the_registry_with_the_default_partition_counts(duck):
    reg, system = duck
    with pytest.raises(StreamNotFoundError, match=f"'{system}.nope' does not exist"):
        reg.partition_counts([SystemStream(system, "nope")])


@pytest.mark.parametrize("operation, call", [
    ("list its streams", lambda admin: admin.list_streams()),
    ("delete streams", lambda admin: admin.delete_stream("s")),
    ("move streams aside", lambda admin: admin.rename_stream("s", "t")),
])
def test_an_operation_the_system_lacks_is_a_typed_error_naming_it(duck, operation, call):
    reg, system = duck
    admin = reg.admin(system)
    assert not admin.deletes_streams and not admin.renames_streams
    with pytest.raises(UnsupportedOperationError, match=f"system '{system}' cannot {operation}"):
        call(admin)


def test_a_changelog_on_a_duck_typed_system_writes_batches_one_send_each_and_reads_back(duck):
    reg, system = duck
    ensure_changelog_stream(reg.admin(system), "cl", 1)  # policy not told: not checked
    producer = reg.producer(system)
    producer.register("store")
    producer.start()
    ssp = SystemStreamPartition(system, "cl", 0)
    sink = SystemChangelogSink(producer, ssp, "store")
    assert sink.append_all([(b"a", b"1"), (b"b", None), (b"a", b"2")]) == 3
    sink.flush()
    assert producer.inner.sent == 3
    source = SystemChangelogSource(reg, ssp)
    assert list(source.read(0, 2)) == [(0, b"a", b"1"), (1, b"b", None), (2, b"a", b"2")]
    assert source.min_compaction_lag_ms() is None


def test_a_changelog_source_adapts_a_duck_typed_factory_given_directly(duck):
    _, system = duck
    admin = DuckFactory().get_admin(system, {})
    admin.create_stream(StreamSpec("cl", 1, CleanupPolicy.COMPACT))
    producer = MemorySystemFactory().get_producer(system, {})
    producer.send("t", OutgoingMessageEnvelope(SystemStream(system, "cl"), b"v", key=b"k",
                                               partition=0))
    source = SystemChangelogSource(DuckFactory(), SystemStreamPartition(system, "cl", 0))
    assert list(source.read(0, 0)) == [(0, b"k", b"v")]


class LocalDuckFactory(DuckFactory):
    """A duck-typed factory that says its streams are process-local without the base."""

    process_local = True


class BatchingDuckFactory(DuckFactory):
    def get_producer(self, system, config):
        producer = super().get_producer(system, config)
        producer.send_batch = lambda *args, **kwargs: 0
        return producer


def test_a_duck_typed_factory_defining_a_capability_is_refused_not_ignored(monkeypatch):
    module = types.ModuleType("weir_duck_local")
    module.LocalDuckFactory = LocalDuckFactory
    monkeypatch.setitem(sys.modules, "weir_duck_local", module)
    system = f"duck-{uuid.uuid4().hex[:8]}"
    config = Config({f"systems.{system}.factory": "weir_duck_local:LocalDuckFactory"})
    with pytest.raises(ConfigError, match=(f"config key 'systems.{system}.factory'.*defines "
                                           f"process_local but does not derive from .*"
                                           f"SystemFactoryBase")):
        SystemRegistry(config).factory(system)


def test_a_duck_typed_producer_defining_send_batch_is_refused_not_ignored():
    system = f"duck-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigError, match="defines send_batch but does not derive from .*"
                                          "SystemProducerBase"):
        ForeignFactory(BatchingDuckFactory()).get_producer(system, {})
