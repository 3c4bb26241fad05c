"""The memory engine's own behaviour (the shared contract is in tests/stores/test_contract.py)."""

from __future__ import annotations

import random

from stores.engines._base import BytesEngine
from stores.engines.memory import MemoryEngine

from ._helpers import keys_of


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
