"""CPU time of ``weir run`` from the interpreter's start to the first message at the task
(issue 27, start-up): the CPU clock, so a busy machine (waiting for a core) does not count.

The job is bench/peers_e2e.py's start-up job (one container, the file log, a RocksDB store
with a changelog, ``bench._job_tasks:StopAtFirst`` as its task), each round a new process with
empty state. Per round and tree: the whole process's CPU seconds when the task sees its first
message (``time.process_time`` in the task), and the CPU of ``import weir.engine.cli`` alone
(``-X importtime`` is not used: it adds its own cost). With ``--compare REV`` the revision
runs interleaved (peers_e2e's snapshots).

Run::

    .venv/bin/python bench/startup_cpu.py --rounds 5
    .venv/bin/python bench/startup_cpu.py --rounds 5 --compare main
    .venv/bin/python bench/startup_cpu.py --set job.container.count=auto   # the fork server too
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers_e2e  # noqa: E402  (bench/ is not a package on sys.path)
from bench._peers_startup import _PROBE  # noqa: E402  (the repository root: peers_e2e put it on sys.path)
from bench._peers_variants import generate, job_file  # noqa: E402

__all__ = ["main"]

_IMPORT_CLI = ("import time, weir.engine.cli; "
               "print(repr(time.process_time()))")


def _round(work: Path, log_root: Path, weir_path: Path | None,
           extra: dict[str, str]) -> tuple[float, float]:
    """One whole-process run to the first message and one ``import weir.engine.cli``:
    CPU seconds of each."""
    run = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    path = job_file(log_root, run, "rocksdb", _PROBE | extra)
    cpu_file = run / "first-cpu"
    env = peers_e2e._env(weir_path, work / "pycache") | {"WEIR_BENCH_FIRST_CPU": str(cpu_file)}
    try:
        proc = subprocess.run([sys.executable, "-m", "weir", "run", str(path), "--status", "off"],
                              env=env, cwd=str(work), capture_output=True, text=True)
        if proc.returncode != 0 or not cpu_file.exists():
            raise SystemExit(f"weir run exited {proc.returncode} without reaching the task:\n"
                             f"{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
        first = float(cpu_file.read_text())
    finally:
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(log_root / f"{run.name}-changelog", ignore_errors=True)
    out = subprocess.run([sys.executable, "-c", _IMPORT_CLI], env=env, cwd=str(work),
                         capture_output=True, text=True, check=True).stdout
    return first, float(out.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--compare", action="append", default=[], metavar="REV")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a job config key (repeatable)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    extra = dict(kv.split("=", 1) for kv in args.overrides)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="weir-startup-"))
    work.mkdir(parents=True, exist_ok=True)
    trees: dict[str, Path | None] = {"this tree": None}
    for rev in args.compare:
        trees[rev] = peers_e2e.snapshot(rev, work)
    for weir_path in trees.values():
        peers_e2e.warm_bytecode(work, weir_path)
    log_root = work / f"log-startup-{args.records}"
    generate(log_root, args.records, 10_000)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for name in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
            first, cli = _round(work, log_root, trees[name], extra)
            results[name].append((first, cli))
            print(f"round {r + 1} {name:<12} first message {first:.3f} s CPU  "
                  f"import weir.engine.cli {cli:.3f} s CPU  load {os.getloadavg()[0]:.1f}",
                  flush=True)
    loads.append(os.getloadavg()[0])
    print("\n| tree | `weir run` to first message, CPU s, median (min-max) | "
          "`import weir.engine.cli`, CPU s, median (min-max) |\n|---|---:|---:|")
    for name, samples in results.items():
        cols = []
        for i in (0, 1):
            vals = [s[i] for s in samples]
            cols.append(f"{statistics.median(vals):.3f} ({min(vals):.3f}-{max(vals):.3f})")
        print(f"| {name} | {cols[0]} | {cols[1]} |")
    print(f"\n{args.rounds} interleaved rounds, {args.records:,} records, load average "
          f"{loads[0]:.1f} at the start, {loads[1]:.1f} at the end; {os.cpu_count()} cores")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
