"""The README's main job on Spark: ``weir run job.properties --runner spark --trigger
available-now`` gives the same multiset of joined amounts and the same end-of-stream totals as
the embedded runner on the same input (real Spark in local mode, in a child process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "currency_join"


@pytest.fixture
def example():
    sys.path.insert(0, str(EXAMPLE))
    try:
        from generate import generate
        from run_example import job_config, read_outputs

        yield generate, job_config, read_outputs
    finally:
        sys.path.remove(str(EXAMPLE))


def _write_properties(path: Path, config) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in sorted(config.items())))


def test_the_currency_job_on_spark_matches_the_embedded_runner(example, tmp_path):
    from weir.engine.container.runner import ExitCode, run_job

    generate, job_config, read_outputs = example
    embedded = job_config(tmp_path / "embedded")
    truth = generate(embedded, transactions=800, replay=400)
    assert run_job(embedded).exit_code is ExitCode.OK
    want_amounts, want_totals = read_outputs(embedded)

    spark_dir = tmp_path / "spark"
    on_spark = job_config(spark_dir, ["spark.weir.max.records.per.batch=700",
                                      f"spark.weir.state.local.dir={tmp_path / 'replicas'}",
                                      f"spark.local.dir={tmp_path / 'scratch'}",
                                      "spark.master=local[2]",
                                      "metrics.reporter.interval.ms=1",
                                      f"metrics.reporter.file={tmp_path / 'metrics.jsonl'}"])
    generate(on_spark, transactions=800, replay=400)
    props = EXAMPLE / "job.properties"
    overrides = [f"{k}={on_spark[k]}" for k in sorted(on_spark) if on_spark[k] != _base(props, k)]
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE)}
    done = subprocess.run(
        [sys.executable, "-m", "weir", "run", str(props), "--runner", "spark",
         "--trigger", "available-now", *[a for o in overrides for a in ("--set", o)]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ended (end-of-stream)" in done.stdout
    assert re.search(r"out\s+filelog\.amounts\s+1,200\b", done.stdout), done.stdout
    got_amounts, got_totals = read_outputs(on_spark)
    assert Counter(m["amount"] for _, m in got_amounts) == \
        Counter(m["amount"] for _, m in want_amounts)
    assert sorted(k for k, _ in got_amounts) == sorted(truth.amounts)
    assert got_totals == want_totals == truth.totals
    # every batch's observed metrics reached Weir's metrics reporter
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    per_batch = [v for line in lines for k, v in line["metrics"].items()
                 if k.startswith("weir.")]
    assert sum(m["rows_in"] for m in per_batch) >= 1200       # transactions, plus rates
    assert per_batch[-1]["state_rows"] > 0


def _base(props: Path, key: str) -> str | None:
    for line in props.read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1]
    return None


def test_the_job_on_spark_is_refused_while_it_runs_embedded(example, tmp_path):
    # One run of a job at a time, embedded or on Spark: the run lock beside the coordinator
    # stream is held by the embedded run's job coordinator (here: a process holding it).
    from weir.engine.coordinator.errors import JobAlreadyRunningError
    from weir.engine.spark.jobrunner import run_on_spark
    from weir.stores.config import Config

    generate, job_config, _ = example
    config = job_config(tmp_path / "job")
    generate(config, transactions=10, replay=0)
    props = tmp_path / "job.properties"
    _write_properties(props, config)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\n"
         "from weir.engine.config.job import load_config\n"
         "from weir.engine.coordinator.guard import StateDirectories\n"
         "from weir.engine.coordinator.run_lock import RunLock\n"
         "from weir.engine.coordinator.settings import CoordinatorSettings\n"
         "from weir.engine.systems.registry import SystemRegistry\n"
         f"config = load_config({str(props)!r}, [])\n"
         "lock = RunLock.acquire(SystemRegistry(config), CoordinatorSettings.from_config(config),\n"
         "                       StateDirectories.of(config))\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n"],
        env={**os.environ, "PYTHONPATH": str(EXAMPLE)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(JobAlreadyRunningError, match=f"pid {holder.pid}.*`weir run "
                                                         f"--runner spark` needs the job stopped"):
            run_on_spark(Config(dict(config)))
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
