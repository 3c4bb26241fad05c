"""The write-back cache: when entries go down, what the changelog sees, LRU and negative entries."""

from __future__ import annotations

import pytest

from weir.stores.changelog import ChangelogSink
from weir.stores.engines.memory import MemoryEngine
from weir.stores.errors import SerdeError, StoreClosedError
from weir.stores.layers.cached import CachedLayer, MissReads
from weir.stores.layers.logged import LoggedLayer
from weir.stores.layers.serialized import SerializedLayer
from weir.stores.serdes import Int64Serde, JsonSerde, SerdeBase, StringSerde


class RecordingSink(ChangelogSink):
    def __init__(self):
        self.records: list[tuple[bytes, bytes | None]] = []
        self.flushes = 0

    def append(self, key, value):
        self.records.append((key, value))

    def flush(self):
        self.flushes += 1


class CountingEngine(MemoryEngine):
    """A memory engine that counts the calls reaching it."""

    def __init__(self, name="s"):
        super().__init__(name)
        self.gets = 0
        self.get_alls: list[list[bytes]] = []
        self.batches: list[list[tuple[bytes, bytes | None]]] = []

    def get(self, key):
        self.gets += 1
        return super().get(key)

    def get_all(self, keys):
        self.get_alls.append(list(keys))
        return super().get_all(keys)

    def write_batch(self, items):
        items = list(items)
        self.batches.append(items)
        super().write_batch(items)


def cached(engine=None, capacity=4, batch=2, miss_reads=MissReads.SKIP_WHEN_COMPLETE):
    engine = engine if engine is not None else CountingEngine()
    return CachedLayer(engine, capacity=capacity, write_batch_size=batch,
                       miss_reads=miss_reads), engine


def test_puts_stay_in_the_cache_until_the_batch_fills():
    store, engine = cached(batch=3)
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    assert engine.batches == [] and store.dirty_count == 2
    store.put(b"c", b"3")
    assert engine.batches == [[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]]
    assert store.dirty_count == 0


def test_a_key_written_many_times_goes_down_once_with_its_latest_value():
    store, engine = cached(batch=2)
    for i in range(5):
        store.put(b"a", str(i).encode())
    store.delete(b"b")
    assert engine.batches == [[(b"a", b"4"), (b"b", None)]]


def test_write_down_is_in_first_dirtied_order():
    store, engine = cached(capacity=10, batch=10)
    store.put(b"z", b"1")
    store.put(b"a", b"2")
    store.put(b"z", b"3")
    store.flush()
    assert engine.batches == [[(b"z", b"3"), (b"a", b"2")]]


def test_hits_do_not_reach_the_inner_store():
    store, engine = cached()
    store.put(b"a", b"1")
    for _ in range(10):
        assert store.get(b"a") == b"1"
    assert engine.gets == 0


def test_misses_are_cached_as_absent():
    engine = CountingEngine()
    engine.put(b"other", b"1")  # a store with data: misses read it
    store, _ = cached(engine)
    assert store.get(b"nope") is None
    assert store.get(b"nope") is None
    assert engine.gets == 1


def test_get_all_serves_hits_and_fetches_misses_in_one_call():
    engine = CountingEngine()
    engine.put(b"b", b"2")
    store, _ = cached(engine)
    store.put(b"a", b"1")
    assert store.get_all([b"a", b"b", b"c"]) == {b"a": b"1", b"b": b"2"}
    assert engine.get_alls == [[b"b", b"c"]]
    assert store.get_all([b"b", b"c"]) == {b"b": b"2"}
    assert len(engine.get_alls) == 1


def test_evicting_a_dirty_entry_writes_all_dirty_entries_first():
    store, engine = cached(capacity=2, batch=2)
    store.get(b"x")            # clean negative entry, least recently used
    store.put(b"a", b"1")      # dirty
    store.put(b"b", b"2")      # evicts x (clean), then 2 dirty -> write down
    assert engine.batches == [[(b"a", b"1"), (b"b", b"2")]]
    store.put(b"c", b"3")      # evicts a (clean now)
    assert store.cached_count == 2 and engine.get(b"a") == b"1"


def test_eviction_of_a_dirty_entry_before_the_batch_is_full():
    store, engine = cached(capacity=3, batch=3)
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    store.get(b"m1")
    store.get(b"m2")           # cache full: evicts a, which is dirty -> a and b go down
    assert engine.batches == [[(b"a", b"1"), (b"b", b"2")]]


def test_lru_keeps_recently_read_entries():
    store, engine = cached(capacity=2, batch=2)
    engine.write_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4")])
    store.get(b"a")
    store.get(b"b")
    store.get(b"c")            # the cache is full from here on: evicts a (oldest)
    store.get(b"b")            # b is now the most recent
    store.get(b"d")            # evicts c, not b
    gets = engine.gets
    store.get(b"b")
    assert engine.gets == gets
    store.get(b"c")
    assert engine.gets == gets + 1


def test_before_the_cache_first_fills_hits_do_not_reorder_it():
    store, engine = cached(capacity=2, batch=2)
    engine.write_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    store.get(b"a")
    store.get(b"b")
    store.get(b"a")            # not full yet: no recency bookkeeping
    store.get(b"c")            # first eviction takes the oldest insert, a
    gets = engine.gets
    store.get(b"b")
    assert engine.gets == gets
    store.get(b"a")
    assert engine.gets == gets + 1


@pytest.mark.parametrize("op", ["range", "prefix", "all", "snapshot"])
def test_ordered_reads_write_dirty_entries_down_first(op):
    store, engine = cached(capacity=10, batch=10)
    store.put(b"a", b"1")
    call = {"range": lambda: store.range(b"a", b"b"), "prefix": lambda: store.prefix(b"a"),
            "all": store.all, "snapshot": lambda: store.snapshot(None, None)}[op]
    call().close()
    assert engine.batches == [[(b"a", b"1")]]


def test_flush_writes_down_then_flushes_the_inner_store_and_changelog():
    sink = RecordingSink()
    store, engine = cached(LoggedLayer(CountingEngine(), sink), capacity=10, batch=10)
    store.put(b"a", b"1")
    assert sink.records == []
    store.flush()
    assert sink.records == [(b"a", b"1")] and sink.flushes == 1


def test_changelog_gets_the_cache_deduplicated_batches():
    sink = RecordingSink()
    store = CachedLayer(LoggedLayer(MemoryEngine("s"), sink), capacity=100, write_batch_size=100)
    for i in range(50):
        store.put(b"k%d" % (i % 5), b"%d" % i)
    store.delete(b"k0")
    store.flush()
    assert sink.records == [(b"k0", None), (b"k1", b"46"), (b"k2", b"47"), (b"k3", b"48"),
                            (b"k4", b"49")]


def test_close_writes_dirty_entries_and_closes_the_inner_store():
    store, engine = cached(capacity=10, batch=10)
    store.put(b"a", b"1")
    store.close()
    assert engine.batches == [[(b"a", b"1")]] and engine.closed


def test_a_hot_key_is_not_served_after_close():
    store, _ = cached()
    store.put(b"a", b"1")
    store.get(b"a")
    store.close()
    with pytest.raises(StoreClosedError):
        store.get(b"a")


def test_object_cache_returns_the_same_object_it_was_given():
    typed = SerializedLayer(MemoryEngine("s"), StringSerde(), JsonSerde())
    store = CachedLayer(typed, capacity=10, write_batch_size=5)
    value = {"n": 1}
    store.put("k", value)
    assert store.get("k") is value  # documented: cached objects are shared, not copied


def test_object_cache_serializes_only_at_write_down():
    calls = []

    class SpySerde(SerdeBase):
        name = "spy"

        def to_bytes(self, obj):
            calls.append(obj)
            return Int64Serde().to_bytes(obj)

        def from_bytes(self, data):
            return Int64Serde().from_bytes(data)

    typed = SerializedLayer(MemoryEngine("s"), StringSerde(), SpySerde())
    store = CachedLayer(typed, capacity=10, write_batch_size=10)
    for i in range(100):
        store.put("counter", (store.get("counter") or 0) + 1)
    assert calls == []
    store.flush()
    assert calls == [100]


def test_unhashable_keys_are_refused_with_a_hint():
    typed = SerializedLayer(MemoryEngine("s"), JsonSerde(), JsonSerde())
    store = CachedLayer(typed, capacity=10, write_batch_size=5)
    with pytest.raises(SerdeError, match="tuple instead of a list"):
        store.put(["a", 1], 1)
    store.put(("a", 1), 1)
    store.flush()
    assert store.get(("a", 1)) == 1


def test_capacity_below_batch_size_is_refused():
    with pytest.raises(ValueError, match="cannot be less"):
        CachedLayer(MemoryEngine("s"), capacity=2, write_batch_size=3)


def test_stats_count_misses_and_leave_hits_uncounted_until_the_cache_fills():
    store, engine = cached(capacity=4, batch=2, miss_reads=MissReads.ALWAYS)
    for key in (b"a", b"b", b"a", b"a"):
        store.get(key)
    stats = store.stats()
    assert (stats["misses"], stats["evictions"], stats["full"]) == (2, 0, False)
    assert stats["hits"] is None and stats["hit-rate"] is None
    assert engine.gets == stats["misses"]


def test_stats_give_the_hit_rate_of_reads_since_the_cache_filled():
    store, engine = cached(capacity=2, batch=1, miss_reads=MissReads.ALWAYS)
    store.get(b"a"), store.get(b"b"), store.get(b"c")  # the third miss evicts a
    store.get(b"c"), store.get(b"c"), store.get(b"a")  # 2 hits, 1 miss (evicts b)
    stats = store.stats()
    assert stats["full"] and stats["evictions"] == 2
    assert stats["misses"] == 4 == engine.gets
    assert stats["hits"] == 2
    assert stats["hit-rate"] == pytest.approx(2 / 3, abs=1e-4)  # 2 hits of the 3 reads after filling: c, c, a
    assert (stats["entries"], stats["capacity"]) == (2, 2)


# -- a complete cache: a store found empty at its first use answers misses itself -----------

def test_a_store_empty_at_its_first_use_answers_misses_without_reading_the_engine():
    store, engine = cached(capacity=8, batch=2)
    assert store.get(b"a") is None and store.get(b"b") is None
    store.put(b"a", b"1")
    store.put(b"c", b"3")                      # two dirty: written down
    assert store.get(b"a") == b"1" and store.get(b"d") is None
    assert store.get_all([b"a", b"e"]) == {b"a": b"1"}
    assert engine.gets == 0 and engine.get_alls == []
    stats = store.stats()
    assert stats["complete"] and stats["misses"] == stats["reads-skipped"] == 4


def test_a_complete_cache_refuses_a_null_key_and_a_closed_store_on_its_absent_key_path():
    from weir.stores.errors import NullKeyOrValueError

    store, engine = cached(capacity=8, batch=2)
    assert store.get(b"a") is None and store.complete
    with pytest.raises(NullKeyOrValueError):
        store.get(None)
    store.close()
    with pytest.raises(StoreClosedError):
        store.get(b"b")
    assert engine.gets == 0


def test_a_complete_cache_that_fills_up_evicts_and_reads_the_engine_from_then_on():
    store, engine = cached(capacity=2, batch=1)
    store.put(b"a", b"1")                      # written down at once (batch of 1)
    assert store.get(b"b") is None             # absent: the cache is complete, with room
    assert store.get(b"c") is None             # no room: evicts a, completeness ends
    assert not store.complete and engine.gets == 0
    assert store.get(b"a") == b"1" and engine.gets == 1
    stats = store.stats()
    assert (stats["misses"], stats["reads-skipped"], stats["evictions"]) == (3, 2, 2)


def test_a_store_with_data_at_its_first_use_reads_every_miss():
    engine = CountingEngine()
    engine.put(b"a", b"1")
    store, _ = cached(engine, capacity=8)
    assert store.get(b"a") == b"1" and store.get(b"x") is None
    assert engine.gets == 2 and not store.complete


def test_data_loaded_below_the_cache_before_its_first_use_is_read():
    """Restore and bootstrap loads write the engine after the store is built, before any
    read: the look at the engine happens at the first use, not when the layer is made."""
    engine = CountingEngine()
    store, _ = cached(engine, capacity=8)
    engine.write_batch([(b"a", b"restored")])
    assert store.get(b"a") == b"restored"
    assert not store.complete


def test_a_first_put_also_decides_completeness():
    store, engine = cached(capacity=8, batch=8)
    store.put(b"a", b"1")
    assert store.complete
    assert store.get(b"b") is None and engine.gets == 0


def test_the_first_eviction_ends_completeness_and_misses_read_the_engine_again():
    store, engine = cached(capacity=2, batch=1)
    store.put(b"a", b"1")          # written down at once (batch of 1)
    store.put(b"b", b"2")
    assert store.complete and engine.gets == 0
    store.put(b"c", b"3")          # evicts a, which the engine holds
    assert not store.complete
    assert store.get(b"a") == b"1"  # read from the engine, not answered absent
    assert engine.gets == 1
    assert store.stats()["reads-skipped"] == 0


def test_deleted_keys_of_an_emptied_store_do_not_count_as_data():
    engine = CountingEngine()
    engine.put(b"a", b"1")
    engine.delete(b"a")
    store, _ = cached(engine)
    assert store.get(b"a") is None and store.complete and engine.gets == 0


def test_miss_reads_always_reads_an_empty_store_too():
    store, engine = cached(miss_reads=MissReads.ALWAYS)
    assert store.get(b"a") is None
    assert engine.gets == 1 and not store.complete


def test_the_emptiness_look_does_not_deserialize_stored_values():
    """A value the serde cannot read is reported by the read that meets it, not by the
    look at the engine."""
    engine = CountingEngine()
    engine.put(b"bad", b"not an int64")
    store = CachedLayer(SerializedLayer(engine, StringSerde(), Int64Serde()), capacity=8,
                        write_batch_size=2)
    assert store.get("ok") is None
    assert not store.complete and engine.gets == 1


def test_a_store_that_cannot_be_listed_reads_every_miss():
    class Unlistable(CountingEngine):
        def all(self):
            raise RuntimeError("no listing here")

    store, engine = cached(Unlistable())
    assert store.get(b"a") is None
    assert engine.gets == 1 and not store.complete


def test_a_complete_cache_over_a_real_rocksdb_store_survives_a_reopen(tmp_path):
    from weir.stores.engines.rocksdb import RocksDBEngine

    engine = RocksDBEngine("s", tmp_path, logged=False)
    store = CachedLayer(engine, capacity=16, write_batch_size=4)
    for i in range(10):
        assert store.get(b"k%d" % i) is None
        store.put(b"k%d" % i, b"v%d" % i)
    assert store.complete
    store.close()
    engine = RocksDBEngine("s", tmp_path, logged=False)
    store = CachedLayer(engine, capacity=16, write_batch_size=4)
    assert store.get(b"k3") == b"v3" and store.get(b"zz") is None
    assert not store.complete
    store.close()
