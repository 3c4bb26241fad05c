"""The memory engine's own behaviour (the shared contract is in tests/stores/test_contract.py)."""

from __future__ import annotations

import random

import pytest

from weir.stores.engines._base import BytesEngine
from weir.stores.engines.memory import MemoryEngine
from weir.stores.errors import NullKeyOrValueError

from tests.stores.engines._helpers import keys_of


def test_memory_engine_is_a_bytes_engine():
    assert isinstance(MemoryEngine("s"), BytesEngine)


def test_ranges_stay_sorted_across_interleaved_writes_and_deletes():
    engine = MemoryEngine("s")
    model: set[bytes] = set()
    rng = random.Random(3)
    for step in range(3000):
        key = bytes([rng.randrange(256) for _ in range(rng.randrange(1, 3))])
        if rng.random() < 0.7:
            engine.put(key, b"v")
            model.add(key)
        else:
            engine.delete(key)
            model.discard(key)
        if step % rng.choice((1, 7, 300)) == 0:  # few and many changes between scans
            assert keys_of(engine.all()) == sorted(model)
    assert keys_of(engine.all()) == sorted(model)


def test_key_deleted_and_reinserted_between_scans_appears_once():
    engine = MemoryEngine("s")
    engine.put(b"a", b"1")
    assert keys_of(engine.all()) == [b"a"]
    engine.delete(b"a")
    engine.put(b"a", b"2")
    engine.put(b"b", b"3")
    engine.delete(b"b")
    assert keys_of(engine.all()) == [b"a"]


def test_close_drops_the_data():
    engine = MemoryEngine("s")
    engine.put(b"a", b"1")
    engine.close()
    assert engine.closed and "closed" in repr(engine)


@pytest.mark.parametrize("call", [
    lambda e: e.put(b"k", "v"), lambda e: e.put("k", b"v"), lambda e: e.put(b"k", bytearray(b"v")),
    lambda e: e.put_all([(b"a", b"1"), ("k", b"v")]),
    lambda e: e.write_batch([(b"a", b"1"), (b"k", "v")]),
    lambda e: e.write_batch([(b"a", b"1"), ("k", None)]),
    lambda e: e.delete("k"), lambda e: e.delete_all([b"a", "k"]),
], ids=["put value", "put key", "put bytearray", "put_all", "write_batch", "write_batch delete",
        "delete", "delete_all"])
def test_non_bytes_are_rejected_like_the_persistent_engines_do(call):
    """A serde that returns str must fail on the memory engine in tests, not first in
    production on RocksDB or LMDB; and a refused batch writes nothing."""
    engine = MemoryEngine("s")
    engine.put(b"a", b"0")
    with pytest.raises(TypeError, match="store 's'.*must be bytes"):
        call(engine)
    assert list(engine.all()) == [(b"a", b"0")]


@pytest.mark.parametrize("call", [
    lambda e: e.put(None, b"v"), lambda e: e.put(b"k", None), lambda e: e.delete(None),
    lambda e: e.put_all([(b"a", b"1"), (b"k", None)]), lambda e: e.write_batch([(None, None)]),
    lambda e: e.delete_all([b"a", None]),
], ids=["put key", "put value", "delete", "put_all", "write_batch", "delete_all"])
def test_none_is_rejected_with_a_typed_error(call):
    engine = MemoryEngine("s")
    engine.put(b"a", b"0")
    with pytest.raises(NullKeyOrValueError, match="store 's'"):
        call(engine)
    assert list(engine.all()) == [(b"a", b"0")]
