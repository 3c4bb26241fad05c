"""The lock layer: a store used by several threads at once keeps every write.

Each test builds the real stack (cache, serdes, changelog to a real file, RocksDB / LMDB /
memory engine) with a small cache and write batch, so evictions and write-downs happen all the
time while the threads write, and puts :class:`LockedLayer` on top, as the task instance does
when the run loop lets a task's calls overlap.
"""

from __future__ import annotations

import threading

import pytest

from weir.stores.builder import build_store, shared_store
from weir.stores.config import Config
from weir.stores.errors import StoreClosedError
from weir.testing import FileChangelog
from weir.stores.layers.locked import LockedIterator, LockedLayer, LockedSnapshot
from weir.stores.serdes import Int64Serde
from weir.stores.spec import StoreSpec

from tests.stores.stacks import ENGINES, engine_param

pytestmark = pytest.mark.timeout(120)

THREADS = 8
PER_THREAD = 1_500


def _open(tmp_path, engine: str, *, cache: int = 16, batch: int = 8):
    cfg = Config({"stores.s.factory": engine, "stores.s.key.serde": "string",
                  "stores.s.msg.serde": "int64", "stores.s.changelog": "filelog.s-log",
                  "stores.s.object.cache.size": str(cache),
                  "stores.s.write.batch.size": str(batch)})
    log = FileChangelog(tmp_path / "s.changelog")
    store = build_store(StoreSpec.from_config(cfg, "s"), tmp_path / "s", changelog=log,
                        config=cfg)
    return shared_store(store), log


def _hammer(target, threads: int = THREADS) -> None:
    """Run ``target(n)`` on ``threads`` threads released together; re-raise a failure."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            start.wait()
            target(n)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]


def _replay(log: FileChangelog) -> dict[str, int]:
    """The state the changelog rebuilds, typed (string keys, int64 values)."""
    state: dict[str, int] = {}
    newest = log.newest_offset()
    if newest < 0:
        return state
    values = Int64Serde()
    for _, key, value in log.read(0, newest):
        if value is None:
            state.pop(key.decode(), None)
        else:
            state[key.decode()] = values.from_bytes(value)
    return state


@pytest.mark.parametrize("engine", [engine_param(e) for e in ENGINES])
def test_threads_writing_unique_keys_lose_none_in_the_store_or_the_changelog(tmp_path, engine):
    store, log = _open(tmp_path, engine)

    def write(n: int) -> None:
        for i in range(PER_THREAD):
            store.put(f"t{n}-{i:05d}", i)
            if i % 7 == 0 and i >= 7:  # deletes and reads in the mix, on this thread's keys
                store.delete(f"t{n}-{i - 7:05d}")
                assert store.get(f"t{n}-{i:05d}") == i

    _hammer(write)
    store.flush()
    expected = {f"t{n}-{i:05d}": i for n in range(THREADS) for i in range(PER_THREAD)
                if not (i % 7 == 0 and i + 7 < PER_THREAD)}
    with store.all() as it:
        assert dict(it) == expected
    assert _replay(log) == expected
    store.close()
    log.close()


@pytest.mark.parametrize("engine", [engine_param(e) for e in ENGINES])
def test_each_operation_is_atomic_so_a_read_modify_write_under_the_users_own_lock_is_exact(
        tmp_path, engine):
    """The documented recipe for a read-modify-write under concurrency > 1: the store makes
    each operation whole; the user orders the get-then-put of one key (here with a lock per
    key). Counts come out exact."""
    store, log = _open(tmp_path, engine)
    keys = [f"k{i:02d}" for i in range(10)]
    key_locks = {k: threading.Lock() for k in keys}

    def count(n: int) -> None:
        for i in range(1_000):
            key = keys[(i * 7 + n) % len(keys)]
            with key_locks[key]:
                store.put(key, (store.get(key) or 0) + 1)

    _hammer(count)
    store.flush()
    with store.all() as it:
        counts = dict(it)
    assert sum(counts.values()) == THREADS * 1_000
    assert _replay(log) == counts
    store.close()
    log.close()


@pytest.mark.parametrize("engine", [engine_param(e) for e in ENGINES])
def test_iterating_while_other_threads_write_takes_the_lock_per_step(tmp_path, engine):
    store, log = _open(tmp_path, engine)
    for i in range(200):
        store.put(f"a{i:04d}", i)
    stop = threading.Event()

    def scan_or_write(n: int) -> None:
        if n == 0:
            for _ in range(30):
                with store.range("a", "b") as it:
                    assert isinstance(it, LockedIterator)
                    seen = [k for k, _ in it]
                assert seen == sorted(seen) and len(seen) >= 200
                with store.snapshot("a", "b") as snap:
                    assert isinstance(snap, LockedSnapshot)
                    with snap.iterator() as it:
                        assert sum(1 for _ in it) >= 200
            stop.set()
        else:
            i = 0
            while not stop.is_set():
                store.put(f"b{n}-{i:06d}", i)
                store.put(f"a{i % 200:04d}", i)
                i += 1

    _hammer(scan_or_write, threads=4)
    store.close()
    log.close()


def test_the_lock_layer_passes_every_call_through_and_closes_its_store(tmp_path):
    store, log = _open(tmp_path, "memory")
    assert isinstance(store, LockedLayer) and store.name == "s"
    store.put_all({"a": 1, "b": 2})
    store.write_batch([("c", 3), ("a", None)])
    assert store.get_all(["a", "b", "c"]) == {"b": 2, "c": 3}
    store.delete_all(["b"])
    with store.all() as it:
        assert list(it) == [("c", 3)]
    with store.prefix("c") as it:
        assert list(it) == [("c", 3)]
    assert store.inner.dirty_count == 0          # the scan wrote the cache down first
    with store.lock:                            # re-entrant: a holder may call the store
        store.put("d", 4)
    store.close()
    assert store.closed
    with pytest.raises(StoreClosedError):
        store.get("c")
    log.close()
