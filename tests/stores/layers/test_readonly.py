"""The read-only view: reads pass through, writes raise ReadOnlyStoreError, close is the view's."""

from __future__ import annotations

import pytest

from weir.stores.api import ReadOnlyKeyValueStore
from weir.stores.engines.memory import MemoryEngine
from weir.stores.errors import ReadOnlyStoreError, StoreClosedError
from weir.stores.layers.readonly import ReadOnlyView


@pytest.fixture
def engine():
    e = MemoryEngine("rates")
    e.write_batch([(b"eur", b"1.1"), (b"usd", b"1.0")])
    return e


def test_reads_pass_through(engine):
    view = ReadOnlyView(engine)
    assert isinstance(view, ReadOnlyKeyValueStore)
    assert view.get(b"eur") == b"1.1"
    assert view.get_all([b"eur", b"gbp"]) == {b"eur": b"1.1"}
    with view.range(b"a", b"z") as it:
        assert [k for k, _ in it] == [b"eur", b"usd"]
    with view.prefix(b"u") as it:
        assert [k for k, _ in it] == [b"usd"]
    with view.all() as it:
        assert len(list(it)) == 2
    with view.snapshot(None, None) as snap, snap.iterator() as it:
        assert len(list(it)) == 2


@pytest.mark.parametrize("write", [
    lambda v: v.put(b"eur", b"2"),
    lambda v: v.put_all([(b"eur", b"2")]),
    lambda v: v.delete(b"eur"),
    lambda v: v.delete_all([b"eur"]),
    lambda v: v.write_batch([(b"eur", None)]),
])
def test_writes_raise_read_only_naming_the_store(engine, write):
    with pytest.raises(ReadOnlyStoreError, match="store 'rates'.*read-only"):
        write(ReadOnlyView(engine))
    assert engine.get(b"eur") == b"1.1"


def test_closing_the_view_leaves_the_store_open(engine):
    view = ReadOnlyView(engine)
    view.close()
    assert view.closed and not engine.closed
    with pytest.raises(StoreClosedError):
        view.get(b"eur")
    assert engine.get(b"eur") == b"1.1"


def test_flush_on_the_view_is_a_noop(engine):
    ReadOnlyView(engine).flush()
