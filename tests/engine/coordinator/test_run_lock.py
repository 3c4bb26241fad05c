"""The run lock: one job coordinator per coordinator stream. A second run of a job that already
runs, started with other directories (another ``job.data.dir``, or the same relative one from
another working directory), fails at start naming the first run, and writes nothing; the
first run goes on untouched. Real ``weir run`` processes on one file log."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from weir.engine.config.job import load_config
from weir.engine.coordinator import (CoordinatorStreamStore, ImmutableSettingError,
                                     JobAlreadyRunningError, JobCoordinator, RunLock,
                                     StateDirectories, read_run_record)
from weir.engine.coordinator.run_lock import run_lock_path
from weir.engine.coordinator.settings import CoordinatorSettings
from weir.engine.systems.registry import SystemRegistry

from tests.engine.coordinator._helpers import create_inputs, job_config
from tests._processes import run_weir
from tests.reliability._input_job import InputJob, words


# -- in one process ---------------------------------------------------------------------------

def test_a_second_coordinator_of_the_job_with_other_directories_is_refused_naming_the_first(
        tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    other = job_config(tmp_path, **{"task.checkpoint.path": str(tmp_path / "other-cp")})
    with JobCoordinator(config) as first:
        first.start()
        second = JobCoordinator(other)
        with pytest.raises(JobAlreadyRunningError) as info:
            second.start()
        second.stop()
    message = str(info.value)
    assert "job 'coord_test' (id 1) already runs" in message
    assert f"checkpoints and job lock in {tmp_path / 'checkpoints'}" in message  # the first
    assert f"checkpoints and job lock in {tmp_path / 'other-cp'}" in message  # this one
    assert "SIGTERM" in message and "another job.id" in message and "Nothing was written" in message
    assert info.value.holder["role"] == "job coordinator"
    assert info.value.path.endswith(".coordinators/__samza_coordinator_coord-test_1.LOCK")


def test_the_run_lock_is_held_while_the_coordinator_runs_and_released_when_it_stops(tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    registry, settings = SystemRegistry(config), CoordinatorSettings.from_config(config)
    with JobCoordinator(config) as coordinator:
        coordinator.start()
        record = read_run_record(registry, settings)
        assert record.directories == StateDirectories.of(config)
        assert record.cwd is not None and record.holder.details["job"] == "coord_test"
    assert read_run_record(registry, settings) is None
    assert not run_lock_path(registry, settings).exists()
    with JobCoordinator(config) as again:  # the next run takes it
        again.start()


def test_a_refused_start_releases_the_run_lock(tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    with JobCoordinator(config) as coordinator:
        coordinator.start()
    changed = job_config(tmp_path, **{"stores.counts.changelog": "filelog.elsewhere"})
    refused = JobCoordinator(changed)
    with pytest.raises(ImmutableSettingError):
        refused.start()  # (not stopped: the failed start released the lock itself)
    assert read_run_record(SystemRegistry(config), CoordinatorSettings.from_config(config)) is None
    with JobCoordinator(config) as coordinator:
        coordinator.start()


def test_a_system_without_files_has_no_run_lock(tmp_path):
    config = job_config(tmp_path, **{"systems.mem.factory": "memory",
                                     "job.coordinator.system": "mem"})
    registry, settings = SystemRegistry(config), CoordinatorSettings.from_config(config)
    assert run_lock_path(registry, settings) is None
    with RunLock.acquire(registry, settings, StateDirectories.of(config)) as lock:
        assert not lock.held and lock.path is None


# -- two `weir run` processes on one file log ------------------------------------------------

N1, N2 = 300, 200


def _wait_until_running(job: InputJob, first: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while job.input_offset() < N1 - 1 and time.monotonic() < deadline:
        assert first.poll() is None, first.communicate()[0]
        time.sleep(0.02)
    assert job.input_offset() == N1 - 1


def _stream_end(job: InputJob) -> int:
    config = load_config(job.config_path, [f"systems.filelog.root={job.base / 'log'}"])
    with CoordinatorStreamStore.for_job(config, source="test") as store:
        store.bootstrap()
        return store.next_offset


@pytest.mark.parametrize("how", ["another data dir", "another working directory"])
def test_a_second_run_with_other_directories_fails_at_start_and_the_first_runs_on(tmp_path, how):
    base = tmp_path / "job"
    base.mkdir()
    job = InputJob(base, "rocksdb")
    job.produce(words(N1))  # no STOP, no end: the first run keeps running
    first = job.start("task.commit.ms=200")
    try:
        _wait_until_running(job, first)
        before = _stream_end(job)
        if how == "another data dir":
            ours = base / "copy"
            second = job.run("task.commit.ms=200", "job.data.dir=copy", timeout=60)
        else:  # the same config, relative job.data.dir=. resolving elsewhere
            ours = tmp_path / "elsewhere"
            ours.mkdir()
            second = run_weir(ours, "run", str(job.config_path), "--status", "off", "--set",
                              f"systems.filelog.root={base / 'log'}", timeout=60)

        out = second.stdout
        assert second.returncode == 2, out
        assert "job 'reliability-count' (id 1) already runs" in out
        assert f"pid {first.pid}" in out and "command `" in out
        assert f"job.data.dir {base.resolve()} " in out  # the first run's
        assert f"job.data.dir {ours.resolve()} " in out  # this one's
        assert "Stop process" in out and "'Moving a job's data'" in out
        assert _stream_end(job) == before  # nothing written to the coordinator stream
        assert not ours.exists() or not any(ours.iterdir())  # nothing created there
        assert first.poll() is None  # the first run goes on
        job.produce(words(N2, seed=2), end=True)
        output, _ = first.communicate(timeout=90)
        assert first.returncode == 0, output
        assert "config change refused" not in output
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGKILL)
            first.communicate()
    assert job.totals() == job.truth()


def test_a_run_killed_with_sigkill_leaves_no_run_lock_behind(tmp_path):
    job = InputJob(tmp_path, "rocksdb")
    job.produce(words(N1))
    first = job.start("task.commit.ms=200")
    try:
        _wait_until_running(job, first)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    job.produce(words(N2, seed=2), end=True)
    result = job.run(timeout=90)  # the kernel dropped the lock with the process
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()


def test_read_run_record_ignores_the_record_of_a_dead_process(tmp_path):
    config = job_config(tmp_path)
    registry, settings = SystemRegistry(config), CoordinatorSettings.from_config(config)
    path = run_lock_path(registry, settings)
    path.parent.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    import socket
    path.write_text(f'{{"pid": {dead}, "host": "{socket.gethostname()}", "since": "x"}}')
    assert read_run_record(registry, settings) is None
