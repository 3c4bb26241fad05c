"""Store benchmarks: the full layered stack side by side with hand-written loops on the raw library.

Every workload runs twice in the same process: through ``build_store`` (object cache + serdes +
changelog to a FileChangelog + engine, flushed every COMMIT_EVERY events as a commit would) and
through the library directly, written the way a careful engineer would without Weir:

- RocksDB reference: rocksdict raw mode with the same options as Weir's engine, a dict cache
  of decoded values, one WriteBatch per 1,000 events, WAL off (as Weir's logged engine),
  ``db.flush()`` at each commit (what Weir's engine does at flush);
- LMDB reference: one write transaction per 1,000 events (``sync=False``, as the PERF-FACTS
  reference row), nothing else at commit.

Goals (read-modify-write counter, 10,000 hot keys): full RocksDB stack >= 0.75x the RocksDB
reference, full LMDB stack >= 0.4x the LMDB reference.

Run::

    .venv/bin/python -m pytest bench/test_bench_stores.py --benchmark-enable -q -s

``test_side_by_side`` interleaves stack and reference rounds (best of N, wall and CPU time, the
latter steadier on a shared machine) and prints the ratios; the pytest-benchmark tests give the
grouped table.
"""

from __future__ import annotations

import functools
import os
import random
import statistics
import struct
import time
from pathlib import Path

import lmdb
import pytest
import rocksdict

from weir.stores.builder import build_store, open_engine, shared_store
from weir.stores.config import Config
from weir.stores.engines.rocksdb import RocksDBOptions
from weir.testing import FileChangelog
from weir.stores.layers.cached import CachedLayer
from weir.stores.layers.logged import LoggedLayer
from weir.stores.layers.serialized import SerializedLayer
from weir.stores.serdes import Int64Serde, StringSerde
from weir.stores.spec import StoreSpec

HOT_KEYS = 10_000
EVENTS = int(os.environ.get("WEIR_BENCH_EVENTS", "50000"))
COMMIT_EVERY = int(os.environ.get("WEIR_BENCH_COMMIT_EVERY", "25000"))
SIDE_BY_SIDE_COMMITS = (1_000, 25_000, EVENTS)  # the last: one commit per round
BATCH = 1_000
COLD_KEYS = 100_000
VALUE = b"x" * 100
ROUNDS = int(os.environ.get("WEIR_BENCH_ROUNDS", "5"))
SIDE_BY_SIDE_ROUNDS = int(os.environ.get("WEIR_BENCH_SIDE_ROUNDS", "25"))

_rng = random.Random(12345)
RMW_KEYS = ["key%05d" % _rng.randrange(HOT_KEYS) for _ in range(EVENTS)]
COLD = ["cold%07d" % i for i in range(COLD_KEYS)]
_rng.shuffle(COLD)
_U64 = struct.Struct(">Q")
_BIAS = 1 << 63


# -- stacks -----------------------------------------------------------------------------------

def stack_config(engine: str, *, value_serde: str, cache: int, extra=None) -> Config:
    values = {
        "stores.s.factory": engine, "stores.s.key.serde": "string",
        "stores.s.msg.serde": value_serde, "stores.s.changelog": "filelog.s-changelog",
        "stores.s.object.cache.size": str(cache), "stores.s.write.batch.size": str(BATCH),
        # The changelog is the durability point; LMDB need not fsync its own commits too.
        "stores.s.lmdb.sync": "false",
    }
    values.update(extra or {})
    return Config(values)


def open_stack(root: Path, engine: str, *, value_serde="int64", cache=2 * HOT_KEYS):
    config = stack_config(engine, value_serde=value_serde, cache=cache)
    log = FileChangelog(root / f"{engine}.changelog")
    store = build_store(StoreSpec.from_config(config, "s"), root / engine, changelog=log,
                        config=config)
    return store, log


def open_bytes_cache_stack(root: Path, engine: str):
    """The alternative placement: cache of bytes BELOW serialization (measured for the docs)."""
    config = stack_config(engine, value_serde="int64", cache=2 * HOT_KEYS)
    spec = StoreSpec.from_config(config, "s")
    log = FileChangelog(root / f"{engine}-bytes.changelog")
    engine_ = open_engine(spec, root / f"{engine}-bytes", logged=True)
    cached = CachedLayer(LoggedLayer(engine_, log), capacity=2 * HOT_KEYS, write_batch_size=BATCH)
    return SerializedLayer(cached, StringSerde(), Int64Serde()), log


def open_rocks_reference(root: Path):
    # The same RocksDB options as Weir's engine, so that the comparison measures the layers.
    db = rocksdict.Rdict(str(root / "rocks-ref"), RocksDBOptions().to_rocksdict_options())
    wopts = rocksdict.WriteOptions()
    wopts.disable_wal = True
    return db, wopts


def open_lmdb_reference(root: Path):
    return lmdb.open(str(root / "lmdb-ref"), map_size=1 << 30, sync=False, metasync=False,
                     writemap=True, readahead=False)


# -- read-modify-write counter -----------------------------------------------------------------

def rmw_stack(store, keys=RMW_KEYS, commit_every=COMMIT_EVERY) -> None:
    get, put = store.get, store.put
    n = 0
    for key in keys:
        count = get(key)
        put(key, 1 if count is None else count + 1)
        n += 1
        if n % commit_every == 0:
            store.flush()
    store.flush()


def rmw_rocks_reference(ref, cache: dict, keys=RMW_KEYS, commit_every=COMMIT_EVERY) -> None:
    db, wopts = ref
    pack, unpack, bias = _U64.pack, _U64.unpack, _BIAS
    batch = rocksdict.WriteBatch(raw_mode=True)
    n = 0
    for key in keys:
        count = cache.get(key)
        if count is None:
            raw = db.get(key.encode())
            count = 0 if raw is None else unpack(raw)[0] - bias
        count += 1
        cache[key] = count
        batch.put(key.encode(), pack(count + bias))
        n += 1
        if n % BATCH == 0:
            db.write(batch, wopts)
            batch = rocksdict.WriteBatch(raw_mode=True)
        if n % commit_every == 0:
            db.flush(True)
    db.write(batch, wopts)
    db.flush(True)


def rmw_lmdb_reference(env, keys=RMW_KEYS, commit_every=COMMIT_EVERY) -> None:
    pack, unpack, bias = _U64.pack, _U64.unpack, _BIAS
    txn = env.begin(write=True)
    get, put = txn.get, txn.put
    n = 0
    for key in keys:
        kb = key.encode()
        raw = get(kb)
        put(kb, pack((0 if raw is None else unpack(raw)[0] - bias) + 1 + bias))
        n += 1
        if n % BATCH == 0:
            txn.commit()
            txn = env.begin(write=True)
            get, put = txn.get, txn.put
    txn.commit()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("bench-stores")


@pytest.mark.benchmark(group="rmw-rocksdb")
@pytest.mark.parametrize("variant", ["stack", "stack-bytes-cache", "reference"])
def test_rmw_rocksdb(benchmark, root, variant):
    if variant == "reference":
        ref, cache = open_rocks_reference(root), {}
        benchmark.pedantic(rmw_rocks_reference, args=(ref, cache), rounds=ROUNDS, warmup_rounds=1)
        ref[0].close()
        return
    store, log = (open_stack(root, "rocksdb") if variant == "stack"
                  else open_bytes_cache_stack(root, "rocksdb"))
    benchmark.pedantic(rmw_stack, args=(store,), rounds=ROUNDS, warmup_rounds=1)
    store.close()
    log.close()


@pytest.mark.benchmark(group="rmw-lmdb")
@pytest.mark.parametrize("variant", ["stack", "reference"])
def test_rmw_lmdb(benchmark, root, variant):
    if variant == "reference":
        env = open_lmdb_reference(root)
        benchmark.pedantic(rmw_lmdb_reference, args=(env,), rounds=ROUNDS, warmup_rounds=1)
        env.close()
        return
    store, log = open_stack(root, "lmdb")
    benchmark.pedantic(rmw_stack, args=(store,), rounds=ROUNDS, warmup_rounds=1)
    store.close()
    log.close()


# -- put, get hot, get cold, range -------------------------------------------------------------

def put_stack(store, keys) -> None:
    put = store.put
    n = 0
    for key in keys:
        put(key, VALUE)
        n += 1
        if n % COMMIT_EVERY == 0:
            store.flush()
    store.flush()


def put_rocks_reference(ref, keys) -> None:
    db, wopts = ref
    batch = rocksdict.WriteBatch(raw_mode=True)
    n = 0
    for key in keys:
        batch.put(key.encode(), VALUE)
        n += 1
        if n % BATCH == 0:
            db.write(batch, wopts)
            batch = rocksdict.WriteBatch(raw_mode=True)
        if n % COMMIT_EVERY == 0:
            db.flush(True)
    db.write(batch, wopts)
    db.flush(True)


def put_lmdb_reference(env, keys) -> None:
    txn = env.begin(write=True)
    n = 0
    for key in keys:
        txn.put(key.encode(), VALUE)
        n += 1
        if n % BATCH == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()


def get_stack(store, keys) -> None:
    get = store.get
    for key in keys:
        get(key)


def get_rocks_reference(ref, keys) -> None:
    get = ref[0].get
    for key in keys:
        get(key.encode())


def get_lmdb_reference(env, keys) -> None:
    with env.begin() as txn:
        get = txn.get
        for key in keys:
            get(key.encode())


SCANS = [COLD[i] for i in range(0, 20)]  # 20 random start keys


def range_stack(store, starts) -> int:
    n = 0
    for start in starts:
        with store.range(start, None) as it:
            for _, (key, value) in zip(range(COLD_KEYS // 100), it):
                n += 1
    return n


def range_rocks_reference(ref, starts) -> int:
    n = 0
    for start in starts:
        it = ref[0].items(from_key=start.encode())
        for _, (key, value) in zip(range(COLD_KEYS // 100), it):
            key.decode()
            n += 1
        del it
    return n


def range_lmdb_reference(env, starts) -> int:
    n = 0
    with env.begin() as txn:
        cursor = txn.cursor()
        for start in starts:
            cursor.set_range(start.encode())
            for _, (key, value) in zip(range(COLD_KEYS // 100), cursor.iternext()):
                key.decode()
                n += 1
    return n


@pytest.fixture(scope="module", params=["rocksdb", "lmdb"])
def filled(request, root):
    """A stack (bytes values, small cache) and a reference, both holding COLD_KEYS keys."""
    engine = request.param
    sub = root / f"filled-{engine}"
    sub.mkdir()
    store, log = open_stack(sub, engine, value_serde="bytes", cache=BATCH)
    put_stack(store, COLD)
    if engine == "rocksdb":
        ref = open_rocks_reference(sub)
        put_rocks_reference(ref, COLD)
    else:
        ref = open_lmdb_reference(sub)
        put_lmdb_reference(ref, COLD)
    yield engine, store, ref
    store.close()
    log.close()
    (ref[0] if engine == "rocksdb" else ref).close()


def _pair(engine, stack_fn, rocks_fn, lmdb_fn):
    return stack_fn, (rocks_fn if engine == "rocksdb" else lmdb_fn)


@pytest.mark.benchmark(group="put")
@pytest.mark.parametrize("variant", ["stack", "reference"])
@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_put(benchmark, root, engine, variant):
    sub = root / f"put-{engine}-{variant}"
    sub.mkdir()
    if variant == "stack":
        store, log = open_stack(sub, engine, value_serde="bytes", cache=BATCH)
        benchmark.pedantic(put_stack, args=(store, COLD[:20_000]), rounds=ROUNDS)
        store.close()
        log.close()
    elif engine == "rocksdb":
        ref = open_rocks_reference(sub)
        benchmark.pedantic(put_rocks_reference, args=(ref, COLD[:20_000]), rounds=ROUNDS)
        ref[0].close()
    else:
        env = open_lmdb_reference(sub)
        benchmark.pedantic(put_lmdb_reference, args=(env, COLD[:20_000]), rounds=ROUNDS)
        env.close()


@pytest.mark.benchmark(group="get-hot")
@pytest.mark.parametrize("variant", ["stack", "reference"])
def test_get_hot(benchmark, filled, variant):
    engine, store, ref = filled
    hot = COLD[:500] * 100  # 500 keys: they fit the 1,000-entry object cache
    if variant == "stack":
        benchmark.pedantic(get_stack, args=(store, hot), rounds=ROUNDS, warmup_rounds=1)
    else:
        fn = get_rocks_reference if engine == "rocksdb" else get_lmdb_reference
        benchmark.pedantic(fn, args=(ref, hot), rounds=ROUNDS, warmup_rounds=1)


@pytest.mark.benchmark(group="get-cold")
@pytest.mark.parametrize("variant", ["stack", "reference"])
def test_get_cold(benchmark, filled, variant):
    engine, store, ref = filled
    cold = COLD[::-1][:50_000]  # far more keys than the 1,000-entry cache: every get misses
    if variant == "stack":
        benchmark.pedantic(get_stack, args=(store, cold), rounds=ROUNDS)
    else:
        fn = get_rocks_reference if engine == "rocksdb" else get_lmdb_reference
        benchmark.pedantic(fn, args=(ref, cold), rounds=ROUNDS)


@pytest.mark.benchmark(group="range")
@pytest.mark.parametrize("variant", ["stack", "reference"])
def test_range_scan(benchmark, filled, variant):
    engine, store, ref = filled
    if variant == "stack":
        n = benchmark.pedantic(range_stack, args=(store, SCANS), rounds=ROUNDS)
    else:
        fn = range_rocks_reference if engine == "rocksdb" else range_lmdb_reference
        n = benchmark.pedantic(fn, args=(ref, SCANS), rounds=ROUNDS)
    assert n > 0


# -- the goal check: interleaved rounds, ratios printed ------------------------------------------

def _measure(fn, *args) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def _rocksdb_handles(pairs: dict) -> list:
    """The native RocksDB handles behind the stores and references being compared."""
    handles = []
    for _, args in pairs.values():
        for arg in args:
            if isinstance(arg, tuple) and isinstance(arg[0], rocksdict.Rdict):
                handles.append(arg[0])
            inner = arg
            while inner is not None and not isinstance(inner, rocksdict.Rdict):
                inner = getattr(inner, "inner", None) or getattr(inner, "_db", None)
            if isinstance(inner, rocksdict.Rdict):
                handles.append(inner)
    return handles


_BACKGROUND_WORK = ("rocksdb.num-running-compactions", "rocksdb.num-running-flushes",
                    "rocksdb.compaction-pending", "rocksdb.mem-table-flush-pending")


def _settle(handles: list, timeout: float = 10.0) -> None:
    """Wait until no RocksDB flush or compaction runs in the background: those threads count
    in this process's CPU time and would be charged to whichever loop runs next."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = sum(h.property_int_value(prop) for h in handles for prop in _BACKGROUND_WORK)
        if not busy:
            return
        time.sleep(0.01)


def _side_by_side(pairs: dict, rounds: int) -> dict:
    """Run every loop once per round, in an order that alternates between rounds; keep each
    loop's times per round. Background RocksDB work is settled before every run."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in pairs}
    handles = _rocksdb_handles(pairs)
    names = list(pairs)
    for name in names:  # warm-up: caches filled, files created
        fn, args = pairs[name]
        fn(*args)
    for i in range(rounds):
        for name in (names if i % 2 == 0 else names[::-1]):
            fn, args = pairs[name]
            _settle(handles)
            times[name].append(_measure(fn, *args))
    return times


def _ratio(times: dict, stack: str, reference: str, which: int) -> float:
    """Median over rounds of reference time / stack time, each pair measured side by side in
    one round: robust to the load of a shared machine drifting between rounds."""
    ratios = sorted(ref[which] / st[which] for st, ref in zip(times[stack], times[reference]))
    return statistics.median(ratios)


@pytest.mark.parametrize("commit_every", SIDE_BY_SIDE_COMMITS)
def test_side_by_side(root, capsys, commit_every):
    sub = root / f"side-by-side-{commit_every}"
    sub.mkdir()
    rocks_stack, rocks_log = open_stack(sub, "rocksdb")
    bytes_stack, bytes_log = open_bytes_cache_stack(sub, "rocksdb")
    lmdb_stack, lmdb_log = open_stack(sub, "lmdb")
    rocks_ref, lmdb_ref = open_rocks_reference(sub), open_lmdb_reference(sub)
    c = {"commit_every": commit_every}
    pairs = {
        "rocksdb stack (object cache)": (functools.partial(rmw_stack, **c), (rocks_stack,)),
        "rocksdb stack (bytes cache)": (functools.partial(rmw_stack, **c), (bytes_stack,)),
        "rocksdb reference": (functools.partial(rmw_rocks_reference, **c), (rocks_ref, {})),
        "lmdb stack": (functools.partial(rmw_stack, **c), (lmdb_stack,)),
        "lmdb reference": (functools.partial(rmw_lmdb_reference, **c), (lmdb_ref,)),
    }
    times = _side_by_side(pairs, SIDE_BY_SIDE_ROUNDS)
    lines = [f"read-modify-write counter, {HOT_KEYS:,} hot keys, {EVENTS:,} events/round, "
             f"commit every {commit_every:,}, {SIDE_BY_SIDE_ROUNDS} interleaved rounds",
             f"{'loop':32s} {'best wall ev/s':>15s} {'best cpu ev/s':>15s}"]
    for name, runs in times.items():
        wall = min(w for w, _ in runs)
        cpu = min(c for _, c in runs)
        lines.append(f"{name:32s} {EVENTS / wall:15,.0f} {EVENTS / cpu:15,.0f}")
    ratios = {
        "rocksdb stack / reference": ("rocksdb stack (object cache)", "rocksdb reference", 0.75),
        "rocksdb bytes-cache stack / reference": ("rocksdb stack (bytes cache)",
                                                  "rocksdb reference", None),
        "lmdb stack / reference": ("lmdb stack", "lmdb reference", 0.4),
    }
    lines.append("median of per-round ratios (reference time / stack time):")
    for label, (a, b, goal) in ratios.items():
        target = f"  (goal >= {goal})" if goal else ""
        lines.append(f"{label:40s} wall {_ratio(times, a, b, 0):.2f}  "
                     f"cpu {_ratio(times, a, b, 1):.2f}{target}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    for store, log in ((rocks_stack, rocks_log), (bytes_stack, bytes_log),
                       (lmdb_stack, lmdb_log)):
        store.close()
        log.close()
    rocks_ref[0].close()
    lmdb_ref.close()


def test_lock_cost(root, capsys):
    """What the lock layer costs a task whose calls may overlap (``task.max.concurrency`` > 1
    off the loop thread): the read-modify-write loop through ``shared_store(stack)`` against
    the bare stack, one thread, interleaved rounds. The inline path never gets the layer."""
    sub = root / "lock-cost"
    for part in ("bare", "locked"):
        (sub / part).mkdir(parents=True)
    c = {"commit_every": COMMIT_EVERY}
    opened, pairs = [], {}
    for engine in ("rocksdb", "lmdb"):
        bare, bare_log = open_stack(sub / "bare", engine)
        locked_inner, locked_log = open_stack(sub / "locked", engine)
        opened += [(bare, bare_log), (locked_inner, locked_log)]
        pairs[f"{engine} stack"] = (functools.partial(rmw_stack, **c), (bare,))
        pairs[f"{engine} stack + lock"] = (functools.partial(rmw_stack, **c),
                                           (shared_store(locked_inner),))
    times = _side_by_side(pairs, SIDE_BY_SIDE_ROUNDS)
    lines = [f"read-modify-write counter, {HOT_KEYS:,} hot keys, {EVENTS:,} events/round, "
             f"commit every {COMMIT_EVERY:,}, {SIDE_BY_SIDE_ROUNDS} interleaved rounds",
             f"{'loop':32s} {'best wall ev/s':>15s} {'best cpu ev/s':>15s}"]
    for name, runs in times.items():
        lines.append(f"{name:32s} {EVENTS / min(w for w, _ in runs):15,.0f} "
                     f"{EVENTS / min(c for _, c in runs):15,.0f}")
    lines.append("median of per-round ratios (bare time / locked time):")
    for engine in ("rocksdb", "lmdb"):
        a, b = f"{engine} stack + lock", f"{engine} stack"
        lines.append(f"{engine + ' locked / bare':40s} wall {_ratio(times, a, b, 0):.2f}  "
                     f"cpu {_ratio(times, a, b, 1):.2f}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    for store, log in opened:
        store.close()
        log.close()
