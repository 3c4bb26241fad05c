"""The changelog layer: every change is logged before it is applied, and replay rebuilds the store."""

from __future__ import annotations

import random

import pytest

from weir.stores.builder import build_store, open_engine
from weir.stores.changelog import ChangelogSink
from weir.stores.config import Config
from weir.stores.engines.memory import MemoryEngine
from weir.stores.errors import StoreClosedError, StoreError
from weir.testing import FileChangelog
from weir.stores.layers.logged import LoggedLayer
from weir.stores.layers.serialized import SerializedLayer
from weir.stores.serdes import Int64Serde, JsonSerde
from weir.stores.spec import StoreSpec

from tests.stores.stacks import ENGINES, engine_param


class RecordingSink(ChangelogSink):
    def __init__(self):
        self.records = []
        self.flushes = 0

    def append(self, key, value):
        self.records.append((key, value))

    def flush(self):
        self.flushes += 1


def test_every_write_is_appended_in_order():
    sink = RecordingSink()
    store = LoggedLayer(MemoryEngine("s"), sink)
    store.put(b"a", b"1")
    store.put_all([(b"b", b"2"), (b"c", b"3")])
    store.delete(b"a")
    store.delete_all([b"b"])
    store.write_batch([(b"d", b"4"), (b"c", None)])
    assert sink.records == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"a", None), (b"b", None),
                            (b"d", b"4"), (b"c", None)]


def test_the_change_is_logged_before_the_engine_sees_it():
    order = []

    class Sink(RecordingSink):
        def append(self, key, value):
            order.append("log")

    class Engine(MemoryEngine):
        def put(self, key, value):
            order.append("engine")
            super().put(key, value)

    LoggedLayer(Engine("s"), Sink()).put(b"a", b"1")
    assert order == ["log", "engine"]


def test_reads_are_not_logged():
    sink = RecordingSink()
    store = LoggedLayer(MemoryEngine("s"), sink)
    store.put(b"a", b"1")
    store.get(b"a")
    store.get_all([b"a"])
    store.all().close()
    assert sink.records == [(b"a", b"1")]


def test_flush_flushes_engine_then_sink():
    sink = RecordingSink()
    store = LoggedLayer(MemoryEngine("s"), sink)
    store.flush()
    assert sink.flushes == 1


def test_a_write_to_a_closed_store_is_not_logged():
    sink = RecordingSink()
    store = LoggedLayer(MemoryEngine("s"), sink)
    store.close()
    with pytest.raises(StoreClosedError):
        store.put(b"a", b"1")
    assert sink.records == []


def test_batches_use_the_sinks_append_columns_when_it_has_one():
    class BatchSink(RecordingSink):
        def __init__(self):
            super().__init__()
            self.batches = []

        def append_columns(self, keys, values):
            self.batches.append((list(keys), list(values)))

    sink = BatchSink()
    LoggedLayer(MemoryEngine("s"), sink).write_batch([(b"a", b"1"), (b"b", None)])
    assert sink.batches == [([b"a", b"b"], [b"1", None])] and sink.records == []


def test_batches_use_the_sinks_append_all_when_it_has_no_append_columns():
    class PairSink(RecordingSink):
        def __init__(self):
            super().__init__()
            self.batches = []

        def append_all(self, items):
            self.batches.append(list(items))

    sink = PairSink()
    LoggedLayer(MemoryEngine("s"), sink).write_batch([(b"a", b"1"), (b"b", None)])
    assert sink.batches == [[(b"a", b"1"), (b"b", None)]] and sink.records == []


def test_a_sink_with_only_append_gets_one_call_per_change():
    sink = RecordingSink()
    LoggedLayer(MemoryEngine("s"), sink).write_batch([(b"a", b"1"), (b"b", None)])
    assert sink.records == [(b"a", b"1"), (b"b", None)]


def replay(log: FileChangelog, engine) -> None:
    batch = []
    for _, key, value in log.read(log.oldest_offset(), log.newest_offset()):
        batch.append((key, value))
        if len(batch) >= 100:
            engine.write_batch(batch)
            batch = []
    engine.write_batch(batch)


def dump(store):
    with store.all() as it:
        return list(it)


@pytest.mark.parametrize("engine", [engine_param(e) for e in ENGINES])
@pytest.mark.parametrize("cache_size", [0, 16])
def test_changelog_replayed_into_an_empty_store_reproduces_it(tmp_path, engine, cache_size):
    config = Config({"stores.s.factory": engine, "stores.s.key.serde": "int64",
                     "stores.s.msg.serde": "json", "stores.s.changelog": "filelog.s-log",
                     "stores.s.object.cache.size": str(cache_size),
                     "stores.s.write.batch.size": "8"})
    spec = StoreSpec.from_config(config, "s")
    log = FileChangelog(tmp_path / "s.changelog")
    store = build_store(spec, tmp_path / "original", changelog=log, config=config)
    rng = random.Random(7)
    for step in range(2000):
        key = rng.randrange(200)
        roll = rng.random()
        if roll < 0.6:
            store.put(key, {"step": step, "tags": ["x"] * (step % 3)})
        elif roll < 0.8:
            store.delete(key)
        elif roll < 0.9:
            store.put_all({key + i: {"batch": step} for i in range(3)})
        else:
            store.delete_all([key, key + 1])
        if step % 300 == 0:
            store.flush()
    store.flush()
    expected = dump(store)

    rebuilt = SerializedLayer(open_engine(spec, tmp_path / "rebuilt", logged=False),
                              Int64Serde(), JsonSerde())
    replay(log, rebuilt.inner)
    assert dump(rebuilt) == expected
    assert len(expected) > 50
    rebuilt.close()
    store.close()
    log.close()


@pytest.mark.parametrize("cache_size", ["0", "16"])
def test_a_key_the_engine_refuses_never_reaches_the_changelog(tmp_path, cache_size):
    """LMDB cannot hold an empty key. The refused write must not be logged: a changelog record
    the engine refuses would make every later restore of the store fail on it."""
    config = Config({"stores.s.factory": "lmdb", "stores.s.key.serde": "string",
                     "stores.s.msg.serde": "int64", "stores.s.changelog": "filelog.s-log",
                     "stores.s.object.cache.size": cache_size, "stores.s.write.batch.size": "4"})
    spec = StoreSpec.from_config(config, "s")
    log = FileChangelog(tmp_path / "s.changelog")
    store = build_store(spec, tmp_path / "s", changelog=log, config=config)
    try:
        store.put("a", 1)
        with pytest.raises(StoreError, match="LMDB keys must be 1 to"):
            store.put("", 2)
            store.flush()  # with a cache, the engine sees the key at the write-down
        store.delete("")
        store.flush()
        assert all(key for _, key, _ in log.read(0, log.newest_offset()))
    finally:
        store.close()
        log.close()
