"""``bench/peers_e2e.py --startup``: Weir's start-up, from the spawn (or from ``run_job``) to
the first message at the task, for this tree and the ``--compare`` revisions, interleaved."""

from __future__ import annotations

import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._peers_runner import child_env, snapshot, warm_bytecode
from bench._peers_variants import SCRIPT, generate, job_file

__all__ = ["startup", "startup_child"]

_PROBE = {"task.class": "bench._job_tasks:StopAtFirst", "job.container.count": "1"}


def _startup_job(work: Path, log_root: Path) -> Path:
    """A fresh run directory with the benchmark's RocksDB job, its task the start-up probe."""
    run = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    return job_file(log_root, run, "rocksdb", _PROBE)


def startup_child(job: Path) -> None:
    """In this process: import the runner, then time ``run_job`` to the first message (the
    first call in the process, so anything imported lazily on the way counts)."""
    import logging

    from bench import _job_tasks
    from weir.engine.container.runner import run_job
    from weir.engine.container.status import StatusMode
    from weir.engine.config.job import load_config

    logging.basicConfig(level=logging.WARNING)
    config = load_config(str(job), [])
    started = time.perf_counter()
    run_job(config, status=StatusMode.OFF)
    print(f"startup-child {_job_tasks.StopAtFirst.first_at - started!r}")


def _startup_round(work: Path, log_root: Path, weir_path: Path | None,
                   tag: str) -> tuple[float, float]:
    """One whole-process start-up (``weir run``, interpreter start to the first message at the
    task) and one in-process start-up (``run_job`` to the first message), each in a new
    process with a new job (empty state, new changelog); seconds."""
    out = []
    for mode in ("whole", "in-process"):
        path = _startup_job(work, log_root)
        run = path.parent
        first_file = run / "first-at"
        log = work / f"startup-{mode}-{tag}.log"
        if mode == "whole":
            cmd = [sys.executable, "-m", "weir", "run", str(path), "--status", "off"]
        else:
            cmd = [sys.executable, str(SCRIPT), "--startup-child", str(path)]
        env = child_env(weir_path, work / "pycache") | {"WEIR_BENCH_FIRST_AT": str(first_file)}
        try:
            with open(log, "wb") as sink:
                started = time.perf_counter()
                code = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                      cwd=str(work)).returncode
            text = log.read_text()
            if code != 0 or not first_file.exists():
                raise SystemExit(f"{' '.join(map(shlex.quote, cmd))} exited {code} without "
                                 f"reaching the task:\n{text[-3000:]}")
            if mode == "whole":
                out.append(float(first_file.read_text()) - started)
            else:
                line = next(x for x in text.splitlines() if x.startswith("startup-child "))
                out.append(float(line.split()[1]))
        finally:
            shutil.rmtree(run, ignore_errors=True)
            shutil.rmtree(log_root / f"{run.name}-changelog", ignore_errors=True)
    return out[0], out[1]


def startup(work: Path, n: int, rounds: int, compare: list[str]) -> list[str]:
    """Start-up of a job over ``n // 10`` and ``n`` records (10,000 keys, 4 partitions): one
    container, the file log, a RocksDB store with a changelog, a probe task that stops the job
    at its first message. Per round and tree (this one, then each ``compare`` revision, the
    order alternating between rounds): the whole process (``python -m weir run``, from the
    spawn to the first message at the task: imports, config, coordinator, stores, inputs) and
    ``run_job`` to the first message in a new process that imported the runner first.
    Returns the report's lines."""
    trees: dict[str, Path | None] = {"this tree": None}
    for rev in compare:
        trees[rev] = snapshot(rev, work)
    for weir_path in trees.values():
        warm_bytecode(work, weir_path)
    load = os.getloadavg()[0]
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    sizes = (max(1, n // 10), n)
    for records in sizes:
        generate(work / f"log-startup-{records}", records, 10_000)
    for r in range(rounds):
        for records in sizes:
            names = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for name in names:
                whole, inproc = _startup_round(work, work / f"log-startup-{records}",
                                               trees[name], f"{records}-{name.replace(' ', '-')}")
                results.setdefault((name, records), []).append((whole, inproc))
                print(f"round {r + 1} {records:>9,} records {name:<12} whole process "
                      f"{whole * 1000:5.0f} ms  run_job {inproc * 1000:5.0f} ms  load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)

    def ms(values: list[float]) -> str:
        return (f"{statistics.median(values) * 1000:.0f} ms ({min(values) * 1000:.0f}-"
                f"{max(values) * 1000:.0f})")

    lines = [f"### Start-up: first message at the task ({rounds} interleaved rounds)", "",
             "| tree | records | whole process: spawn to first message, median (min-max) | "
             "`run_job` to first message, median (min-max) |", "|---|---:|---:|---:|"]
    for (name, records), samples in results.items():
        lines.append(f"| {name} | {records:,} | {ms([s[0] for s in samples])} | "
                     f"{ms([s[1] for s in samples])} |")
    for rev in compare:
        lines += ["", f"| ratio `{rev}` / this tree (median of per-round ratios) | records | "
                      "whole process | `run_job` |", "|---|---:|---:|---:|"]
        for records in sizes:
            pairs = list(zip(results[("this tree", records)], results[(rev, records)]))
            lines.append(f"| | {records:,} | "
                         f"{statistics.median(b[0] / a[0] for a, b in pairs):.2f}x | "
                         f"{statistics.median(b[1] / a[1] for a, b in pairs):.2f}x |")
    lines.append(f"\nload average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
                 f"{os.cpu_count()} cores")
    return lines
