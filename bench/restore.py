"""Restore benchmark: rebuild stores from file-log changelogs, beside the raw limits.

One run measures, on the same changelog (``--records`` records, 16-byte random keys,
100-byte values, one file-log partition) and side by side:

* the raw limits (PERF-FACTS.md): parsing the framed changelog into one dict (the file log's
  bulk reader, what restore reads with), writing the same pairs sorted into an SST file and
  ingesting it into RocksDB, and appending them sorted into LMDB with ``putmulti``;
* restore through the engine's storage layer (``TaskStorage``: the validity decision, the
  restore threads and worker processes, bulk loads below serdes and cache, OFFSET files):
  into an empty store (rebuild) and into a store 50% behind (catch up the second half), for
  RocksDB and LMDB;
* parallel restore: 4 RocksDB stores of ``records / 4`` each restored at once (default
  settings: min(stores, cores) restore threads, worker processes) against one of them alone
  (aggregate throughput), and against the same 4 restored one at a time
  (``job.container.restore.thread.pool.size=1``).

Rounds are interleaved; each figure is the best of ``--rounds``. Page cache warm. Every
restore also reports its CPU time (this process and its restore worker processes, user +
system): on a shared machine CPU time is steadier than wall time. ``--compare REV`` also runs
the rebuilds from empty of git revision ``REV`` (a snapshot of its source first on
``PYTHONPATH``, as ``bench/peers_e2e.py --compare`` does) in a child process on the same
changelog, interleaved round by round with this tree's.

Run::

    .venv/bin/python bench/restore.py                  # 1,000,000 records, 3 rounds
    .venv/bin/python bench/restore.py --records 200000 --rounds 1   # a quick look
    .venv/bin/python bench/restore.py --rebuild-only --rounds 2      # raw limits + rebuilds only
    .venv/bin/python bench/restore.py --rebuild-only --rounds 3 --compare main   # before/after
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import lmdb  # noqa: E402
from rocksdict import Options, Rdict, SstFileWriter  # noqa: E402

from weir.engine.config.job import JobConfig  # noqa: E402
from weir.engine.container.task_storage import TaskStorage  # noqa: E402
from weir.engine.model import SystemStreamPartition  # noqa: E402
from weir.engine.systems.api import CleanupPolicy, StreamSpec  # noqa: E402
from weir.engine.systems.changelog import SystemChangelogSink, SystemChangelogSource  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.recovery.checkpoint import Checkpoint  # noqa: E402
from weir.recovery.container_storage import RestoreSettings, available_cores  # noqa: E402
from weir.recovery.storage import ProgressMode  # noqa: E402
from weir.stores.config import Config  # noqa: E402
from weir.stores.spec import StoreSpec  # noqa: E402

KEY_BYTES, VALUE_BYTES = 16, 100
TASK = "Partition 0"


def _config(base: Path, stores: dict[str, tuple[str, str]], threads: int | None) -> Config:
    values = {"job.name": "bench-restore", "job.data.dir": str(base / "data"),
              "systems.fl.factory": "filelog", "systems.fl.root": str(base / "log")}
    for name, (engine, stream) in stores.items():
        values.update({f"stores.{name}.factory": engine, f"stores.{name}.key.serde": "bytes",
                       f"stores.{name}.msg.serde": "bytes",
                       f"stores.{name}.changelog": f"fl.{stream}"})
    if threads is not None:
        values["job.container.restore.thread.pool.size"] = str(threads)
    return Config(values)


def _write_changelog(registry: SystemRegistry, stream: str, records: int, seed: int, *,
                     create: bool = True) -> int:
    if create:
        registry.admin("fl").create_stream(StreamSpec(stream, 1, CleanupPolicy.COMPACT))
    producer = registry.producer("fl")
    producer.register("bench")
    producer.start()
    sink = SystemChangelogSink(producer, SystemStreamPartition("fl", stream, 0), "bench")
    rng = __import__("random").Random(seed)
    value = b"v" * VALUE_BYTES
    chunk = 50_000
    for first in range(0, records, chunk):
        n = min(chunk, records - first)
        sink.append_all([(rng.randbytes(KEY_BYTES), value) for _ in range(n)])
    sink.flush()
    producer.stop()
    return SystemChangelogSource(registry, SystemStreamPartition("fl", stream, 0)).newest_offset()


def _cpu() -> float:
    """CPU seconds of this process and its waited-for children (restore workers), so far."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _restore(base: Path, config: Config, registry: SystemRegistry, targets: dict[str, int]
             ) -> tuple[float, float]:
    """Open the task's stores at a checkpoint with these changelog offsets: ``(wall seconds,
    CPU seconds)`` (CPU: this process and the restore workers, which are gone by the time
    the stores are closed)."""
    job = JobConfig.from_config(config)
    specs = [StoreSpec.from_config(config, name, changelog_system="fl") for name in targets]
    producer = registry.producer("fl")
    producer.register("bench-restore")
    producer.start()
    try:
        storage = TaskStorage(TASK, specs, job, 0, {"fl": producer}, registry, config,
                              ProgressMode.QUIET, restore=RestoreSettings.from_config(config))
        cpu = _cpu()
        started = time.perf_counter()
        storage.open(Checkpoint({}, targets))
        seconds = time.perf_counter() - started
        storage.close()
        cpu = _cpu() - cpu
    finally:
        producer.stop()
    return seconds, cpu


def _wipe(base: Path) -> None:
    shutil.rmtree(base / "data", ignore_errors=True)


# -- raw limits -----------------------------------------------------------------------------

def _pairs(registry: SystemRegistry, stream: str, newest: int
           ) -> tuple[dict, tuple[float, float]]:
    """The changelog parsed into one dict, and ``(wall s, CPU s)`` it took."""
    source = SystemChangelogSource(registry, SystemStreamPartition("fl", stream, 0))
    cpu = time.process_time()
    started = time.perf_counter()
    into: dict = {}
    for _ in source.read_batches(0, newest, into=into):
        pass
    return into, (time.perf_counter() - started, time.process_time() - cpu)


def _sst_ingest(base: Path, pairs: dict) -> float:
    directory = base / "raw-rocksdb"
    shutil.rmtree(directory, ignore_errors=True)
    started = time.perf_counter()
    items = sorted(pairs.items())
    options = Options(raw_mode=True)
    writer = SstFileWriter(options)
    sst = str(base / "raw.sst")
    writer.open(sst)
    for key, value in items:
        writer[key] = value
    writer.finish()
    db = Rdict(str(directory), options)
    db.ingest_external_file([sst])
    db.close()
    seconds = time.perf_counter() - started
    os.unlink(sst)
    return seconds


def _lmdb_append(base: Path, pairs: dict) -> float:
    directory = base / "raw-lmdb"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    started = time.perf_counter()
    items = sorted(pairs.items())
    env = lmdb.open(str(directory), map_size=1 << 34, sync=True, metasync=True)
    with env.begin(write=True) as txn:
        txn.cursor().putmulti(items, append=True)
    env.sync(True)
    env.close()
    return time.perf_counter() - started


# -- the run --------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    parser.add_argument("--rebuild-only", action="store_true",
                        help="only the raw limits and the rebuilds from empty (RocksDB, LMDB)")
    parser.add_argument("--compare", metavar="REV",
                        help="also time the rebuilds from empty of git revision REV, "
                             "interleaved (implies --rebuild-only)")
    parser.add_argument("--child-rebuilds", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n = args.records
    base = Path(args.dir or tempfile.mkdtemp(prefix="weir-bench-restore-"))
    try:
        if args.child_rebuilds:  # one round of --compare, run by the revision compared with
            print(json.dumps(_rebuilds(base, n)))
            return 0
        return _run(base, n, args.rounds, rebuild_only=args.rebuild_only or bool(args.compare),
                    compare=args.compare)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


def _rebuilds(base: Path, n: int) -> dict[str, tuple[float, float]]:
    """The raw parse and one rebuild from empty per engine of the ``big`` changelog already in
    ``base``: ``{"parse" or engine: (wall s, CPU s)}``."""
    registry = SystemRegistry(_config(base, {}, None))
    newest = SystemChangelogSource(registry, SystemStreamPartition("fl", "big", 0)
                                   ).newest_offset()
    assert newest == n - 1, f"{base} holds {newest + 1} records, not {n}"
    _warm(base, registry)
    out = {"parse": _pairs(registry, "big", newest)[1]}
    for engine in ("rocksdb", "lmdb"):
        _wipe(base)
        out[engine] = _restore(base, _config(base, {"s": (engine, "big")}, None), registry,
                               {"s": newest})
    return out


def _warm(base: Path, registry: SystemRegistry) -> None:
    """Restore the small ``warm`` changelog into both engines, untimed: the first restore of a
    process also imports the engines' and the restore's modules, which the timed ones should
    not pay (this process and a ``--compare`` child alike)."""
    newest = SystemChangelogSource(registry, SystemStreamPartition("fl", "warm", 0)
                                   ).newest_offset()
    for engine in ("rocksdb", "lmdb"):
        _wipe(base)
        _restore(base, _config(base, {"s": (engine, "warm")}, None), registry, {"s": newest})


def _compared(base: Path, n: int, rev: str) -> dict[str, tuple[float, float]]:
    """:func:`_rebuilds` of revision ``rev``, in a child process."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers_e2e import _env, snapshot  # noqa: PLC0415 - only for --compare

    weir_path = snapshot(rev, base / "snapshots")
    done = subprocess.run([sys.executable, __file__, "--child-rebuilds", "--records", str(n),
                           "--dir", str(base)], env=_env(weir_path), check=True,
                          capture_output=True, text=True)
    return {k: tuple(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def _run(base: Path, n: int, rounds: int, *, rebuild_only: bool = False,
         compare: str | None = None) -> int:
    mb = n * (KEY_BYTES + VALUE_BYTES) / 1e6
    print(f"restore benchmark: {n:,} changelog records ({KEY_BYTES} B keys, {VALUE_BYTES} B "
          f"values, {mb:.0f} MB of keys and values), {rounds} round(s), best of; "
          f"{available_cores()} core(s), load average {os.getloadavg()[0]:.1f}")
    registry = SystemRegistry(_config(base, {}, None))
    started = time.perf_counter()
    newest = _write_changelog(registry, "big", n, seed=1)
    _write_changelog(registry, "warm", 1000, seed=2)
    quarter = n // 4
    small = ([] if rebuild_only else
             [_write_changelog(registry, f"part{i}", quarter, seed=10 + i) for i in range(4)])
    print(f"wrote the changelogs in {time.perf_counter() - started:.1f} s")

    best: dict[str, float] = {}
    best_cpu: dict[str, float] = {}

    def keep(name: str, seconds: float | tuple[float, float]) -> None:
        if isinstance(seconds, tuple):
            seconds, cpu = seconds
            best_cpu[name] = min(best_cpu.get(name, float("inf")), cpu)
        best[name] = min(best.get(name, float("inf")), seconds)

    _warm(base, registry)
    for r in range(rounds):
        pairs, parse = _pairs(registry, "big", newest)
        keep("raw: framed parse into a dict", parse)
        keep("raw: sort + SST write + ingest (RocksDB)", _sst_ingest(base, pairs))
        keep("raw: sort + putmulti append (LMDB)", _lmdb_append(base, pairs))
        del pairs
        for engine in ("rocksdb", "lmdb"):
            config = _config(base, {"s": (engine, "big")}, None)
            _wipe(base)
            keep(f"restore {engine}: rebuild from empty",
                 _restore(base, config, registry, {"s": newest}))
            if rebuild_only:
                continue
            # 50% behind: a store restored to the first half of its changelog, then the
            # second half appended (as a job on another machine wrote it)
            stream = f"behind-{engine}-{r}"
            half = _write_changelog(registry, stream, n // 2, seed=100 + r)
            config = _config(base, {"s": (engine, stream)}, None)
            _wipe(base)
            _restore(base, config, registry, {"s": half})
            full = _write_changelog(registry, stream, n - n // 2, seed=200 + r, create=False)
            keep(f"restore {engine}: catch up from 50% behind",
                 _restore(base, config, registry, {"s": full}))
        if compare:
            for what, timed in _compared(base, n, compare).items():
                keep(f"raw: framed parse into a dict, {compare}" if what == "parse" else
                     f"restore {what}: rebuild from empty, {compare}", timed)
        if rebuild_only:
            print(f"round {r + 1}/{rounds} done")
            continue
        stores = {f"s{i}": ("rocksdb", f"part{i}") for i in range(4)}
        targets = {f"s{i}": small[i] for i in range(4)}
        _wipe(base)
        keep("restore 1 RocksDB store of records/4",
             _restore(base, _config(base, {"s0": stores["s0"]}, None), registry,
                      {"s0": small[0]}))
        for threads, label in ((None, "default threads"), (1, "1 thread")):
            _wipe(base)
            keep(f"restore 4 RocksDB stores of records/4, {label}",
                 _restore(base, _config(base, stores, threads), registry, targets))
        print(f"round {r + 1}/{rounds} done")

    print()
    print(f"{'what':<48} {'records':>10} {'seconds':>8} {'records/s':>12} {'MB/s':>7} "
          f"{'CPU s':>7} {'rec/CPU s':>10}")
    for name, seconds in best.items():
        records = n // 2 if "50%" in name else n // 4 if "1 RocksDB store" in name else n
        rate = records / seconds
        cpu = (f"{best_cpu[name]:>7.2f} {records / best_cpu[name]:>10,.0f}"
               if name in best_cpu else "")
        print(f"{name:<48} {records:>10,} {seconds:>8.2f} {rate:>12,.0f} "
              f"{rate * (KEY_BYTES + VALUE_BYTES) / 1e6:>7.0f} {cpu}")
    print()
    for engine, raw in (("rocksdb", "raw: sort + SST write + ingest (RocksDB)"),
                        ("lmdb", "raw: sort + putmulti append (LMDB)")):
        limit = best["raw: framed parse into a dict"] + best[raw]
        rebuild = best[f"restore {engine}: rebuild from empty"]
        print(f"{engine}: rebuild takes {rebuild / limit:.2f}x the raw limit (parse + load "
              f"= {limit:.2f} s)")
        if compare:
            if engine == "rocksdb":
                name = "raw: framed parse into a dict"
                theirs = f"{name}, {compare}"
                print(f"parse against {compare}: {best[theirs] / best[name]:.2f}x the "
                      f"throughput by wall time, {best_cpu[theirs] / best_cpu[name]:.2f}x by "
                      f"CPU time")
            name = f"restore {engine}: rebuild from empty"
            theirs = f"{name}, {compare}"
            print(f"{engine}: rebuild against {compare}: {best[theirs] / rebuild:.2f}x the "
                  f"throughput by wall time, {best_cpu[theirs] / best_cpu[name]:.2f}x by CPU "
                  f"time")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if rebuild_only:
        return 0
    parallel = best["restore 4 RocksDB stores of records/4, default threads"]
    one = best["restore 1 RocksDB store of records/4"]
    sequential = best["restore 4 RocksDB stores of records/4, 1 thread"]
    print(f"parallel restore of 4 stores: {4 * one / parallel:.2f}x the throughput of one store "
          f"alone, {sequential / parallel:.2f}x restoring them one at a time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
