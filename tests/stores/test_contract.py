"""The store contract, run against every registered engine x every layer stack (see
``stacks.py``), and every engine's declared capabilities (``StoreEngine.capabilities``,
``worker_restore``, ``file_patterns``, ``open_read_only``) at the end.

Keys and values are bytes here (``bytes`` serdes) so byte-order edge cases can be written
directly; typed behaviour (serdes, ordering of ints) has its own tests further down.
"""

from __future__ import annotations

import pytest

from weir.stores.api import KeyValueStore
from weir.stores.errors import NullKeyOrValueError, SerdeError, StoreClosedError

from tests.stores.stacks import ENGINES, STACKS, StoreFactory, engine_param


@pytest.fixture(params=[engine_param(e) for e in ENGINES])
def engine(request):
    return request.param


@pytest.fixture(params=STACKS)
def factory(request, engine, tmp_path):
    f = StoreFactory(engine, request.param, tmp_path)
    yield f
    f.close_all()


@pytest.fixture
def store(factory):
    return factory.open()


def items(it):
    with it:
        return list(it)


def fill(store, keys):
    for k in keys:
        store.put(k, b"v" + k)


# -- point operations ---------------------------------------------------------------------------

def test_built_store_satisfies_the_store_protocol(store):
    assert isinstance(store, KeyValueStore)
    assert store.name == "s" and not store.closed


def test_get_missing_key_returns_none(store):
    assert store.get(b"nope") is None


def test_put_then_get_returns_value(store):
    store.put(b"k", b"v")
    assert store.get(b"k") == b"v"


def test_put_overwrites_previous_value(store):
    store.put(b"k", b"1")
    store.put(b"k", b"2")
    assert store.get(b"k") == b"2"


def test_empty_value_is_a_value_not_a_delete(store):
    store.put(b"k", b"")
    assert store.get(b"k") == b""
    assert items(store.all()) == [(b"k", b"")]


def test_delete_removes_key(store):
    store.put(b"k", b"v")
    store.delete(b"k")
    assert store.get(b"k") is None


def test_delete_of_missing_key_is_a_noop(store):
    store.delete(b"never")
    assert store.get(b"never") is None
    assert items(store.all()) == []


def test_put_after_delete_restores_key(store):
    store.put(b"k", b"1")
    store.delete(b"k")
    store.put(b"k", b"2")
    assert store.get(b"k") == b"2"
    assert items(store.all()) == [(b"k", b"2")]


def test_get_all_omits_missing_keys(store):
    fill(store, [b"a", b"b"])
    store.delete(b"b")
    assert store.get_all([b"a", b"b", b"c"]) == {b"a": b"va"}


def test_get_all_of_no_keys_is_empty(store):
    assert store.get_all([]) == {}


def test_put_all_accepts_pairs_and_mappings(store):
    store.put_all([(b"a", b"1"), (b"b", b"2")])
    store.put_all({b"c": b"3"})
    assert items(store.all()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]


def test_put_all_applies_pairs_in_order(store):
    store.put_all([(b"a", b"1"), (b"a", b"2")])
    assert store.get(b"a") == b"2"


def test_put_all_with_a_none_value_writes_nothing(store):
    with pytest.raises(NullKeyOrValueError):
        store.put_all([(b"a", b"1"), (b"b", None)])
    assert store.get(b"a") is None


def test_write_batch_with_a_none_key_is_rejected(store):
    with pytest.raises(NullKeyOrValueError):
        store.write_batch([(b"a", b"1"), (None, b"v")])


@pytest.mark.parametrize("bad", [[b"ab"], ["ab"], [(b"a", b"1", b"2")], [b"a"], [None]])
def test_put_all_refuses_items_that_are_not_pairs(store, bad):
    with pytest.raises(TypeError, match=r"store 's'.*\(key, value\) pairs"):
        store.put_all([(b"ok", b"1"), *bad])
    store.flush()
    assert items(store.all()) == []


def test_delete_all_removes_each_key(store):
    fill(store, [b"a", b"b", b"c"])
    store.delete_all([b"a", b"c", b"missing"])
    assert items(store.all()) == [(b"b", b"vb")]


def test_write_batch_applies_puts_and_deletes_in_order(store):
    store.put(b"x", b"0")
    store.write_batch([(b"a", b"1"), (b"x", None), (b"a", b"2"), (b"b", b"3")])
    assert items(store.all()) == [(b"a", b"2"), (b"b", b"3")]


# -- ranges -------------------------------------------------------------------------------------

def test_range_is_half_open(store):
    fill(store, [b"a", b"b", b"c", b"d"])
    assert [k for k, _ in items(store.range(b"b", b"d"))] == [b"b", b"c"]


def test_range_with_lo_equal_hi_is_empty(store):
    fill(store, [b"a", b"b"])
    assert items(store.range(b"a", b"a")) == []


def test_range_with_lo_greater_than_hi_is_empty(store):
    fill(store, [b"a", b"b", b"c"])
    assert items(store.range(b"c", b"a")) == []


def test_range_on_an_empty_store_is_empty(store):
    assert items(store.range(b"a", b"z")) == []
    assert items(store.all()) == []


def test_range_bounds_between_keys(store):
    fill(store, [b"a", b"c", b"e"])
    assert [k for k, _ in items(store.range(b"b", b"d"))] == [b"c"]


def test_range_with_none_bounds_is_unbounded(store):
    fill(store, [b"a", b"b", b"c"])
    assert [k for k, _ in items(store.range(None, b"b"))] == [b"a"]
    assert [k for k, _ in items(store.range(b"b", None))] == [b"b", b"c"]
    assert [k for k, _ in items(store.range(None, None))] == [b"a", b"b", b"c"]


def test_range_skips_deleted_keys(store):
    fill(store, [b"a", b"b", b"c"])
    store.delete(b"b")
    assert items(store.range(b"a", b"z")) == [(b"a", b"va"), (b"c", b"vc")]


def test_range_sees_every_write_made_before_it(store):
    # With a cache these are dirty entries: the range must write them down first.
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    store.delete(b"a")
    store.put(b"c", b"3")
    assert items(store.range(None, None)) == [(b"b", b"2"), (b"c", b"3")]


def test_all_orders_keys_by_unsigned_bytes(store):
    keys = [b"\xff", b"\x80", b"\x7f", b"\x00", b"", b"a", b"a\x00", b"ab", b"\x00\xff"]
    keys.remove(b"")  # some engines (LMDB) reject empty keys; not part of the contract
    fill(store, keys)
    assert [k for k, _ in items(store.all())] == sorted(keys)


def test_many_keys_come_back_sorted(store):
    keys = [bytes([i % 251, (i * 7) % 256]) for i in range(300)]
    fill(store, keys)
    assert [k for k, _ in items(store.all())] == sorted(set(keys))


# -- prefix -------------------------------------------------------------------------------------

def test_prefix_matches_only_keys_with_the_prefix(store):
    fill(store, [b"a", b"ab", b"abc", b"abd", b"ac", b"b"])
    assert [k for k, _ in items(store.prefix(b"ab"))] == [b"ab", b"abc", b"abd"]


def test_prefix_at_ff_boundaries(store):
    fill(store, [b"a", b"a\xff", b"a\xff\x00", b"a\xff\xff", b"b", b"\xfe", b"\xff", b"\xff\x01",
                 b"\xff\xff"])
    assert [k for k, _ in items(store.prefix(b"\xff"))] == [b"\xff", b"\xff\x01", b"\xff\xff"]
    assert [k for k, _ in items(store.prefix(b"a\xff"))] == [b"a\xff", b"a\xff\x00", b"a\xff\xff"]
    assert [k for k, _ in items(store.prefix(b"\xff\xff"))] == [b"\xff\xff"]


def test_prefix_with_no_match_is_empty(store):
    fill(store, [b"a", b"c"])
    assert items(store.prefix(b"b")) == []


def test_prefix_skips_deleted_keys(store):
    fill(store, [b"pa", b"pb", b"pc"])
    store.delete(b"pb")
    assert [k for k, _ in items(store.prefix(b"p"))] == [b"pa", b"pc"]


# -- snapshots ----------------------------------------------------------------------------------

def test_snapshot_is_isolated_from_later_writes_and_deletes(store):
    fill(store, [b"a", b"b", b"c"])
    with store.snapshot(b"a", b"z") as snap:
        store.put(b"b", b"changed")
        store.delete(b"c")
        store.put(b"d", b"new")
        store.flush()
        assert items(snap.iterator()) == [(b"a", b"va"), (b"b", b"vb"), (b"c", b"vc")]
    assert items(store.all()) == [(b"a", b"va"), (b"b", b"changed"), (b"d", b"new")]


def test_snapshot_covers_only_its_range(store):
    fill(store, [b"a", b"b", b"c"])
    with store.snapshot(b"b", b"c") as snap:
        assert items(snap.iterator()) == [(b"b", b"vb")]


def test_snapshot_sees_writes_made_before_it(store):
    store.put(b"a", b"1")
    store.delete(b"a")
    store.put(b"b", b"2")
    with store.snapshot(None, None) as snap:
        assert items(snap.iterator()) == [(b"b", b"2")]


def test_snapshot_iterator_can_be_opened_twice(store):
    fill(store, [b"a", b"b"])
    with store.snapshot(None, None) as snap:
        assert items(snap.iterator()) == items(snap.iterator())


def test_closed_snapshot_refuses_new_iterators(store):
    fill(store, [b"a"])
    snap = store.snapshot(None, None)
    snap.close()
    with pytest.raises(StoreClosedError):
        snap.iterator()


# -- iterator lifecycle -------------------------------------------------------------------------

def test_iterator_is_a_context_manager(store):
    fill(store, [b"a", b"b"])
    with store.all() as it:
        assert next(it) == (b"a", b"va")
    with pytest.raises(StoreClosedError):
        next(it)


def test_closing_an_iterator_twice_is_harmless(store):
    fill(store, [b"a"])
    it = store.all()
    it.close()
    it.close()


def test_using_a_closed_iterator_raises_store_closed(store):
    fill(store, [b"a", b"b"])
    it = store.range(b"a", b"z")
    it.close()
    with pytest.raises(StoreClosedError):
        next(it)


def test_iterator_of_a_closed_store_raises_store_closed(store):
    fill(store, [b"a", b"b"])
    it = store.all()
    store.close()
    with pytest.raises(StoreClosedError):
        next(it)


EMPTY_VIEWS = {
    "lo == hi": lambda s: s.range(b"m", b"m"),
    "lo > hi": lambda s: s.range(b"z", b"a"),
    "hi empty": lambda s: s.range(None, b""),
    "snapshot lo > hi": lambda s: s.snapshot(b"z", b"a"),
}


@pytest.mark.parametrize("view", EMPTY_VIEWS)
def test_empty_range_iterators_and_snapshots_are_closed_with_their_store(factory, view):
    store = factory.open()
    fill(store, [b"a"])
    opened = EMPTY_VIEWS[view](store)
    store.close()
    try:
        next(opened.iterator() if view.startswith("snapshot") else opened)
    except StoreClosedError:
        return
    except (StopIteration, Exception) as exc:
        raise AssertionError(f"an empty view of a closed store gave {exc!r}") from None
    raise AssertionError("an empty view of a closed store yielded a pair")


def test_iterator_opened_before_a_write_does_not_see_it(store):
    fill(store, [b"a", b"b"])
    store.flush()
    with store.all() as it:
        store.put(b"c", b"new")
        store.flush()
        assert [k for k, _ in it] == [b"a", b"b"]


# -- close --------------------------------------------------------------------------------------

OPERATIONS = {
    "get": lambda s: s.get(b"k"),
    "get_all": lambda s: s.get_all([b"k"]),
    "put": lambda s: s.put(b"k", b"v"),
    "put_all": lambda s: s.put_all([(b"k", b"v")]),
    "delete": lambda s: s.delete(b"k"),
    "delete_all": lambda s: s.delete_all([b"k"]),
    "write_batch": lambda s: s.write_batch([(b"k", b"v")]),
    "range": lambda s: s.range(b"a", b"z"),
    "prefix": lambda s: s.prefix(b"k"),
    "all": lambda s: s.all(),
    "snapshot": lambda s: s.snapshot(None, None),
    "flush": lambda s: s.flush(),
}


@pytest.mark.parametrize("op", OPERATIONS)
def test_operations_after_close_raise_store_closed(store, op):
    store.put(b"k", b"v")  # a cached hot key must not be served after close either
    store.get(b"k")
    store.close()
    with pytest.raises(StoreClosedError, match="'s'"):
        OPERATIONS[op](store)


def test_close_twice_is_harmless(store):
    store.close()
    store.close()
    assert store.closed


# -- None keys and values -----------------------------------------------------------------------

NULL_OPERATIONS = {
    "get": lambda s: s.get(None),
    "get_all": lambda s: s.get_all([b"a", None]),
    "get_all list": lambda s: s.get_all(None),
    "put key": lambda s: s.put(None, b"v"),
    "put value": lambda s: s.put(b"k", None),
    "put_all key": lambda s: s.put_all([(None, b"v")]),
    "put_all list": lambda s: s.put_all(None),
    "put_all mapping value": lambda s: s.put_all({b"a": b"1", b"b": None}),
    "prefix": lambda s: s.prefix(None),
    "delete": lambda s: s.delete(None),
    "delete_all": lambda s: s.delete_all([b"a", None]),
}


@pytest.mark.parametrize("op", NULL_OPERATIONS)
def test_none_keys_and_values_are_rejected(store, op):
    with pytest.raises(NullKeyOrValueError):
        NULL_OPERATIONS[op](store)
    assert items(store.all()) == []


# -- durability ---------------------------------------------------------------------------------

def test_flush_and_reopen_keeps_every_write(factory):
    if not factory.persistent:
        pytest.skip("the memory engine keeps nothing across close")
    store = factory.open()
    fill(store, [b"a", b"b", b"c"])
    store.delete(b"b")
    store.flush()
    store = factory.reopen(store)
    assert items(store.all()) == [(b"a", b"va"), (b"c", b"vc")]


def test_close_writes_dirty_entries_down(factory):
    if not factory.persistent:
        pytest.skip("the memory engine keeps nothing across close")
    store = factory.open()
    store.put(b"a", b"1")  # dirty in the cache (batch size 4)
    store = factory.reopen(store)
    assert store.get(b"a") == b"1"


# -- typed stores -------------------------------------------------------------------------------

@pytest.fixture
def typed_factory(engine, tmp_path):
    def make(key_serde, value_serde, stack="cached"):
        f = StoreFactory(engine, stack, tmp_path / f"{key_serde}-{value_serde}-{stack}",
                         key_serde=key_serde, value_serde=value_serde)
        made.append(f)
        return f.open()
    made: list[StoreFactory] = []
    yield make
    for f in made:
        f.close_all()


@pytest.mark.parametrize("stack", STACKS)
def test_int64_keys_iterate_in_numeric_order(typed_factory, stack):
    store = typed_factory("int64", "string", stack)
    numbers = [5, -1, 0, 2**62, -(2**63), 2**63 - 1, -300, 17]
    for n in numbers:
        store.put(n, str(n))
    assert [k for k, _ in items(store.all())] == sorted(numbers)
    assert [k for k, _ in items(store.range(-300, 6))] == [-300, -1, 0, 5]


@pytest.mark.parametrize("stack", STACKS)
def test_string_prefix_returns_typed_pairs(typed_factory, stack):
    store = typed_factory("string", "json", stack)
    store.put_all({"user:1": {"n": 1}, "user:2": {"n": [1, 2]}, "video:1": {"n": None}})
    assert items(store.prefix("user:")) == [("user:1", {"n": 1}), ("user:2", {"n": [1, 2]})]
    assert store.get_all(["user:2", "nobody"]) == {"user:2": {"n": [1, 2]}}


@pytest.mark.parametrize("stack", STACKS)
def test_snapshot_of_a_typed_store_yields_typed_pairs(typed_factory, stack):
    store = typed_factory("string", "msgpack", stack)
    store.put("a", [1, "x"])
    with store.snapshot("a", "b") as snap:
        store.put("a", [2])
        assert items(snap.iterator()) == [("a", [1, "x"])]


def test_prefix_with_an_order_only_key_serde_raises_serde_error(typed_factory):
    store = typed_factory("int64", "string", "raw")
    with pytest.raises(SerdeError, match="range"):
        store.prefix(5)


@pytest.mark.parametrize("stack", STACKS)
def test_unserializable_value_raises_serde_error_naming_store_and_key(typed_factory, stack):
    store = typed_factory("string", "int64", stack)
    with pytest.raises(SerdeError, match=r"store 's'.*'bad'") as info:
        store.put("bad", "not a number")
        store.flush()  # with a cache, serialization happens when dirty entries go down
    assert info.value.key == "bad"
    store.delete("bad")  # replacing the bad entry unblocks the write-down
    store.put("good", 1)
    store.flush()
    assert items(store.all()) == [("good", 1)]


@pytest.mark.parametrize("stack", STACKS)
def test_undeserializable_value_raises_serde_error_naming_store_and_key(tmp_path, engine, stack):
    raw = StoreFactory(engine, "raw", tmp_path, key_serde="string", value_serde="bytes")
    store = raw.open()
    store.put("k", b"\xff\xfe not json")
    store.flush()
    store.close()
    raw.close_all()
    typed = StoreFactory(engine, stack, tmp_path, key_serde="string", value_serde="json")
    if not typed.persistent:
        pytest.skip("needs the bytes written by a first store to survive close")
    try:
        store = typed.open()
        with pytest.raises(SerdeError, match=r"store 's'.*'k'.*json"):
            store.get("k")
        with pytest.raises(SerdeError, match=r"store 's'.*'k'"):
            items(store.all())
    finally:
        typed.close_all()


def test_closing_the_store_under_a_running_loop_raises_store_closed(store):
    fill(store, [b"a", b"b", b"c"])
    it = store.all()
    with pytest.raises(StoreClosedError):
        for key, _ in it:
            if key == b"a":
                store.close()


# -- None keys and values on the bare engines ---------------------------------------------------

BARE_NULL_OPERATIONS = {
    "get": lambda e: e.get(None),
    "get_all key": lambda e: e.get_all([b"a", None]),
    "get_all list": lambda e: e.get_all(None),
    "put key": lambda e: e.put(None, b"v"),
    "put value": lambda e: e.put(b"k", None),
    "put_all key": lambda e: e.put_all([(None, b"v")]),
    "put_all value": lambda e: e.put_all([(b"a", b"1"), (b"b", None)]),
    "put_all list": lambda e: e.put_all(None),
    "delete": lambda e: e.delete(None),
    "delete_all key": lambda e: e.delete_all([b"a", None]),
    "delete_all list": lambda e: e.delete_all(None),
    "write_batch key": lambda e: e.write_batch([(b"a", b"1"), (None, b"v")]),
    "write_batch list": lambda e: e.write_batch(None),
    "prefix": lambda e: e.prefix(None),
}


@pytest.fixture
def bare_engine(engine, tmp_path):
    from weir.stores.builder import open_engine
    from weir.stores.config import Config
    from weir.stores.spec import StoreSpec
    spec = StoreSpec.from_config(Config({"stores.s.factory": engine, "stores.s.key.serde": "bytes",
                                         "stores.s.msg.serde": "bytes"}), "s")
    opened = open_engine(spec, tmp_path / "s", logged=True)
    yield opened
    opened.close()


@pytest.mark.parametrize("op", BARE_NULL_OPERATIONS)
def test_bare_engines_reject_none_keys_and_values_with_a_typed_error(bare_engine, op):
    with pytest.raises(NullKeyOrValueError, match="store 's'"):
        BARE_NULL_OPERATIONS[op](bare_engine)
    with bare_engine.all() as it:
        assert list(it) == []


# -- declared capabilities (weir.stores.engines.registry) ---------------------------------------

def _bare(engine_name, directory):
    from weir.stores.builder import open_engine
    from weir.stores.config import Config
    from weir.stores.spec import StoreSpec
    spec = StoreSpec.from_config(Config({"stores.s.factory": engine_name,
                                         "stores.s.key.serde": "bytes",
                                         "stores.s.msg.serde": "bytes"}), "s")
    return spec, open_engine(spec, directory, logged=True)


def _registered(engine_name):
    from weir.stores.engines.registry import store_engine
    return store_engine(engine_name)


def test_an_engine_keeps_its_bytes_across_reopen_exactly_when_it_says_it_is_persistent(
        engine, tmp_path):
    from weir.stores.offline import engine_of_files
    registered = _registered(engine)
    _, opened = _bare(engine, tmp_path / "s")
    opened.put_all([(b"a", b"1"), (b"b", b"2")])
    opened.flush()
    opened.close()
    if registered.file_patterns:
        assert engine_of_files(tmp_path / "s") is registered
    _, opened = _bare(engine, tmp_path / "s")
    with opened.all() as it:
        assert list(it) == ([(b"a", b"1"), (b"b", b"2")] if registered.persistent else [])
    opened.close()


def test_a_commit_marker_names_each_durable_commit(engine, tmp_path):
    from weir.stores.engines.registry import Capability
    registered = _registered(engine)
    if Capability.COMMIT_MARKER not in registered.capabilities:
        pytest.skip(f"engine {engine} declares no commit marker")
    _, opened = _bare(engine, tmp_path / "s")
    opened.flush()
    empty = opened.commit_marker()
    opened.put(b"a", b"1")
    opened.flush()
    one = opened.commit_marker()
    assert isinstance(one, str) and one != empty
    opened.flush()
    assert opened.commit_marker() == one  # nothing new, nothing changes
    opened.close()
    if registered.persistent:
        _, opened = _bare(engine, tmp_path / "s")
        assert opened.commit_marker() == one
        opened.close()


def test_a_bulk_load_writes_a_sorted_run_over_what_the_engine_held(engine, tmp_path):
    from weir.stores.engines.registry import Capability
    if Capability.BULK_LOAD not in _registered(engine).capabilities:
        pytest.skip(f"engine {engine} declares no bulk load")
    _, opened = _bare(engine, tmp_path / "s")
    opened.put_all([(b"a", b"old"), (b"b", b"old"), (b"z", b"kept")])
    opened.load_sorted([b"a", b"b", b"c"], [None, b"new", b"3"], deletes=True)
    opened.load_sorted([b"d", b"e"], [b"4", b"5"], deletes=False)
    with opened.all() as it:
        assert list(it) == [(b"b", b"new"), (b"c", b"3"), (b"d", b"4"), (b"e", b"5"),
                            (b"z", b"kept")]
    opened.close()


def test_sorted_files_from_a_restore_worker_are_ingested_in_order(engine, tmp_path):
    from weir.stores.engines.registry import WorkerRestore
    registered = _registered(engine)
    if registered.worker_restore is not WorkerRestore.SORTED_FILES:
        pytest.skip(f"engine {engine} takes no sorted files")
    spec, opened = _bare(engine, tmp_path / "s")
    opened.put(b"a", b"old")
    staging = tmp_path / "staging"
    staging.mkdir()
    first, second = str(staging / "0.sst"), str(staging / "1.sst")
    registered.write_sorted_file(first, [b"a", b"b"], [b"1", b"1"], spec.options, deletes=False)
    registered.write_sorted_file(second, [b"a", b"c"], [None, b"2"], spec.options, deletes=True)
    opened.ingest_files([first, second])
    with opened.all() as it:
        assert list(it) == [(b"b", b"1"), (b"c", b"2")]
    opened.close()


def test_read_only_files_show_what_the_engine_wrote_and_change_nothing(engine, tmp_path):
    from weir.stores.engines.registry import Capability
    from weir.stores.offline import open_read_only
    registered = _registered(engine)
    if registered.open_read_only is None:
        pytest.skip(f"engine {engine} has no read-only reader")
    spec, opened = _bare(engine, tmp_path / "s")
    opened.put_all([(b"a1", b"1"), (b"a2", b"2"), (b"b1", b"3")])
    opened.flush()
    marker = (opened.commit_marker() if Capability.COMMIT_MARKER in registered.capabilities
              else None)
    opened.close()
    before = sorted((p.name, p.stat().st_size) for p in (tmp_path / "s").iterdir())
    with open_read_only(spec, tmp_path / "s") as files:
        with files.prefix(b"a") as it:
            assert list(it) == [(b"a1", b"1"), (b"a2", b"2")]
        if marker is not None:
            assert files.commit_marker() == marker
    assert sorted((p.name, p.stat().st_size) for p in (tmp_path / "s").iterdir()) == before


_KILLED_WRITER = """
import importlib, os, sys, time
from pathlib import Path
for module in sys.argv[3:]:
    importlib.import_module(module)
from weir.stores.engines.registry import Durability, store_engine
from weir.stores.spec import StoreSpec
spec = StoreSpec("s", sys.argv[1], "bytes", "bytes")
engine = spec.engine.open(spec, Path(sys.argv[2]), Durability.LOCAL)
engine.put(b"k", b"written before the kill")
print("written", flush=True)
time.sleep(600)
"""


def test_a_write_ahead_log_keeps_an_unflushed_write_through_sigkill(engine, tmp_path):
    import signal
    import subprocess
    import sys

    from weir.stores.engines.registry import Capability
    registered = _registered(engine)
    if Capability.WRITE_AHEAD_LOG not in registered.capabilities:
        pytest.skip(f"engine {engine} declares no write-ahead log")
    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, engine, str(tmp_path / "s"),
                              *registered.preload], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"  # the handshake: put returned
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    _, opened = _bare(engine, tmp_path / "s")
    assert opened.get(b"k") == b"written before the kill"
    opened.close()
