"""Exactly-once on vs off, and read_committed vs read_uncommitted, side by side in one run.

Jobs (the embedded runner, ``run_job``: the code path of ``weir run``; one container, status
off), on the workload of ``bench/job_compare.py`` (N messages in one file-log partition, keys
``key%05d`` uniform over 10,000 keys, 8-byte values), at the default ``task.commit.ms``:

==================  ==========================================================================
``count-alo``       count task, RocksDB store with a changelog, at-least-once (the default)
``count-eos``       the same with ``task.processing.guarantee=exactly_once``
``emit-alo``        the word count's shape: count per key and every new count sent to an
                    output stream (N outputs), at-least-once
``emit-eos``        the same, exactly-once
==================  ==========================================================================

Consumers (``FileLogConsumer.poll`` loops until every record is delivered) over one
transactional log: N records written by a transactional producer in transactions of
``--txn-records`` records, one in ten aborted, plus plain records from a second producer
between them:

==================  ==========================================================================
``read-uncommitted``  every record (aborted ones included)
``read-committed``    committed and plain records: the scout walks ahead, aborted batches
                      are skipped whole
==================  ==========================================================================

Rounds are interleaved; rates are per second of the run loop (jobs) or of the poll loop
(consumers); best of ``--rounds``. Goals: count-eos and emit-eos >= 0.85x of their
at-least-once twins; read-committed >= 0.9x of read-uncommitted (measured per delivered
record, the only fair unit when the two deliver different counts, and per record of the log).

Run::

    .venv/bin/python bench/exactly_once.py                       # 1M messages, 3 rounds
    .venv/bin/python bench/exactly_once.py --n 300000 --rounds 5
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.job_compare import base_config, generate, job_config, _fresh_output  # noqa: E402
from weir.engine.container.runner import ExitCode, run_job  # noqa: E402
from weir.engine.container.status import StatusMode  # noqa: E402
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.filelog import FileLogConsumer, FileLogProducer, FileLogSettings  # noqa: E402
from weir.engine.systems.filelog.transactions import TransactionalProducer  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.stores.config import Config  # noqa: E402

TXN = SystemStream("filelog", "bench-txn")
TXN_SSP = SystemStreamPartition("filelog", TXN.stream, 0)


def run_job_variant(work: Path, task: str, eos: bool) -> float:
    _fresh_output(work)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    config = dict(job_config(work, run, task, "rocksdb"))
    config["job.id"] = run.name.replace("_", "-")  # a new job each run (its own coordinator stream)
    if eos:
        config["task.processing.guarantee"] = "exactly_once"
    result = run_job(Config(config), status=StatusMode.OFF)
    if result.exit_code is not ExitCode.OK:
        raise SystemExit("\n".join(result.summary_lines()))
    shutil.rmtree(run, ignore_errors=True)
    return result.containers[0].loop_seconds


def make_transactional_log(work: Path, n: int, per_txn: int) -> tuple[int, int]:
    """The consumers' log; returns (records written, records committed or plain)."""
    settings = FileLogSettings.from_config("filelog", Config(base_config(work)))
    registry = SystemRegistry(Config(base_config(work)))
    registry.admin("filelog").create_stream(StreamSpec(TXN.stream, 1))
    producer = TransactionalProducer(settings, "bench/txn")
    producer.init_transactions()
    plain = FileLogProducer(settings)
    plain.register("plain")
    value = b"v" * 8
    written = visible = 0
    txn = 0
    while written < n:
        txn += 1
        count = min(per_txn, n - written)
        for i in range(count):
            producer.send("t", OutgoingMessageEnvelope(TXN, value, key=b"key%05d" % (i % 10_000),
                                                       partition=0))
        written += count
        if txn % 10 == 0:
            producer.flush()
            producer.abort()
        else:
            producer.prepare()
            producer.commit()
            visible += count
        plain.send("plain", OutgoingMessageEnvelope(TXN, value, key=None, partition=0))
        plain.flush("plain")
        written += 1
        visible += 1
    producer.stop()
    plain.stop()
    return written, visible


def consume(work: Path, isolation: str) -> tuple[float, int, float]:
    """(seconds, records delivered, CPU seconds) of a poll loop reading the whole
    transactional log. CPU time is the steadier measure on a shared machine (the reader does
    no I/O wait: the log is in the page cache)."""
    settings = FileLogSettings.from_config("filelog", Config(base_config(work)))
    consumer = FileLogConsumer(settings)
    consumer.set_isolation_level(isolation)
    consumer.register(TXN_SSP, 0)
    consumer.start()
    got = 0
    started = time.perf_counter()
    cpu = time.process_time()
    poll = consumer.poll
    ssps = (TXN_SSP,)
    while True:
        batch = poll(ssps, 0.05).get(TXN_SSP)
        if not batch:
            break
        got += len(batch)
    seconds = time.perf_counter() - started - 0.05  # the last, empty poll's wait
    cpu = time.process_time() - cpu
    consumer.stop()
    return seconds, got, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--txn-records", type=int, default=5_000,
                        help="records per transaction of the consumers' log (default 5,000)")
    parser.add_argument("--only", default="jobs,consumers", help="jobs, consumers or both")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="weir-bench-eos-"))
    parts = {p.strip() for p in args.only.split(",")}
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores shared)")
    try:
        generate(work, args.n, args.keys)
        written = visible = 0
        if "consumers" in parts:
            written, visible = make_transactional_log(work, args.n, args.txn_records)
            print(f"transactional log: {written:,} records, {visible:,} committed or plain")
        variants = []
        if "jobs" in parts:
            variants += [("count-alo", lambda: run_job_variant(work, "Count", False), args.n),
                         ("count-eos", lambda: run_job_variant(work, "Count", True), args.n),
                         ("emit-alo", lambda: run_job_variant(work, "CountEmit", False), args.n),
                         ("emit-eos", lambda: run_job_variant(work, "CountEmit", True), args.n)]
        if "consumers" in parts:
            variants += [("read-uncommitted", lambda: consume(work, "read_uncommitted"), None),
                         ("read-committed", lambda: consume(work, "read_committed"), None)]
        rates: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        per_log: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        per_cpu: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        for r in range(args.rounds):
            for name, fn, n in variants:
                out = fn()
                if isinstance(out, tuple):
                    seconds, delivered, cpu = out
                    rates[name].append(delivered / seconds)
                    per_log[name].append(written / seconds)
                    per_cpu[name].append(delivered / cpu)
                    extra = f", {delivered:,} delivered, {delivered / cpu:,.0f} /CPU s"
                else:
                    seconds = out
                    rates[name].append(n / seconds)
                    extra = ""
                print(f"round {r + 1} {name:<17} {rates[name][-1]:>11,.0f} /s  "
                      f"({seconds:.2f} s{extra}, load {os.getloadavg()[0]:.1f})", flush=True)
        print()
        print("| variant | best /s | ratio of bests | per round: median (min-max) | goal |")
        print("|---|---:|---:|---:|---|")
        pairs = [("count-eos", "count-alo", 0.85), ("emit-eos", "emit-alo", 0.85),
                 ("read-committed", "read-uncommitted", 0.9)]
        for test, base, goal in pairs:
            if test not in rates or base not in rates:
                continue
            for label, table in (("", rates), (" (per log record)", per_log),
                                 (" (per CPU second)", per_cpu)):
                if label and not table[test]:
                    continue
                best_t, best_b = max(table[test]), max(table[base])
                rounds = sorted(t / b for t, b in zip(table[test], table[base]))
                ratio = best_t / best_b
                print(f"| `{base}`{label} | {best_b:,.0f} | | | |")
                print(f"| `{test}`{label} | {best_t:,.0f} | {ratio:.2f}x | "
                      f"{statistics.median(rounds):.2f}x ({rounds[0]:.2f}-{rounds[-1]:.2f}) | "
                      f">= {goal}x: {'met' if ratio >= goal else 'MISSED'} |")
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
        return 0
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
