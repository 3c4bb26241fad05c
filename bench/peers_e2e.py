"""The end-to-end running-count job in Weir and its peers, each run as a whole process.

Workload (issue 16, PERF-FACTS part 2): N events (default 1,000,000), keys drawn uniformly
from K keys (``random.Random(12345)``; default K = 10,000 and 1,000,000), a running count per
key, output discarded.

Payloads (``--payload``, default ``bytes``; ``bytes,json`` runs both, reported side by side):

* ``bytes``: the event is its key; Weir's job counts ``envelope.key`` (bytes keys, no serde);
* ``json`` (issue 27): the event is a JSON line with a few fields,
  ``{"k":"key00042","n":7,"src":"bench","ok":true}``. Weir's input stream has the README word
  count's serdes (``systems.filelog.samza.key.serde=string``, ``samza.msg.serde=json``), its
  task (``bench._job_tasks:CountJson``) counts ``envelope.message["k"]`` in a store with
  ``string`` keys; every peer and the ceiling parse the same lines (orjson, as Weir's ``json``
  serde) and count by ``k``.

Variants (each round runs every variant once as its own process; the order alternates
between rounds; three rounds by default):

=====================  =======================================================================
``weir-rocksdb-1``     ``weir run`` of ``bench._job_tasks:Count`` over a 4-partition file-log
                       stream, store ``counts`` on RocksDB with a changelog on the file log,
                       default store settings, ``job.container.count=1``
``weir-rocksdb-auto``  the same with ``job.container.count=auto`` (min(tasks, cores))
``weir-lmdb-1``        the RocksDB job on LMDB, one container
``weir-lmdb-auto``     the same with ``job.container.count=auto``
``bytewax-b1000``      Bytewax, ``TestingSource`` with input batches of 1000, ``key_on`` +
                       ``stateful_map``, ``run_main`` (1 worker), no recovery
``quix-txn1000``       the Quix Streams state layer, a transaction per 1000 events
``quix-txn100k``       the same, a transaction per 100,000 events
``rocksdict-hand``     a hand-written rocksdict loop: read-through dict, WriteBatch and a
                       zstd-L1 changelog file per 1000 events (``bench/_peer_jobs.py``)
``ceiling-1``          not a peer: the machine's pure-Python ceiling. The jobs' work per
                       event and nothing else, in one process: draw the N events as the peers
                       do, take each event's key once (JSON: parse the line once, orjson) and
                       count the keys in a dict in 8 passes (issue 27's yardstick)
``ceiling-2``          the same work split over two processes running at once (N/2 each,
                       no coordination): ``ceiling-2`` / ``ceiling-1`` is the most two
                       containers can gain over one on this machine at this moment (a VM's
                       second core is not always a whole core)
=====================  =======================================================================

The ceiling parses every event once, as every job does, then counts the keys in 8 passes:
the ceiling issue 27 measured (409k events/s) and wrote its ``>= 0.6x ceiling-1`` goal
against, so that goal keeps its meaning. Until wave 9 the JSON ceiling parsed every line in
each of the 8 passes (more parsing than any job: its JSON ratios before then are not
comparable); the bytes ceiling is unchanged.

A peer whose package is not importable is not run: one line says so when the run starts and
again under the tables (``bytewax-b1000 not run: bytewax is not importable ...; install the
peers with .venv/bin/pip install -e '.[peers]'``). ``.[peers]`` installs Bytewax and Quix
Streams; rocksdict comes with Weir.

The Weir jobs read their events from the file log (written once per key count before the
rounds, not timed); the peers draw the same keys in memory inside their process (PERF-FACTS
part 2, as the issue's figures were taken). Every Weir run starts with empty state (new
checkpoint and store directories and a new changelog stream); these are deleted after the run.

Reported per variant: the median over rounds of the whole-process wall time (interpreter
start to exit) as events/s, the min-max, the median max RSS (``wait4``: the largest process of
the tree, which with container processes is the largest container or the runner), and the
median over rounds of the per-round ratio to ``weir-rocksdb-1``. Then the issue's goals as
ratios from the same rounds.

``--startup`` measures Weir's start-up instead, for a job over N and N/10 records (one
container, the file log, a RocksDB store with a changelog; a probe task stops the job at its
first message): the whole process (``weir run``, from the spawn to the first message at the
task) and ``run_job`` to the first message (in a new process that imported the runner
first), each round in new processes; with ``--compare REV`` the revision runs interleaved.

The benchmark's parts: the variants, their input and job files (``bench/_peers_variants.py``),
running and measuring one whole process (``bench/_peers_runner.py``), the tables
(``bench/_peers_report.py``), ``--startup`` (``bench/_peers_startup.py``); the peers' jobs and
the ceiling's work are in ``bench/_peer_jobs.py``.

Run::

    .venv/bin/pip install -e '.[test,peers]'
    .venv/bin/python bench/peers_e2e.py                         # 1M events, 10k and 1M keys
    .venv/bin/python bench/peers_e2e.py --n 200000 --keys 10000 --rounds 1
    .venv/bin/python bench/peers_e2e.py --only weir-rocksdb-1,bytewax-b1000
    .venv/bin/python bench/peers_e2e.py --startup
    .venv/bin/python bench/peers_e2e.py --startup --compare main --rounds 5     # before/after
    .venv/bin/python bench/peers_e2e.py --compare main --only weir-rocksdb-1   # before/after
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench.*; after a snapshot on
# PYTHONPATH, so that --startup-child imports the snapshot's Weir

from bench._peers_report import from_log, report  # noqa: E402
from bench._peers_runner import Run, snapshot, warm_bytecode  # noqa: E402
from bench._peers_runner import child_env as _env, descendants as _descendants  # noqa: E402
from bench._peers_startup import startup, startup_child  # noqa: E402
from bench._peers_variants import (PARTITIONS, VARIANTS, WEIR, ceiling, child,  # noqa: E402
                                   generate, missing_peers, run_variant)

__all__ = ["main", "snapshot", "warm_bytecode", "_env", "_descendants"]
# snapshot, warm_bytecode, _env and _descendants: bench/latency.py and its helpers import them
# from here


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="events per run (default 1M)")
    parser.add_argument("--keys", default="10000,1000000",
                        help="comma-separated key counts (default 10000,1000000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(VARIANTS),
                        help=f"comma-separated variants (default all: {','.join(VARIANTS)}); "
                             f"a Weir variant as of a git revision is written name@REV")
    parser.add_argument("--payload", default="bytes",
                        help="comma-separated payloads: bytes (the key only), json (a JSON line "
                             "with a few fields, parsed by every system); default bytes")
    parser.add_argument("--workdir", type=Path, help="keep inputs here (reused when present)")
    parser.add_argument("--startup", action="store_true", help="measure start-up instead")
    parser.add_argument("--compare", action="append", default=[], metavar="REV",
                        help="also run the Weir variants as of git revision REV (as "
                             "variant@REV), interleaved with the others; repeatable")
    parser.add_argument("--from-log", type=Path, metavar="FILE",
                        help="print the tables of an earlier run from its output")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--ceiling", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--startup-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.from_log:
        print("\n".join(from_log(args.from_log)))
        return 0
    if args.startup_child:
        startup_child(args.startup_child)
        return 0
    if args.ceiling:
        ceiling(args.ceiling, args.n, int(args.keys), args.payload)
        return 0
    if args.child:
        child(args.child, args.n, int(args.keys), args.workdir, args.payload)
        return 0
    command = " ".join([".venv/bin/python", "bench/peers_e2e.py",
                        *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    work = args.workdir or Path(tempfile.mkdtemp(prefix="weir-peers-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.startup:
            print("\n".join(startup(work, args.n, args.rounds, args.compare)))
            print(f"command: {command}")
            return 0
        names = [v.strip() for v in args.only.split(",") if v.strip()]
        for bad in [v for v in names if v.partition("@")[0] not in VARIANTS]:
            raise SystemExit(f"--only {bad!r}: not a variant; one of {', '.join(VARIANTS)}")
        missing = missing_peers(names)
        for name, line in missing.items():
            print(line, flush=True)
            names.remove(name)
        names += [f"{n}@{rev}" for rev in args.compare for n in list(names) if n in WEIR]
        snapshots = {rev: snapshot(rev, work)
                     for rev in {n.partition("@")[2] for n in names} - {""}}
        for weir_path in (None, *snapshots.values()):
            warm_bytecode(work, weir_path)
        out: list[str] = []
        payloads = [p.strip() for p in args.payload.split(",") if p.strip()]
        for bad in set(payloads) - {"bytes", "json"}:
            raise SystemExit(f"--payload {bad!r}: one of bytes, json")
        for keys, payload in ((int(k), p) for k in args.keys.split(",") for p in payloads):
            log_root = work / f"log-{keys}-{payload}"
            started = time.perf_counter()
            generate(log_root, args.n, keys, payload)
            print(f"input: {args.n:,} events, {keys:,} keys, {PARTITIONS} partitions, {payload} "
                  f"({time.perf_counter() - started:.1f} s)", flush=True)
            runs: dict[str, list[Run]] = {name: [] for name in names}
            load = os.getloadavg()[0]
            for r in range(args.rounds):
                for name in (names if r % 2 == 0 else names[::-1]):
                    res = run_variant(name, work, log_root, args.n, keys, snapshots, payload)
                    runs[name].append(res)
                    print(f"keys {keys:>9,} {payload} round {r + 1} {name:<18} "
                          f"{args.n / res.wall:>10,.0f}"
                          f" ev/s  {res.wall:6.2f} s  {res.rss_mib:6.0f} MiB  load "
                          f"{os.getloadavg()[0]:.1f}  cpu {res.cpu:6.2f} s", flush=True)
            out += report(runs, args.n, keys, payload)
            out.append(f"\nload average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at "
                       f"the end; {os.cpu_count()} cores\n")
        print("\n".join(out + list(missing.values())))
        print(f"command: {command}")
        return 0
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
