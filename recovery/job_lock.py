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

A command that only *looks* (``weir state list``, ``show``, ``dump``, ``verify``, ``export``)
asks for :attr:`LockAccess.READ`: the same exclusive lock where the checkpoint directory can be
written, and where it cannot (a read-only file system, a backup mounted read only, another
user's files) a *shared* ``flock`` on the lock files as they are, opened read only
(:class:`ReadLock`): it refuses, naming the holder, while a run holds them, keeps a run on this
machine out while the command reads, and writes nothing. A look needs no more: it changes
nothing a run could trip on, and refusing it made a read-only copy of a job's data unreadable
(issue 23, point 11).

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

import errno
import fcntl
import functools
import os
import sys
import time
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from weir.stores.locking import FileLock, LockHolder, acquire_lock, read_holder

from weir.recovery.errors import JobLockedError, RecoveryError

__all__ = ["JOB_LOCK_FILE", "JobLock", "LockAccess", "ReadLock", "command_line",
           "container_lock_path", "hold_container_lock", "is_lock_file", "read_lock",
           "writable"]

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


class LockAccess(Enum):
    """What a command holding a job's locks does with the job's state."""

    CHANGE = "change"
    """Runs the job or changes its checkpoints or state: the exclusive lock, always."""
    READ = "read"
    """Only looks: the exclusive lock where its directory can be written, else a
    :class:`ReadLock` (see the module docstring)."""


class ReadLock:
    """A shared ``flock`` on an existing lock file opened read only: taken by a look at a job
    whose lock directory cannot be written (:func:`read_lock`). Writes nothing; ``holder`` is
    None (the file's record names whoever held it last, not this process)."""

    __slots__ = ("path", "_fd")
    holder = None

    def __init__(self, path: Path, fd: int):
        self.path, self._fd = path, fd

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)  # drops the lock

    def __enter__(self) -> "ReadLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_HANDOVER_WAIT_S = 1.0
"""How long a look waits while a lock file's record names no live process (a locker between
taking the lock and writing its record, or one that just died)."""


def read_lock(path: Path | str, *, error: Callable[[Path, LockHolder | None], Exception]
              ) -> ReadLock | None:
    """A :class:`ReadLock` on lock file ``path`` (None when there is no such file: nobody ever
    held it), or ``error(path, holder)`` raised while another process holds it."""
    path = Path(path)
    deadline = time.monotonic() + _HANDOVER_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = read_holder(path)
            if (holder is None or holder.is_alive() is False) and time.monotonic() < deadline:
                time.sleep(0.005)
                continue
            raise error(path, holder) from None
        return ReadLock(path, fd)


def writable(directory: Path) -> bool:
    """Whether this process can create files in ``directory`` (False when it is missing)."""
    return directory.is_dir() and os.access(directory, os.W_OK)


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

    def __init__(self, directory: Path, lock: FileLock | ReadLock | None):
        self.directory = directory
        self._lock = lock

    @classmethod
    def acquire(cls, directory: Path | str, *, job: str = "", role: str = "runner",
                details: Mapping[str, Any] | None = None,
                access: LockAccess = LockAccess.CHANGE) -> "JobLock":
        """Lock the job whose checkpoint directory is ``directory`` (created if missing), or
        raise :class:`JobLockedError` naming the holder. Also refuses while a container
        process of an earlier run still holds its container lock. With
        :attr:`LockAccess.READ` and a directory this process cannot write (or that does not
        exist), take :class:`ReadLock` s instead, creating nothing (:attr:`shared`)."""
        directory = Path(directory)
        what = f"job '{job}'" if job else f"the job of {directory}"
        if access is LockAccess.READ and not writable(directory):
            return cls._read(directory, what)
        _make_directory(directory)
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

    @classmethod
    def _read(cls, directory: Path, what: str) -> "JobLock":
        lock = read_lock(directory / JOB_LOCK_FILE, error=functools.partial(_locked_error, what))
        try:
            for path in sorted(directory.glob(f"{_CONTAINER_PREFIX}*{_CONTAINER_SUFFIX}")):
                probe = read_lock(path, error=functools.partial(
                    _locked_error, f"{what} (a container of an earlier run)"))
                if probe is not None:
                    probe.release()
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(directory, lock)

    @property
    def shared(self) -> bool:
        """True for a look's lock on a directory it cannot write (see the module
        docstring): nothing exclusive is held."""
        return not isinstance(self._lock, FileLock)

    @property
    def held(self) -> bool:
        return self._lock is not None and self._lock.held

    @property
    def path(self) -> Path:
        return self.directory / JOB_LOCK_FILE

    @property
    def holder(self) -> LockHolder | None:
        return self._lock.holder if self._lock is not None else None

    def release(self) -> None:
        if self._lock is not None:
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
