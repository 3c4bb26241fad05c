"""The job lock: one run (or checkpoint command) of a job at a time, and never beside the
container processes of an earlier run."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap

import pytest

from weir.recovery.errors import JobLockedError, RecoveryError
from weir.recovery.job_lock import JOB_LOCK_FILE, JobLock, container_lock_path, hold_container_lock


def test_a_second_locker_gets_an_error_naming_pid_host_role_and_lock_file(tmp_path):
    with JobLock.acquire(tmp_path, job="wc", role="weir run") as lock:
        assert lock.held and (tmp_path / JOB_LOCK_FILE).exists()
        with pytest.raises(JobLockedError) as err:
            JobLock.acquire(tmp_path, job="wc", role="weir checkpoint reset")
    message = str(err.value)
    assert f"pid {os.getpid()}" in message and "weir run" in message
    assert str(tmp_path / JOB_LOCK_FILE) in message and "nothing was changed" in message
    assert err.value.holder["role"] == "weir run"
    JobLock.acquire(tmp_path, job="wc").release()  # released: free again


def _hold_in_child(code: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_lock_held_by_another_process_is_released_when_it_dies(tmp_path):
    child = _hold_in_child(f"""
        import sys, time
        from weir.recovery.job_lock import JobLock
        lock = JobLock.acquire({str(tmp_path)!r}, job="wc")
        print("held", flush=True)
        time.sleep(60)
    """)
    try:
        with pytest.raises(JobLockedError, match=f"pid {child.pid}"):
            JobLock.acquire(tmp_path, job="wc")
    finally:
        child.kill()
        child.wait()
    JobLock.acquire(tmp_path, job="wc").release()


def test_a_container_of_an_earlier_run_keeps_a_new_run_out(tmp_path):
    child = _hold_in_child(f"""
        import time
        from weir.recovery.job_lock import hold_container_lock
        lock = hold_container_lock({str(tmp_path)!r}, "1", job="wc")
        print("held", flush=True)
        time.sleep(60)
    """)
    try:
        with pytest.raises(JobLockedError) as err:
            JobLock.acquire(tmp_path, job="wc")
        assert "a container of an earlier run" in str(err.value)
        assert f"pid {child.pid}" in str(err.value)
        assert str(container_lock_path(tmp_path, "1")) in str(err.value)
        assert not (tmp_path / JOB_LOCK_FILE).exists()  # the job lock was given back
    finally:
        child.kill()
        child.wait()
    with JobLock.acquire(tmp_path, job="wc"):
        pass


def test_a_forked_child_does_not_keep_the_job_lock(tmp_path):
    lock = JobLock.acquire(tmp_path, job="wc")
    pid = os.fork()
    if pid == 0:  # the child: its copy of the lock file was closed at fork
        os._exit(0 if not lock.held else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    lock.release()
    JobLock.acquire(tmp_path, job="wc").release()


def test_container_locks_of_this_process_are_separate_files(tmp_path):
    with JobLock.acquire(tmp_path, job="wc"):
        first = hold_container_lock(tmp_path, "0", job="wc")
        with pytest.raises(JobLockedError, match="container 0"):
            hold_container_lock(tmp_path, "0", job="wc")
        first.release()


def test_an_unwritable_place_is_an_error_naming_the_directory_and_the_key(tmp_path):
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o500)
    try:
        if os.access(tmp_path / "ro", os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(RecoveryError, match="task.checkpoint.path"):
            JobLock.acquire(tmp_path / "ro" / "checkpoints", job="wc")
    finally:
        os.chmod(tmp_path / "ro", 0o700)


# -- a look at a job whose directory cannot be written (issue 23, point 11) --------------------

def test_a_look_at_a_job_without_a_checkpoint_directory_creates_nothing(tmp_path):
    from weir.recovery.job_lock import LockAccess
    with JobLock.acquire(tmp_path / "checkpoints", job="wc", role="weir state list",
                         access=LockAccess.READ) as lock:
        assert lock.shared and not lock.held
    assert not (tmp_path / "checkpoints").exists()


def test_a_shared_look_is_refused_while_a_run_holds_the_lock_and_keeps_a_run_out(tmp_path):
    from weir.recovery.job_lock import _locked_error, read_lock
    error = functools.partial(_locked_error, "job 'wc'")
    with JobLock.acquire(tmp_path, job="wc", role="runner"):
        with pytest.raises(JobLockedError) as err:
            read_lock(tmp_path / "JOB.LOCK", error=error)
        assert err.value.holder["role"] == "runner"
    assert read_lock(tmp_path / "JOB.LOCK", error=error) is None  # no file: nobody holds it
    (tmp_path / "JOB.LOCK").write_text("{}")  # a lock file left as it is (read-only place)
    look = read_lock(tmp_path / "JOB.LOCK", error=error)
    assert look is not None and look.held
    try:
        with pytest.raises(JobLockedError):
            JobLock.acquire(tmp_path, job="wc", role="runner")
    finally:
        look.release()
    JobLock.acquire(tmp_path, job="wc", role="runner").release()
