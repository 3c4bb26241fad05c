"""build_store: which layers a spec gets, and no engine left open when building fails."""

from __future__ import annotations

import pytest

from weir.stores.builder import build_store
from weir.stores.config import Config
from weir.stores.engines.lmdb import LMDBEngine
from weir.stores.engines.memory import MemoryEngine
from weir.testing import FileChangelog
from weir.stores.layers.cached import CachedLayer
from weir.stores.layers.large import LargeMessageLayer, PutSizeCheck
from weir.stores.layers.logged import LoggedLayer
from weir.stores.layers.serialized import SerializedLayer
from weir.stores.spec import StoreSpec


def _config(**keys: str) -> Config:
    return Config({"stores.s.factory": "lmdb", "stores.s.key.serde": "string",
                   "stores.s.msg.serde": "int64", **keys})


def _layers(store) -> list[type]:
    chain = [type(store)]
    while hasattr(store, "inner"):
        store = store.inner
        chain.append(type(store))
    return chain


@pytest.mark.parametrize("cache, logged, expected", [
    ("0", False, [SerializedLayer, LMDBEngine]),
    ("0", True, [SerializedLayer, LargeMessageLayer, LoggedLayer, LMDBEngine]),
    ("8", False, [CachedLayer, SerializedLayer, LMDBEngine]),
    ("8", True, [CachedLayer, SerializedLayer, LargeMessageLayer, LoggedLayer, LMDBEngine]),
])
def test_the_cache_exists_only_with_a_size_and_the_log_only_with_a_changelog(
        tmp_path, cache, logged, expected):
    cfg = _config(**{"stores.s.object.cache.size": cache, "stores.s.write.batch.size": "4"})
    log = FileChangelog(tmp_path / "log") if logged else None
    store = build_store(StoreSpec.from_config(cfg, "s"), tmp_path / "s", changelog=log,
                        config=cfg)
    try:
        assert _layers(store) == expected
    finally:
        store.close()
        if log is not None:
            log.close()


@pytest.mark.parametrize("key, expected", [
    ("stores.s.disallow.large.messages",
     [PutSizeCheck, CachedLayer, SerializedLayer, LargeMessageLayer, LMDBEngine]),
    ("stores.s.drop.large.messages", [CachedLayer, SerializedLayer, LargeMessageLayer, LMDBEngine]),
])
def test_a_store_without_changelog_gets_the_large_message_guard_only_when_asked(
        tmp_path, key, expected):
    cfg = _config(**{key: "true"})
    store = build_store(StoreSpec.from_config(cfg, "s"), tmp_path / "s", changelog=None,
                        config=cfg)
    try:
        assert _layers(store) == expected
    finally:
        store.close()


def test_a_failed_build_leaves_the_store_directory_unlocked(tmp_path):
    cfg = _config()
    spec = StoreSpec.from_config(cfg, "s")
    with pytest.raises(TypeError, match="ChangelogSink"):
        build_store(spec, tmp_path / "s", changelog=object(), config=cfg)  # not a sink
    store = build_store(spec, tmp_path / "s", changelog=None, config=cfg)  # not "locked"
    store.close()


def test_the_memory_engine_needs_no_directory(tmp_path):
    cfg = _config(**{"stores.s.factory": "memory"})
    store = build_store(StoreSpec.from_config(cfg, "s"), tmp_path / "never-created",
                        changelog=None, config=cfg)
    assert isinstance(store.inner.inner, MemoryEngine)
    store.close()
    assert not (tmp_path / "never-created").exists()


@pytest.mark.parametrize("fields, problem", [
    ({"object_cache_size": 5, "write_batch_size": 500}, "cannot be less than"),
    ({"write_batch_size": 0}, "write_batch_size"),
    ({"object_cache_size": -1}, "object_cache_size"),
    ({"staleness_ms": 0}, "staleness_ms"),
])
def test_a_spec_built_in_code_is_checked_like_a_parsed_one(fields, problem):
    with pytest.raises(ValueError, match=problem):
        StoreSpec(name="s", engine="memory", key_serde="string", value_serde="string",
                  **fields)


def test_stored_data_that_the_serdes_cannot_read_is_a_stored_data_error_not_a_message_error(
        tmp_path):
    # The store's own bytes disagree with its settings (msg.serde changed from int64 to json):
    # every read of such a key fails, whatever the message; it is not the message's fault.
    from weir.stores.errors import SerdeError, StoredDataError

    cfg = _config(**{"stores.s.object.cache.size": "0"})
    old = build_store(StoreSpec.from_config(cfg, "s"), tmp_path / "s", changelog=None, config=cfg)
    old.put("k", 7)
    old.close()
    cfg = _config(**{"stores.s.msg.serde": "json", "stores.s.object.cache.size": "0"})
    store = build_store(StoreSpec.from_config(cfg, "s"), tmp_path / "s", changelog=None,
                        config=cfg)
    try:
        for read in (lambda: store.get("k"), lambda: store.get_all(["k"]),
                     lambda: list(store.all())):
            with pytest.raises(StoredDataError) as err:
                read()
            assert isinstance(err.value, SerdeError) and err.value.store == "s"
            assert "msg.serde" in str(err.value)
        with pytest.raises(SerdeError) as put:
            store.put("j", {1, 2})  # a value the serde cannot write: the message's own fault
        assert not isinstance(put.value, StoredDataError)
    finally:
        store.close()
