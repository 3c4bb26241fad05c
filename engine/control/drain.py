"""Drain requests: stop a pipeline cleanly for a redeploy (docs/CONTROL.md, "Drain").

``weir drain <job>`` writes a :class:`DrainRequest` to the job's drain file
(``job.drain.path``, default ``<task.checkpoint.path>/drain-request.json``; every stage of an
application shares the application's). Running containers look at the file every
``task.drain.poll.interval.ms`` (:class:`DrainMonitor`). A task that sees a request it has not
completed yet:

1. stops reading its source partitions where they are (the unread input stays for the next
   run), and finishes what it already took;
2. lets event time run to the end (every window fires), and sends a
   :class:`~weir.engine.control.messages.DrainMessage` with the request's id down every
   intermediate stream it writes;
3. when every input has drained or ended (intermediate partitions drain once every upstream
   task sent its drain message), calls ``on_drain`` if the task has one, commits and stops.

The checkpoint records the id of the drain a task completed, so the next ``weir run`` of the
same job ignores the old request and runs normally; a run that crashed in the middle of a
drain continues it. A new ``weir drain`` writes a new id. Samza matches drains against the
deployment's ``app.run.id``; an embedded Weir run has no deployment id, so the request's own
id plays that part (it travels as ``runId`` in the drain messages).

**A request names the runs it is for** (``runs``, :class:`RunTarget`): ``weir drain``
(:func:`request_drain`) reads the job lock that each running ``weir run`` holds in the
checkpoint directory (and in the ``stage-N`` directories of an application run stage by
stage), whose record carries the run's id (:data:`RUN_RECORD_KEY`), and refuses with
:class:`~weir.engine.control.errors.JobNotRunningError` when no run holds one: a request
written while the job is stopped, or from a directory where relative paths resolve to other
directories, would otherwise make the next run drain at once and report success. The
monitor acts on a request only while a run it names runs (a request without ``runs``, from
:func:`write_drain_request` or an older Weir, is taken as before). When a run starts,
:func:`settle_drain_request` looks at the request it finds: one for a run that ended is
continued when a task's checkpoint shows that drain under way (re-addressed to this run),
and otherwise moved aside (``drain-request.json.ignored-<id>``, or ``.completed-<id>`` when
the tasks completed it) with a log line that says so.

Example::

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "drain-request.json"
    ...     request = write_drain_request(path)
    ...     read_drain_request(path) == request
    True
"""

from __future__ import annotations

import logging
import os
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

from weir.stores.filesafety import atomic_write, fsync_dir
from weir.stores.locking import read_holder

from weir.engine.control.errors import DrainRequestError, JobNotRunningError

__all__ = ["DrainMode", "DrainRequest", "DrainProgress", "DrainStart", "RunTarget",
           "RUN_RECORD_KEY", "write_drain_request", "read_drain_request", "drain_path_of",
           "drain_progress", "request_drain", "running_runs", "settle_drain_request",
           "DrainMonitor"]

log = logging.getLogger("weir.control")

DrainMode = str
DEFAULT_DRAIN_MODE: DrainMode = "DEFAULT"
RUN_RECORD_KEY = "run"
"""The key of the run's id in the record of the job lock ``weir run`` holds (``JOB.LOCK``)."""
_JOB_LOCK = "JOB.LOCK"  # weir.recovery.job_lock.JOB_LOCK_FILE
_REQUEST_NAME = "drain-request.json"


@dataclass(frozen=True)
class RunTarget:
    """A run of a job that a drain request is for: the id its ``weir run`` recorded in the
    job lock it holds, that lock file, and the process."""

    run_id: str
    lock: str
    pid: int
    host: str
    since: str
    job: str = ""

    def is_running(self) -> bool:
        """Whether the run still holds its job lock (a holder on another host counts as
        running: its liveness cannot be checked from here)."""
        holder = read_holder(self.lock)
        return (holder is not None and holder.details.get(RUN_RECORD_KEY) == self.run_id
                and holder.is_alive() is not False)

    def describe(self) -> str:
        job = f"job '{self.job}' " if self.job else ""
        return f"{job}(pid {self.pid} on {self.host}, since {self.since}, run {self.run_id[:8]})"

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run_id, "job": self.job, "lock": self.lock, "pid": self.pid,
                "host": self.host, "since": self.since}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "RunTarget":
        return cls(str(raw["run"]), str(raw["lock"]), int(raw["pid"]), str(raw["host"]),
                   str(raw["since"]), str(raw.get("job", "")))


@dataclass(frozen=True)
class DrainRequest:
    """Samza's DrainNotification: ``uuid``, ``runId`` (the id drain messages carry),
    ``drainMode`` and when it was written; ``runs``: the runs it is for (empty: any run)."""

    uuid: str
    run_id: str
    drain_mode: DrainMode = DEFAULT_DRAIN_MODE
    created_ms: int = 0
    runs: tuple[RunTarget, ...] = ()

    def to_json(self) -> bytes:
        data: dict[str, Any] = {"uuid": self.uuid, "runId": self.run_id,
                                "drainMode": self.drain_mode, "createdMs": self.created_ms}
        if self.runs:
            data["runs"] = [run.to_dict() for run in self.runs]
        return orjson.dumps(data, option=orjson.OPT_INDENT_2)

    def is_for_a_running_run(self) -> bool:
        """A request for any run, or for a run that still runs."""
        return not self.runs or any(run.is_running() for run in self.runs)

    def describe_runs(self) -> str:
        if not self.runs:
            return "no particular run"
        return ", ".join(run.describe() for run in self.runs)


def write_drain_request(path: Path, *, run_id: str | None = None,
                        runs: Iterable[RunTarget] = ()) -> DrainRequest:
    """Write a new drain request (a fresh id; ``run_id`` defaults to it) for ``runs`` (none:
    any run) atomically. :func:`request_drain` is what ``weir drain`` calls: it names the
    running runs and refuses when there is none."""
    request_id = str(uuid.uuid4())
    request = DrainRequest(request_id, run_id or request_id, DEFAULT_DRAIN_MODE,
                           time.time_ns() // 1_000_000, tuple(runs))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, request.to_json())
    return request


def drain_path_of(config: Any) -> Path:
    """The drain file of a job's (or an application's) config: ``job.drain.path``, else
    ``drain-request.json`` in its checkpoint directory."""
    from weir.engine.config.job import JobConfig
    from weir.engine.control.settings import ControlSettings

    job = JobConfig.from_config(config)
    return ControlSettings.from_config(config, checkpoint_dir=job.checkpoint_dir).drain_path


def running_runs(checkpoint_dir: Path) -> tuple[RunTarget, ...]:
    """The runs of ``weir run`` that hold a job lock in ``checkpoint_dir`` or in one of its
    subdirectories (the stage jobs of an application), oldest lock file name first."""
    directory = Path(checkpoint_dir).absolute()
    runs = []
    for lock in [directory / _JOB_LOCK, *sorted(directory.glob(f"*/{_JOB_LOCK}"))]:
        holder = read_holder(lock)
        if holder is None or not isinstance(holder.details.get(RUN_RECORD_KEY), str):
            continue  # no lock, or held by a tool (`weir checkpoint ...`), not by a run
        run = RunTarget(holder.details[RUN_RECORD_KEY], str(lock), holder.pid, holder.host,
                        holder.since, str(holder.details.get("job", "")))
        if run.is_running():
            runs.append(run)
    return tuple(runs)


def request_drain(config: Any) -> DrainRequest:
    """Ask the running job (every stage of an application) of ``config`` to drain: what
    ``weir drain`` does. Returns the request written, which names the runs it is for; raises
    :class:`~weir.engine.control.errors.JobNotRunningError` (and writes nothing) when no
    ``weir run`` of the job runs with this config's checkpoint directory."""
    from weir.engine.config.job import JobConfig

    job = JobConfig.from_config(config)
    runs = running_runs(job.checkpoint_dir)
    if not runs:
        raise JobNotRunningError(job.name, str(Path(job.checkpoint_dir).absolute()))
    return write_drain_request(drain_path_of(config), runs=runs)


def read_drain_request(path: Path) -> DrainRequest | None:
    """The request in ``path``, or None when there is none. A file that cannot be read or
    parsed raises :class:`DrainRequestError` naming it."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DrainRequestError(f"cannot read the drain request {path}: {exc.strerror}; fix "
                                f"its permissions or delete it") from None
    try:
        raw = orjson.loads(data)
        return DrainRequest(str(raw["uuid"]), str(raw["runId"]),
                            str(raw.get("drainMode", DEFAULT_DRAIN_MODE)),
                            int(raw.get("createdMs", 0)),
                            tuple(RunTarget.from_dict(r) for r in raw.get("runs") or ()))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DrainRequestError(f"the drain request {path} is not valid ({exc}); delete it and "
                                f"run `weir drain` again") from None


# -- what the tasks' checkpoints say about a drain -----------------------------------------

@dataclass(frozen=True)
class DrainProgress:
    """Task checkpoints (``stage-N/Task`` labels) under some directories, by what their
    control bookkeeping says about one drain."""

    completed: tuple[str, ...]
    """Recorded the drain as completed."""
    draining: tuple[str, ...]
    """Began the drain and did not complete it."""
    other: tuple[str, ...]
    """Everything else (never began it, no control bookkeeping, being written)."""

    @property
    def pending(self) -> tuple[str, ...]:
        return self.draining + self.other


def drain_progress(directories: Iterable[Path], run_id: str) -> DrainProgress:
    """What the task checkpoints under ``directories`` (searched recursively, each file once)
    say about drain ``run_id``."""
    from weir.recovery.checkpoint import FileCheckpointManager

    completed, draining, other = [], [], []
    seen: set[Path] = set()
    for directory in directories:
        directory = Path(directory)
        if not directory.is_dir():
            continue
        for path in sorted(directory.rglob("*.json")):
            if path.name == _REQUEST_NAME or path.resolve() in seen:
                continue
            seen.add(path.resolve())
            task = urllib.parse.unquote(path.stem)
            label = str(path.parent.relative_to(directory) / task).removeprefix("./")
            try:
                checkpoint = FileCheckpointManager(path.parent).read_last(task)
            except Exception:  # noqa: BLE001 - not a checkpoint, or one being written
                other.append(label)
                continue
            control = (checkpoint.extras.get("control") or {}) if checkpoint is not None else {}
            if control.get("completedDrain") == run_id:
                completed.append(label)
            elif (control.get("drain") or {}).get("runId") == run_id:
                draining.append(label)
            else:
                other.append(label)
    return DrainProgress(tuple(completed), tuple(draining), tuple(other))


class DrainStart(Enum):
    """What a starting run made of the drain request it found (:func:`settle_drain_request`)."""

    NONE = "none"
    """No request."""
    FOR_THIS_RUN = "for-this-run"
    """Written for this run (``weir drain`` since it took its job lock)."""
    SHARED = "shared"
    """For another run that still runs (a stage of the same application): taken as it is."""
    CONTINUED = "continued"
    """A drain an earlier run began and did not finish: re-addressed to this run."""
    COMPLETED = "completed"
    """Completed by an earlier run: moved aside."""
    IGNORED = "ignored"
    """For no running run and never begun: moved aside, this run processes normally."""


def _move_aside(path: Path, request: DrainRequest, kind: str) -> Path:
    target = path.with_name(f"{path.name}.{kind}-{request.uuid[:8]}")
    try:
        os.replace(path, target)
        fsync_dir(path.parent)
    except OSError as exc:
        raise DrainRequestError(
            f"cannot move the drain request {path} aside to {target.name} ({exc.strerror}); it "
            f"is for {request.describe_runs()}, which no longer runs. Move or delete it, "
            f"then start the job again") from None
    return target


def settle_drain_request(path: Path | None, directories: Iterable[Path],
                         run: RunTarget) -> DrainStart:
    """What a starting ``run`` does with the drain request in ``path`` (before its tasks
    start), judged by the task checkpoints under ``directories``; see the module docstring.
    Logs what it decided unless there was nothing to decide."""
    if path is None:
        return DrainStart.NONE
    path = Path(path)
    request = read_drain_request(path)
    if request is None:
        return DrainStart.NONE
    if any(target.run_id == run.run_id for target in request.runs):
        return DrainStart.FOR_THIS_RUN
    if request.runs and request.is_for_a_running_run():
        log.info("drain request %s in %s is for %s, which still runs: this run drains with it",
                 request.run_id, path, request.describe_runs())
        return DrainStart.SHARED
    progress = drain_progress([*directories, path.parent], request.run_id)
    if progress.draining:
        continued = DrainRequest(request.uuid, request.run_id, request.drain_mode,
                                 request.created_ms, (run,))
        atomic_write(path, continued.to_json())
        log.info("continuing drain %s, which an earlier run (%s) began and did not finish: %d "
                 "task(s) draining, %d done; this run drains", request.run_id,
                 request.describe_runs(), len(progress.draining), len(progress.completed))
        return DrainStart.CONTINUED
    if progress.completed:
        moved = _move_aside(path, request, "completed")
        log.info("drain request %s was completed by an earlier run (%d task(s)); moved it to %s",
                 request.run_id, len(progress.completed), moved)
        return DrainStart.COMPLETED
    moved = _move_aside(path, request, "ignored")
    written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(request.created_ms / 1000))
    log.warning("ignoring drain request %s (written %s for %s): no run it names is running and "
                "no task began it, so this run processes normally; moved it to %s. To drain "
                "this run, run `weir drain` while it runs", request.run_id, written,
                request.describe_runs(), moved)
    return DrainStart.IGNORED


class DrainMonitor:
    """Looks at a drain request file at most every ``poll_ms``; shared by the tasks of one
    container. ``current()`` is the request seen last (None: there is none, or it names only
    runs that no longer run: such a request is logged once and not acted on)."""

    def __init__(self, path: Path | None, poll_ms: int = 1000, *,
                 clock: Callable[[], float] = time.monotonic):
        self.path = Path(path) if path is not None else None
        self.poll_s = poll_ms / 1000.0
        self._clock = clock
        self._next = 0.0
        self._current: DrainRequest | None = None
        self._judged: DrainRequest | None = None
        self._accepted = False

    def current(self, *, force: bool = False) -> DrainRequest | None:
        if self.path is None:
            return None
        now = self._clock()
        if force or now >= self._next:
            self._next = now + self.poll_s
            self._current = self._judge(read_drain_request(self.path))
        return self._current

    def _judge(self, request: DrainRequest | None) -> DrainRequest | None:
        """``request`` when it is for a running run (judged once per request)."""
        if request is None:
            return None
        if request != self._judged:
            self._judged = request
            self._accepted = request.is_for_a_running_run()
            if not self._accepted:
                log.warning("ignoring drain request %s in %s: it is for %s, which no longer "
                            "runs. To drain this run, run `weir drain` again", request.run_id,
                            self.path, request.describe_runs())
        return request if self._accepted else None
