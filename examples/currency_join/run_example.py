"""Generate the currency example's data, run the job to its end, check and summarize.

One command, a few seconds by default::

    python examples/currency_join/run_example.py                 # 20k + 10k transactions
    python examples/currency_join/run_example.py --transactions 1000000 --replay 200000
    python examples/currency_join/run_example.py --runner spark     # the same job on Spark

Everything lives in a fresh temporary directory (``--workdir DIR`` to choose it, ``--keep``
to keep it). The job runs embedded through the same runner as ``weir run``; afterwards every
``amounts`` message and the final total of every currency are checked against a direct
computation over the generated input. Exit code 0 when everything matches.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # currency_task and generate sit beside this file

from weir.engine.config.job import load_config  # noqa: E402
from weir.engine.model import SystemStream, SystemStreamPartition  # noqa: E402
from weir.engine.container.runner import ExitCode, run_job  # noqa: E402
from weir.engine.container.status import StatusMode, configure_logging  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.recovery.storage import ProgressMode  # noqa: E402
from weir.stores.config import Config  # noqa: E402

from generate import CURRENCIES, PARTITIONS, Truth, generate  # noqa: E402

__all__ = ["job_config", "read_stream", "read_outputs", "check", "main"]

_DIRS = ("log", "state", "checkpoints")


def job_config(workdir: Path, overrides: Sequence[str] = ()) -> Config:
    """The example's job.properties with its directories inside ``workdir``: the log in
    ``workdir/log``, stores and checkpoints in ``workdir/state`` and ``workdir/checkpoints``
    (``job.data.dir``)."""
    return load_config(HERE / "job.properties", [
        f"systems.filelog.root={workdir / 'log'}",
        f"job.data.dir={workdir}",
        *overrides])


def read_stream(registry: SystemRegistry, stream: str) -> list[tuple[object, object]]:
    """Every ``(key, message)`` of a file-log stream, partition by partition, deserialized."""
    ss = SystemStream("filelog", stream)
    serdes = registry.serdes_for(ss)
    ssps = [SystemStreamPartition("filelog", stream, p) for p in range(PARTITIONS)]
    out: list[tuple[object, object]] = []
    consumer = registry.consumer("filelog")
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    per_partition: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    try:
        while True:
            got = consumer.poll(ssps, 0.05)
            if not any(got.values()):
                break
            for ssp, envelopes in got.items():
                for env in envelopes:
                    if env.is_end_of_stream:
                        continue
                    typed = serdes.deserialize(env)
                    per_partition[ssp.partition].append((typed.key, typed.message))
    finally:
        consumer.stop()
    for p in range(PARTITIONS):
        out.extend(per_partition[p])
    return out


def read_outputs(config: Config) -> tuple[list[tuple[str, dict]], dict[str, dict]]:
    """``(amounts messages, final total per currency)``: the last ``currency-totals``
    message of each currency is its final total."""
    registry = SystemRegistry(config)
    amounts = read_stream(registry, "amounts")
    totals: dict[str, dict] = {}
    for code, message in read_stream(registry, "currency-totals"):
        totals[code] = {"total": message["total"], "count": message["count"]}
    return amounts, totals


def check(truth: Truth, amounts: list[tuple[str, dict]], totals: dict[str, dict]) -> list[str]:
    """Problems found comparing the outputs with the truth (empty: everything matches)."""
    problems = []
    got = {}
    for key, message in amounts:
        if key in got and got[key] != message["amount"]:
            problems.append(f"transaction {key}: two different amounts {got[key]!r} and "
                            f"{message['amount']!r}")
        got[key] = message["amount"]
    missing = truth.amounts.keys() - got.keys()
    if missing:
        problems.append(f"{len(missing)} transactions have no amount, e.g. {sorted(missing)[:3]}")
    wrong = [k for k in got if truth.amounts.get(k) != got[k]]
    if wrong:
        k = wrong[0]
        problems.append(f"{len(wrong)} amounts differ, e.g. {k}: {got[k]!r} instead of "
                        f"{truth.amounts.get(k)!r}")
    if totals != truth.totals:
        bad = sorted(c for c in truth.totals.keys() | totals.keys()
                     if totals.get(c) != truth.totals.get(c))
        problems.append(f"totals differ for {', '.join(bad)}")
    return problems


def _print_totals(totals: dict[str, dict]) -> None:
    print("  currency  symbol  transactions           total")
    for code, t in sorted(totals.items(), key=lambda kv: -kv[1]["count"]):
        print(f"  {code:<8}  {CURRENCIES[code][0]:<6}  {t['count']:>12,}  {t['total']:>14,}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the currency join example end to end.")
    parser.add_argument("--transactions", type=int, default=20_000,
                        help="real-time transactions to generate (default 20,000)")
    parser.add_argument("--replay", type=int, default=10_000,
                        help="replayed older transactions to generate (default 10,000)")
    parser.add_argument("--workdir", type=Path, help="where the log, stores and checkpoints "
                        "go (default: a new temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a job config key")
    parser.add_argument("--status", choices=[m.value for m in StatusMode], default="auto")
    parser.add_argument("--verbose", "-v", action="store_true", help="log at INFO")
    parser.add_argument("--runner", choices=("embedded", "spark"), default="embedded",
                        help="run the job embedded (default) or on Spark, as one streaming "
                             "query in local mode (needs `pip install 'weir[spark]'` and "
                             "Java 17+; docs/SPARK.md)")
    args = parser.parse_args(argv)

    mode = StatusMode(args.status)
    console = configure_logging(mode, level=logging.INFO if args.verbose else logging.WARNING)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="weir-currency-join-"))
    for name in _DIRS:
        shutil.rmtree(workdir / name, ignore_errors=True)
    config = job_config(workdir, args.overrides)
    try:
        started = time.perf_counter()
        truth = generate(config, transactions=args.transactions, replay=args.replay)
        generated = time.perf_counter() - started
        print(f"generated {sum(truth.records.values()):,} input records in {generated:.2f} s")
        if args.runner == "spark":
            from weir.engine.spark.jobrunner import Trigger, run_on_spark

            result = run_on_spark(config, trigger=Trigger.AVAILABLE_NOW, config_dir=str(HERE))
        else:
            result = run_job(config, status=mode, console=console,
                             progress=None if args.verbose else ProgressMode.QUIET)
        for line in result.summary_lines():
            print(line)
        if result.exit_code is not ExitCode.OK:
            return int(result.exit_code)
        amounts, totals = read_outputs(config)
        _print_totals(totals)
        problems = check(truth, amounts, totals)
        for problem in problems:
            print(f"MISMATCH: {problem}")
        if not problems:
            print(f"checked: {len(truth.amounts):,} amounts and {len(truth.totals)} currency "
                  f"totals match a direct computation over the input")
        return 1 if problems else 0
    finally:
        if args.keep or args.workdir:
            print(f"work directory: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
