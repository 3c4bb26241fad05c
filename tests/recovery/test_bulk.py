"""Bulk replay: any sequence of changelog batches, cut into runs at any budget, leaves every
engine holding exactly the last value of each key (tombstones delete), into an empty store
and into a store that already holds data; and the engines' bulk loads refuse unsorted runs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.recovery.bulk import RunBuilder, load_run, replay_runs
from weir.stores.engines.lmdb import LMDBEngine
from weir.stores.engines.memory import MemoryEngine
from weir.stores.engines.rocksdb import RocksDBEngine, write_sst_file
from weir.stores.errors import StoreError


class Batch:
    def __init__(self, pairs, last):
        self.pairs, self.last = pairs, last
        self.records = len(pairs)
        self.nbytes = sum(len(k) + len(v or b"") for k, v in pairs)


def _engine(kind: str, path):
    if kind == "rocksdb":
        return RocksDBEngine("s", path, logged=True)
    if kind == "lmdb":
        return LMDBEngine("s", path)
    return MemoryEngine("s")


def _batches(records, size):
    return [Batch(records[i:i + size], i + len(records[i:i + size]) - 1)
            for i in range(0, len(records), size)]


def _contents(engine) -> dict:
    with engine.all() as items:
        return dict(items)


records_strategy = st.lists(
    st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"k" * 20, b"\x00", b"\xff"]),
              st.one_of(st.none(), st.binary(max_size=6))),
    max_size=60)


@pytest.mark.parametrize("kind", ["rocksdb", "lmdb", "memory"])
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=records_strategy, prefill=records_strategy,
       batch=st.integers(1, 9), budget=st.integers(1, 80))
def test_replay_leaves_the_last_value_of_every_key(tmp_path_factory, kind, records, prefill,
                                                   batch, budget):
    engine = _engine(kind, tmp_path_factory.mktemp("store"))
    try:
        model = {}
        for key, value in prefill:
            model[key] = value
        keys, values = _sorted(prefill)
        load_run(engine, keys, values, deletes=True)
        empty = not prefill
        seen = []
        replay_runs(engine, _batches(records, batch), empty=empty, budget_bytes=budget,
                    progress=lambda last, n, b: seen.append((last, n)))
        for key, value in records:
            model[key] = value
        assert _contents(engine) == {k: v for k, v in model.items() if v is not None}
        assert sum(n for _, n in seen) == len(records)
    finally:
        engine.close()


def _sorted(records):
    state = {}
    for key, value in records:
        state[key] = value
    keys = sorted(state)
    return keys, [state[k] for k in keys]


def test_a_run_into_an_empty_store_leaves_tombstones_out():
    builder = RunBuilder()
    builder.add(Batch([(b"b", b"1"), (b"a", None), (b"c", b"3")], 2))
    assert builder.take(drop_tombstones=True) == ([b"b", b"c"], [b"1", b"3"], False)
    builder.add(Batch([(b"a", None), (b"b", b"2")], 4))
    assert builder.take(drop_tombstones=False) == ([b"a", b"b"], [None, b"2"], True)
    assert len(builder) == 0


def test_a_reader_may_fill_the_builders_dict_itself():
    builder = RunBuilder()
    builder.pairs[b"x"] = b"1"  # what read_changelog(..., into=builder.pairs) does
    shared = Batch([], 0)
    shared.pairs, shared.nbytes = builder.pairs, 2
    builder.add(shared)
    assert builder.pending_bytes == 2 and builder.take(drop_tombstones=True)[0] == [b"x"]


@pytest.mark.parametrize("kind", ["rocksdb", "lmdb"])
def test_bulk_loads_refuse_keys_out_of_order_and_write_nothing(tmp_path, kind):
    engine = _engine(kind, tmp_path / "s")
    try:
        with pytest.raises(StoreError, match="ascending order"):
            engine.load_sorted([b"b", b"a"], [b"1", b"2"])
        assert _contents(engine) == {}
    finally:
        engine.close()


def test_sst_files_built_elsewhere_are_ingested_in_order(tmp_path):
    write_sst_file(tmp_path / "1.sst", [b"a", b"b"], [b"1", b"1"])
    write_sst_file(tmp_path / "2.sst", [b"a", b"c"], [None, b"2"])
    engine = RocksDBEngine("s", tmp_path / "s", logged=True)
    try:
        engine.put(b"z", b"0")
        engine.ingest_files([tmp_path / "1.sst", tmp_path / "2.sst"])
        assert _contents(engine) == {b"b": b"1", b"c": b"2", b"z": b"0"}
        assert not (tmp_path / "1.sst").exists()  # moved into the store
    finally:
        engine.close()


def test_a_run_file_gives_back_its_run(tmp_path):
    from weir.recovery.bulk import read_run_file, write_run_file

    write_run_file(tmp_path / "r.run", [b"a", b"b", b"c"], [b"1", None, b""], deletes=True)
    assert read_run_file(tmp_path / "r.run") == ([b"a", b"b", b"c"], [b"1", None, b""], True)


@pytest.mark.parametrize("cut", [0, 5, 20, -3])
def test_a_run_file_cut_short_is_refused_not_half_read(tmp_path, cut):
    from weir.recovery.bulk import RunFileError, read_run_file, write_run_file

    path = tmp_path / "r.run"
    write_run_file(path, [b"k%03d" % i for i in range(100)], [b"v"] * 100, deletes=False)
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    with pytest.raises(RunFileError):
        read_run_file(path)


def test_run_files_load_in_order_and_are_removed(tmp_path):
    from weir.recovery.bulk import load_run_files, write_run_file
    from weir.stores.engines.lmdb import LMDBEngine

    write_run_file(tmp_path / "0.run", [b"a", b"b"], [b"1", b"1"], deletes=False)
    write_run_file(tmp_path / "1.run", [b"a", b"c"], [None, b"2"], deletes=True)
    engine = LMDBEngine("s", tmp_path / "db")
    try:
        load_run_files(engine, [tmp_path / "0.run", tmp_path / "1.run"])
        assert list(engine.all()) == [(b"b", b"1"), (b"c", b"2")]
        assert not any(tmp_path.glob("*.run"))
    finally:
        engine.close()
