"""The README's pageviews application (examples/pageviews) as real `weir run` processes: its
config in a test's directory, a run started, the views its checkpoints cover, a run SIGKILLed
once they cover a target, and the check that every window and session was emitted exactly once
with the value of a direct computation. Shared by tests/e2e/test_pageviews_sigkill.py and
tests/e2e/test_pageviews_runner_sigkill.py."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from enum import Enum
from pathlib import Path

from tests._examples import load_example as load_examples_module

from weir.engine.config.job import JobConfig, load_config
from weir.recovery.checkpoint import FileCheckpointManager

__all__ = ["ROOT", "EXAMPLE", "Victim", "load_example", "write_properties", "start",
           "example_env", "views_committed", "kill_once_committed", "panes_of",
           "assert_every_window_once_exact"]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pageviews"


class Victim(Enum):
    """What :func:`kill_once_committed` SIGKILLs."""

    PROCESS_GROUP = "the runner and its container processes"
    RUNNER = "the runner process only (its containers are orphaned)"


def load_example():
    return load_examples_module("pageviews")


def write_properties(workdir: Path, extra: str = "") -> Path:
    """The example's app.properties with its data in ``workdir``: the file `weir run` reads."""
    path = workdir / "app.properties"
    path.write_text((EXAMPLE / "app.properties").read_text() + "\n"
                    f"systems.filelog.root={workdir / 'log'}\n"
                    f"job.logged.store.base.dir={workdir / 'state'}\n"
                    f"job.non-logged.store.base.dir={workdir / 'state'}\n"
                    f"task.checkpoint.path={workdir / 'checkpoints'}\n" + extra)
    return path


def example_env() -> dict[str, str]:
    """The environment of a `weir` command on the example (its modules importable)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]))


def start(workdir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "weir", "run", "app.properties", "--status",
                             "off"], cwd=workdir, env=example_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def views_committed(workdir: Path) -> int:
    """Source records the checkpoints cover."""
    job = JobConfig.from_config(load_config(workdir / "app.properties"), cwd=workdir)
    manager = FileCheckpointManager(job.checkpoint_dir)
    done = 0
    for p in range(4):
        try:
            cp = manager.read_last(f"Partition {p}")
        except Exception:  # noqa: BLE001 - racing a write: look again later
            continue
        if cp is not None:
            done += cp.input_offsets.get(("filelog", "pageviews", p), -1) + 1
    return done


def kill_once_committed(workdir: Path, target: int, rng: random.Random, victim: Victim,
                        wait_s: float) -> tuple[bool, str]:
    """Start the job and SIGKILL ``victim`` once the checkpoints cover ``target`` views (plus a
    random delay; at once when they already do). Returns whether it was killed, and the output
    of the run: reading it to its end also waits for orphaned containers (they write to the
    same pipe) to finish their final commit and exit. ``wait_s`` bounds each wait."""
    proc = start(workdir)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.poll() is None:
        if views_committed(workdir) >= target:
            break
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.3))
    try:
        if victim is Victim.RUNNER:
            os.kill(proc.pid, signal.SIGKILL)     # the runner only, not its process group
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    output, _ = proc.communicate(timeout=wait_s)
    if proc.returncode == -signal.SIGKILL:
        return True, output
    assert proc.returncode == 0, output
    return False, output


def panes_of(example, workdir: Path, stream: str) -> list[dict]:
    """Every pane of an output stream, read committed with the serdes the plan declares."""
    from weir.engine.app.runner import prepare_application
    return example.read_panes(prepare_application(example.app_config(workdir))[1], stream)


def assert_every_window_once_exact(example, workdir: Path, views) -> list[dict]:
    """Every per-minute window and every session emitted exactly once (read committed) with
    the value of the direct computation over ``views``; returns the per-minute panes."""
    minutes, sessions = example.truth(views)
    panes = panes_of(example, workdir, "views-per-minute")
    emitted = Counter((p["key"], p["start"]) for p in panes)
    assert [w for w, n in emitted.items() if n != 1] == []          # once each, read committed
    wrong = {(p["key"], p["start"]): (p["value"], minutes.get((p["key"], p["start"])))
             for p in panes if p["value"] != minutes.get((p["key"], p["start"]))}
    assert wrong == {} and set(emitted) == set(minutes)
    got_sessions = Counter((p["key"], p["start"], p["end"], p["value"])
                           for p in panes_of(example, workdir, "sessions"))
    assert got_sessions == sessions
    return panes
