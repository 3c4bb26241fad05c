"""RocksDBEngine.write_columns: a write batch given as two parallel lists, the way the layers
hand their write-downs down."""

from __future__ import annotations

import pytest

from weir.stores.engines.rocksdb import RocksDBEngine
from weir.stores.errors import NullKeyOrValueError, StoreClosedError
from weir.stores.layers._columns import columns_writer

from tests.stores.engines._helpers import keys_of


@pytest.fixture
def engine(tmp_path):
    e = RocksDBEngine("s", tmp_path / "s", logged=True)
    yield e
    e.close()


def test_the_layers_pick_write_columns_up(engine):
    assert columns_writer(engine) == engine.write_columns


def test_puts_without_deletes_land_like_a_write_batch(engine):
    keys = [b"k%04d" % i for i in range(1500)]
    engine.write_columns(keys, [k + b"!" for k in keys], deletes=False)
    assert engine.get(b"k0000") == b"k0000!" and engine.get(b"k1499") == b"k1499!"
    assert keys_of(engine.all()) == keys


def test_none_values_delete_in_order(engine):
    engine.put_all([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    engine.write_columns([b"a", b"c", b"c", b"d", b"b"], [None, b"x", None, b"4", b"5"])
    assert list(engine.all()) == [(b"b", b"5"), (b"d", b"4")]


def test_later_values_of_a_repeated_key_win(engine):
    engine.write_columns([b"a", b"a", b"a"], [b"1", b"2", b"3"], deletes=False)
    assert engine.get(b"a") == b"3"


def test_a_bad_entry_writes_nothing_and_names_the_problem(engine):
    engine.put(b"a", b"0")
    with pytest.raises(TypeError, match="must be bytes"):
        engine.write_columns([b"a", "text", b"c"], [b"1", b"2", b"3"], deletes=False)
    with pytest.raises(NullKeyOrValueError):
        engine.write_columns([b"a", b"b"], [b"1", None], deletes=False)
    with pytest.raises(NullKeyOrValueError):
        engine.write_columns([b"a", None], [b"1", b"2"])
    assert list(engine.all()) == [(b"a", b"0")]


def test_columns_of_different_lengths_are_refused(engine):
    with pytest.raises(ValueError, match="2 keys and 1 values"):
        engine.write_columns([b"a", b"b"], [b"1"])


def test_a_closed_engine_refuses_write_columns(tmp_path):
    e = RocksDBEngine("s", tmp_path / "s", logged=True)
    e.close()
    with pytest.raises(StoreClosedError):
        e.write_columns([b"a"], [b"1"])


def test_a_large_batch_in_any_order_lands_with_the_last_value_of_each_key(engine):
    """Large put batches reach the memtable sorted (faster inserts); a repeated key still ends
    with the value written last, and the caller's lists are left as they were."""
    keys = [b"k%04d" % i for i in range(500, 0, -1)] + [b"k0007", b"k0499", b"k0007"]
    values = [b"first"] * 500 + [b"second", b"only", b"third"]
    given = (list(keys), list(values))
    engine.write_columns(keys, values, deletes=False)
    assert (keys, values) == given
    assert engine.get(b"k0007") == b"third" and engine.get(b"k0499") == b"only"
    assert engine.get(b"k0001") == b"first"
    assert keys_of(engine.all()) == sorted(set(keys))


def test_a_bad_entry_in_a_large_batch_writes_nothing_and_names_it(engine):
    keys = [b"k%03d" % i for i in range(100)]
    with pytest.raises(TypeError, match="must be bytes"):
        engine.write_columns(keys[:50] + ["text"] + keys[50:], [b"v"] * 101, deletes=False)
    with pytest.raises(NullKeyOrValueError):
        engine.write_columns(keys + [None], [b"v"] * 101)
    assert list(engine.all()) == []
