"""SystemRegistry (factory resolution, cached admins, batched calls) and per-stream serdes."""

from __future__ import annotations

import sys
import types
import uuid

import pytest

from weir.engine.errors import DeserializationError, StreamNotFoundError
from weir.engine.model import (
    EnvelopeKind,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    SystemStream,
    SystemStreamPartition,
)
from weir.engine.config.serdes import NO_SERDE, SerdeManager, stream_serdes
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.memory import MemorySystemFactory, reset_memory_systems
from weir.engine.systems.registry import SystemRegistry, configured_systems, resolve_factory
from weir.stores.config import Config
from weir.stores.errors import ConfigError, SerdeError


@pytest.fixture
def system():
    name = f"mem-{uuid.uuid4().hex[:8]}"
    yield name
    reset_memory_systems(name)


class CountingFactory(MemorySystemFactory):
    """A user system factory: the memory system, counting admin calls."""

    admins_made = 0
    metadata_calls: list[int] = []

    def get_admin(self, system, config):
        CountingFactory.admins_made += 1
        admin = super().get_admin(system, config)
        inner = admin.metadata

        def metadata(ssps):
            ssps = list(ssps)
            CountingFactory.metadata_calls.append(len(ssps))
            return inner(ssps)

        admin.metadata = metadata
        return admin


NOT_A_FACTORY = object()


# -- factory resolution ---------------------------------------------------------------------

def test_memory_factory_by_short_name(system):
    reg = SystemRegistry(Config({f"systems.{system}.factory": "memory"}))
    assert isinstance(reg.factory(system), MemorySystemFactory)


def test_samza_factory_key_and_samza_in_memory_class_name_are_accepted(system):
    reg = SystemRegistry(Config({
        f"systems.{system}.samza.factory": "org.apache.samza.system.inmemory.InMemorySystemFactory"}))
    assert isinstance(reg.factory(system), MemorySystemFactory)
    assert configured_systems(reg.config) == [system]


def test_module_colon_class_and_dotted_class_names_resolve(system):
    for spec in (f"{__name__}:CountingFactory", f"{__name__}.CountingFactory"):
        reg = SystemRegistry(Config({f"systems.{system}.factory": spec}))
        assert isinstance(reg.factory(system), CountingFactory)


def test_builtin_system_names_need_no_factory_config():
    assert isinstance(resolve_factory(Config(), "memory"), MemorySystemFactory)


def test_filelog_system_name_resolves_to_the_file_log():
    try:
        from weir.engine.systems.filelog import FileLogSystemFactory
    except ImportError:
        pytest.skip("engine/systems/filelog is not built yet")
    assert isinstance(resolve_factory(Config(), "filelog"), FileLogSystemFactory)


def test_other_systems_without_factory_raise_naming_the_key():
    with pytest.raises(ConfigError, match=r"systems\.kafka\.factory"):
        SystemRegistry(Config()).admin("kafka")


@pytest.mark.parametrize("spec", ["org.apache.samza.system.other.OtherSystemFactory",
                                  "no_such_module:Factory", f"{__name__}:NoSuchClass", "justaword"])
def test_unknown_or_unimportable_factory_names_key_and_origin(system, spec):
    key = f"systems.{system}.factory"
    reg = SystemRegistry(Config({key: spec}, origins={key: "job.properties:7"}))
    with pytest.raises(ConfigError) as err:
        reg.factory(system)
    assert key in str(err.value) and "job.properties:7" in str(err.value)
    assert spec in str(err.value)


def test_an_object_that_is_not_a_factory_is_refused(system):
    key = f"systems.{system}.factory"
    with pytest.raises(ConfigError, match="lacks get_admin"):
        SystemRegistry(Config({key: f"{__name__}:NOT_A_FACTORY"})).factory(system)


# -- admins, consumers, producers -----------------------------------------------------------

def test_admins_are_cached_and_consumers_and_producers_are_new(system):
    CountingFactory.admins_made = 0
    reg = SystemRegistry(Config({f"systems.{system}.factory": f"{__name__}:CountingFactory"}))
    assert reg.admin(system) is reg.admin_for(SystemStream(system, "x"))
    assert CountingFactory.admins_made == 1
    assert reg.consumer(system) is not reg.consumer(system)
    assert reg.producer(system) is not reg.producer(system)


def test_partition_counts_and_metadata_are_batched_per_system(system):
    other = system + "-b"
    CountingFactory.metadata_calls = []
    reg = SystemRegistry(Config({f"systems.{system}.factory": f"{__name__}:CountingFactory",
                                 f"systems.{other}.factory": "memory"}))
    reg.admin(system).create_stream(StreamSpec("a", 2))
    reg.admin(system).create_stream(StreamSpec("b", 3))
    reg.admin(other).create_stream(StreamSpec("c", 1))
    streams = [SystemStream(system, "a"), SystemStream(system, "b"), SystemStream(other, "c")]
    assert reg.partition_counts(streams) == dict(zip(streams, [2, 3, 1]))
    ssps = [SystemStreamPartition(system, s, p) for s, n in (("a", 2), ("b", 3)) for p in range(n)]
    md = reg.metadata(ssps + [SystemStreamPartition(other, "c", 0)])
    assert len(md) == 6 and CountingFactory.metadata_calls == [5]
    assert reg.stream_metadata(SystemStream(system, "b"))[2].upcoming == 0
    reset_memory_systems(other)


def test_partition_counts_of_a_missing_stream_name_it(system):
    reg = SystemRegistry(Config({f"systems.{system}.factory": "memory"}))
    with pytest.raises(StreamNotFoundError, match=f"{system}.ghost"):
        reg.partition_counts([SystemStream(system, "ghost")])


# -- per-stream serdes ----------------------------------------------------------------------

SS = SystemStream("filelog", "orders")
SSP = SystemStreamPartition("filelog", "orders", 2)


def test_no_serde_configured_means_bytes_pass_through():
    serdes = stream_serdes(Config(), SS)
    env = IncomingMessageEnvelope(SSP, 1, b"k", b"v")
    assert serdes.key_serde_name == serdes.msg_serde_name == NO_SERDE
    assert serdes.deserialize(env) is env
    assert serdes.serialize(OutgoingMessageEnvelope(SS, b"v", key=b"k")) == (b"k", b"v")


def test_stream_level_serde_wins_over_the_system_default():
    cfg = Config({"systems.filelog.samza.msg.serde": "string",
                  "systems.filelog.streams.orders.samza.msg.serde": "json",
                  "systems.filelog.samza.key.serde": "string"})
    serdes = stream_serdes(cfg, SS)
    assert (serdes.key_serde_name, serdes.msg_serde_name) == ("string", "json")
    assert stream_serdes(cfg, SystemStream("filelog", "other")).msg_serde_name == "string"


def test_stream_id_properties_and_default_stream_properties_are_used():
    cfg = Config({"streams.purchases.samza.system": "filelog",
                  "streams.purchases.samza.physical.name": "orders",
                  "streams.purchases.samza.msg.serde": "json",
                  "systems.filelog.streams.orders.samza.msg.serde": "string",
                  "systems.filelog.default.stream.samza.key.serde": "int64"})
    serdes = stream_serdes(cfg, SS)
    assert (serdes.key_serde_name, serdes.msg_serde_name) == ("int64", "json")


def test_deserialize_gives_a_new_typed_envelope_and_keeps_nulls():
    cfg = Config({"systems.filelog.samza.key.serde": "string",
                  "systems.filelog.samza.msg.serde": "json"})
    serdes = stream_serdes(cfg, SS)
    env = IncomingMessageEnvelope(SSP, 5, b"alice", b'{"n":1}', 123, 12)
    typed = serdes.deserialize(env)
    assert typed is not env and env.key == b"alice"
    assert (typed.ssp, typed.offset, typed.key, typed.message, typed.timestamp, typed.size) == \
        (SSP, 5, "alice", {"n": 1}, 123, 12)
    tomb = serdes.deserialize(IncomingMessageEnvelope(SSP, 6, None, None))
    assert (tomb.key, tomb.message) == (None, None)
    eos = IncomingMessageEnvelope.end_of_stream(SSP, 7)
    assert serdes.deserialize(eos) is eos and eos.kind is EnvelopeKind.END_OF_STREAM


def test_deserialization_failure_names_ssp_offset_and_serde():
    serdes = stream_serdes(Config({"systems.filelog.samza.msg.serde": "json"}), SS)
    with pytest.raises(DeserializationError) as err:
        serdes.deserialize(IncomingMessageEnvelope(SSP, 41, None, b"{not json"))
    assert err.value.ssp == SSP and err.value.offset == 41
    assert "filelog.orders#2 offset 41" in str(err.value) and "'json'" in str(err.value)
    assert "task.drop.deserialization.errors" in str(err.value)


def test_serialize_uses_the_serdes_and_rejects_objects_without_a_serde():
    cfg = Config({"systems.filelog.streams.orders.samza.key.serde": "int64",
                  "systems.filelog.streams.orders.samza.msg.serde": "json"})
    key, msg = stream_serdes(cfg, SS).serialize(OutgoingMessageEnvelope(SS, {"a": 1}, key=7))
    assert msg == b'{"a":1}' and len(key) == 8
    assert stream_serdes(cfg, SS).serialize(OutgoingMessageEnvelope(SS, None, key=7))[1] is None
    with pytest.raises(SerdeError, match=r"samza\.msg\.serde"):
        stream_serdes(Config(), SS).serialize(OutgoingMessageEnvelope(SS, {"a": 1}))
    with pytest.raises(SerdeError, match="int64"):
        stream_serdes(cfg, SS).serialize(OutgoingMessageEnvelope(SS, {}, key="seven"))


def test_unknown_serde_name_raises_config_error_naming_the_key_and_origin():
    key = "systems.filelog.streams.orders.samza.msg.serde"
    cfg = Config({key: "protobuf"}, origins={key: "job.properties:9"})
    with pytest.raises(ConfigError) as err:
        stream_serdes(cfg, SS)
    assert key in str(err.value) and "job.properties:9" in str(err.value)


def test_user_serdes_from_the_serializer_registry(monkeypatch):
    mod = types.ModuleType("weir_test_user_serde")

    class Upper:
        def to_bytes(self, obj):
            return obj.upper().encode()

        def from_bytes(self, data):
            return data.decode().lower()

    mod.Upper = Upper
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    cfg = Config({"serializers.registry.shout.class": f"{mod.__name__}:Upper",
                  "systems.filelog.samza.msg.serde": "shout"})
    serdes = stream_serdes(cfg, SS)
    assert serdes.serialize_message("hi") == b"HI"
    assert serdes.deserialize(IncomingMessageEnvelope(SSP, 0, None, b"HI")).message == "hi"


def test_serde_manager_caches_per_stream_and_routes_by_envelope():
    reg = SystemRegistry(Config({"systems.filelog.samza.msg.serde": "string"}))
    assert isinstance(reg.serdes, SerdeManager)
    assert reg.serdes_for(SS) is reg.serdes_for(SS)
    assert reg.serdes.deserialize(IncomingMessageEnvelope(SSP, 0, None, b"x")).message == "x"
    assert reg.serdes.serialize(OutgoingMessageEnvelope(SS, "y")) == (None, b"y")
