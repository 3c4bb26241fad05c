"""What is specific to the RocksDB engine: options, WAL and flush durability (with real
SIGKILLed processes), rocksdict quirks (snapshots, iterator bounds), bulk ingest, closing."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.stores.config import Config, find_declared
from weir.stores.engines.rocksdb import (
    ROCKSDB_KEYS,
    CompactionStyle,
    Compression,
    RocksDBEngine,
    RocksDBOptions,
)
from weir.stores.errors import ConfigError, StoreError

from tests.stores.engines._helpers import bad_option_error, keys_of
from tests.stores.engines._proc import Child


@pytest.fixture
def engine(tmp_path):
    e = RocksDBEngine("s", tmp_path / "s", logged=True)
    yield e
    e.close()


# -- options ------------------------------------------------------------------------------

def test_options_defaults_are_documented_values():
    opts = RocksDBOptions()
    assert opts.compression is Compression.LZ4
    assert opts.compaction_style is CompactionStyle.LEVEL
    assert opts.block_cache_size_bytes == 64 * 1024 * 1024
    assert opts.write_buffer_size_bytes == 32 * 1024 * 1024
    assert opts.max_write_buffer_number == 3
    assert opts.bloom_filter_bits == 10
    assert opts.memtable_bloom_percent == 10
    assert RocksDBOptions.from_config(Config({}), "s") == opts


def test_options_read_every_key_of_the_store():
    cfg = Config({
        "stores.s.rocksdb.block.cache.size.bytes": "1048576",
        "stores.s.rocksdb.write.buffer.size.bytes": "2_097_152",
        "stores.s.rocksdb.max.write.buffer.number": "4",
        "stores.s.rocksdb.compression": "ZSTD",
        "stores.s.rocksdb.bloom.filter.bits": "0",
        "stores.s.rocksdb.memtable.bloom.percent": "0",
        "stores.s.rocksdb.block.size.bytes": "16384",
        "stores.s.rocksdb.max.open.files": "500",
        "stores.s.rocksdb.compaction.style": "universal",
        "stores.other.rocksdb.compression": "none",
    })
    assert RocksDBOptions.from_config(cfg, "s") == RocksDBOptions(
        block_cache_size_bytes=1048576, write_buffer_size_bytes=2097152,
        max_write_buffer_number=4, compression=Compression.ZSTD, bloom_filter_bits=0,
        memtable_bloom_percent=0, block_size_bytes=16384, max_open_files=500, compaction_style=CompactionStyle.UNIVERSAL)


@pytest.mark.parametrize("percent, in_options", [("10", True), ("0", False)])
def test_the_memtable_bloom_filter_reaches_rocksdb(tmp_path, percent, in_options):
    opts = RocksDBOptions.from_config(
        Config({"stores.s.rocksdb.memtable.bloom.percent": percent}), "s")
    engine = RocksDBEngine("s", tmp_path / "s", options=opts, logged=True)
    engine.put(b"k", b"v")
    assert engine.get(b"k") == b"v" and engine.get(b"missing") is None
    engine.close()
    written = "".join(p.read_text() for p in (tmp_path / "s").glob("OPTIONS-*"))
    assert ("memtable_whole_key_filtering=true" in written) is in_options
    assert ("memtable_prefix_bloom_size_ratio=0.100000" in written) is in_options


def test_a_memtable_bloom_above_a_quarter_of_the_write_buffer_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="stores.s.rocksdb.memtable.bloom.percent.*at most 25"):
        RocksDBOptions.from_config(
            Config({"stores.s.rocksdb.memtable.bloom.percent": "40"}), "s")


def test_options_accept_samza_key_names_and_split_container_sizes_among_tasks():
    cfg = Config({
        "stores.s.container.cache.size.bytes": str(100 * 1024 * 1024),
        "stores.s.container.write.buffer.size.bytes": str(32 * 1024 * 1024),
        "stores.s.rocksdb.num.write.buffers": "5",
        "stores.s.rocksdb.compression": "bzip2",
    })
    opts = RocksDBOptions.from_config(cfg, "s", tasks_in_container=4)
    assert opts.block_cache_size_bytes == 25 * 1024 * 1024
    assert opts.write_buffer_size_bytes == 8 * 1024 * 1024
    assert opts.max_write_buffer_number == 5
    assert opts.compression is Compression.BZIP2
    # Weir's own per-store key wins over Samza's and is not divided.
    both = cfg.merged({"stores.s.rocksdb.block.cache.size.bytes": "1000000"})
    assert RocksDBOptions.from_config(both, "s", tasks_in_container=4).block_cache_size_bytes \
        == 1000000


@pytest.mark.parametrize("key, value, expected", [
    ("stores.s.rocksdb.block.cache.size.bytes", "lots", "an integer"),
    ("stores.s.rocksdb.block.cache.size.bytes", "-1", "at least 0"),
    ("stores.s.rocksdb.write.buffer.size.bytes", "1024", "at least 65536"),
    ("stores.s.rocksdb.max.write.buffer.number", "1", "at least 2"),
    ("stores.s.rocksdb.compression", "brotli", "expected one of none, snappy, lz4"),
    ("stores.s.rocksdb.compaction.style", "tiered", "expected one of level, universal, fifo"),
    ("stores.s.rocksdb.max.open.files", "0", "-1"),
    ("stores.s.rocksdb.num.write.buffers", "0", "at least 2"),
])
def test_bad_option_value_raises_config_error_naming_the_key_and_origin(key, value, expected):
    err = bad_option_error(RocksDBOptions.from_config, key, value, "job.properties:7")
    assert expected in str(err)
    assert "job.properties:7" in str(err)


def test_container_size_too_small_after_division_names_the_samza_key():
    key = "stores.s.container.write.buffer.size.bytes"
    with pytest.raises(ConfigError) as info:
        RocksDBOptions.from_config(Config({key: str(1024 * 1024)}), "s", tasks_in_container=64)
    assert info.value.key == key
    assert "after dividing among 64 tasks" in str(info.value)


def test_options_built_in_code_are_checked_too():
    with pytest.raises(ValueError, match="max_write_buffer_number"):
        RocksDBOptions(max_write_buffer_number=1)


def test_every_rocksdb_key_is_declared_with_its_samza_aliases():
    names = {k.name for k in ROCKSDB_KEYS}
    assert all(n.startswith("stores.<store>.rocksdb.") for n in names)
    for samza in ("stores.s.rocksdb.num.write.buffers", "stores.s.container.cache.size.bytes",
                  "stores.s.container.write.buffer.size.bytes", "stores.s.rocksdb.compression"):
        assert find_declared(samza) in ROCKSDB_KEYS


@pytest.mark.parametrize("opts", [RocksDBOptions(compression=c) for c in Compression]
                         + [RocksDBOptions(compaction_style=s, block_cache_size_bytes=0)
                            for s in CompactionStyle], ids=repr)
def test_every_option_choice_opens_a_working_store(tmp_path, opts):
    e = RocksDBEngine("s", tmp_path, opts, logged=True)
    e.put(b"k", b"v" * 1000)
    e.flush()
    e.close()
    e = RocksDBEngine("s", tmp_path, opts, logged=True)
    assert e.get(b"k") == b"v" * 1000
    e.close()


# -- durability ---------------------------------------------------------------------------

WRITE_FLUSH_WRITE = """
    import sys
    from weir.stores.engines.rocksdb import RocksDBEngine
    engine = RocksDBEngine("s", sys.argv[1], logged=sys.argv[2] == "logged")
    engine.put_all([(b"flushed-%04d" % i, b"v%d" % i) for i in range(500)])
    engine.delete(b"flushed-0000")
    engine.flush()
    for i in range(500):
        engine.put(b"later-%04d" % i, b"v")
    print("ready", flush=True)
    sys.stdin.read()
"""


def test_flush_of_a_logged_store_survives_sigkill_and_later_writes_skip_the_wal(tmp_path):
    child = Child(WRITE_FLUSH_WRITE, tmp_path, "logged")
    child.kill()
    e = RocksDBEngine("s", tmp_path, logged=True)
    assert e.get(b"flushed-0499") == b"v499"
    assert e.get(b"flushed-0000") is None
    assert len(keys_of(e.prefix(b"flushed-"))) == 499
    # WAL off: unflushed writes of a logged store are lost (the changelog brings them back).
    assert keys_of(e.prefix(b"later-")) == []
    e.close()


def test_unlogged_store_keeps_the_wal_so_writes_survive_sigkill_without_flush(tmp_path):
    child = Child(WRITE_FLUSH_WRITE, tmp_path, "unlogged")
    child.kill()
    e = RocksDBEngine("s", tmp_path, logged=False)
    assert len(keys_of(e.prefix(b"later-"))) == 500
    assert len(keys_of(e.prefix(b"flushed-"))) == 499
    e.close()


def test_clean_close_keeps_writes_of_a_logged_store_without_flush(tmp_path):
    e = RocksDBEngine("s", tmp_path, logged=True)
    e.write_batch([(b"a", b"1"), (b"b", b"2"), (b"a", None)])
    e.close()
    e = RocksDBEngine("s", tmp_path, logged=True)
    assert keys_of(e.all()) == [b"b"]
    e.close()


# -- iteration and snapshots --------------------------------------------------------------

@given(keys=st.lists(st.sampled_from([b"\x00", b"\x00\x00", b"\x00\xff", b"\x01", b"a", b"a\x00",
                                      b"a\xff", b"\x7f", b"\x80", b"\xff", b"\xff\x00",
                                      b"\xff\xff", b""]), unique=True),
       lo=st.sampled_from([None, b"", b"\x00", b"a", b"\x80", b"\xff"]),
       hi=st.sampled_from([None, b"", b"\x00\x01", b"a\x00", b"\xff", b"\xff\xff\xff"]))
def test_range_is_bytewise_with_zero_and_ff_bytes(tmp_path_factory, keys, lo, hi):
    e = RocksDBEngine("s", tmp_path_factory.mktemp("r"), logged=True)
    try:
        for k in keys:
            e.put(k, k + b"!")
        expected = sorted(k for k in keys if (lo is None or k >= lo) and (hi is None or k < hi))
        assert keys_of(e.range(lo, hi)) == expected
        with e.snapshot(lo, hi) as snap:
            assert keys_of(snap.iterator()) == expected
    finally:
        e.close()


def test_range_upper_bound_holds_after_the_bound_object_is_gone(engine):
    # rocksdict 0.3.29 keeps a pointer into the bound's bytes; the engine must pin them.
    for k in [b"a", b"ab", b"abc", b"abd", b"ac", b"b"]:
        engine.put(k, b"1")
    its = [engine.prefix(bytes(bytearray(b"ab"))) for _ in range(3)]
    gc.collect()
    junk = [bytes(bytearray(b"zz" * 8)) for _ in range(10_000)]
    assert [keys_of(it) for it in its] == [[b"ab", b"abc", b"abd"]] * 3
    del junk


def test_snapshot_does_not_see_later_writes_deletes_or_compaction(engine):
    engine.put_all([(b"k%d" % i, b"old") for i in range(5)])
    snap = engine.snapshot(b"k1", b"k4")
    engine.put(b"k1", b"new")
    engine.delete(b"k2")
    engine.put(b"k25", b"new")
    engine.flush()
    engine.compact()
    assert list(snap.iterator()) == [(b"k1", b"old"), (b"k2", b"old"), (b"k3", b"old")]
    snap.close()
    assert keys_of(engine.range(b"k1", b"k4")) == [b"k1", b"k25", b"k3"]


def test_iterators_of_one_snapshot_interleave_independently(engine):
    engine.put_all([(b"%d" % i, b"v") for i in range(6)])
    with engine.snapshot(None, None) as snap:
        a, b = snap.iterator(), snap.iterator()
        assert [next(a)[0], next(a)[0], next(b)[0], next(a)[0], next(b)[0]] == \
            [b"0", b"1", b"0", b"2", b"1"]
        assert [k for k, _ in b] == [b"2", b"3", b"4", b"5"]
        assert [k for k, _ in a] == [b"3", b"4", b"5"]


def test_range_iterator_is_a_view_as_of_its_creation(engine):
    engine.put_all([(b"a", b"1"), (b"c", b"1")])
    it = engine.all()
    engine.put(b"b", b"1")
    engine.delete(b"c")
    assert keys_of(it) == [b"a", b"c"]


def test_empty_and_inverted_ranges_yield_nothing(engine):
    engine.put(b"a", b"1")
    assert keys_of(engine.range(b"b", b"a")) == []
    assert keys_of(engine.range(b"a", b"a")) == []
    assert keys_of(engine.range(None, b"")) == []
    with engine.snapshot(b"b", b"a") as snap:
        assert keys_of(snap.iterator()) == []


# -- writes and bulk load -----------------------------------------------------------------


def test_get_all_returns_only_found_keys(engine):
    engine.put_all([(b"a", b"1"), (b"c", b"3")])
    assert engine.get_all([b"a", b"b", b"c"]) == {b"a": b"1", b"c": b"3"}
    assert engine.get_all([]) == {}


def test_ingest_sorted_loads_pairs_overriding_and_deleting_existing_keys(engine):
    engine.put_all([(b"b", b"old"), (b"c", b"old"), (b"z", b"kept")])
    n = engine.ingest_sorted([(b"a", b"1"), (b"b", b"2"), (b"c", None), (b"d", b"4")])
    assert n == 4
    assert list(engine.all()) == [(b"a", b"1"), (b"b", b"2"), (b"d", b"4"), (b"z", b"kept")]
    assert not list(engine.path.glob("*.weir-ingest*"))


def test_ingest_sorted_rejects_keys_out_of_order_and_ingests_nothing(engine):
    with pytest.raises(StoreError, match=r"key b'a' \(pair 2\) is not greater"):
        engine.ingest_sorted([(b"b", b"1"), (b"c", b"1"), (b"a", b"1")])
    with pytest.raises(StoreError, match="not greater"):
        engine.ingest_sorted([(b"b", b"1"), (b"b", b"2")])
    assert keys_of(engine.all()) == []
    assert engine.ingest_sorted([]) == 0


def test_size_and_count_estimates_reflect_the_data(engine):
    engine.put_all([(b"k%05d" % i, b"x" * 100) for i in range(2000)])
    engine.flush()
    assert engine.count_estimate() == 2000
    assert engine.approximate_size() > 2000 * 10
