"""The job lock: one process at a time may run a job or change its checkpoints and state.

The lock lives in the job's checkpoint directory (``task.checkpoint.path``), which names the
job's durable position: two runs of the same job would write the same checkpoint files.

* ``JOB.LOCK``: held by the ``weir run`` runner for its whole run, and by the ``weir
  checkpoint`` commands while they work. A second locker gets :class:`JobLockedError` naming
  the holder's pid, host, role and command, and the lock file.
* ``CONTAINER-<id>.LOCK``: held by each container *process* of a multi-process run for its
  whole life. Container processes are started with the *spawn* method, so they do not
  inherit the runner's lock (and :mod:`weir.stores.locking` closes inherited lock files in
  forked children anyway); when the runner dies first (SIGKILL), its containers still finish
  their final commit. :meth:`JobLock.acquire` therefore also checks every container lock and
  refuses while one is held: a new run never starts beside the containers of an old one.

Locks are ``flock``s (:mod:`weir.stores.locking`): the kernel drops them when their process
exits for any reason, so a crashed run never leaves the job locked.

Clean-up that would disturb a live run (removing temp files of interrupted checkpoint writes)
is done only while holding this lock: see
:meth:`weir.recovery.checkpoint.FileCheckpointManager.remove_stray_temps`.

Example::

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with JobLock.acquire(d, job="word-count", role="runner") as lock:
    ...     try:
    ...         JobLock.acquire(d, job="word-count", role="checkpoint-tool")
    ...     except JobLockedError as exc:
    ...         print(exc.holder["role"])
    runner
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weir.stores.locking import FileLock, LockHolder, acquire_lock

from weir.recovery.errors import JobLockedError, RecoveryError

__all__ = ["JOB_LOCK_FILE", "JobLock", "command_line", "container_lock_path",
           "hold_container_lock", "is_lock_file"]

JOB_LOCK_FILE = "JOB.LOCK"
_CONTAINER_PREFIX = "CONTAINER-"
_CONTAINER_SUFFIX = ".LOCK"


def container_lock_path(directory: Path | str, container_id: str) -> Path:
    """The lock file a container process of the job holds while it runs."""
    return Path(directory) / f"{_CONTAINER_PREFIX}{container_id}{_CONTAINER_SUFFIX}"


def is_lock_file(name: str) -> bool:
    """Whether ``name`` (a file name in the checkpoint directory) belongs to the job lock."""
    base = name[:-4] if name.endswith(".tmp") else name
    return base == JOB_LOCK_FILE or (base.startswith(_CONTAINER_PREFIX)
                                     and base.endswith(_CONTAINER_SUFFIX))


def _make_directory(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecoveryError(
            f"cannot create the job's checkpoint directory {directory} ({exc.strerror}); make "
            f"it (or its parent) writable, or point task.checkpoint.path somewhere "
            f"writable") from None


def command_line() -> str:
    """This process's command line as a lock record names it (program name without its
    directory; at most 300 characters)."""
    return " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300]


def _locked_error(what: str, path: Path, holder: LockHolder | None) -> JobLockedError:
    if holder is None:
        who = "another process (its record in the lock file could not be read)"
        stop = "stop that process (`lsof` on the lock file finds it)"
    else:
        role = holder.details.get("role", "a process")
        command = holder.details.get("command")
        who = (f"{role} pid {holder.pid} on host {holder.host} (since {holder.since}"
               + (f", command `{command}`" if command else "") + ")")
        stop = (f"stop process {holder.pid} on {holder.host} (SIGTERM stops a run with a final "
                f"commit) or wait for it to finish")
    return JobLockedError(
        f"{what} is locked by {who} (lock file {path}); {stop}. The lock is released "
        f"automatically when that process exits; nothing was changed",
        path=str(path), holder=holder.as_dict() if holder is not None else None)


class JobLock:
    """The exclusive lock of one job's checkpoint directory (see the module docstring)."""

    __slots__ = ("directory", "_lock")

    def __init__(self, directory: Path, lock: FileLock):
        self.directory = directory
        self._lock = lock

    @classmethod
    def acquire(cls, directory: Path | str, *, job: str = "", role: str = "runner",
                details: Mapping[str, Any] | None = None) -> "JobLock":
        """Lock the job whose checkpoint directory is ``directory`` (created if missing), or
        raise :class:`JobLockedError` naming the holder. Also refuses while a container
        process of an earlier run still holds its container lock."""
        directory = Path(directory)
        _make_directory(directory)
        what = f"job '{job}'" if job else f"the job of {directory}"
        record = {"role": role, "job": job, "command": command_line(), **(details or {})}
        lock = acquire_lock(directory / JOB_LOCK_FILE,
                            error=functools.partial(_locked_error, what), details=record)
        try:
            for path in sorted(directory.glob(f"{_CONTAINER_PREFIX}*{_CONTAINER_SUFFIX}")):
                probe = acquire_lock(path, error=functools.partial(
                    _locked_error, f"{what} (a container of an earlier run)"),
                    details={"role": "lock check"})
                probe.release()
        except BaseException:
            lock.release()
            raise
        return cls(directory, lock)

    @property
    def held(self) -> bool:
        return self._lock.held

    @property
    def path(self) -> Path:
        return self._lock.path

    @property
    def holder(self) -> LockHolder:
        return self._lock.holder

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> "JobLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"JobLock({str(self.directory)!r}, {'held' if self.held else 'released'})"


def hold_container_lock(directory: Path | str, container_id: str, *, job: str = "") -> FileLock:
    """Lock ``CONTAINER-<id>.LOCK`` for this container process (released at exit)."""
    directory = Path(directory)
    _make_directory(directory)
    what = f"container {container_id} of job '{job}'" if job else f"container {container_id}"
    return acquire_lock(container_lock_path(directory, container_id),
                        error=functools.partial(_locked_error, what),
                        details={"role": f"container {container_id}", "job": job,
                                 "command": command_line()})
