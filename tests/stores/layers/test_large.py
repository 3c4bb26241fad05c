"""The large-message guard: a value over stores.<s>.changelog.max.message.size.bytes fails
with an error naming the store and key (at write-down, or at put), or is dropped and counted;
nothing of a refused batch reaches the changelog or the engine."""

from __future__ import annotations

import pytest

from weir.stores.builder import build_store
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.testing import FileChangelog
from weir.stores.layers.large import LargeMessageLayer, RecordTooLargeError
from weir.stores.spec import LargeMessages, StoreSpec


def _config(**keys: str) -> Config:
    return Config({"stores.s.factory": "memory", "stores.s.key.serde": "string",
                   "stores.s.msg.serde": "string", "stores.s.changelog": "filelog.s-log",
                   "stores.s.changelog.max.message.size.bytes": "8", **keys})


def _store(tmp_path, **keys):
    cfg = _config(**keys)
    log = FileChangelog(tmp_path / "log")
    return build_store(StoreSpec.from_config(cfg, "s"), tmp_path / "s", changelog=log,
                       config=cfg), log


def _logged(log):
    newest = log.newest_offset()
    return [] if newest < 0 else [(k, v) for _, k, v in log.read(0, newest)]


def test_a_value_over_the_limit_fails_at_write_down_naming_store_and_key(tmp_path):
    store, log = _store(tmp_path)
    store.put("small", "12345678")
    store.put("big", "123456789")
    with pytest.raises(RecordTooLargeError) as err:
        store.flush()
    assert err.value.store == "s" and err.value.key == b"big"
    assert (err.value.size, err.value.limit) == (9, 8)
    assert "stores.s.changelog.max.message.size.bytes" in str(err.value)
    assert "'big'" in str(err.value) and "drop.large.messages" in str(err.value)
    assert _logged(log) == []  # nothing of the refused batch was logged
    log.close()


def test_disallow_large_messages_fails_at_put_and_stores_nothing(tmp_path):
    store, log = _store(tmp_path, **{"stores.s.disallow.large.messages": "true"})
    with pytest.raises(RecordTooLargeError, match="'big'"):
        store.put("big", "123456789")
    store.put("ok", "1")
    store.flush()
    assert store.get("big") is None
    assert _logged(log) == [(b"ok", b"1")]
    store.close()
    log.close()


def test_drop_large_messages_drops_and_counts_the_value(tmp_path, caplog):
    store, log = _store(tmp_path, **{"stores.s.drop.large.messages": "true",
                                     "stores.s.object.cache.size": "0"})
    store.put("big", "123456789")
    store.put("ok", "1")
    store.flush()
    assert store.get("big") is None and store.get("ok") == "1"
    assert _logged(log) == [(b"ok", b"1")]
    guard = store.inner
    assert isinstance(guard, LargeMessageLayer) and guard.dropped == 1
    assert "dropped a value of 9 bytes" in caplog.text
    store.close()
    log.close()


def test_deletes_and_values_at_the_limit_pass(tmp_path):
    store, log = _store(tmp_path)
    store.put("k", "12345678")
    store.delete("k")
    store.flush()
    assert _logged(log) == [(b"k", None)]
    store.close()
    log.close()


def test_disallow_and_drop_together_are_refused_naming_the_key():
    cfg = _config(**{"stores.s.disallow.large.messages": "true",
                     "stores.s.drop.large.messages": "true"})
    with pytest.raises(ConfigError, match="stores.s.drop.large.messages"):
        StoreSpec.from_config(cfg, "s")


def test_the_default_limit_is_samzas_one_mebibyte():
    spec = StoreSpec.from_config(Config({"stores.s.factory": "memory",
                                         "stores.s.key.serde": "string",
                                         "stores.s.msg.serde": "string"}), "s")
    assert (spec.max_message_bytes, spec.large_messages) == (1_048_576,
                                                            LargeMessages.FAIL_AT_WRITE)
