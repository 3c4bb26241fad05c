"""Weir's state provider registry: a store's engine from ``stores.<s>.factory``, else
``spark.weir.state.provider``; unknown names are config errors naming the key."""

from __future__ import annotations

import pytest

from weir.stores.config import ConfigError
from weir.stores.engines.memory import MemoryEngine

from weir.engine.spark.providers import (register_state_provider, state_provider,
                                         state_providers, store_specs,
                                         unregister_state_provider)
from weir.engine.spark.settings import ProviderSettings


def test_each_store_takes_its_factory_else_the_sessions_provider():
    specs = store_specs(["a", "b", "c"], {
        "stores.a.factory": "lmdb",
        "stores.b.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
        "stores.a.key.serde": "string"}, "memory")
    assert [(s.name, s.provider) for s in specs] == [("a", "lmdb"), ("b", "rocksdb"),
                                                      ("c", "memory")]
    assert specs[0].describe() == {"provider": "lmdb", "key.serde": "string",
                                   "msg.serde": "bytes"}


def test_the_default_provider_comes_from_the_spark_conf():
    settings = ProviderSettings.from_mapping({"spark.weir.state.provider": "LMDB",
                                              "spark.weir.state.snapshot.interval": "4"})
    assert (settings.provider, settings.snapshot_interval) == ("lmdb", 4)
    assert store_specs(["s"], {}, settings.provider)[0].provider == "lmdb"


def test_an_unknown_provider_names_the_key_that_chose_it():
    with pytest.raises(ConfigError, match="stores.s.factory.*unknown state provider 'leveldb'"):
        store_specs(["s"], {"stores.s.factory": "leveldb"}, "rocksdb")
    with pytest.raises(ConfigError, match="spark.weir.state.provider"):
        store_specs(["s"], {}, "leveldb")


def test_a_registered_provider_is_selectable_by_name():
    register_state_provider("scratch-test", lambda store, directory, spec: MemoryEngine(store),
                            persistent=False, description="test")
    try:
        assert state_provider("Scratch-Test").persistent is False
        assert "scratch-test" in [p.name for p in state_providers()]
        assert store_specs(["s"], {"stores.s.factory": "scratch-test"}, "rocksdb")[0].provider \
            == "scratch-test"
        with pytest.raises(ValueError, match="built in"):
            register_state_provider("rocksdb", lambda *a: None)
    finally:
        unregister_state_provider("scratch-test")
    with pytest.raises(ConfigError):
        state_provider("scratch-test")
