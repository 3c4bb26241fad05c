"""Drain requests name the runs they are for: what a starting run makes of the request it finds
(real checkpoint files, a real job lock), and the monitor acting only on requests for a run
that still runs."""

from __future__ import annotations

import os
import socket

import pytest

from weir.engine.control.drain import (DrainMonitor, DrainStart, RunTarget, drain_progress,
                                       read_drain_request, request_drain, running_runs,
                                       settle_drain_request, write_drain_request)
from weir.engine.control.errors import JobNotRunningError
from weir.recovery.checkpoint import Checkpoint, FileCheckpointManager
from weir.recovery.job_lock import JobLock
from weir.stores.config import Config


def ended_run(tmp_path) -> RunTarget:
    """A run that no longer runs: its lock names another run id."""
    return RunTarget("ended-run", str(tmp_path / "cp" / "JOB.LOCK"), 999_999, "elsewhere",
                     "2026-01-01T00:00:00+00:00", "j")


def hold(tmp_path, run_id: str = "this-run", sub: str = "") -> tuple[JobLock, RunTarget]:
    """A job lock held by this process for run ``run_id``, as `weir run` takes it."""
    directory = tmp_path / "cp" / sub if sub else tmp_path / "cp"
    lock = JobLock.acquire(directory, job="j", role="weir run", details={"run": run_id})
    holder = lock.holder
    return lock, RunTarget(run_id, str(lock.path), holder.pid, holder.host, holder.since, "j")


def checkpoint(tmp_path, task: str, control: dict) -> None:
    mgr = FileCheckpointManager(tmp_path / "cp")
    mgr.register(task)
    mgr.start()
    mgr.write(task, Checkpoint({("filelog", "src", 0): 10}, extras={"control": control}))


def test_a_run_finds_the_request_written_for_it_and_keeps_it(tmp_path):
    lock, run = hold(tmp_path)
    with lock:
        request = write_drain_request(tmp_path / "cp" / "drain-request.json", runs=(run,))

        assert settle_drain_request(tmp_path / "cp" / "drain-request.json", [tmp_path / "cp"],
                                    run) is DrainStart.FOR_THIS_RUN
        assert DrainMonitor(tmp_path / "cp" / "drain-request.json").current() == request


def test_a_request_nobody_began_for_a_run_that_ended_is_moved_aside(tmp_path):
    lock, run = hold(tmp_path)
    with lock:
        path = tmp_path / "cp" / "drain-request.json"
        stray = write_drain_request(path, runs=(ended_run(tmp_path),))
        checkpoint(tmp_path, "Partition 0", {"completedDrain": None, "drain": None})

        assert settle_drain_request(path, [tmp_path / "cp"], run) is DrainStart.IGNORED

        assert not path.exists()
        assert read_drain_request(path.with_name(f"drain-request.json.ignored-{stray.uuid[:8]}")
                                  ) == stray


def test_a_drain_an_earlier_run_began_is_continued_by_the_next_run(tmp_path):
    lock, run = hold(tmp_path)
    with lock:
        path = tmp_path / "cp" / "drain-request.json"
        begun = write_drain_request(path, runs=(ended_run(tmp_path),))
        checkpoint(tmp_path, "Partition 0", {"drain": {"runId": begun.run_id, "tasks": {}}})
        checkpoint(tmp_path, "Partition 1", {"completedDrain": begun.run_id})

        assert settle_drain_request(path, [tmp_path / "cp"], run) is DrainStart.CONTINUED

        continued = DrainMonitor(path).current()
        assert continued is not None and continued.run_id == begun.run_id
        assert continued.runs == (run,)


def test_a_completed_drain_request_is_moved_aside(tmp_path):
    lock, run = hold(tmp_path)
    with lock:
        path = tmp_path / "cp" / "drain-request.json"
        done = write_drain_request(path)  # no runs: as an older Weir wrote them
        checkpoint(tmp_path, "Partition 0", {"completedDrain": done.run_id})

        assert settle_drain_request(path, [tmp_path / "cp"], run) is DrainStart.COMPLETED
        assert path.with_name(f"drain-request.json.completed-{done.uuid[:8]}").exists()


def test_a_request_for_another_stage_that_still_runs_is_shared(tmp_path):
    stage0, other = hold(tmp_path, "stage-0-run", "stage-0")
    stage1, run = hold(tmp_path, "stage-1-run", "stage-1")
    with stage0, stage1:
        path = tmp_path / "cp" / "drain-request.json"
        write_drain_request(path, runs=(other,))

        assert settle_drain_request(path, [tmp_path / "cp" / "stage-1"], run) is DrainStart.SHARED
        assert path.exists()


def test_the_monitor_ignores_a_request_for_a_run_that_no_longer_runs_and_says_so_once(
        tmp_path, caplog):
    path = tmp_path / "drain-request.json"
    stray = write_drain_request(path, runs=(ended_run(tmp_path),))
    monitor = DrainMonitor(path, poll_ms=0)

    assert monitor.current() is None and monitor.current() is None

    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and f"ignoring drain request {stray.run_id}" in warnings[0]


def test_request_drain_names_every_running_run_and_refuses_when_none_runs(tmp_path):
    config = Config({"job.name": "j", "task.inputs": "filelog.src",
                     "task.checkpoint.path": str(tmp_path / "cp")})
    with pytest.raises(JobNotRunningError, match="job 'j' is not running"):
        request_drain(config)
    assert not (tmp_path / "cp" / "drain-request.json").exists()

    lock, run = hold(tmp_path)
    with lock:
        assert running_runs(tmp_path / "cp") == (run,)
        request = request_drain(config)
        assert request.runs == (run,) and run.pid == os.getpid()
        assert run.host == socket.gethostname()
    assert running_runs(tmp_path / "cp") == ()  # released: nothing runs


def test_drain_progress_sorts_tasks_by_what_they_did_with_a_drain(tmp_path):
    checkpoint(tmp_path, "Partition 0", {"completedDrain": "d1"})
    checkpoint(tmp_path, "Partition 1", {"drain": {"runId": "d1"}})
    checkpoint(tmp_path, "Partition 2", {"completedDrain": "d0"})

    progress = drain_progress([tmp_path / "cp"], "d1")

    assert progress.completed == ("Partition 0",) and progress.draining == ("Partition 1",)
    assert progress.other == ("Partition 2",)
