"""``weir plan``, ``weir run`` with an application, ``weir run --stage N`` and ``weir drain``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engine.app._apps import batch_three_stage, make_events
from tests.engine.app._pipeline import Pipeline
from weir.engine.cli import main

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[3]


def app_dir(tmp_path: Path, app: str = "ThreeStage", **extra) -> Pipeline:
    lines = ["job.name=t", f"app.class=tests.engine.app._apps:{app}",
             f"systems.filelog.root={tmp_path / 'log'}",
             "systems.filelog.default.stream.samza.offset.default=oldest",
             f"task.checkpoint.path={tmp_path / 'checkpoints'}",
             f"job.logged.store.base.dir={tmp_path / 'state'}",
             f"job.non-logged.store.base.dir={tmp_path / 'state'}"]
    lines += [f"{k.replace('__', '.')}={v}" for k, v in extra.items()]
    (tmp_path / "app.properties").write_text("\n".join(lines) + "\n")
    return Pipeline(tmp_path, app, **extra)


def weir(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "weir", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_weir_plan_prints_stages_and_streams_as_tables(tmp_path, capsys, monkeypatch):
    p = app_dir(tmp_path)
    p.create("events", 2)
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["plan", str(tmp_path / "app.properties")]) == 0
    out = capsys.readouterr().out
    assert "3 stage(s)" in out and "stages" in out and "streams" in out
    assert "t-1-partition_by-by-user" in out and "intermediate (to create)" in out
    assert not (tmp_path / "log" / "t-1-partition_by-by-user").exists()   # nothing created


def test_weir_plan_json_is_the_plan(tmp_path, capsys, monkeypatch):
    p = app_dir(tmp_path)
    p.create("events", 2)
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["plan", str(tmp_path / "app.properties"), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["stage"] for s in plan["stages"]] == [0, 1, 2]
    streams = {s["stream"]: s for s in plan["streams"]}
    assert streams["filelog.t-1-partition_by-by-second"]["upstreamTasks"] == 2
    assert streams["filelog.t-1-partition_by-by-second"]["producerStage"] == 1


def test_weir_plan_config_prints_a_stage_jobs_config(tmp_path, capsys, monkeypatch):
    p = app_dir(tmp_path)
    p.create("events", 2)
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["plan", str(tmp_path / "app.properties"), "--config", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "job.name=t-stage-2" in lines and "app.stage=2" in lines


def test_weir_plan_refuses_a_task_config(tmp_path, capsys):
    (tmp_path / "job.properties").write_text("job.name=x\ntask.class=a:B\ntask.inputs=filelog.x\n")
    assert main(["plan", str(tmp_path / "job.properties")]) == 2
    assert "app.class" in capsys.readouterr().err


@pytest.mark.slow
def test_weir_run_of_a_three_stage_application_over_bounded_inputs_exits_0(tmp_path):
    events = make_events(51, 400, users=5)
    p = app_dir(tmp_path)
    p.create("events", 2)
    p.produce("events", events, lambda i, e: i % 2)
    done = weir(tmp_path, "run", "app.properties", "--status", "off")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ended (end-of-stream)" in done.stdout
    assert {pane["start"]: pane["value"] for _, pane, _ in p.outputs()} == batch_three_stage(events)


@pytest.mark.slow
def test_weir_run_stage_by_stage_reaches_the_same_result(tmp_path):
    events = make_events(52, 400, users=5)
    p = app_dir(tmp_path)
    p.create("events", 2)
    p.produce("events", events, lambda i, e: i % 2)
    for stage in (0, 1, 2):
        done = weir(tmp_path, "run", "app.properties", "--status", "off", "--stage", str(stage))
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"job 't-stage-{stage}' ended (end-of-stream)" in done.stdout
    assert {pane["start"]: pane["value"] for _, pane, _ in p.outputs()} == batch_three_stage(events)


def test_weir_run_stage_on_a_task_config_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "job.properties").write_text("job.name=x\ntask.class=a:B\ntask.inputs=filelog.x\n")
    assert main(["run", str(tmp_path / "job.properties"), "--stage", "1"]) == 2
    assert "--stage is for applications" in capsys.readouterr().err


@pytest.mark.slow
def test_weir_drain_stops_a_running_application_and_waits_for_it(tmp_path):
    p = app_dir(tmp_path, "WindowedCounts", task__drain__poll__interval__ms=50)
    p.create("events", 2)
    p.produce("events", make_events(53, 2000), lambda i, e: i % 2, end=False)   # never ends
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    job = subprocess.Popen([sys.executable, "-m", "weir", "run", "app.properties", "--status",
                            "off"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "checkpoints" / "Partition%200.json").exists():
            assert time.monotonic() < deadline and job.poll() is None
            time.sleep(0.05)
        drain = weir(tmp_path, "drain", "app.properties", "--wait", "60")
        assert drain.returncode == 0, drain.stdout + drain.stderr
        assert "drain requested: id" in drain.stdout and "drained: 2 task(s)" in drain.stdout
        output, _ = job.communicate(timeout=60)
        assert job.returncode == 0, output
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
