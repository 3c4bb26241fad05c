"""The designated writer of a broadcast adjunct store dies (SIGKILL) and another container
takes its tasks over: the new container's store is decided by the recovery table (none there:
bootstrapped from the oldest offset), its first task becomes the writer, and the clicks of the
dead container's task resume from their checkpoint, joined to the current product table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from weir.engine.config.streams import all_input_streams
from weir.engine.container.container import Container, ProgressMode
from weir.engine.jobmodel.model import ContainerModel, JobModel, build_job_model
from weir.engine.systems.registry import SystemRegistry

from tests.engine.adjunct import _support as S

ROOT = Path(__file__).resolve().parents[3]
PRODUCTS = [(f"sku{i}", {"name": f"n{i}"}) for i in range(10)]


def test_the_designated_writer_dies_and_a_new_container_takes_over(tmp_path):
    extra = {"job.container.count": "2", "task.commit.ms": "50"}
    cfg = S.config(tmp_path, **extra)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "clicks", "enriched")
    S.produce(registry, "products", PRODUCTS, partition=0)
    S.produce(registry, "clicks", [(f"sku{i}", {"sku": f"sku{i}"}) for i in range(10)],
              partition=0)
    # container 0 runs task Partition 0, the writer of its broadcast store, in its own process
    child = subprocess.Popen([sys.executable, "-m", "tests.engine.adjunct._child", "enrich",
                              str(tmp_path), "0", "2"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        S.wait_for(lambda: child.poll() is not None or len(S.read(registry, "enriched")) == 10)
        assert child.poll() is None, child.stderr.read().decode()[-3000:]
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stderr.close()
    assert (tmp_path / "state" / "products" / "broadcast-container-0").is_dir()
    # the product table changes, and more clicks come, while nobody runs Partition 0
    S.produce(registry, "products", [("sku1", {"name": "renamed"}), ("sku2", None)], partition=0)
    S.produce(registry, "clicks", [(f"sku{i}", {"sku": f"sku{i}"}) for i in range(3)],
              partition=0)
    S.produce(registry, "clicks", [("sku4", {"sku": "sku4"})], partition=1)
    S.end(registry, "products", "clicks")
    # container 1 takes over both tasks
    model = build_job_model(cfg, registry.partition_counts(all_input_streams(cfg)))
    tasks = model.tasks()
    takeover = JobModel(cfg, {"1": ContainerModel("1", tasks)})
    container = Container(cfg, takeover, "1", registry=registry, progress=ProgressMode.QUIET)
    container.run()
    (unit,) = container.adjunct.units
    assert unit.writer == "Partition 0"  # the new container's designated writer
    assert unit.stats.decision.start.value == "oldest" and unit.stats.records == 12
    out = S.read(registry, "enriched")  # partition 0's output, then partition 1's
    p0, p1 = out[:-1], out[-1:]
    # the first 10 clicks were enriched before the kill ...
    assert [m["name"] for m in p0[:10]] == [f"n{i}" for i in range(10)]
    # ... (a kill between output flush and checkpoint may process a few again: at least
    # once) and the later ones see the table as it changed while the writer was dead
    assert [(m["sku"], m["name"]) for m in p0[-3:]] == [
        ("sku0", "n0"), ("sku1", "renamed"), ("sku2", None)]
    assert len(p0) >= 13
    assert [(m["sku"], m["name"]) for m in p1] == [("sku4", "n4")]
