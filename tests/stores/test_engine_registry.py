"""The one engine registry: a new engine is one module plus its registration
(``tests/stores/_sqlite_engine.py``, docs/ENGINES.md), and then the builder, restore, the Spark
providers, the container starter, the offline readers and the contract suite all take it."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from weir.stores.builder import build_store
from weir.stores.config import Config
from weir.stores.engines.registry import (Durability, EngineRegistrationError,
                                          StoreEngine, UnknownEngineError, register_engine,
                                          store_engine, store_engines, unregister_engine)
from weir.stores.offline import engine_of_files, open_read_only
from weir.stores.spec import StoreSpec

_ROOT = Path(__file__).resolve().parents[2]
_MODULE = "tests.stores._sqlite_engine"


@pytest.fixture
def sqlite():
    """The test's SQLite engine, registered for one test only (its module registers it on
    import; the rest of the session must not see it)."""
    from tests.stores import _sqlite_engine
    engine = register_engine(_sqlite_engine.SQLITE)
    yield engine
    unregister_engine(engine.name)


def _config(factory: str, **extra: str) -> Config:
    return Config({"stores.s.factory": factory, "stores.s.key.serde": "string",
                   "stores.s.msg.serde": "json", **extra})


def test_a_registered_engine_is_a_store_factory_under_its_name_and_aliases(sqlite, tmp_path):
    for factory in ("sqlite", "SQLite3"):
        spec = StoreSpec.from_config(_config(factory), "s")
        assert spec.engine is sqlite and spec.persistent
    store = build_store(spec, tmp_path / "s", changelog=None, config=_config("sqlite"))
    store.put("k", {"n": 1})
    store.close()
    assert engine_of_files(tmp_path / "s") is sqlite
    store = build_store(spec, tmp_path / "s", changelog=None, config=_config("sqlite"))
    assert store.get("k") == {"n": 1}
    store.close()
    with open_read_only(spec, tmp_path / "s") as files, files.all() as items:
        assert list(items) == [(b"k", b'{"n":1}')]


def test_a_misspelt_engine_gets_a_typed_error_with_the_registered_name(sqlite):
    with pytest.raises(UnknownEngineError) as info:
        StoreSpec.from_config(_config("sqlit"), "s")
    assert (info.value.key, info.value.suggestion) == ("stores.s.factory", "sqlite")
    assert "did you mean sqlite?" in str(info.value)
    assert "rocksdb, lmdb, memory, sqlite" in str(info.value)


def test_an_unregistered_engine_is_unknown_again(sqlite):
    unregister_engine("sqlite")
    try:
        with pytest.raises(UnknownEngineError):
            StoreSpec.from_config(_config("sqlite"), "s")
    finally:
        register_engine(sqlite)


def test_names_and_aliases_cannot_be_taken_twice_and_built_ins_stay(sqlite):
    def opener(spec, directory, durability):
        raise AssertionError("never opened")

    with pytest.raises(EngineRegistrationError, match="'sqlite3' already names the registered "
                                                      "engine 'sqlite'"):
        register_engine(StoreEngine("sqlite-two", opener, aliases=("sqlite3",)))
    with pytest.raises(EngineRegistrationError, match="built in"):
        register_engine(StoreEngine(
            "rocks", opener,
            samza_factory="org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory"))
    with pytest.raises(EngineRegistrationError, match="built in"):
        unregister_engine("lmdb")
    with pytest.raises(EngineRegistrationError, match="lower case"):
        StoreEngine("SQLite", opener)
    assert [e.name for e in store_engines()][:3] == ["rocksdb", "lmdb", "memory"]


def test_a_spec_pickles_to_the_registered_engine_itself(sqlite):
    spec = StoreSpec.from_config(_config("sqlite"), "s")
    assert pickle.loads(pickle.dumps(spec)).engine is sqlite
    assert pickle.loads(pickle.dumps(store_engine("rocksdb"))) is store_engine("rocksdb")


def test_the_spark_providers_and_the_container_starter_read_the_same_registry(sqlite, tmp_path):
    from weir.engine.container.starter import preload
    from weir.engine.spark.providers import state_provider, state_providers, store_specs
    provider = state_provider("SQLITE3")
    assert provider.engine is sqlite and provider.persistent
    assert "sqlite" in [p.name for p in state_providers()]
    (spec,) = store_specs(["s"], {"stores.s.factory": "sqlite"}, "rocksdb")
    assert (spec.provider, spec.spec.engine) == ("sqlite", sqlite)
    replica = provider.open("s", tmp_path / "replica", spec.spec)
    replica.put(b"a", b"1")
    replica.close()
    assert _MODULE in preload()
    assert preload()[-3:] == ["weir.stores.engines.rocksdb", "weir.stores.engines.lmdb", _MODULE]


def test_the_opener_is_told_what_durability_the_caller_needs(tmp_path):
    seen = []

    def opener(spec, directory, durability):
        seen.append(durability)
        from weir.stores.engines.memory import MemoryEngine
        return MemoryEngine(spec.name)

    from weir.engine.spark.providers import state_provider
    from weir.stores.builder import open_engine
    register_engine(StoreEngine("recording", opener))
    try:
        spec = StoreSpec("s", "recording", "bytes", "bytes")
        open_engine(spec, tmp_path, logged=True).close()
        open_engine(spec, tmp_path, logged=False).close()
        state_provider("recording").open("s", tmp_path, None).close()
    finally:
        unregister_engine("recording")
    assert seen == [Durability.CHANGELOG, Durability.LOCAL, Durability.PROCESS]


def test_the_contract_suite_runs_on_an_engine_registered_by_a_test_module(tmp_path):
    """docs/ENGINES.md's promise: register an engine, and the store contract, the model tests
    and restore's storage tests run on it with nothing else changed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["TMPDIR"] = str(tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-p", _MODULE, f"--basetemp={tmp_path / 'run'}", "-k", "sqlite", "tests/stores/test_contract.py",
         "tests/stores/test_model.py", "tests/recovery/test_storage.py"],
        cwd=_ROOT, env=env, capture_output=True, text=True, timeout=1200)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 250, summary  # the contract (x3 stacks), 3 model machines, restore
    assert "failed" not in summary and "error" not in summary, summary
