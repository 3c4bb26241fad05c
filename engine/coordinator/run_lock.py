"""The run lock: one job coordinator per coordinator stream, so one run of a job at a time.

The job lock (``JOB.LOCK`` in ``task.checkpoint.path``, :mod:`weir.recovery.job_lock`) keeps a
second ``weir run`` of a job out only when both runs use the same directories. A copy started
with another ``job.data.dir`` (or from another working directory with a relative one) finds
another, free job lock, yet shares the job's coordinator stream and changelogs in the file log:
its job coordinator would write its config to the stream, and the first run's coordinator,
which reads the stream every ``job.coordinator.catchup.interval.ms``, would take it up.

So a job coordinator holds a second lock from :meth:`JobCoordinator.start
<weir.engine.coordinator.coordinator.JobCoordinator.start>` to its stop, beside the
coordinator stream: ``<root of the coordinator system>/.coordinators/<coordinator
stream>.LOCK``. It is a ``flock`` (:mod:`weir.stores.locking`): the kernel drops it when the
process exits for any reason, so a crashed run never leaves the job locked. Its record names
the process, its working directory and where the run keeps its state
(:class:`~weir.engine.coordinator.guard.StateDirectories`). A second coordinator of the job
gets :class:`~weir.engine.coordinator.errors.JobAlreadyRunningError` naming all that before it
writes anything; ``weir coordinator set-config`` reads the record (:func:`read_run_record`) to
check a change against the running job's directories.

A system that keeps no files on this machine (the memory system lives in one process) has no
run lock: :meth:`RunLock.acquire` holds nothing there.

Example::

    >>> import tempfile
    >>> from weir.stores.config import Config
    >>> from weir.engine.coordinator.settings import CoordinatorSettings
    >>> from weir.engine.systems.registry import SystemRegistry
    >>> root = tempfile.mkdtemp()
    >>> config = Config({"job.name": "wc", "task.inputs": "filelog.words",
    ...                  "systems.filelog.factory": "filelog", "systems.filelog.root": root,
    ...                  "job.data.dir": tempfile.mkdtemp()})
    >>> registry, settings = SystemRegistry(config), CoordinatorSettings.from_config(config)
    >>> with RunLock.acquire(registry, settings, StateDirectories.of(config)) as lock:
    ...     read_run_record(registry, settings).holder.pid == os.getpid()
    True
    >>> read_run_record(registry, settings) is None
    True
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.recovery.job_lock import JobLock, LockAccess, ReadLock, command_line, read_lock, writable
from weir.stores.config import Config
from weir.stores.locking import FileLock, LockHolder, acquire_lock, read_holder

from weir.engine.config.job import _LOGGED_BASE_ENV
from weir.engine.coordinator.errors import JobAlreadyRunningError
from weir.engine.coordinator.guard import StateDirectories
from weir.engine.coordinator.settings import CoordinatorSettings
from weir.engine.errors import UnwritableDirectoryError

__all__ = ["RUN_LOCK_DIR", "RunLock", "RunRecord", "hold_stopped_job", "read_run_record",
           "run_lock_path"]

RUN_LOCK_DIR = ".coordinators"
"""The directory of the run locks under the coordinator system's root (hidden: the file log
lists only directories with a ``stream.json`` as streams)."""


def run_lock_path(registry: Any, settings: CoordinatorSettings) -> Path | None:
    """The run lock file of the job whose coordinator stream ``settings`` names; None when its
    system keeps no files on this machine (its admin has no ``root`` directory)."""
    root = registry.admin(settings.system).root
    if root is None:
        return None
    return Path(root) / RUN_LOCK_DIR / f"{settings.stream}.LOCK"


@dataclass(frozen=True)
class RunRecord:
    """What the run lock of a running job says about it."""

    path: Path
    holder: LockHolder
    directories: StateDirectories | None
    """Where the running job keeps its state (None: the record does not say)."""
    cwd: Path | None
    """The running job's working directory (relative directories resolve against it)."""
    environ: dict[str, str]
    """The running job's environment variables that choose directories
    (``LOGGED_STORE_BASE_DIR``, when set)."""


def read_run_record(registry: Any, settings: CoordinatorSettings) -> RunRecord | None:
    """The record of the job coordinator that runs the job, or None when none runs (no run
    lock, no record, or its process is gone). Reads only: a holder on another host counts as
    running, since its liveness cannot be checked from here."""
    path = run_lock_path(registry, settings)
    if path is None:
        return None
    holder = read_holder(path)
    if holder is None or holder.is_alive() is False:
        return None
    details = holder.details
    cwd = details.get("cwd")
    environ = details.get("environ")
    return RunRecord(path, holder, StateDirectories.from_record(details),
                     Path(cwd) if isinstance(cwd, str) else None,
                     dict(environ) if isinstance(environ, dict) else {})


class RunLock:
    """The run lock of one job coordinator (see the module docstring); release with
    :meth:`release` or use it as a context manager. Holds nothing (``path`` None) on a system
    without files."""

    __slots__ = ("path", "_lock")

    def __init__(self, path: Path | None, lock: FileLock | ReadLock | None):
        self.path = path
        self._lock = lock

    @classmethod
    def acquire(cls, registry: Any, settings: CoordinatorSettings,
                directories: StateDirectories, *, tool: str | None = None,
                access: LockAccess = LockAccess.CHANGE) -> "RunLock":
        """Lock the job's coordinator stream for this process, recording ``directories``;
        raise JobAlreadyRunningError naming the other run when another process holds it.
        ``tool`` names an offline command (``weir state rebuild``) that takes the lock to keep
        the job from starting while it works, and is refused while the job runs. A tool that
        only looks (:attr:`LockAccess.READ`) takes a shared lock, writing nothing, where the
        lock's directory cannot be written (:mod:`weir.recovery.job_lock`)."""
        path = run_lock_path(registry, settings)
        if path is None:
            return cls(None, None)
        if access is LockAccess.READ and not writable(path.parent):
            return cls(path, read_lock(path, error=functools.partial(
                _already_running, settings, directories, tool)))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            key = f"systems.{settings.system}.root"
            raise UnwritableDirectoryError(
                f"cannot create {path.parent}, where the job coordinator locks the job's "
                f"coordinator stream ({exc.strerror}); make the file log's root writable",
                path=str(path.parent), key=key) from None
        environ = {k: os.environ[k] for k in (_LOGGED_BASE_ENV,) if os.environ.get(k)}
        record = {"role": tool or "job coordinator", "job": settings.job_name,
                  "job_id": settings.job_id, "stream": f"{settings.system}.{settings.stream}",
                  "command": command_line(), "cwd": os.getcwd(), "environ": environ,
                  **directories.to_record()}
        lock = acquire_lock(path, details=record, error=functools.partial(
            _already_running, settings, directories, tool))
        return cls(path, lock)

    @property
    def held(self) -> bool:
        return self._lock is not None and self._lock.held

    def release(self) -> None:
        """Drop the lock (harmless when released before or when nothing is held)."""
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"RunLock({str(self.path)!r}, {'held' if self.held else 'not held'})"


@contextmanager
def hold_stopped_job(config: Config, registry: Any, tool: str, checkpoint_dir: Any,
                     job_name: str, *, access: LockAccess = LockAccess.CHANGE,
                     details: Mapping[str, Any] | None = None) -> Iterator[JobLock]:
    """The job's run lock, then its job lock, held by ``tool`` (an offline command such as
    ``weir state rebuild``, or ``weir run --runner spark``) while it works: refused with
    JobAlreadyRunningError while the job runs with any directories, or JobLockedError with
    these; a ``weir run`` started meanwhile is refused naming ``tool``. A job whose
    coordinator system is not configured has no run lock to take. ``access``: a tool that
    only looks takes shared locks where it cannot write (``JobLock.shared``). ``details``:
    more for the job lock's record (a Spark run's id, which ``weir drain`` names)."""
    settings = CoordinatorSettings.from_config(config)
    run_lock = (RunLock.acquire(registry, settings, StateDirectories.of(config), tool=tool,
                                access=access)
                if settings.system in registry.systems() else RunLock(None, None))
    with run_lock, JobLock.acquire(checkpoint_dir, job=job_name, role=tool,
                                   access=access, details=details) as lock:
        yield lock


def _already_running(settings: CoordinatorSettings, directories: StateDirectories,
                     tool: str | None, path: Path,
                     holder: LockHolder | None) -> JobAlreadyRunningError:
    job = f"job '{settings.job_name}' (id {settings.job_id})"
    stream = f"{settings.system}.{settings.stream}"
    theirs = None
    role = "its job coordinator"
    if holder is None:
        who = "another process (its record in the lock file could not be read)"
        stop = "Stop that process (`lsof` on the lock file finds it)"
    else:
        command = holder.details.get("command")
        cwd = holder.details.get("cwd")
        held_by = holder.details.get("role")
        if isinstance(held_by, str) and held_by != "job coordinator":
            role = f"`{held_by}`"
        who = (f"pid {holder.pid} on host {holder.host} (since {holder.since}"
               + (f", command `{command}`" if command else "")
               + (f", working directory {cwd}" if cwd else "") + ")")
        theirs = StateDirectories.from_record(holder.details)
        stop = (f"Stop process {holder.pid} on {holder.host} (SIGTERM stops it with a final "
                f"commit) or wait for it to end")
    where = f", with {theirs.describe()}" if theirs is not None else ""
    if tool is not None:
        return JobAlreadyRunningError(
            f"{job} is in use: {role}, {who}, holds the job's coordinator stream {stream} "
            f"(run lock {path}){where}. `{tool}` needs the job stopped, whatever directories it "
            f"runs with. {stop}, then run `{tool}` again. Nothing was changed",
            path=str(path), holder=holder.as_dict() if holder is not None else None)
    ours = "the same directories" if theirs == directories else directories.describe()
    return JobAlreadyRunningError(
        f"{job} {'already runs' if role == 'its job coordinator' else 'is in use'}: {role}, "
        f"{who}, holds the job's coordinator stream "
        f"{stream} (run lock {path}){where}. This run was started with {ours}. Two runs of "
        f"one job share its coordinator stream and changelogs, and each would take up the "
        f"other's config. {stop}, then start the job again; to move the job's data to this "
        f"run's directories, move them while the job is stopped (docs/COORDINATOR.md, "
        f"'Moving a job's data'); to run a separate copy of the job beside it, give the copy "
        f"another job.id. Nothing was written",
        path=str(path), holder=holder.as_dict() if holder is not None else None)
