"""The driver killed with SIGKILL -- in the middle of a batch, and after the operator published a
batch's version but before Spark committed the batch -- then restarted: the state and the
exactly-once parquet sink's output equal a count of the input, every batch emitted once.

Each run is a real driver process (``tests/engine/spark/_driver.py``: its own JVM and Python
workers, one process group) killed at a handshake: the driver writes ``held-<point>`` at the
point and waits; the test kills the group when the file appears.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from weir.engine.spark.durable import OperatorCheckpoint
from weir.engine.spark.partition import load_version

from tests.engine.spark._spark import write_parquet

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[3]
RNG = np.random.default_rng(7)
FILES = [pd.DataFrame({"key": [f"k{i:02d}" for i in RNG.integers(0, 30, 200)],
                       "v": RNG.integers(0, 9, 200)}) for _ in range(4)]


_RUNNING: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_driver_left():
    yield
    for proc in _RUNNING:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _RUNNING.clear()


def _driver(base: Path, hold: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    args = [sys.executable, "-m", "tests.engine.spark._driver", str(base)] + ([hold] if hold else [])
    with open(base / "driver.log", "ab") as log:
        proc = subprocess.Popen(args, cwd=REPO, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=log)
    _RUNNING.append(proc)
    return proc


def _kill_at(base: Path, proc: subprocess.Popen, point: str) -> None:
    marker = base / f"held-{point}"
    deadline = time.monotonic() + 600
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the driver ended (exit {proc.returncode}) before {point}: "
                                 f"{(base / 'driver.log').read_text()[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"the driver never reached {point}")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)          # driver, JVM and Python workers
    proc.wait()
    marker.unlink()


def _sink_rows(out: Path) -> pd.DataFrame:
    """The rows of the files the parquet sink committed (its _spark_metadata log)."""
    paths = []
    for entry in sorted((out / "_spark_metadata").iterdir()):
        if entry.name.startswith(".") or entry.name.endswith(".crc"):
            continue
        for line in entry.read_text().splitlines()[1:]:
            record = json.loads(line)
            if record.get("action") == "add":
                paths.append(record["path"].removeprefix("file://"))
    return pd.concat([pq.read_table(p).to_pandas() for p in paths], ignore_index=True)


def _expected(upto: int) -> dict[str, int]:
    return pd.concat(FILES[:upto])["key"].value_counts().to_dict()


def test_the_driver_killed_mid_batch_and_between_publish_and_commit_loses_and_doubles_nothing(
        tmp_path):
    for i, frame in enumerate(FILES):
        write_parquet(tmp_path / "src", i, frame)

    _kill_at(tmp_path, _driver(tmp_path, "mid-batch:1"), "mid-batch")
    _kill_at(tmp_path, _driver(tmp_path, "after-publish:2"), "after-publish")
    final = _driver(tmp_path)
    assert final.wait(timeout=900) == 0, (tmp_path / "driver.log").read_text()[-3000:]

    op = OperatorCheckpoint(tmp_path / "ckpt", "counts")
    state: dict[str, int] = {}
    for p in range(2):
        for k, v in load_version(op, p, 3, ["counts"])["counts"].items():
            state[k.decode()] = int.from_bytes(v, "big") - (1 << 63)
    assert state == _expected(4)

    rows = _sink_rows(tmp_path / "out")
    assert not rows.duplicated(["key", "batch"]).any()           # every batch emitted once
    for batch in range(4):
        emitted = rows[rows["batch"] == batch]
        keys = set(FILES[batch]["key"])
        assert dict(zip(emitted["key"], emitted["count"])) == {
            k: v for k, v in _expected(batch + 1).items() if k in keys}
