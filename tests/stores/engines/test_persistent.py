"""What the RocksDB and LMDB engines do alike beyond the store contract: closing iterators,
snapshots and the engine itself, and typed errors for None and non-bytes."""

from __future__ import annotations

import pytest

from weir.stores.errors import NullKeyOrValueError, StoreClosedError

from tests.stores.engines._helpers import PERSISTENT, keys_of, open_persistent


@pytest.fixture(params=PERSISTENT)
def kind(request):
    return request.param


@pytest.fixture
def engine(kind, tmp_path):
    e = open_persistent(kind, tmp_path / "s")
    yield e
    e.close()


def test_closed_iterator_raises_and_stops_a_running_loop(engine):
    engine.put_all([(b"%d" % i, b"v") for i in range(5)])
    it = engine.all()
    seen = []
    for k, _ in it:
        seen.append(k)
        if len(seen) == 2:
            it.close()
    assert seen == [b"0", b"1"]
    with pytest.raises(StoreClosedError):
        next(it)
    with pytest.raises(StoreClosedError):
        iter(it)
    it.close()


def test_close_with_open_iterators_and_snapshots_then_reopen_in_the_same_process(kind, tmp_path):
    e = open_persistent(kind, tmp_path)
    e.put_all([(b"a", b"1"), (b"b", b"2")])
    it, snap = e.all(), e.snapshot(None, None)
    snap_it = snap.iterator()
    next(it), next(snap_it)
    e.close()
    for closed in (it, snap_it):
        with pytest.raises(StoreClosedError):
            next(closed)
    with pytest.raises(StoreClosedError):
        snap.iterator()
    # The directory (and RocksDB's own LOCK) is free again: every native reference was dropped.
    e = open_persistent(kind, tmp_path)
    assert e.get(b"b") == b"2"
    assert keys_of(e.all()) == [b"a", b"b"]
    e.close()


def test_every_operation_on_a_closed_engine_raises_store_closed(engine):
    engine.close()
    engine.close()
    for call in (lambda: engine.get(b"k"), lambda: engine.put(b"k", b"v"),
                 lambda: engine.get_all([b"k"]), lambda: engine.put_all([]),
                 lambda: engine.delete(b"k"), lambda: engine.delete_all([b"k"]),
                 lambda: engine.write_batch([]), lambda: engine.range(None, None),
                 lambda: engine.snapshot(None, None), engine.flush,
                 lambda: engine.ingest_sorted([]), engine.approximate_size):
        with pytest.raises(StoreClosedError, match="store 's'"):
            call()
    assert engine.closed


def test_none_and_non_bytes_are_rejected_with_typed_errors(kind, engine):
    with pytest.raises(NullKeyOrValueError):
        engine.put(b"k", None)
    with pytest.raises(NullKeyOrValueError):
        engine.put_all([(b"a", b"1"), (b"k", None)])
    with pytest.raises(TypeError, match="must be bytes"):
        engine.put(b"k", "v")
    with pytest.raises(TypeError, match="must be bytes"):
        engine.put("k", b"v")
    with pytest.raises(TypeError, match="must be bytes"):
        engine.delete("k")
    assert engine.get(b"a") is None  # the failed put_all wrote nothing
    if kind == "lmdb":
        assert engine.pending_count == 0  # ... and buffered nothing either


def test_commit_marker_changes_with_every_write_and_survives_close_and_reopen(kind, tmp_path):
    engine = open_persistent(kind, tmp_path / "m")
    empty = engine.commit_marker()
    engine.put(b"a", b"1")
    engine.flush()
    one = engine.commit_marker()
    assert one != empty
    engine.flush()  # nothing new: same marker
    assert engine.commit_marker() == one
    engine.close()
    engine = open_persistent(kind, tmp_path / "m")
    assert engine.commit_marker() == one
    engine.write_batch([(b"a", None), (b"b", b"2")])
    engine.flush()
    assert engine.commit_marker() not in (one, empty)
    engine.close()


def test_lmdb_has_no_commit_marker_while_writes_are_buffered(tmp_path):
    engine = open_persistent("lmdb", tmp_path / "m")
    engine.put(b"a", b"1")
    assert engine.commit_marker() is None
    engine.flush()
    assert engine.commit_marker() is not None
    engine.close()
