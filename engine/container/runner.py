"""The embedded runner: run a job's containers on this machine, in this process or several.

:func:`run_job` is what ``weir run job.properties`` does:

1. check the config (bad values raise :class:`~weir.stores.errors.ConfigError` with ``file:line``;
   unknown keys are logged as warnings with the closest known key);
2. read every input stream's partition count and build the job model
   (:func:`~weir.engine.jobmodel.model.build_job_model`);
3. with ``job.container.count`` = 1, run the one container in this process (the job
   coordinator's HTTP endpoint is then served only when ``job.coordinator.http.serve`` or a
   set port asks for it); with more, serve the endpoint and run each container in its own OS
   process (forked from a warm fork server, ``starter.py``), which reads its model over HTTP
   and reports progress and its result back over a queue
   (:mod:`~weir.engine.container.supervisor` supervises them). When one fails, the others are
   stopped (SIGTERM, so they commit) and the result names the failed container and why;
   The runner holds the job lock (:class:`~weir.recovery.job_lock.JobLock`, in
   ``task.checkpoint.path``) for the whole run, its record naming the run (a fresh id that
   ``weir drain`` addresses; a drain request found at the start for a run that ended is
   continued or moved aside, :func:`~weir.engine.control.drain.settle_drain_request`): a
   second ``weir run`` of the same job fails
   fast with :class:`~weir.recovery.errors.JobLockedError` naming the holder; each container
   process also holds its own container lock, so a new run never starts beside containers
   of an old one whose runner died;
4. SIGINT / SIGTERM stop the job gracefully: work in flight finishes (up to
   ``task.shutdown.ms``), every task commits, stores close. The handlers are installed before
   the job is prepared: a signal that comes while it starts stops it before (or as soon as)
   its containers start. A second SIGINT stops at once
   without the final commit (processing resumes from the last checkpoint). No container
   process outlives ``run_job``: when the runner leaves abnormally (a second SIGINT kills
   them; any other error SIGTERMs them and waits ``task.shutdown.ms`` + 10 s, reading their
   reports, before it kills what is left);
5. the job ends by itself when all its inputs are bounded and have ended.

The :class:`JobResult` has the exit code (:class:`ExitCode`), per-stream message counts of all
containers and a summary for the terminal.

Example::

    result = run_job(load_config("job.properties"))
    print("\\n".join(result.summary_lines()))
    sys.exit(result.exit_code)
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from weir.recovery.checkpoint import FileCheckpointManager
from weir.recovery.job_lock import JobLock
from weir.recovery.storage import ProgressMode
from weir.stores.config import Config
from weir.stores.errors import ConfigError

from weir.engine.container.progress import ContainerFailure, ContainerResult
from weir.engine.container.process import container_process_main
from weir.engine.container.starter import process_context, warm_up_for
from weir.engine.config.job import JobConfig
from weir.engine.container.container import Container, create_changelog_streams
from weir.engine.container.preflight import check_job, preflight
from weir.engine.container.settings import JobSettings
from weir.engine.errors import EngineError, UnwritableDirectoryError
from weir.engine.jobmodel.model import JobModel, build_job_model
from weir.engine.runloop.settings import TASK_SHUTDOWN_MS
from weir.engine.model import SystemStream
from weir.engine.container.status import StatusMode, StatusReporter, StatusSettings
from weir.engine.control.drain import RUN_RECORD_KEY, RunTarget, settle_drain_request
from weir.engine.container.supervisor import (_Child, _ModelFollower, _end_children, _start_child,
                                              _stop_children, _supervise, coordinator_environment)
from weir.engine.config.streams import all_input_streams
from weir.engine.coordinator.coordinator import JobCoordinator, ModelChange, StateReset
from weir.engine.systems.registry import SystemRegistry

__all__ = ["ExitCode", "JobResult", "ContainerFailure", "PreparedJob", "containers_in_process",
           "prepare", "prepare_job", "run_job"]

log = logging.getLogger("weir.runner")

_EXIT_MARGIN_S = 10.0
"""How long past ``task.shutdown.ms`` a container may take to commit and exit when the runner
leaves abnormally, before it is killed."""


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

def prepare_job(config: Config, *, registry: SystemRegistry | None = None,
                coordinator: JobCoordinator | None = None,
                before_writes: Callable[[JobConfig], Any] | None = None
                ) -> tuple[JobConfig, SystemRegistry, JobModel]:
    """Check ``config`` and build the job model from the input streams' partition counts
    (see :func:`prepare` for the settings too).

    With a ``coordinator`` the job model comes from it (:meth:`JobCoordinator.start`: the
    config written to and read back from the coordinator stream, immutable settings checked,
    assignments kept stable). Raises ConfigError for bad values (unknown keys are only
    logged; ``task.class`` is imported; every settings object is built and every directory the
    job writes is checked, :func:`~weir.engine.container.preflight.check_job`) and
    StreamNotFoundError for an input stream that does not exist. Nothing is created before
    these checks pass; ``before_writes(job)`` (``run_job`` takes the job lock there) is called
    after them and before anything is written.
    """
    prepared = prepare(config, registry=registry, coordinator=coordinator,
                       before_writes=before_writes)
    return prepared.job, prepared.registry, prepared.model


@dataclass(frozen=True)
class PreparedJob:
    """A checked job: its settings (parsed once, for the job's effective config), systems and
    job model; its changelog streams exist."""

    config: Config
    settings: JobSettings
    registry: SystemRegistry
    model: JobModel

    @property
    def job(self) -> JobConfig:
        return self.settings.job


def prepare(config: Config, *, registry: SystemRegistry | None = None,
            coordinator: JobCoordinator | None = None,
            before_writes: Callable[[JobConfig], Any] | None = None) -> PreparedJob:
    """:func:`prepare_job`, returning the parsed settings as well. With a coordinator, the
    effective config is the one read back from its stream (it differs from ``config`` when
    dynamic config changed keys the file does not set); the settings are parsed from it. The
    coordinator records the host of the containers :func:`containers_in_process` names with
    the model's assignments (:func:`run_job` runs them in this process)."""
    # The keys, the task class, every settings object and every directory to write, before
    # anything is created: the same check as `weir config show`.
    checked = preflight(config, registry=registry)
    for warning in checked.review.warnings:
        log.warning("%s", warning.message)
    for note in checked.review.notes:
        log.info("%s", note.message)
    job, registry, settings = checked.job, checked.registry, checked.settings
    if before_writes is not None:
        before_writes(job)
    if coordinator is not None:
        model = coordinator.start(local=containers_in_process)
        if dict(model.config) != dict(config):  # dynamic config: parse what will run
            config = model.config
            settings = check_job(config, JobConfig.from_config(config), registry)
    else:
        model = build_job_model(config, registry.partition_counts(all_input_streams(config)))
    # Created here, before any container starts, so containers never race to create them.
    create_changelog_streams(list(settings.stores), registry, model)
    return PreparedJob(config, settings, registry, model)


# -- signals ------------------------------------------------------------------------------

class _Signals:
    """SIGINT/SIGTERM handlers for the whole of a run (main thread only), installed before the
    job is prepared: the first signal asks for a graceful stop of whatever runs then (the
    stop target :meth:`attach` set: the in-process container, or the container processes);
    one that arrives before the containers start is kept, and the containers are not started
    (or are stopped as soon as they are). After the first signal, SIGINT raises
    KeyboardInterrupt again."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._on_stop: Callable[[int], None] | None = None
        self._handling = False  # handlers run on the main thread only: no lock needed

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def attach(self, on_stop: Callable[[int], None]) -> None:
        """Stop with ``on_stop`` from now on; at once when a signal came already."""
        self._on_stop = on_stop
        if self.received is not None:
            on_stop(self.received)

    def detach(self) -> None:
        self._on_stop = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self._handling:
            return  # a signal inside this handler (two at once): the outer call stops the job
        self._handling = True  # never re-entered: a stop target may take a lock (an Event)
        try:
            if self.received is None:
                self.received = signum
                log.warning("received %s: stopping after the work in flight and a final "
                            "commit (press Ctrl-C again to stop at once, without it)",
                            signal.Signals(signum).name)
                signal.signal(signal.SIGINT, signal.default_int_handler)
            if self._on_stop is not None:
                self._on_stop(signum)
        finally:
            self._handling = False

    def reason(self, default: str) -> str:
        if self.received is None:
            return default
        return f"stopped by {signal.Signals(self.received).name}"

    def exit_code(self) -> ExitCode:
        return ExitCode.INTERRUPTED if self.received == signal.SIGINT else ExitCode.OK


# -- running ------------------------------------------------------------------------------

def run_job(config: Config, *, status: StatusMode = StatusMode.AUTO,
            console: Any = None, progress: ProgressMode | None = None,
            reset: StateReset = StateReset.KEEP) -> JobResult:
    """Run the job of ``config`` to its end (or until stopped); see the module docstring.

    The job coordinator (``weir.engine.coordinator``) writes ``config`` to the job's
    coordinator stream, builds the job model from it, serves it to the container processes
    over HTTP and follows config written while the job runs; ``reset`` (``--reset-state``)
    lets it delete the job's state to accept changed immutable settings. A job whose one
    container runs in this process gets no HTTP endpoint unless
    ``job.coordinator.http.serve=always`` or ``job.coordinator.http.port`` asks for one (the
    container reads nothing over it; its locality goes down with the model's assignments).

    ConfigError / StreamNotFoundError from preparing the job propagate (nothing ran); every
    failure while running is in the result (``exit_code`` FAILED, ``failures``)."""
    _refuse_unguarded_run()
    started = time.perf_counter()
    warm_up_for(config)  # the containers' fork server imports while the coordinator starts
    stack = contextlib.ExitStack()
    coordinator = JobCoordinator(config, reset=reset)
    # One run of a job at a time: the lock is held for the whole run (taken after the checks,
    # which create nothing, and before the coordinator writes its stream or a reset moves
    # state), and only under it are temp files of interrupted checkpoint writes removed. The
    # coordinator's run lock comes first: it also refuses a run with other directories.
    run_id = uuid.uuid4().hex  # names this run in its job lock; `weir drain` addresses it
    locks: list[JobLock] = []
    # A SIGTERM while the job is prepared (a process-group stop as it starts) is kept and
    # stops the job before its containers start: never the default action's bare exit.
    signals = stack.enter_context(_Signals())
    try:
        prepared = prepare(config, registry=coordinator.registry, coordinator=coordinator,
                           before_writes=lambda job: (coordinator.claim_run(), locks.append(
                               _take_job_lock(job, stack, run_id))))
        job, registry, model = prepared.job, prepared.registry, prepared.model
        job_settings = prepared.settings  # parsed once; handed to the container
        # A drain request for a run that ended is continued (a task began it), or moved aside
        # and said so: it never makes this run stop at once.
        settle_drain_request(job_settings.control.drain_path, [job.checkpoint_dir],
                             _run_target(locks[0], run_id))
        config = model.config  # the job's config as the coordinator stream holds it
        settings = StatusSettings.from_config(config)
        coordinator.start_catch_up()
        generations: list[JobResult] = []
        while True:
            if signals.received is not None and not generations:
                log.info("job '%s' stops before its containers start", job.name)
                return JobResult(job.name, signals.exit_code(), signals.reason(""),
                                 time.perf_counter() - started)
            version = coordinator.version_of(model)
            in_process = bool(containers_in_process(model))
            if in_process:
                if coordinator.settings.serves_in_process:
                    coordinator.serve()
                result = _run_in_process(config, job, registry, model, status, settings,
                                         console, progress or ProgressMode.AUTO, started,
                                         coordinator, job_settings, signals)
            else:
                # The container processes read their model over HTTP: they start while the
                # endpoint does (their requests wait in its socket's backlog).
                coordinator.serve(wait=False)
                result = _run_processes(config, job, model, status, settings, console,
                                        started, coordinator, signals)
            generations.append(result)
            latest = coordinator.snapshot
            # Container processes follow new models themselves (_ModelFollower); a container
            # in this process stops for a new model, which then runs here or in processes.
            if not in_process or result.exit_code is not ExitCode.OK \
                    or result.reason.startswith("stopped by") or latest.version == version:
                return _combined(generations)
            log.info("job model version %d has %d container(s): starting them",
                     latest.version, len(latest.model.containers))
            model, config = latest.model, latest.model.config
            job_settings = JobSettings.from_config(config, registry, job=job)
    finally:
        coordinator.stop()
        stack.close()


def _refuse_unguarded_run() -> None:
    """A container process imports the runner's main module (as ``__mp_main__``); a script
    that calls :func:`run_job` at module level would run the job again in every container.
    Say so, instead of failing on the job lock the script itself holds."""
    if "__mp_main__" not in sys.modules:  # only a multiprocessing child has one
        return
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == "__mp_main__":
            raise EngineError(
                f"run_job() was called while a container process imported your script "
                f"{frame.f_code.co_filename} as its main module: a job with more than one "
                f"container starts a process per container, and each imports the main "
                f"module. Call run_job under `if __name__ == \"__main__\":` "
                f"(docs/RUNNING.md)")
        frame = frame.f_back


def containers_in_process(model: JobModel) -> tuple[str, ...]:
    """The containers of ``model`` that :func:`run_job` runs inside its own process: the one
    container of a one-container model, none otherwise (each runs in its own process)."""
    return tuple(model.containers) if len(model.containers) == 1 else ()


def _take_job_lock(job: JobConfig, stack: contextlib.ExitStack, run_id: str) -> JobLock:
    lock = stack.enter_context(JobLock.acquire(job.checkpoint_dir, job=job.name, role="weir run",
                                               details={RUN_RECORD_KEY: run_id}))
    FileCheckpointManager(job.checkpoint_dir).remove_stray_temps(lock)
    return lock


def _run_target(lock: JobLock, run_id: str) -> RunTarget:
    """This run, as a drain request names it."""
    holder = lock.holder
    return RunTarget(run_id, str(lock.path.absolute()), holder.pid, holder.host, holder.since,
                     str(holder.details.get("job", "")))


def _combined(generations: list[JobResult]) -> JobResult:
    """One result for runs of successive job models (dynamic config moved the job between
    running in this process and in container processes)."""
    last = generations[-1]
    if len(generations) == 1:
        return last
    return JobResult(last.job, last.exit_code, last.reason, last.seconds,
                     tuple(c for g in generations for c in g.containers),
                     tuple(f for g in generations for f in g.failures))


def _status_registry(config: Config) -> Callable[[list], Mapping]:
    registry = SystemRegistry(config)  # its own admins: the status thread shares nothing
    return registry.metadata


def _run_in_process(config: Config, job: JobConfig, registry: SystemRegistry, model: JobModel,
                    status: StatusMode, settings: StatusSettings, console: Any,
                    progress: ProgressMode, started: float,
                    coordinator: JobCoordinator | None = None,
                    job_settings: JobSettings | None = None,
                    signals: _Signals | None = None) -> JobResult:
    cid = next(iter(model.containers))
    container = Container(config, model, cid, registry=registry, job=job,
                          settings=job_settings, progress=progress)
    unsubscribe: Callable[[], None] | None = None
    if coordinator is not None:
        coordinator.record_locality(cid, coordinator.host)

        def on_change(change: ModelChange) -> None:
            if cid in change.restart or cid in change.stop:
                log.info("container %s stops with a final commit for job model version %d",
                         cid, change.new.version)
                container.shutdown()

        unsubscribe = coordinator.on_change(on_change)
    reporter = StatusReporter(job.name, lambda: [container.progress_snapshot()],
                              _status_registry(config), status, settings, console=console)
    signals = _Signals() if signals is None else signals  # run_job's, installed before it prepared
    with reporter:
        signals.attach(lambda signum: container.shutdown())
        try:
            result = container.run()
        except Exception as exc:  # noqa: BLE001 - reported in the result, with its message
            failure = ContainerFailure(cid, type(exc).__name__, str(exc))
            log.debug("container %s failed", cid, exc_info=True)
            return JobResult(job.name, _failure_exit_code((failure,)), "failed",
                             time.perf_counter() - started, (container.result_so_far(),),
                             (failure,))
        finally:
            signals.detach()
            if unsubscribe is not None:
                unsubscribe()
    return JobResult(job.name, signals.exit_code(), signals.reason(f"ended ({result.reason})"),
                     time.perf_counter() - started, (result,))


_CONFIG_ERRORS = frozenset({ConfigError.__name__, UnwritableDirectoryError.__name__})


def _failure_exit_code(failures: Iterable[ContainerFailure]) -> ExitCode:
    """CONFIG when every failure is a config error (the job cannot run as configured),
    FAILED otherwise."""
    kinds = {f.error_type for f in failures}
    return ExitCode.CONFIG if kinds and kinds <= _CONFIG_ERRORS else ExitCode.FAILED


# -- container processes (weir.engine.container.supervisor supervises them) ----------------

def _run_processes(config: Config, job: JobConfig, model: JobModel, status: StatusMode,
                   settings: StatusSettings, console: Any, started: float,
                   coordinator: JobCoordinator | None = None,
                   signals: _Signals | None = None) -> JobResult:
    ctx = process_context(config)
    events = ctx.Queue()
    interval_ms = settings.interval_ms if status.resolve(console) is StatusMode.LINE \
        else max(settings.interval_ms, 1000)

    def spawn(cid: str, version: int | None = None) -> _Child:
        # The container takes this process's environment as of now (as a spawned child would;
        # one forked from the fork server starts with the server's), plus, with a
        # coordinator, the variables naming its HTTP endpoint, where it reads model and config.
        if coordinator is None:
            return _Child(cid, ctx.Process(
                target=container_process_main, name=f"weir-container-{cid}",
                args=(config, model.to_json(), cid, events, interval_ms, dict(os.environ))))
        extra = coordinator_environment(coordinator, cid, version)
        # The first version's containers take model and config through the fork: they start
        # while the endpoint does, without waiting for it (their host, this one, is recorded
        # below); a container of a later version reads its model over HTTP.
        handed = (config, model.to_json()) if version == first_version else (None, None)
        child = _Child(cid, ctx.Process(target=container_process_main,
                                        name=f"weir-container-{cid}",
                                        args=(*handed, cid, events, interval_ms,
                                              {**os.environ, **extra})))
        child.environment = extra
        return child

    version = first_version = coordinator.version_of(model) if coordinator is not None else None
    children = {cid: spawn(cid, version) for cid in model.containers}

    def stop_all(signum: int = signal.SIGTERM) -> None:
        _stop_children(children)

    signals = _Signals() if signals is None else signals  # run_job's, installed before it prepared
    try:
        for child in children.values():
            _start_child(child)
        if coordinator is not None:
            # These processes run on this host; one started for a later model version reads
            # its model over HTTP and reports its host there itself.
            for cid in children:
                coordinator.record_locality(cid, coordinator.host)
        # A signal that came while they started (or before) stops them now.
        signals.attach(stop_all)
        log.info("started %d containers of job '%s' as processes %s", len(children), job.name,
                 ", ".join(f"{c.container_id}:{c.process.pid}" for c in children.values()))
        if coordinator is not None:
            coordinator.wait_served()  # a failed endpoint stops the containers (below)
        reporter = StatusReporter(
            job.name, lambda: [c.progress for c in list(children.values())
                               if c.progress is not None],
            _status_registry(config), status, settings, console=console)
        follower = None if coordinator is None else _ModelFollower(
            coordinator, model, children, spawn, lambda: signals.received is not None)
        with reporter:
            _supervise(children, events, stop_all, follower)
    except BaseException as exc:
        # No container outlives run_job: whatever stopped the runner (a second Ctrl-C, a bug),
        # the containers stop too before it propagates.
        _end_children(children, events, stop_all,
                      at_once=isinstance(exc, KeyboardInterrupt),
                      grace_s=TASK_SHUTDOWN_MS.get(config) / 1000 + _EXIT_MARGIN_S)
        raise
    finally:
        signals.detach()
    events.close()
    everyone = [*(follower.retired if follower else []), *children.values()]
    failures = tuple(c.failure for c in everyone if c.failure is not None)
    results = tuple(c.result for c in everyone if c.result is not None)
    seconds = time.perf_counter() - started
    if failures:
        return JobResult(job.name, _failure_exit_code(failures), "failed", seconds, results,
                         failures)
    reasons = sorted({r.reason for r in results})
    return JobResult(job.name, signals.exit_code(),
                     signals.reason(f"ended ({', '.join(reasons)})"), seconds, results)
