"""``weir drain`` names the run it is for: refused when the job does not run (from here), and a
request the next run finds for no running job is ignored, said so and moved aside. Real
``weir run`` and ``weir drain`` processes on a real file log."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from weir.engine.control.drain import RunTarget, read_drain_request, write_drain_request
from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.engine.config.job import load_config

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[3]
RECORDS = 30_000

JOB = """\
job.name=drained
task.class=tests.engine.runloop._control_tasks:Drainer
task.inputs=filelog.src
test.marker.dir=markers
systems.filelog.root=log
systems.filelog.default.stream.samza.offset.default=oldest
task.checkpoint.path=cp
job.data.dir=data
task.drain.poll.interval.ms=20
"""


def weir(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "weir", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def make_job(tmp_path: Path, *, bounded: bool) -> Path:
    (tmp_path / "job.properties").write_text(JOB)
    (tmp_path / "markers").mkdir()
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the config's relative paths, as `weir` sees them
    try:
        config = load_config(tmp_path / "job.properties")
        registry = SystemRegistry(config)
        registry.admin("filelog").create_stream(StreamSpec("src", 2, bounded=bounded))
        producer = registry.producer("filelog")
        producer.register("test")
        producer.start()
        for i in range(RECORDS):
            producer.send("test", OutgoingMessageEnvelope(SystemStream("filelog", "src"),
                                                          f"m{i}".encode(), key=None, partition=i % 2))
        if bounded:
            producer.end_stream("src")
        producer.stop()
    finally:
        os.chdir(cwd)
    return tmp_path / "cp" / "drain-request.json"


def markers(tmp_path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((tmp_path / "markers").iterdir())}


def test_weir_drain_of_a_job_that_does_not_run_is_refused_and_writes_nothing(tmp_path):
    drain_file = make_job(tmp_path, bounded=True)

    done = weir(tmp_path, "drain", "job.properties")

    assert done.returncode == 2, done.stdout + done.stderr
    assert "job 'drained' is not running" in done.stderr
    assert str(tmp_path / "cp") in done.stderr
    assert not drain_file.exists()


@pytest.mark.parametrize("target", ["no run", "a run that ended"])
def test_a_stray_drain_request_is_ignored_by_the_next_run_which_says_so(tmp_path, target):
    drain_file = make_job(tmp_path, bounded=True)
    # What an older Weir wrote, or `weir drain` for a run that stopped before it drained.
    runs = () if target == "no run" else (RunTarget(
        "f00d", str(tmp_path / "cp" / "JOB.LOCK"), 999_999, "elsewhere", "2026-01-01T00:00:00"),)
    stray = write_drain_request(drain_file, runs=runs)

    done = weir(tmp_path, "run", "job.properties", "--status", "off")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "job 'drained' ended (end-of-stream)" in done.stdout
    assert f"{RECORDS:,}" in done.stdout  # every record processed
    assert markers(tmp_path) == {"Partition 0.eos": str(RECORDS // 2),
                                 "Partition 1.eos": str(RECORDS // 2)}
    assert f"ignoring drain request {stray.run_id}" in done.stderr
    assert not drain_file.exists()
    moved = list((tmp_path / "cp").glob("drain-request.json.ignored-*"))
    assert len(moved) == 1 and orjson.loads(moved[0].read_bytes())["uuid"] == stray.uuid


def _start(tmp_path: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "weir", "run", "job.properties", "--status",
                             "off"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait_until_running(tmp_path: Path, job: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not (tmp_path / "cp" / "Partition%201.json").exists():  # a task committed
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.02)


def test_weir_drain_names_the_running_job_which_drains(tmp_path):
    drain_file = make_job(tmp_path, bounded=False)  # never ends by itself
    job = _start(tmp_path)
    try:
        _wait_until_running(tmp_path, job)

        done = weir(tmp_path, "drain", "job.properties", "--wait", "60")

        assert done.returncode == 0, done.stdout + done.stderr
        assert f"for job 'drained' (pid {job.pid}" in done.stdout
        request = read_drain_request(drain_file)
        assert [r.pid for r in request.runs] == [job.pid]
        output, _ = job.communicate(timeout=60)
        assert job.returncode == 0, output
        assert sorted(markers(tmp_path)) == ["Partition 0.drain", "Partition 1.drain"]
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def test_weir_drain_from_another_directory_is_refused_while_the_job_runs_here(tmp_path):
    make_job(tmp_path, bounded=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    job = _start(tmp_path)
    try:
        _wait_until_running(tmp_path, job)

        done = weir(elsewhere, "drain", str(tmp_path / "job.properties"))

        assert done.returncode == 2, done.stdout + done.stderr
        assert "is not running" in done.stderr and str(elsewhere / "cp") in done.stderr
        assert "working directory" in done.stderr
        assert not (elsewhere / "cp" / "drain-request.json").exists()
        assert job.poll() is None  # the running job goes on
    finally:
        job.terminate()
        job.communicate(timeout=60)
