"""StoreSpec parsing: engines and their Samza aliases, defaults, validation and error messages."""

from __future__ import annotations

import dataclasses

import pytest

from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.engines.registry import UnknownEngineError, store_engine
from weir.stores.spec import StoreSpec, stores_in

from tests.stores.stacks import engine_available


def with_keys(**keys: str) -> Config:
    base = {"stores.s.factory": "memory", "stores.s.key.serde": "string",
            "stores.s.msg.serde": "json"}
    base.update(keys)
    return Config(base, origins={k: f"job.properties:{i}" for i, k in enumerate(base, 1)})


def test_minimal_spec_has_samza_defaults():
    spec = StoreSpec.from_config(with_keys(), "s")
    assert spec.engine is store_engine("memory")
    assert (spec.key_serde, spec.value_serde) == ("string", "json")
    assert spec.changelog is None and not spec.logged
    assert spec.write_batch_size == 500
    assert spec.object_cache_size == 1000
    assert spec.staleness_ms == 86_400_000
    assert not spec.persistent


def test_spec_is_frozen():
    spec = StoreSpec.from_config(with_keys(), "s")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.write_batch_size = 1  # type: ignore[misc]


@pytest.mark.parametrize("factory, engine", [
    ("memory", "memory"),
    ("MEMORY", "memory"),
    ("in-memory", "memory"),
    ("org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory", "memory"),
    ("rocksdb", "rocksdb"),
    ("org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory", "rocksdb"),
    ("lmdb", "lmdb"),
])
def test_factory_short_names_and_samza_class_names(factory, engine):
    spec = StoreSpec.from_config(with_keys(**{"stores.s.factory": factory}), "s")
    assert spec.engine is store_engine(engine)
    assert spec.persistent is (engine != "memory")


def test_rocksdb_spec_carries_rocksdb_options_only():
    if not engine_available("rocksdb"):
        pytest.skip("rocksdb engine not importable yet")
    spec = StoreSpec.from_config(with_keys(**{"stores.s.factory": "rocksdb",
                                              "stores.s.rocksdb.compression": "lz4"}), "s")
    assert type(spec.options).__name__ == "RocksDBOptions"
    assert spec.options.compression.value == "lz4"


def test_unknown_factory_lists_the_accepted_ones():
    with pytest.raises(ConfigError, match="rocksdb, lmdb, memory") as info:
        StoreSpec.from_config(with_keys(**{"stores.s.factory": "leveldb"}), "s")
    assert "stores.s.factory" in str(info.value) and "job.properties:1" in str(info.value)


@pytest.mark.parametrize("typo, meant", [
    ("rocksbd", "rocksdb"), ("LDMB", "lmdb"), ("Memroy", "memory"),
    ("org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactor",
     "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory"),
])
def test_a_misspelt_factory_is_a_typed_error_with_the_closest_name(typo, meant):
    with pytest.raises(UnknownEngineError) as info:
        StoreSpec.from_config(with_keys(**{"stores.s.factory": typo}), "s")
    assert isinstance(info.value, ConfigError)
    assert (info.value.key, info.value.name, info.value.suggestion) == (
        "stores.s.factory", typo, meant)
    assert f"did you mean {meant}?" in str(info.value)


def test_missing_factory_is_an_error_naming_the_key():
    config = Config({"stores.s.key.serde": "string", "stores.s.msg.serde": "json"})
    with pytest.raises(ConfigError, match="stores.s.factory.*required"):
        StoreSpec.from_config(config, "s")


@pytest.mark.parametrize("key", ["stores.s.key.serde", "stores.s.msg.serde"])
def test_missing_serde_is_an_error_naming_the_key(key):
    config = Config({k: v for k, v in with_keys().items() if k != key})
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        StoreSpec.from_config(config, "s")


def test_unknown_serde_name_fails_at_parse_time():
    with pytest.raises(ConfigError, match="stores.s.msg.serde.*unknown serde 'protobuf'"):
        StoreSpec.from_config(with_keys(**{"stores.s.msg.serde": "protobuf"}), "s")


def test_serde_aliases_are_kept_as_written_and_resolve():
    spec = StoreSpec.from_config(with_keys(**{"stores.s.key.serde": "long"}), "s")
    assert spec.key_serde == "long"


def test_unknown_store_key_names_it_suggests_and_lists_valid_keys():
    config = with_keys(**{"stores.s.object.cache.sise": "10"})
    with pytest.raises(ConfigError) as info:
        StoreSpec.from_config(config, "s")
    message = str(info.value)
    assert "'stores.s.object.cache.sise'" in message
    assert "job.properties:4" in message
    assert "did you mean stores.s.object.cache.size?" in message
    for valid in ("stores.s.factory", "stores.s.key.serde", "stores.s.msg.serde",
                  "stores.s.changelog", "stores.s.write.batch.size"):
        assert valid in message


def test_keys_of_other_stores_are_not_checked():
    config = with_keys(**{"stores.other.whatever": "1"})
    assert StoreSpec.from_config(config, "s").name == "s"


def test_changelog_is_a_system_stream_pair():
    spec = StoreSpec.from_config(with_keys(**{"stores.s.changelog": "kafka.my.changelog"}), "s")
    assert spec.changelog == ("kafka", "my.changelog")
    assert spec.logged


def test_bare_changelog_stream_uses_the_given_system():
    config = with_keys(**{"stores.s.changelog": "s-log"})
    assert StoreSpec.from_config(config, "s", changelog_system="filelog").changelog == (
        "filelog", "s-log")


def test_bare_changelog_stream_without_a_system_is_an_error():
    with pytest.raises(ConfigError, match="without a system.*job.changelog.system"):
        StoreSpec.from_config(with_keys(**{"stores.s.changelog": "s-log"}), "s")


@pytest.mark.parametrize("value", ["", ".x", "x."])
def test_malformed_changelog_is_an_error(value):
    with pytest.raises(ConfigError, match="stores.s.changelog"):
        StoreSpec.from_config(with_keys(**{"stores.s.changelog": value}), "s")


def test_cache_size_defaults_to_at_least_the_batch_size():
    spec = StoreSpec.from_config(with_keys(**{"stores.s.write.batch.size": "5000"}), "s")
    assert spec.object_cache_size == 5000


def test_cache_size_zero_disables_the_cache():
    spec = StoreSpec.from_config(with_keys(**{"stores.s.object.cache.size": "0"}), "s")
    assert not spec.cached


def test_cache_smaller_than_batch_is_an_error():
    config = with_keys(**{"stores.s.object.cache.size": "10", "stores.s.write.batch.size": "20"})
    with pytest.raises(ConfigError, match=r"cannot be less than write.batch.size \(20\)"):
        StoreSpec.from_config(config, "s")


@pytest.mark.parametrize("key, value, fragment", [
    ("stores.s.write.batch.size", "-1", ">= 0"),
    ("stores.s.write.batch.size", "many", "expected a integer|integer"),
    ("stores.s.object.cache.size", "-1", ">= 0"),
    ("stores.s.changelog.staleness.ms", "0", "positive"),
])
def test_bad_numbers_are_errors_naming_the_key(key, value, fragment):
    with pytest.raises(ConfigError, match=fragment) as info:
        StoreSpec.from_config(with_keys(**{key: value}), "s")
    assert key in str(info.value)


def test_samza_retention_key_is_an_alias_of_staleness():
    config = with_keys(**{"stores.s.changelog.delete.retention.ms": "1000"})
    assert StoreSpec.from_config(config, "s").staleness_ms == 1000


def test_stores_in_lists_stores_with_a_factory():
    config = Config({"stores.b.factory": "memory", "stores.a.factory": "rocksdb",
                     "stores.c.key.serde": "string", "stores.default.changelog.x": "1",
                     "job.name": "j"})
    assert stores_in(config) == ["a", "b"]
