"""``weir run --runner spark`` of an application as a real child process (its own
process group: driver, JVM and Python workers), for the application tests on Spark.

* :func:`spark_overrides`: the example's directories under ``base`` and a small local Spark;
* :func:`run_to_end`: run it and wait, once more when Spark's fixed 10 s wait for a Python
  worker ran out on an overloaded machine (as an operator would; the outputs must stay exact);
* :func:`start` / :func:`kill_at`: start it holding at a fault point
  (``WEIR_SPARK_HOLD``, weir.engine.spark.faultpoint) and SIGKILL its process group when the
  held task wrote its marker -- a handshake, never a sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from weir.engine.spark.faultpoint import HOLD_ENV

__all__ = ["WORKER_DID_NOT_CONNECT", "spark_overrides", "command", "run_to_end", "start",
           "kill_at", "Driver", "pageviews_panes"]

REPO = Path(__file__).resolve().parents[3]
WORKER_DID_NOT_CONNECT = "Python worker failed to connect back"


def spark_overrides(base: Path, *extra: str) -> list[str]:
    return [f"systems.filelog.root={base / 'spark' / 'log'}",
            f"job.logged.store.base.dir={base / 'spark' / 'state'}",
            f"job.non-logged.store.base.dir={base / 'spark' / 'state'}",
            f"task.checkpoint.path={base / 'spark' / 'checkpoints'}",
            f"spark.weir.state.local.dir={base / 'replicas'}",
            f"spark.local.dir={base / 'scratch'}",
            "spark.master=local[2,3]", "spark.sql.shuffle.partitions=2", *extra]


def command(props: Path, overrides: Sequence[str], *args: str) -> list[str]:
    """``weir run <props> --runner spark``; ``props``: a config file, or an example's
    directory (its ``app.properties``)."""
    if props.is_dir():
        props = props / "app.properties"
    return [sys.executable, "-m", "weir", "run", str(props),
            "--runner", "spark", *args, *[a for o in overrides for a in ("--set", o)]]


def _env(props: Path, hold: str | None = None) -> dict[str, str]:
    home = props if props.is_dir() else props.parent    # task modules beside the config
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(home), str(REPO)])}
    env.pop(HOLD_ENV, None)
    if hold:
        env[HOLD_ENV] = hold
    return env


def run_to_end(props: Path, overrides: Sequence[str], *args: str,
               timeout: float = 1500) -> subprocess.CompletedProcess:
    """Run to its end; a second time when the first failed on a Python worker's start."""
    cmd = command(props, overrides, *args)
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(props), timeout=timeout)
    if done.returncode != 0 and WORKER_DID_NOT_CONNECT in done.stdout + done.stderr:
        done = subprocess.run(cmd, capture_output=True, text=True, env=_env(props),
                              timeout=timeout)
    return done


class Driver:
    """A running ``weir run --runner spark`` (its own session: killed as a group)."""

    def __init__(self, props: Path, overrides: Sequence[str], log: Path, hold: str | None,
                 args: Sequence[str] = ()):
        self.log = log
        self.cmd = command(props, overrides, *args)
        self.env = _env(props, hold)
        self.respawned = False
        self.proc = self._spawn()

    def _spawn(self) -> subprocess.Popen:
        with open(self.log, "ab") as out:
            return subprocess.Popen(self.cmd, cwd=REPO, env=self.env, start_new_session=True,
                                    stdout=out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def respawn_if_worker_failed(self) -> bool:
        """The driver ended because a Python worker did not connect back in time: start it
        again (once)."""
        if WORKER_DID_NOT_CONNECT in self.output() and not self.respawned:
            self.respawned = True
            self.proc = self._spawn()
            return True
        return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def start(props: Path, overrides: Sequence[str], log: Path, hold: str | None = None,
          *args: str) -> Driver:
    return Driver(props, overrides, log, hold, args)


def kill_at(driver: Driver, marker: Path, *, deadline_s: float = 900) -> int:
    """Wait for ``marker`` (the held task's pid), then SIGKILL the driver's process group;
    returns the held worker's pid."""
    deadline = time.monotonic() + deadline_s
    while not marker.exists():
        if driver.proc.poll() is not None and not driver.respawn_if_worker_failed():
            raise AssertionError(f"the driver ended (exit {driver.proc.returncode}) before "
                                 f"{marker.name}: {driver.output()[-4000:]}")
        if time.monotonic() > deadline:
            driver.kill()
            raise AssertionError(f"the driver never reached {marker.name}: "
                                 f"{driver.output()[-4000:]}")
        time.sleep(0.2)
    pid = int(marker.read_text())
    driver.kill()                        # driver, JVM and Python workers
    return pid


def pageviews_panes(example, config) -> dict[str, Counter]:
    """The panes the pageviews application (``example``) wrote under ``config``, per output
    stream, as a multiset (a pane written twice counts twice)."""
    from weir.engine.app.runner import prepare_application

    _, job = prepare_application(config)
    return {stream: Counter(tuple(sorted(p.items())) for p in example.read_panes(job, stream))
            for stream in ("views-per-minute", "sessions")}
