"""Running and measuring one whole process of bench/peers_e2e.py: the children's environment,
Weir as of another git revision (:func:`snapshot`), the bytecode cache warmed once, and
:func:`timed`: wall time, max RSS and CPU time of a process and every process of its tree."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HERE", "ROOT", "Run", "child_env", "snapshot", "warm_bytecode", "descendants",
           "timed"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Run:
    wall: float
    rss_mib: float
    cpu: float = 0.0
    """CPU seconds (user + system) of every process of the run's tree, from /proc samples."""



def child_env(weir_path: Path | None = None, pycache: Path | None = None) -> dict[str, str]:
    """The children's environment. Bytecode is cached as on any installation (the peers' was
    compiled by pip): a ``PYTHONDONTWRITEBYTECODE`` in this environment is dropped and the
    cache goes to ``pycache`` (outside the repository), so a run does not pay for compiling
    Weir's ~160 modules at every start."""
    env = dict(os.environ)
    parts = (str(weir_path) if weir_path else None, str(ROOT), env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def snapshot(rev: str, work: Path) -> Path:
    """Weir as of git revision ``rev``, importable as ``weir``: its source (``git archive``)
    with ``engine``, ``stores`` and ``recovery`` linked into its ``weir`` package. Put first
    on ``PYTHONPATH`` it wins over the editable install, so one run can time two commits."""
    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    pkg = work / f"snapshot-{commit}"
    if not (pkg / "weir" / "engine").exists():
        src = work / f"source-{commit}"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        shutil.rmtree(pkg, ignore_errors=True)
        shutil.copytree(src / "weir", pkg / "weir")
        for sub in ("engine", "stores", "recovery"):
            (pkg / "weir" / sub).symlink_to(src / sub)
    return pkg


def descendants(pid: int, depth: int | None = None) -> list[int]:
    """Every process below ``pid`` (Linux /proc; [] elsewhere), or those at most ``depth``
    levels below it."""
    found, todo = [], [(pid, 0)]
    while todo:
        parent, level = todo.pop()
        if depth is not None and level >= depth:
            continue
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            try:
                kids = [int(k) for k in children.read_text().split()]
            except OSError:
                continue
            found += kids
            todo += [(k, level + 1) for k in kids]
    return found


def _peak_rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) ``pid`` spent itself, its children not counted (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None


def timed(cmd: list[str], log: Path, weir_path: Path | None = None) -> Run:
    """Wall time, max RSS and CPU time of one whole process: ``wait4`` on it, and the peak RSS
    and CPU time of every process of its tree sampled every 0.1 s (containers forked from a
    fork server are not the runner's children, so ``wait4`` does not account them). The CPU
    time is the sum over the tree's processes of what each spent itself, as last sampled (up
    to 0.1 s of each process's end is missed), the runner's own from ``wait4`` minus the
    children it reaped. On a busy machine it is the steadier measure: a run's wall time
    also holds the time it waited for a core."""
    with open(log, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env=child_env(weir_path, log.parent / "pycache"),
                                cwd=str(log.parent))  # ROOT's weir/
        # would come first on sys.path (the working directory) and hide a snapshot
        peak = [0]
        cpu: dict[int, float] = {}
        direct: set[int] = set()   # the runner's own children: its rusage holds them
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.1):
                direct.update(descendants(proc.pid, depth=1))
                for pid in descendants(proc.pid):
                    peak[0] = max(peak[0], _peak_rss_kib(pid))
                    used = _cpu_s(pid)
                    if used is not None:
                        cpu[pid] = max(cpu.get(pid, 0.0), used)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(shlex.quote, cmd))} exited {proc.returncode}:\n"
                         + log.read_text()[-3000:])
    # The runner's rusage holds the children it reaped, which were sampled too: count those
    # once (direct children only; deeper ones are reaped by their own parents).
    reaped = sum(cpu.get(pid, 0.0) for pid in direct)
    runner = max(0.0, usage.ru_utime + usage.ru_stime - reaped)
    return Run(wall, max(usage.ru_maxrss, peak[0]) / 1024, runner + sum(cpu.values()))


def warm_bytecode(work: Path, weir_path: Path | None) -> None:
    """Import every Weir module once in the children's environment (fills the bytecode
    cache, as an installation has it)."""
    code = ("import importlib, pkgutil\n"
            "for p in ('weir.stores', 'weir.recovery', 'weir.engine'):\n"
            "  for m in pkgutil.walk_packages(importlib.import_module(p).__path__, p + '.',\n"
            "                                 onerror=lambda name: None):\n"
            "    try: __import__(m.name)\n"
            "    except Exception: pass  # an optional extra (pyspark) that is not installed\n"
            "import weir.engine.cli.run, weir.engine.container.process, bench._job_tasks")
    subprocess.run([sys.executable, "-c", code], env=child_env(weir_path, work / "pycache"),
                   cwd=str(work), check=True, capture_output=True)
