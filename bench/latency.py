"""Latency, open loop (issue 22): how long a record takes from its scheduled send to a reader
of the job's final output, at 10%, 50% and 90% of the job's measured maximum throughput.

Every part is its own process, as in production:

* a **producer** process appends events to the input stream on a fixed schedule (event ``i``
  is due at ``t0 + i / rate``; whatever is due is appended and written out at once, then it
  sleeps to the next due time). Each event carries its scheduled time (``CLOCK_MONOTONIC``,
  one clock for every process on Linux), and latency is measured from it: a stalled producer
  cannot hide a delay, it shows up as latency (no coordinated omission);
* the **job** runs as ``python -m weir run job.properties`` (the Spark scenario with
  ``--runner spark``), with the defaults unless ``--set`` says otherwise;
* a **consumer** process reads the final output stream with the file log's consumer (the
  default ``read_committed``) and records arrival minus scheduled time for every record.

Scenarios:

==========  ================================================================================
``alo``     one job (``bench._job_tasks:CountEcho``): a running count per key in a RocksDB
            store logged to the file log, every input sent on with its count; at-least-once
``eos``     the same job with ``task.processing.guarantee=exactly_once`` (its default
            commit interval)
``chain``   two such jobs, the first one's output is the second one's input
``app``     the pageviews shape (``bench._app_jobs:LatencyViews``): ``partition_by(user)``,
            every record to one output (records through the shuffle, at-least-once) and a
            tumbling one-second count per user to another. Panes are timed from the moment
            the watermark passes the window's end: the scheduled time of the first event at
            or after the end (event time is the scheduled time, ms, no out-of-orderness)
``spark``   the ``alo`` job on Spark (``weir run --runner spark``, local mode)
==========  ================================================================================

The maximum throughput of a scenario is measured first: the producer appends
``--max-records`` events as fast as it can (producer, job and consumer share the machine, as
in the open-loop runs); the events divided by the time from the first send to the last output
is the maximum (a Spark micro-batch delivers its outputs at once, so arrival rates alone would
overstate it).
Then each load runs for ``--duration`` seconds (the first ``--warmup`` seconds not counted)
in new processes with new streams and state; a ping record is sent until its output appears
(so the job's start-up is not measured) before the producer starts. Loads and scenarios are
interleaved over ``--rounds`` rounds (the order alternates); percentiles are over the pooled
records of every round, the spread is the per-round p99 range.

Keys: ``--keys`` (10,000) uniform keys over 4 partitions (the key picks the partition).

Run::

    .venv/bin/python bench/latency.py                              # everything, ~5 minutes
    .venv/bin/python bench/latency.py --scenarios alo,chain --loads 50 --rounds 3
    .venv/bin/python bench/latency.py --scenarios alo --compare 415c877   # before/after
    .venv/bin/python bench/latency.py --scenarios alo --set task.commit.ms=1000
    .venv/bin/python bench/latency.py --scenarios alo --rate 2000  # absolute rates, no max run
    .venv/bin/python bench/latency.py --readers     # how a waiting reader notices a record
    .venv/bin/python bench/latency.py --idle --compare 415c877 --rounds 3   # idle CPU

``--readers`` measures the ways a consumer can wait (bounded-sleep polling at 10 ms and 1 ms,
inotify on the partition directories, and a condition variable between two threads of one
process, the floor of any shared wake-up): the time from a record written by another process
(at random 10-30 ms gaps) to the poll that returns it, the reader polling as the run loop does
(``poll(ssps, 0.01)``), and the CPU of a reader that waits 10 s with nothing to read.

This file is the command line (and the entry of the producer, consumer and reader processes it
starts); the parts live beside it: the scenarios' streams and jobs (``_latency_scenarios.py``),
the open-loop driver: producer, consumer, one run, idle CPU (``_latency_driver.py``), the
waiting readers (``_latency_readers.py``) and the tables (``_latency_report.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.append(str(ROOT))  # after a snapshot on PYTHONPATH

from bench._latency_driver import RunResult, consume, idle_cpu, produce, run_once  # noqa: E402
from bench._latency_readers import reader, readers  # noqa: E402
from bench._latency_report import pct, report  # noqa: E402
from bench._latency_scenarios import SCENARIOS  # noqa: E402
from bench.peers_e2e import snapshot, warm_bytecode  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--loads", default="10,50,90", help="percent of the measured maximum")
    parser.add_argument("--rate", default="", help="absolute rates (events/s, comma-"
                        "separated) instead of --loads; skips the max-throughput runs")
    parser.add_argument("--duration", type=float, default=12.0, help="seconds per load")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds not counted")
    parser.add_argument("--max-records", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra job config (every job of every scenario)")
    parser.add_argument("--compare", action="append", default=[], metavar="REV",
                        help="also run every load as of git revision REV (same rates)")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--readers", action="store_true",
                        help="measure the ways a waiting reader notices a record instead")
    parser.add_argument("--idle", action="store_true",
                        help="measure the CPU of the alo job waiting on an empty input instead "
                             "(with --compare, per tree)")
    parser.add_argument("--produce", help=argparse.SUPPRESS)
    parser.add_argument("--consume", help=argparse.SUPPRESS)
    parser.add_argument("--reader", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.produce:
        produce(json.loads(args.produce))
        return 0
    if args.consume:
        consume(json.loads(args.consume))
        return 0
    if args.reader:
        reader(json.loads(args.reader))
        return 0
    command = " ".join([".venv/bin/python", "bench/latency.py",
                        *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    work = args.workdir or Path(tempfile.mkdtemp(prefix="weir-latency-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.readers:
            load_avg = os.getloadavg()[0]
            lines = readers(work, 300, 10.0, 0.02)
        else:
            trees: dict[str, Path | None] = {"this tree": None}
            for rev in args.compare:
                trees[rev] = snapshot(rev, work)
            for weir_path in trees.values():
                warm_bytecode(work, weir_path)
            load_avg = os.getloadavg()[0]
            if args.idle:
                lines = idle_cpu(work, trees, max(1, args.rounds), 10.0)
            else:
                lines = loads(args, trees, work)
        print("\n".join(lines))
        print(f"\nload average {load_avg:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
              f"{os.cpu_count()} cores\ncommand: {command}")
        return 0
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def loads(args: argparse.Namespace, trees: dict[str, Path | None], work: Path) -> list[str]:
    """Every scenario's maximum (unless ``--rate``), then its loads over the rounds, per tree,
    interleaved; the report's lines."""
    extra = dict(kv.split("=", 1) for kv in args.set)
    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    maxima: dict[tuple[str, str], float] = {}
    rates: dict[str, list[float]] = {}
    for name in names:
        if args.rate:
            rates[name] = [float(r) for r in args.rate.split(",")]
            continue
        for tree, path in trees.items():
            res = run_once(name, tree, path, work, 0, args.max_records, 0, extra, args.keys)
            maxima[(name, tree)] = res.throughput
            print(f"{name:<6} {tree:<12} max {res.throughput:>10,.0f} events/s, job cpu "
                  f"{res.job_cpu_us:.0f} us/event "
                  f"({args.max_records:,} events as fast as the producer goes)  load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
        top = maxima[(name, "this tree")]
        rates[name] = [top * float(p) / 100 for p in args.loads.split(",")]
    results: list[RunResult] = []
    plan = [(name, rate) for name in names for rate in rates[name]]
    for r in range(args.rounds):
        for name, rate in (plan if r % 2 == 0 else plan[::-1]):
            for tree in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                n = max(1, int(rate * args.duration))
                res = run_once(name, tree, trees[tree], work, rate, n,
                               int(rate * args.warmup), extra, args.keys)
                results.append(res)
                print(_progress(r, name, tree, rate, res), flush=True)
    return report(results, maxima)


def _progress(r: int, name: str, tree: str, rate: float, res: RunResult) -> str:
    line = (f"round {r + 1} {name:<6} {tree:<12} {rate:>9,.0f}/s -> "
            f"{res.throughput:>9,.0f}/s  cpu {res.job_cpu_us:5.0f} us/ev  "
            f"p50 {pct(res.latencies_ms, .5):7.1f} "
            f"p99 {pct(res.latencies_ms, .99):7.1f} "
            f"p99.9 {pct(res.latencies_ms, .999):7.1f} ms")
    if res.pane_latencies_ms:
        line += (f"  panes p50 {pct(res.pane_latencies_ms, .5):.1f} "
                 f"p99 {pct(res.pane_latencies_ms, .99):.1f} ms")
    if res.batch_ms:
        line += (f"  micro-batches {len(res.batch_ms)}: median "
                 f"{pct(res.batch_ms, .5):.0f} ms, max "
                 f"{max(res.batch_ms):.0f} ms")
    if res.missing:
        line += f"  MISSING {res.missing}"
    return line + f"  load {os.getloadavg()[0]:.1f}"

if __name__ == "__main__":
    sys.exit(main())
