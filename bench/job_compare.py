"""Jobs through the embedded runner vs hand-written loops over the same file log, side by side.

Workload (PERF-FACTS part 2): N messages (default 1,000,000) in one file-log partition, key
``key%05d`` drawn uniformly from 10,000 keys (``random.Random(12345)``), 8-byte value.

Variants, run in the same process, interleaved per round (best of ``--rounds``):

==================  ==========================================================================
``job-pass``        pass-through task: every message to an output stream (embedded runner)
``hand-pass``       the same by hand: file-log consumer poll loop + producer send
``job-rocks``       count task, RocksDB store with a changelog on the file log, default store
                    settings (object cache 1000, write batch 500), one final commit
``hand-rocks``      by hand: consumer poll loop, rocksdict (raw, WAL off) with a dirty-key
                    overlay and one WriteBatch per 1000 events plus a zstd-L1 changelog file
                    (PERF-FACTS ``rocks-batch1000-changelog``)
``job-lmdb``        count task, LMDB store with a changelog on the file log
``hand-lmdb``       by hand: consumer poll loop, LMDB get+put, write txn per 1000, sync off
                    (PERF-FACTS ``lmdb-txn1000``), plus the changelog of ``hand-rocks``: the
                    keys changed in each 1000 events, framed, zstd-L1, one file, fsynced at
                    the end (the job logs every change too)
``job-lmdb-nolog``  the LMDB count job without a changelog
``hand-lmdb-nolog`` ``hand-lmdb`` without the changelog (PERF-FACTS ``lmdb-txn1000`` as is)
==================  ==========================================================================

Rates are messages per second of the processing (job: the run loop from the first message to
the final commit; hand: the loop including its final flush). Job wall time (config check,
restore, task init, the loop) is shown too. The goals: job-rocks >= 0.6x hand-rocks,
job-lmdb >= 0.4x hand-lmdb.

Run::

    .venv/bin/python bench/job_compare.py                    # 1M messages, 1 round
    .venv/bin/python bench/job_compare.py --n 200000 --rounds 3
    .venv/bin/python bench/job_compare.py --n 300000 --profile job-rocks   # cProfile top 25
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import os
import pstats
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lmdb  # noqa: E402
import zstandard  # noqa: E402
from rocksdict import Options, Rdict, WriteBatch, WriteOptions  # noqa: E402

from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition  # noqa: E402
from weir.engine.container.runner import ExitCode, run_job  # noqa: E402
from weir.engine.container.status import StatusMode  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.stores.config import Config  # noqa: E402

IN = SystemStream("filelog", "bench-in")
OUT = SystemStream("filelog", "bench-out")
SSP = SystemStreamPartition("filelog", IN.stream, 0)
BATCH = 1000
_PACK = struct.Struct("<q")
_FRAME = struct.Struct("<IH")


def base_config(work: Path) -> dict[str, str]:
    return {"systems.filelog.factory": "filelog", "systems.filelog.root": str(work / "log"),
            "systems.filelog.default.stream.samza.offset.default": "oldest"}


def generate(work: Path, n: int, keys: int) -> None:
    registry = SystemRegistry(Config(base_config(work)))
    registry.admin("filelog").create_stream(StreamSpec(IN.stream, 1, bounded=True))
    producer = registry.producer("filelog")
    producer.register("bench")
    producer.start()
    rng = random.Random(12345)
    value = b"v" * 8
    names = [b"key%05d" % i for i in range(keys)]
    for _ in range(n):
        producer.send("bench", OutgoingMessageEnvelope(IN, value, key=names[rng.randrange(keys)],
                                                       partition=0))
    producer.end_stream(IN.stream)
    producer.stop()


def _fresh_output(work: Path) -> None:
    registry = SystemRegistry(Config(base_config(work)))
    shutil.rmtree(work / "log" / OUT.stream, ignore_errors=True)
    registry.admin("filelog").create_stream(StreamSpec(OUT.stream, 1))


# -- jobs ---------------------------------------------------------------------------------

def job_config(work: Path, run: Path, task: str, engine: str | None,
               logged: bool = True) -> Config:
    cfg = base_config(work) | {
        "job.name": "bench", "task.class": f"bench._job_tasks:{task}",
        "task.inputs": str(IN),
        "task.checkpoint.path": str(run / "checkpoints"),
        "job.logged.store.base.dir": str(run / "state"),
        "job.non-logged.store.base.dir": str(run / "state"),
    }
    if engine is not None:
        cfg |= {"stores.counts.factory": engine, "stores.counts.key.serde": "bytes",
                "stores.counts.msg.serde": "int64"}
        if logged:
            cfg["stores.counts.changelog"] = f"filelog.bench-{run.name}-changelog"
    return Config(cfg)


def run_as_job(work: Path, task: str, engine: str | None, logged: bool = True
               ) -> tuple[float, float]:
    """``(loop seconds, job wall seconds)`` of one run through the embedded runner."""
    _fresh_output(work)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    started = time.perf_counter()
    result = run_job(job_config(work, run, task, engine, logged), status=StatusMode.OFF)
    wall = time.perf_counter() - started
    if result.exit_code is not ExitCode.OK:
        raise SystemExit("\n".join(result.summary_lines()))
    return result.containers[0].loop_seconds, wall


# -- hand-written loops ---------------------------------------------------------------------

def _consumer(work: Path):
    consumer = SystemRegistry(Config(base_config(work))).consumer("filelog")
    consumer.register(SSP, 0)
    consumer.start()
    return consumer


def _envelopes(consumer) -> "iter":
    poll = consumer.poll
    while True:
        for env in poll((SSP,), 0.1).get(SSP, ()):
            if env.is_end_of_stream:
                return
            yield env


def hand_pass(work: Path) -> float:
    _fresh_output(work)
    registry = SystemRegistry(Config(base_config(work)))
    producer = registry.producer("filelog")
    producer.register("hand")
    producer.start()
    started = time.perf_counter()
    consumer = _consumer(work)
    send = producer.send
    for env in _envelopes(consumer):
        send("hand", OutgoingMessageEnvelope(OUT, env.message, key=env.key, partition=0))
    producer.flush("hand")
    seconds = time.perf_counter() - started
    consumer.stop()
    producer.stop()
    return seconds


def hand_rocks(work: Path) -> float:
    path = Path(tempfile.mkdtemp(prefix="hand-rocks-", dir=work))
    started = time.perf_counter()
    consumer = _consumer(work)
    db = Rdict(str(path / "db"), Options(raw_mode=True))
    wopts = WriteOptions()
    wopts.disable_wal = True
    log = open(path / "changelog.zst", "wb")
    compress = zstandard.ZstdCompressor(level=1).compress
    pack, unpack, frame = _PACK.pack, _PACK.unpack, _FRAME.pack
    overlay: dict[bytes, int] = {}

    def flush() -> None:
        wb = WriteBatch(raw_mode=True)
        frames = []
        for k, v in overlay.items():
            packed = pack(v)
            wb.put(k, packed)
            frames.append(frame(len(k) + len(packed) + 2, len(k)) + k + packed)
        db.write(wb, wopts)
        log.write(compress(b"".join(frames)))
        overlay.clear()

    count = 0
    for env in _envelopes(consumer):
        k = env.key
        v = overlay.get(k)
        if v is None:
            raw = db.get(k)
            v = unpack(raw)[0] if raw is not None else 0
        overlay[k] = v + 1
        count += 1
        if count % BATCH == 0:
            flush()
    flush()
    log.flush()
    os.fsync(log.fileno())
    db.flush()
    seconds = time.perf_counter() - started
    log.close()
    db.close()
    consumer.stop()
    return seconds


def hand_lmdb(work: Path, changelog: bool = True) -> float:
    """LMDB get + put per event in a write transaction per 1000 events, sync off (PERF-FACTS
    ``lmdb-txn1000``); with ``changelog`` also the hand-rocks changelog: the keys changed in
    each 1000 events framed (``u32 body_len | u16 key_len | key | value``) and written
    zstd-L1 compressed to a file after the transaction commits, fsynced at the end."""
    path = Path(tempfile.mkdtemp(prefix="hand-lmdb-", dir=work))
    started = time.perf_counter()
    consumer = _consumer(work)
    env = lmdb.open(str(path), map_size=1 << 30, sync=False, readahead=False)
    log = open(path / "changelog.zst", "wb") if changelog else None
    compress = zstandard.ZstdCompressor(level=1).compress
    pack, unpack, frame = _PACK.pack, _PACK.unpack, _FRAME.pack
    changed: dict[bytes, bytes] = {}
    txn = env.begin(write=True)

    def commit() -> None:
        txn.commit()
        if log is not None:
            log.write(compress(b"".join([frame(len(k) + len(v) + 2, len(k)) + k + v
                                         for k, v in changed.items()])))
            changed.clear()

    count = 0
    for msg in _envelopes(consumer):
        k = msg.key
        raw = txn.get(k)
        value = pack(unpack(raw)[0] + 1 if raw is not None else 1)
        txn.put(k, value)
        if log is not None:
            changed[k] = value
        count += 1
        if count % BATCH == 0:
            commit()
            txn = env.begin(write=True)
    commit()
    if log is not None:
        log.flush()
        os.fsync(log.fileno())
    env.sync(True)
    seconds = time.perf_counter() - started
    if log is not None:
        log.close()
    env.close()
    consumer.stop()
    return seconds


VARIANTS: dict[str, Callable[[Path], object]] = {
    "hand-pass": hand_pass,
    "job-pass": lambda work: run_as_job(work, "PassThrough", None),
    "hand-rocks": hand_rocks,
    "job-rocks": lambda work: run_as_job(work, "Count", "rocksdb"),
    "hand-lmdb": hand_lmdb,
    "job-lmdb": lambda work: run_as_job(work, "Count", "lmdb"),
    "hand-lmdb-nolog": lambda work: hand_lmdb(work, changelog=False),
    "job-lmdb-nolog": lambda work: run_as_job(work, "Count", "lmdb", logged=False),
}
PAIRS = (("job-pass", "hand-pass", None), ("job-rocks", "hand-rocks", 0.6),
         ("job-lmdb", "hand-lmdb", 0.4), ("job-lmdb-nolog", "hand-lmdb-nolog", None),
         ("job-lmdb", "hand-lmdb-nolog", None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="messages (default 1M)")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", default=",".join(VARIANTS),
                        help="comma-separated variants (default: all)")
    parser.add_argument("--profile", choices=list(VARIANTS),
                        help="run one variant under cProfile and print the top functions")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="weir-bench-job-"))
    try:
        started = time.perf_counter()
        generate(work, args.n, args.keys)
        print(f"generated {args.n:,} messages ({args.keys:,} keys) in "
              f"{time.perf_counter() - started:.1f} s under {work}")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            VARIANTS[args.profile](work)
            profiler.disable()
            stats = pstats.Stats(profiler).sort_stats("tottime")
            stats.print_stats(25)
            return 0
        names = [v.strip() for v in args.only.split(",") if v.strip()]
        rates: dict[str, list[float]] = {name: [] for name in names}
        best: dict[str, float] = {}
        walls: dict[str, float] = {}
        for r in range(args.rounds):
            for name in names:
                out = VARIANTS[name](work)
                seconds, wall = out if isinstance(out, tuple) else (out, out)
                rate = args.n / seconds
                rates[name].append(rate)
                print(f"round {r + 1} {name:<15} {rate:>11,.0f} msg/s  ({seconds:.2f} s, "
                      f"wall {wall:.2f} s, load {os.getloadavg()[0]:.1f})", flush=True)
                if rate > best.get(name, 0.0):
                    best[name], walls[name] = rate, args.n / wall
        print()
        print("| variant | msg/s (best) | job wall msg/s | ratio of bests | per round: median "
              "(min-max) | goal |")
        print("|---|---:|---:|---:|---:|---|")
        shown = set()
        for job, hand, goal in PAIRS:
            if job not in best or hand not in best:
                continue
            ratio = best[job] / best[hand]
            per_round = sorted(j / h for j, h in zip(rates[job], rates[hand]))
            spread = (f"{statistics.median(per_round):.2f}x ({per_round[0]:.2f}-"
                      f"{per_round[-1]:.2f})")
            verdict = "-" if goal is None else (f">= {goal}x: {'met' if ratio >= goal else 'MISSED'}")
            if hand not in shown:
                shown.add(hand)
                print(f"| `{hand}` | {best[hand]:,.0f} | | | | |")
            print(f"| `{job}` | {best[job]:,.0f} | {walls[job]:,.0f} | {ratio:.2f}x of "
                  f"`{hand}` | {spread} | {verdict} |")
        return 0
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
