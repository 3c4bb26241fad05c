"""Versioned bounded datasets in a running container: the model is replaced while the job runs
on a thread pool and every process call sees one version from start to end; the serving
version is checkpointed; a process killed (SIGKILL) while it builds the next version serves
the current one at restart and resumes the next."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from weir.engine.systems.registry import SystemRegistry
from weir.recovery.adjunct import AdjunctOffsets, read_adjunct_offsets
from weir.recovery.checkpoint import FileCheckpointManager

from tests.engine.adjunct import _support as S

ROOT = Path(__file__).resolve().parents[3]


def clicks(n: int, start: int = 0):
    return [(f"c{i}", {"sku": f"sku{i % 3}"}) for i in range(start, start + n)]


def model_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "model" / "broadcast-container-0"


def test_a_model_replaced_while_running_is_seen_whole_by_every_call_under_a_thread_pool(tmp_path):
    cfg = S.model_config(tmp_path)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "model", "clicks", "scored")
    S.model_version(registry, 1)
    S.produce(registry, "clicks", clicks(200))
    container = S.build(cfg)
    thread, errors = S.running(container)
    try:
        S.wait_for(lambda: len(S.read(registry, "scored")) >= 50 or errors)
        S.model_version(registry, 2)  # replaced while the clicks are processed
        S.wait_for(lambda: errors or S.store_of(container, "model").serving == 2)
        S.produce(registry, "clicks", clicks(100, 200))
    finally:
        S.end(registry, "products", "model", "clicks")
        thread.join(120)
    assert not errors, errors
    out = S.read(registry, "scored")
    assert len(out) == 300
    assert all(m["first"] == m["last"] and m["rows"] == [m["first"]] for m in out), \
        [m for m in out if not (m["first"] == m["last"] and m["rows"] == [m["first"]])][:3]
    assert {m["first"] for m in out} <= {1, 2}
    assert sorted(p.name for p in model_dir(tmp_path).iterdir() if p.is_dir()) == ["v2", "v3"]
    cp = FileCheckpointManager(tmp_path / "checkpoints")
    cp.register("Partition 0")
    cp.start()
    extras = cp.read_last("Partition 0").extras["adjunct"]["model"]
    cp.stop()
    assert (extras["serving"], extras["building"]) == (2, 3)


def test_a_crash_while_building_serves_the_current_version_and_resumes_the_next(tmp_path):
    cfg = S.model_config(tmp_path)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "model", "clicks", "scored")
    S.model_version(registry, 1)
    S.model_version(registry, 2, rows=20, seal=False)  # the first 20 rows of version 2
    child = subprocess.Popen([sys.executable, "-m", "tests.engine.adjunct._child", "model",
                              str(tmp_path), "0", "1"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def built_part_of_version_2():
            recorded = read_adjunct_offsets(model_dir(tmp_path))
            return (isinstance(recorded, AdjunctOffsets) and recorded.building == 2 and recorded.offsets.get("0", -1) >= 52)
        S.wait_for(lambda: child.poll() is not None or built_part_of_version_2())
        assert child.poll() is None, child.stderr.read().decode()[-3000:]
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stderr.close()
    # restart: version 1 is served; version 2 goes on from its 20 rows
    S.produce(registry, "clicks", clicks(30))
    container = S.build(cfg)
    thread, errors = S.running(container)
    try:
        S.wait_for(lambda: len(S.read(registry, "scored")) == 30 or errors)
        assert S.store_of(container, "model").serving == 1
        S.model_version(registry, 2, first=20)  # the rest of version 2, and its seal
        S.wait_for(lambda: errors or S.store_of(container, "model").serving == 2)
        S.produce(registry, "clicks", clicks(30, 30))
    finally:
        S.end(registry, "products", "model", "clicks")
        thread.join(120)
    assert not errors, errors
    out = S.read(registry, "scored")
    by_click = {int(m["click"][1:]): m["first"] for m in out}
    assert [by_click[i] for i in range(30)] == [1] * 30  # before the seal: the current version
    assert [by_click[i] for i in range(30, 60)] == [2] * 30
    assert all(m["rows"] == [m["first"]] for m in out)
    assert len(S.contents(cfg, store="model")) == 51  # version 2 whole: 20 + 30 rows + version
