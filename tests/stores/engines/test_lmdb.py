"""What is specific to the LMDB engine: options, buffered writes merged into reads and ranges,
one transaction per flush, automatic map growth, snapshots, threads, and durability with real
SIGKILLed processes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.stores.config import Config
from weir.stores.engines.lmdb import LMDB_KEYS, LMDBEngine, LMDBOptions
from weir.stores.errors import ConfigError, StoreError

from tests.stores.engines._helpers import bad_option_error, keys_of
from tests.stores.engines._proc import Child

KIB = 1024


@pytest.fixture
def engine(tmp_path):
    e = LMDBEngine("s", tmp_path / "s")
    yield e
    e.close()


def commits(e: LMDBEngine) -> int:
    """LMDB's id of the last committed write transaction."""
    return e._env.info()["last_txnid"]


# -- options ------------------------------------------------------------------------------

def test_options_defaults_and_every_key():
    assert LMDBOptions.from_config(Config({}), "s") == LMDBOptions()
    cfg = Config({"stores.s.lmdb.map.size.bytes": "1048576",
                  "stores.s.lmdb.max.map.size.bytes": "8388608",
                  "stores.s.lmdb.sync": "false", "stores.s.lmdb.max.readers": "16",
                  "stores.s.lmdb.write.batch.size": "500"})
    assert LMDBOptions.from_config(cfg, "s") == LMDBOptions(
        map_size_bytes=1048576, max_map_size_bytes=8388608, sync=False, max_readers=16,
        write_batch_size=500)
    assert {k.name.split(".lmdb.")[1] for k in LMDB_KEYS} == {
        "map.size.bytes", "max.map.size.bytes", "sync", "max.readers", "write.batch.size"}


@pytest.mark.parametrize("key, value, expected", [
    ("stores.s.lmdb.map.size.bytes", "1k", "an integer"),
    ("stores.s.lmdb.map.size.bytes", "4096", "at least 65536"),
    ("stores.s.lmdb.sync", "maybe", "true or false"),
    ("stores.s.lmdb.max.readers", "1", "at least 2"),
    ("stores.s.lmdb.write.batch.size", "0", "at least 1"),
    ("stores.s.lmdb.max.map.size.bytes", "65536", "smaller than the initial map size"),
])
def test_bad_option_value_raises_config_error_naming_the_key_and_origin(key, value, expected):
    err = bad_option_error(LMDBOptions.from_config, key, value, "job.yaml:3")
    assert expected in str(err)


def test_map_cap_below_initial_size_blames_the_initial_size_when_only_it_is_set():
    key = "stores.s.lmdb.map.size.bytes"
    with pytest.raises(ConfigError) as info:
        LMDBOptions.from_config(Config({key: str(1 << 40)}), "s")
    assert info.value.key == key


# -- buffering ----------------------------------------------------------------------------

def test_reads_see_buffered_writes_and_deletes_before_any_commit(engine):
    engine.put_all([(b"a", b"1"), (b"b", b"2")])
    engine.flush()
    engine.put(b"a", b"new")
    engine.delete(b"b")
    engine.put(b"c", b"3")
    assert engine.pending_count == 3
    assert (engine.get(b"a"), engine.get(b"b"), engine.get(b"c")) == (b"new", None, b"3")
    assert engine.get_all([b"a", b"b", b"c", b"d"]) == {b"a": b"new", b"c": b"3"}


def test_every_flush_is_one_write_transaction(engine):
    before = commits(engine)
    for i in range(5000):
        engine.put(b"k%05d" % i, b"v")
        if i % 7 == 0:
            engine.delete(b"k%05d" % (i // 2))
    engine.write_batch([(b"x", b"1"), (b"y", None)])
    assert commits(engine) == before  # nothing committed yet
    engine.flush()
    assert commits(engine) == before + 1
    engine.flush()  # nothing buffered: no empty transaction either
    assert commits(engine) == before + 1


def test_buffer_commits_by_itself_when_it_reaches_the_write_batch_size(tmp_path):
    e = LMDBEngine("s", tmp_path, LMDBOptions(write_batch_size=100))
    before = commits(e)
    for i in range(250):
        e.put(b"k%03d" % i, b"v")
    assert commits(e) == before + 2
    assert e.pending_count == 50
    e.close()


def test_close_commits_buffered_writes(tmp_path):
    e = LMDBEngine("s", tmp_path)
    e.put(b"a", b"1")
    e.close()
    e = LMDBEngine("s", tmp_path)
    assert e.get(b"a") == b"1"
    e.close()


def test_range_merges_buffered_writes_and_hides_buffered_deletes_of_committed_keys(engine):
    engine.put_all([(b"a", b"1"), (b"c", b"3"), (b"e", b"5"), (b"g", b"7")])
    engine.flush()
    engine.delete(b"c")          # committed key deleted in the buffer
    engine.put(b"d", b"4")       # new key between committed ones
    engine.put(b"e", b"new")     # committed key overwritten
    engine.put(b"h", b"8")       # past the last committed key
    engine.put(b"0", b"0")       # before the first
    engine.delete(b"zz")         # delete of a key that never existed
    assert list(engine.all()) == [(b"0", b"0"), (b"a", b"1"), (b"d", b"4"), (b"e", b"new"),
                                  (b"g", b"7"), (b"h", b"8")]
    assert keys_of(engine.range(b"b", b"g")) == [b"d", b"e"]
    assert keys_of(engine.prefix(b"e")) == [b"e"]
    assert keys_of(engine.range(b"h", None)) == [b"h"]


OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from([b"\x00", b"\x01", b"a", b"a\x00", b"a\xff", b"b",
                                               b"\x7f", b"\x80", b"\xff", b"\xff\xff"]),
              st.binary(min_size=0, max_size=3)),
    st.tuples(st.just("delete"), st.sampled_from([b"\x00", b"a", b"a\xff", b"\xff", b"q"]),
              st.none()),
    st.tuples(st.just("flush"), st.none(), st.none()),
), max_size=40)
BOUNDS = st.sampled_from([None, b"\x00", b"\x01", b"a", b"a\x00", b"b", b"\x80", b"\xff",
                          b"\xff\xff\xff"])


@given(ops=OPS, lo=BOUNDS, hi=BOUNDS)
def test_range_over_buffered_and_committed_writes_matches_a_sorted_dict(tmp_path_factory,
                                                                        ops, lo, hi):
    e = LMDBEngine("s", tmp_path_factory.mktemp("l"), LMDBOptions(write_batch_size=5))
    model: dict[bytes, bytes] = {}
    try:
        for op, key, value in ops:
            if op == "put":
                e.put(key, value)
                model[key] = value
            elif op == "delete":
                e.delete(key)
                model.pop(key, None)
            else:
                e.flush()
        expected = sorted((k, v) for k, v in model.items()
                          if (lo is None or k >= lo) and (hi is None or k < hi))
        with e.range(lo, hi) as it:
            assert list(it) == expected
        with e.snapshot(lo, hi) as snap:
            assert list(snap.iterator()) == expected
    finally:
        e.close()


# -- snapshots and iterators --------------------------------------------------------------

def test_snapshot_is_isolated_from_later_buffered_and_committed_writes(engine):
    engine.put_all([(b"a", b"1"), (b"b", b"2")])
    engine.flush()
    engine.put(b"c", b"3")  # buffered when the snapshot is taken: part of it
    before = commits(engine)
    snap = engine.snapshot(None, None)
    assert commits(engine) == before  # taking a snapshot forces no commit
    engine.put(b"a", b"new")
    engine.delete(b"b")
    engine.delete(b"c")
    engine.flush()
    engine.put(b"d", b"4")
    assert list(snap.iterator()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    assert list(snap.iterator()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    snap.close()
    assert list(engine.all()) == [(b"a", b"new"), (b"d", b"4")]


def test_iterator_is_a_view_as_of_its_creation_even_across_a_commit(engine):
    engine.put_all([(b"a", b"1"), (b"c", b"3")])
    it = engine.all()
    engine.put(b"b", b"2")
    engine.delete(b"c")
    engine.flush()
    assert keys_of(it) == [b"a", b"c"]


# -- map growth ---------------------------------------------------------------------------

def test_map_grows_from_a_tiny_map_through_many_writes(tmp_path):
    e = LMDBEngine("s", tmp_path, LMDBOptions(map_size_bytes=64 * KIB, write_batch_size=2000))
    start = e.map_size
    value = b"v" * 200
    for i in range(20_000):
        e.put(b"key%06d" % i, value)
    e.flush()
    assert e.map_size > 64 * start
    assert e.get(b"key000000") == value and e.get(b"key019999") == value
    assert len(keys_of(e.all())) == 20_000
    grown = e.map_size
    e.close()
    e = LMDBEngine("s", tmp_path, LMDBOptions(map_size_bytes=64 * KIB))
    assert e.map_size >= grown  # reopening with the small setting does not shrink the map
    assert e.get(b"key012345") == value
    e.close()


def test_one_commit_larger_than_the_free_map_grows_and_retries(tmp_path):
    e = LMDBEngine("s", tmp_path, LMDBOptions(map_size_bytes=64 * KIB, write_batch_size=10**6))
    e.put_all([(b"key%06d" % i, b"x" * 100) for i in range(5000)])
    e.flush()  # ~1 MB in one transaction into a 64 KiB map
    assert e.pending_count == 0
    assert e.map_size >= 1024 * KIB
    e.close()


def test_full_map_at_the_cap_raises_store_error_naming_the_key_and_keeps_writes(tmp_path):
    e = LMDBEngine("s", tmp_path, LMDBOptions(map_size_bytes=64 * KIB,
                                              max_map_size_bytes=256 * KIB,
                                              write_batch_size=10**6))
    e.put_all([(b"key%06d" % i, b"x" * 200) for i in range(3000)])
    with pytest.raises(StoreError) as info:
        e.flush()
    message = str(info.value)
    assert "stores.s.lmdb.max.map.size.bytes" in message
    assert "262144 bytes" in message
    assert e.pending_count == 3000
    assert e.get(b"key002999") == b"x" * 200  # still readable from the buffer
    assert e.map_size == 256 * KIB
    e.delete_all([b"key%06d" % i for i in range(2500, 3000)])
    e.delete_all([b"key%06d" % i for i in range(500, 2500)])
    e.flush()  # now it fits
    assert len(keys_of(e.all())) == 500
    e.close()


def test_growth_waits_for_open_snapshots_and_resumes_when_they_close(tmp_path):
    e = LMDBEngine("s", tmp_path, LMDBOptions(map_size_bytes=64 * KIB, write_batch_size=100))
    e.put(b"seed", b"1")
    e.flush()
    snap = e.snapshot(None, None)
    for i in range(3000):  # auto-commits until the map is full, then keeps buffering
        e.put(b"key%06d" % i, b"x" * 100)
    assert e.pending_count > 100
    with pytest.raises(StoreError, match="close them and flush again"):
        e.flush()
    assert e.get(b"key002999") == b"x" * 100
    assert list(snap.iterator()) == [(b"seed", b"1")]  # the snapshot is intact
    snap.close()
    e.flush()
    assert e.pending_count == 0
    assert len(keys_of(e.prefix(b"key"))) == 3000
    e.close()


# -- keys, values, threads ----------------------------------------------------------------

def test_keys_lmdb_cannot_hold_are_rejected_at_put_and_never_poison_a_commit(engine):
    engine.put(b"ok", b"1")
    for bad in (b"", b"k" * 512):
        with pytest.raises(StoreError, match="LMDB keys must be 1 to 511 bytes"):
            engine.put(bad, b"v")
        with pytest.raises(StoreError, match="LMDB keys must be 1 to 511 bytes"):
            engine.write_batch([(b"fine", b"1"), (bad, b"v")])
        engine.delete(bad)  # cannot exist, so deleting is a no-op
        engine.write_batch([(bad, None)])
        assert engine.get(bad) is None
    engine.put(b"k" * 511, b"longest")
    engine.flush()
    assert engine.get(b"fine") is None  # the rejected batch buffered nothing
    assert keys_of(engine.all()) == [b"k" * 511, b"ok"]


def test_successive_calls_from_different_threads_work(engine):
    """The run loop may call a task's store from any thread of its pool, one call at a time."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        for i in range(40):
            pool.submit(engine.put, b"k%02d" % i, b"v%d" % i).result()
            if i % 10 == 9:
                pool.submit(engine.flush).result()
        snap = pool.submit(engine.snapshot, None, None).result()
        pool.submit(engine.put, b"k00", b"changed").result()
        pool.submit(engine.flush).result()
        assert pool.submit(engine.get, b"k00").result() == b"changed"
        assert pool.submit(lambda: keys_of(engine.prefix(b"k3"))).result() == \
            [b"k3%d" % i for i in range(10)]
        assert pool.submit(lambda: dict(snap.iterator())[b"k00"]).result() == b"v0"
        pool.submit(snap.close).result()


def test_ingest_sorted_into_an_empty_store_and_over_existing_keys(engine):
    assert engine.ingest_sorted((b"k%06d" % i, b"v") for i in range(250_000)) == 250_000
    engine.put(b"k000001", b"buffered")  # committed first, then overridden by the pairs
    assert engine.ingest_sorted([(b"k000001", b"ingested"), (b"k000002", None)]) == 2
    assert engine.get(b"k000001") == b"ingested"
    assert engine.get(b"k000002") is None
    assert engine.count_estimate() == 249_999


def test_ingest_sorted_rejects_keys_out_of_order(engine):
    with pytest.raises(StoreError, match=r"key b'a' \(pair 1\) is not greater"):
        engine.ingest_sorted([(b"b", b"1"), (b"a", b"1")])


# -- durability ---------------------------------------------------------------------------

WRITE_FLUSH_WRITE = """
    import sys
    from weir.stores.engines.lmdb import LMDBEngine, LMDBOptions
    engine = LMDBEngine("s", sys.argv[1], LMDBOptions(sync=sys.argv[2] == "sync"))
    engine.put_all([(b"flushed-%04d" % i, b"v%d" % i) for i in range(500)])
    engine.delete(b"flushed-0000")
    engine.flush()
    for i in range(500):
        engine.put(b"later-%04d" % i, b"v")
    print("ready", flush=True)
    sys.stdin.read()
"""


@pytest.mark.parametrize("sync", ["sync", "nosync"])
def test_flush_survives_sigkill_and_buffered_writes_after_it_do_not(tmp_path, sync):
    child = Child(WRITE_FLUSH_WRITE, tmp_path, sync)
    child.kill()
    e = LMDBEngine("s", tmp_path)
    assert e.get(b"flushed-0499") == b"v499"
    assert e.get(b"flushed-0000") is None
    assert len(keys_of(e.prefix(b"flushed-"))) == 499
    assert keys_of(e.prefix(b"later-")) == []
    e.close()
