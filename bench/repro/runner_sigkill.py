"""Reproduce: SIGKILL only the `weir run` process of the pageviews example (2 containers,
exactly-once), let the orphaned containers stop, restart, compare every pane with a direct
computation. Loops; prints one line per run and the rate at the end.

    .venv/bin/python bench/repro/runner_sigkill.py --runs 40 --views 5000
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

LOW, HIGH, KILLS = 0.1, 0.9, 1
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pageviews"


def load_example():
    spec = importlib.util.spec_from_file_location("pv_example", EXAMPLE / "run_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_properties(workdir: Path, extra: str) -> None:
    (workdir / "app.properties").write_text(
        (EXAMPLE / "app.properties").read_text() + "\n"
        f"systems.filelog.root={workdir / 'log'}\n"
        f"job.logged.store.base.dir={workdir / 'state'}\n"
        f"job.non-logged.store.base.dir={workdir / 'state'}\n"
        f"task.checkpoint.path={workdir / 'checkpoints'}\n"
        "job.container.count=2\n" + extra)


def start(workdir: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]))
    return subprocess.Popen([sys.executable, "-m", "weir", "run", "app.properties", "--status",
                             "off"], cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (containers are children of the fork server)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out + [d for c in out for d in children(c)]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def committed(workdir: Path) -> int:
    total = 0
    from weir.engine.config.job import JobConfig, load_config
    from weir.recovery.checkpoint import FileCheckpointManager
    job = JobConfig.from_config(load_config(workdir / "app.properties"), cwd=workdir)
    manager = FileCheckpointManager(job.checkpoint_dir)
    for p in range(4):
        try:
            cp = manager.read_last(f"Partition {p}")
        except Exception:  # noqa: BLE001
            continue
        if cp is not None:
            total += cp.input_offsets.get(("filelog", "pageviews", p), -1) + 1
    return total


def one_run(example, workdir: Path, views_n: int, rng: random.Random, extra: str) -> tuple[bool, str]:
    write_properties(workdir, extra)
    config = example.app_config(workdir)
    views = example.generate(config, views_n)
    targets = sorted(int(rng.uniform(LOW, HIGH) * views_n) for _ in range(KILLS))
    killed, out1 = 0, ""
    for target in targets:
        proc = start(workdir)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and committed(workdir) < target:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.3))
        kids = children(proc.pid)
        try:
            os.kill(proc.pid, signal.SIGKILL)      # the runner only
        except ProcessLookupError:
            pass
        out, _ = proc.communicate(timeout=120)
        out1 += f"\n=== run killed at target {target} (rc {proc.returncode}):\n" + out[-1500:]
        end = time.monotonic() + 120
        while any(alive(k) for k in kids) and time.monotonic() < end:
            time.sleep(0.05)
        killed += proc.returncode == -signal.SIGKILL
    target = targets
    final = start(workdir)
    out2, _ = final.communicate(timeout=600)
    if final.returncode != 0:
        return False, f"final run exit {final.returncode}: {out2[-2000:]}"
    minutes, sessions = example.truth(views)
    from weir.engine.app.runner import prepare_application
    one = prepare_application(example.app_config(workdir))[1]
    panes = example.read_panes(one, "views-per-minute")
    emitted = Counter((p["key"], p["start"]) for p in panes)
    dup = [w for w, n in emitted.items() if n != 1]
    wrong = {(p["key"], p["start"]): (p["value"], minutes.get((p["key"], p["start"])))
             for p in panes if p["value"] != minutes.get((p["key"], p["start"]))}
    missing = set(minutes) - set(emitted)
    got_sessions = Counter((p["key"], p["start"], p["end"], p["value"])
                           for p in example.read_panes(one, "sessions"))
    ok = not dup and not wrong and not missing and got_sessions == sessions
    lost = sum(minutes.values()) - sum(p["value"] for p in panes)
    detail = (f"killed={killed} target={target} dup={len(dup)} wrong={len(wrong)} "
              f"missing={len(missing)} lost={lost} sessions_ok={got_sessions == sessions}")
    if not ok:
        detail += "\n--- killed runs:\n" + out1[-6000:] + "\n--- final:\n" + out2[-1500:]
    return ok, detail


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--views", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep-failures", type=Path)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--low", type=float, default=0.1)
    ap.add_argument("--high", type=float, default=0.9)
    ap.add_argument("--kills", type=int, default=1, help="runner kills per trial (restarts)")
    args = ap.parse_args()
    global LOW, HIGH, KILLS
    LOW, HIGH, KILLS = args.low, args.high, args.kills
    example = load_example()
    rng = random.Random(args.seed)
    bad = 0
    extra = "".join(s + "\n" for s in args.set)
    for i in range(args.runs):
        workdir = Path(tempfile.mkdtemp(prefix="weir-rk-"))
        try:
            ok, detail = one_run(example, workdir, args.views, rng, extra)
        except Exception as exc:  # noqa: BLE001
            ok, detail = False, f"error {type(exc).__name__}: {exc}"
        bad += not ok
        print(f"run {i + 1}: {'ok' if ok else 'WRONG'} {detail}", flush=True)
        if not ok and args.keep_failures:
            args.keep_failures.mkdir(parents=True, exist_ok=True)
            shutil.copytree(workdir, args.keep_failures / f"run{i + 1}")
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{bad} of {args.runs} runs wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
