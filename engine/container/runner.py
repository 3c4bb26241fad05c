"""The embedded runner: run a job's containers on this machine, in this process or several.

:func:`run_job` is what ``weir run job.properties`` does:

1. check the config (bad values raise :class:`~weir.stores.errors.ConfigError` with ``file:line``;
   unknown keys are logged as warnings with the closest known key);
2. read every input stream's partition count and build the job model
   (:func:`~weir.engine.jobmodel.model.build_job_model`);
3. with ``job.container.count`` = 1, run the one container in this process; with more, run
   each container in its own OS process (``multiprocessing`` *spawn*), which report progress
   and their result back over a queue. When one fails, the others are stopped (SIGTERM, so
   they commit) and the result names the failed container and why;
   The runner holds the job lock (:class:`~weir.recovery.job_lock.JobLock`, in
   ``task.checkpoint.path``) for the whole run: a second ``weir run`` of the same job fails
   fast with :class:`~weir.recovery.errors.JobLockedError` naming the holder; each container
   process also holds its own container lock, so a new run never starts beside containers
   of an old one whose runner died;
4. SIGINT / SIGTERM stop the job gracefully: work in flight finishes (up to
   ``task.shutdown.ms``), every task commits, stores close. A second SIGINT stops at once
   without the final commit (processing resumes from the last checkpoint);
5. the job ends by itself when all its inputs are bounded and have ended.

The :class:`JobResult` has the exit code (:class:`ExitCode`), per-stream message counts of all
containers and a summary for the terminal.

Example::

    result = run_job(load_config("job.properties"))
    print("\\n".join(result.summary_lines()))
    sys.exit(result.exit_code)
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from weir.recovery.checkpoint import FileCheckpointManager
from weir.recovery.job_lock import JobLock
from weir.recovery.storage import ProgressMode
from weir.stores.config import Config
from weir.stores.errors import ConfigError

from weir.engine.container.progress import ContainerProgress, ContainerResult
from weir.engine.container.process import ChildEvent, EventKind, container_process_main
from weir.engine.config.job import JobConfig, load_all_declarations, warn_unknown_keys
from weir.engine.container.container import Container, create_changelog_streams, store_specs
from weir.engine.container.preflight import check_job
from weir.engine.errors import EngineError, UnwritableDirectoryError
from weir.engine.jobmodel.model import JobModel, build_job_model
from weir.engine.model import SystemStream
from weir.engine.container.status import StatusMode, StatusReporter, StatusSettings
from weir.engine.config.streams import all_input_streams
from weir.engine.systems.registry import SystemRegistry
from weir.engine.task import load_task_factory

__all__ = ["ExitCode", "JobResult", "ContainerFailure", "prepare_job", "run_job"]

log = logging.getLogger("weir.runner")

_POLL_S = 0.2


class ExitCode(IntEnum):
    """Exit codes of ``weir run``."""

    OK = 0
    """Inputs ended, a task asked to stop, or SIGTERM: everything committed."""
    FAILED = 1
    """A container failed (a task error, a store or system error); see the message."""
    CONFIG = 2
    """The config or the streams are wrong: found while preparing the job (nothing ran), or
    every container that failed failed with a ConfigError of its own."""
    INTERRUPTED = 130
    """Stopped by SIGINT (Ctrl-C) after the final commit."""


@dataclass(frozen=True)
class ContainerFailure:
    """Why a container failed: the error type and message (with the user traceback for a
    task error), or how its process died."""

    container_id: str
    error_type: str
    message: str

    def headline(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"container {self.container_id} failed: {self.error_type}: {first}"


@dataclass(frozen=True)
class JobResult:
    """The outcome of :func:`run_job`."""

    job: str
    exit_code: ExitCode
    reason: str
    seconds: float
    containers: tuple[ContainerResult, ...] = ()
    failures: tuple[ContainerFailure, ...] = ()

    @property
    def inputs(self) -> dict[SystemStream, int]:
        return _sum_counts(c.inputs for c in self.containers)

    @property
    def outputs(self) -> dict[SystemStream, int]:
        return _sum_counts(c.outputs for c in self.containers)

    @property
    def messages_in(self) -> int:
        return sum(self.inputs.values())

    @property
    def messages_out(self) -> int:
        return sum(self.outputs.values())

    @property
    def rate(self) -> float:
        return self.messages_in / self.seconds if self.seconds > 0 else 0.0

    def summary_lines(self) -> list[str]:
        """The final summary ``weir run`` prints: why it stopped, messages in and out per
        stream, time and rate; then each failure with its full message."""
        lines = [f"job '{self.job}' {self.reason} after {self.seconds:.2f} s"]
        width = max([len(str(s)) for s in (*self.inputs, *self.outputs)] + [10])
        for label, counts in (("in ", self.inputs), ("out", self.outputs)):
            for i, (ss, n) in enumerate(sorted(counts.items())):
                lines.append(f"  {label if i == 0 else '   '}  {str(ss):<{width}}  {n:>12,}")
        lines.append(f"  total  {self.messages_in:,} in, {self.messages_out:,} out, "
                     f"{self.rate:,.0f} msg/s")
        for failure in self.failures:
            lines.append(failure.headline())
            lines.extend("    " + line for line in failure.message.splitlines()[1:])
        return lines


def _sum_counts(maps: Iterable[Mapping[SystemStream, int]]) -> dict[SystemStream, int]:
    out: dict[SystemStream, int] = {}
    for counts in maps:
        for ss, n in counts.items():
            out[ss] = out.get(ss, 0) + n
    return out


# -- preparing ----------------------------------------------------------------------------

def prepare_job(config: Config, *, registry: SystemRegistry | None = None
                ) -> tuple[JobConfig, SystemRegistry, JobModel]:
    """Check ``config`` and build the job model from the input streams' partition counts.

    Raises ConfigError for bad values (unknown keys are only logged; ``task.class`` is
    imported; every settings object is built and every directory the job writes is checked,
    :func:`~weir.engine.container.preflight.check_job`) and StreamNotFoundError for an input
    stream that does not exist. Nothing is created before these checks pass."""
    try:
        load_all_declarations()
    except EngineError as exc:
        log.warning("checking config keys against the declarations of the modules that "
                    "import: %s", exc)
    warn_unknown_keys(config, log, load_declarations=False)
    job = JobConfig.from_config(config)
    load_task_factory(config)  # a bad task.class / task.wrapper.class fails before any setup
    registry = registry if registry is not None else SystemRegistry(config)
    # Every settings object and every directory to write, before anything is created.
    check_job(config, job, registry)
    counts = registry.partition_counts(all_input_streams(config))
    model = build_job_model(config, counts)
    # Created here, before any container starts, so containers never race to create them.
    create_changelog_streams(store_specs(config, job), registry, model)
    return job, registry, model


# -- signals ------------------------------------------------------------------------------

class _Signals:
    """SIGINT/SIGTERM handlers for the duration of a run (main thread only): the first signal
    calls ``on_stop`` (a graceful stop); after it, SIGINT raises KeyboardInterrupt again."""

    def __init__(self, on_stop: Callable[[int], None]):
        self._on_stop = on_stop
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is None:
            self.received = signum
            log.warning("received %s: stopping after the work in flight and a final commit "
                        "(press Ctrl-C again to stop at once, without it)",
                        signal.Signals(signum).name)
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self._on_stop(signum)

    def reason(self, default: str) -> str:
        if self.received is None:
            return default
        return f"stopped by {signal.Signals(self.received).name}"

    def exit_code(self) -> ExitCode:
        return ExitCode.INTERRUPTED if self.received == signal.SIGINT else ExitCode.OK


# -- running ------------------------------------------------------------------------------

def run_job(config: Config, *, status: StatusMode = StatusMode.AUTO,
            console: Any = None, progress: ProgressMode | None = None) -> JobResult:
    """Run the job of ``config`` to its end (or until stopped); see the module docstring.

    ConfigError / StreamNotFoundError from preparing the job propagate (nothing ran); every
    failure while running is in the result (``exit_code`` FAILED, ``failures``)."""
    started = time.perf_counter()
    job, registry, model = prepare_job(config)
    settings = StatusSettings.from_config(config)
    # One run of a job at a time: the lock is held for the whole run, and only under it are
    # temp files of interrupted checkpoint writes removed (never a live writer's).
    with JobLock.acquire(job.checkpoint_dir, job=job.name, role="weir run") as lock:
        FileCheckpointManager(job.checkpoint_dir).remove_stray_temps(lock)
        if len(model.containers) == 1:
            return _run_in_process(config, job, registry, model, status, settings, console,
                                   progress or ProgressMode.AUTO, started)
        return _run_processes(config, job, model, status, settings, console, started)


def _status_registry(config: Config) -> Callable[[list], Mapping]:
    registry = SystemRegistry(config)  # its own admins: the status thread shares nothing
    return registry.metadata


def _run_in_process(config: Config, job: JobConfig, registry: SystemRegistry, model: JobModel,
                    status: StatusMode, settings: StatusSettings, console: Any,
                    progress: ProgressMode, started: float) -> JobResult:
    cid = next(iter(model.containers))
    container = Container(config, model, cid, registry=registry, job=job, progress=progress)
    reporter = StatusReporter(job.name, lambda: [container.progress_snapshot()],
                              _status_registry(config), status, settings, console=console)
    with _Signals(lambda signum: container.shutdown()) as signals, reporter:
        try:
            result = container.run()
        except Exception as exc:  # noqa: BLE001 - reported in the result, with its message
            failure = ContainerFailure(cid, type(exc).__name__, str(exc))
            log.debug("container %s failed", cid, exc_info=True)
            return JobResult(job.name, _failure_exit_code((failure,)), "failed",
                             time.perf_counter() - started, (container.result_so_far(),),
                             (failure,))
    return JobResult(job.name, signals.exit_code(), signals.reason(f"ended ({result.reason})"),
                     time.perf_counter() - started, (result,))


_CONFIG_ERRORS = frozenset({ConfigError.__name__, UnwritableDirectoryError.__name__})


def _failure_exit_code(failures: Iterable[ContainerFailure]) -> ExitCode:
    """CONFIG when every failure is a config error (the job cannot run as configured),
    FAILED otherwise."""
    kinds = {f.error_type for f in failures}
    return ExitCode.CONFIG if kinds and kinds <= _CONFIG_ERRORS else ExitCode.FAILED


@dataclass
class _Child:
    container_id: str
    process: Any
    result: ContainerResult | None = None
    failure: ContainerFailure | None = None
    progress: ContainerProgress | None = None
    stop_sent: bool = False
    exited_at: float | None = field(default=None)
    unreported: bool = False
    """Exited without a result; ``failure`` says why (None: stopped while starting)."""


def _run_processes(config: Config, job: JobConfig, model: JobModel, status: StatusMode,
                   settings: StatusSettings, console: Any, started: float) -> JobResult:
    ctx = multiprocessing.get_context("spawn")
    events = ctx.Queue()
    interval_ms = settings.interval_ms if status.resolve(console) is StatusMode.LINE \
        else max(settings.interval_ms, 1000)
    children = {cid: _Child(cid, ctx.Process(
        target=container_process_main, name=f"weir-container-{cid}",
        args=(config, model.to_json(), cid, events, interval_ms))) for cid in model.containers}
    for child in children.values():
        child.process.start()
    log.info("started %d containers of job '%s' as processes %s", len(children), job.name,
             ", ".join(f"{c.container_id}:{c.process.pid}" for c in children.values()))

    def stop_all(signum: int = signal.SIGTERM) -> None:
        _stop_children(children)

    reporter = StatusReporter(
        job.name, lambda: [c.progress for c in children.values() if c.progress is not None],
        _status_registry(config), status, settings, console=console)
    with _Signals(stop_all) as signals, reporter:
        _supervise(children, events, stop_all)
    events.close()
    failures = tuple(c.failure for c in children.values() if c.failure is not None)
    results = tuple(c.result for c in children.values() if c.result is not None)
    seconds = time.perf_counter() - started
    if failures:
        return JobResult(job.name, _failure_exit_code(failures), "failed", seconds, results,
                         failures)
    reasons = sorted({r.reason for r in results})
    return JobResult(job.name, signals.exit_code(),
                     signals.reason(f"ended ({', '.join(reasons)})"), seconds, results)


def _stop_children(children: dict[str, _Child]) -> None:
    """SIGTERM every live child once: each stops after its work in flight and commits."""
    for child in children.values():
        if not child.stop_sent and child.process.is_alive():
            child.stop_sent = True
            os.kill(child.process.pid, signal.SIGTERM)


def _unreported_exit(child: _Child) -> ContainerFailure | None:
    """Why ``child`` exited without a result: a failure, or None when the runner stopped it
    before it could install its SIGTERM handler (it processed nothing: not a failure)."""
    code = child.process.exitcode
    if child.stop_sent and code == -signal.SIGTERM:
        log.info("container %s was stopped while it started", child.container_id)
        return None
    return ContainerFailure(child.container_id, "ProcessDied", _death(code))


def _supervise(children: dict[str, _Child], events: Any, stop_all: Callable[[], None]) -> None:
    """Collect events until every child has exited; stop the others when one fails."""
    while True:
        _drain(children, events, stop_all, timeout=_POLL_S)
        alive = False
        for child in children.values():
            proc = child.process
            if proc.is_alive():
                alive = True
                continue
            if child.exited_at is None:
                child.exited_at = time.monotonic()
                proc.join()
            if child.result is None and child.failure is None and not child.unreported \
                    and time.monotonic() - child.exited_at > 1.0:
                child.unreported = True
                child.failure = _unreported_exit(child)
                if child.failure is not None:
                    log.error("%s", child.failure.headline())
                    stop_all()
        if not alive:
            _drain(children, events, stop_all, timeout=0.0)
            for child in children.values():
                if child.result is None and child.failure is None and not child.unreported:
                    child.unreported = True
                    child.failure = _unreported_exit(child)
            return


def _drain(children: dict[str, _Child], events: Any, stop_all: Callable[[], None], *,
           timeout: float) -> None:
    import queue as _queue
    wait = timeout
    while True:
        try:
            event: ChildEvent = events.get(timeout=wait) if wait > 0 else events.get_nowait()
        except (_queue.Empty, EOFError, OSError):
            return
        wait = 0.0
        child = children.get(event.container_id)
        if child is None:
            continue
        if event.kind is EventKind.PROGRESS:
            child.progress = event.payload
        elif event.kind is EventKind.DONE:
            child.result = event.payload
        elif event.kind is EventKind.FAILED:
            child.failure = event.payload
            log.error("%s; stopping the other containers", child.failure.headline())
            stop_all()


def _death(exitcode: int | None) -> str:
    if exitcode is None:
        return "the container process did not report and is gone"
    if exitcode < 0:
        return (f"the container process was killed by {signal.Signals(-exitcode).name} "
                f"without reporting; restart the job (it resumes from the last checkpoint)")
    return (f"the container process exited with code {exitcode} without reporting a result; "
            f"see its log lines above")
