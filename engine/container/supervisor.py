"""The container-process supervisor: the container processes of a job run by
:func:`~weir.engine.container.runner.run_job` with more than one container.

It owns the processes (:class:`_Child`: a container's process, its last progress, its result
or failure), their events (progress, result and failure reports read from the queue they share,
:func:`_drain`; an exit without a report is a failure naming how the process died, unless the
runner stopped it while it started), stopping them (SIGTERM once, so each commits, when one
fails or the runner is asked to stop: :func:`_stop_children`), never letting one outlive
``run_job`` (:func:`_end_children`: SIGTERM and keep reading their reports for a grace period,
then SIGKILL; at once on a second Ctrl-C), and following new job model versions
(:class:`_ModelFollower`: the containers whose model changed stop with a final commit and start
again on the new version; :func:`coordinator_environment` is what a container process finds in
its environment).

The runner (``runner._run_processes``) starts the children (:func:`_start_child`), calls
:func:`_supervise` until every one has exited, and builds the job's result from what they
reported; it knows nothing of queues and sentinels, this module nothing of exit codes and
results.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from weir.engine.container.progress import ContainerFailure, ContainerProgress, ContainerResult
from weir.engine.container.process import ChildEvent, EventKind
from weir.engine.container.starter import start_process
from weir.engine.coordinator.coordinator import JobCoordinator, plan_restarts
from weir.engine.jobmodel.model import JobModel

__all__ = ["coordinator_environment"]

log = logging.getLogger("weir.runner")

_POLL_S = 0.2


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
    environment: dict[str, str] = field(default_factory=dict)
    """Extra environment variables of the process (the job coordinator's URL)."""


def _stop_children(children: dict[str, _Child]) -> None:
    """SIGTERM every live child once: each stops after its work in flight and commits."""
    for child in children.values():
        _stop_child(child)


def _stop_child(child: _Child) -> None:
    """SIGTERM ``child`` once unless it has exited (an exit racing the signal is fine)."""
    if not child.stop_sent and child.process.pid is not None and child.process.is_alive():
        child.stop_sent = True
        child.process.terminate()  # ignores a process that exited since is_alive()


def _end_children(children: dict[str, _Child], events: Any, stop_all: Callable[[], None], *,
                  at_once: bool, grace_s: float) -> None:
    """Make sure no child process is left when the runner leaves abnormally: SIGTERM them
    (their final commit) and keep reading their reports, so none blocks on a full queue,
    for up to ``grace_s``; SIGKILL what is left then, or at once with ``at_once`` (a second
    Ctrl-C: stop without the final commit, as the runner itself does)."""
    started = [c for c in children.values() if c.process.pid is not None]
    if not at_once:
        stop_all()
        deadline = time.monotonic() + grace_s
        while any(c.process.is_alive() for c in started) and time.monotonic() < deadline:
            _drain(children, events, stop_all, timeout=_POLL_S)
    for child in started:
        if child.process.is_alive():
            log.error("container %s (pid %s) did not stop%s: killing it", child.container_id,
                      child.process.pid, "" if at_once else f" within {grace_s:.0f} s")
            child.process.kill()
    for child in started:
        child.process.join()


def _unreported_exit(child: _Child) -> ContainerFailure | None:
    """Why ``child`` exited without a result: a failure, or None when the runner stopped it
    before it could install its SIGTERM handler (it processed nothing: not a failure)."""
    code = child.process.exitcode
    if child.stop_sent and code == -signal.SIGTERM:
        log.info("container %s was stopped while it started", child.container_id)
        return None
    return ContainerFailure(child.container_id, "ProcessDied", _death(code))


def _supervise(children: dict[str, _Child], events: Any, stop_all: Callable[[], None],
               follower: "_ModelFollower | None" = None) -> None:
    """Collect events until every child has exited; stop the others when one fails.
    ``follower`` restarts children for new job model versions (dynamic config)."""
    while True:
        _wait_for_news(children, events, stop_all)
        if follower is not None:
            follower.tick()
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
        if not alive and (follower is None or not follower.busy):
            _drain(children, events, stop_all, timeout=0.0)
            for child in children.values():
                if child.result is None and child.failure is None and not child.unreported:
                    child.unreported = True
                    child.failure = _unreported_exit(child)
            return


def _wait_for_news(children: dict[str, _Child], events: Any,
                   stop_all: Callable[[], None]) -> None:
    """Wait up to ``_POLL_S`` for the children's reports, or, once every live child has
    reported its end, for their exits (its process sentinel): the runner notices the last
    exit at once, not at its next poll."""
    live = [c for c in children.values() if c.process.pid is not None and c.process.is_alive()]
    if live and all(c.result is not None or c.failure is not None for c in live):
        from multiprocessing.connection import wait  # containers as processes only

        wait([c.process.sentinel for c in live], timeout=_POLL_S)
        _drain(children, events, stop_all, timeout=0.0)
    else:
        _drain(children, events, stop_all, timeout=_POLL_S)


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
        if event.kind is EventKind.LOG:
            _relog(event.payload)
            continue
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


def _relog(fields: dict) -> None:
    """Log a container's record with the runner's handlers (one format for every line,
    above the status line on a terminal)."""
    record = logging.makeLogRecord(fields)
    logging.getLogger(record.name).handle(record)


def _death(exitcode: int | None) -> str:
    if exitcode is None:
        return "the container process did not report and is gone"
    if exitcode < 0:
        return (f"the container process was killed by {signal.Signals(-exitcode).name} "
                f"without reporting; restart the job (it resumes from the last checkpoint)")
    return (f"the container process exited with code {exitcode} without reporting a result; "
            f"see its log lines above")


# -- the job coordinator: container processes and new job model versions ------------------

def coordinator_environment(coordinator: JobCoordinator, cid: str,
                            version: int | None) -> dict[str, str]:
    """What a container process finds in its environment: the coordinator's URL, its id and
    the job model version it runs (the current one unless given)."""
    from weir.engine.coordinator.client import container_environment

    settings = coordinator.settings
    return container_environment(
        coordinator.url or "", cid, version if version is not None else coordinator.snapshot.version,
        timeout_ms=settings.client_timeout_ms, retry_ms=settings.client_retry_ms,
        token=coordinator.container_token)


def _start_child(child: _Child) -> None:
    """Start ``child``'s process (it sets its environment itself, see ``spawn``); a fork server
    it starts survives a SIGTERM to the process group (``starter.start_process``)."""
    start_process(child.process)


class _ModelFollower:
    """Moves the container processes to each new job model version, one version at a time:
    the containers whose model changed (and those the new model drops) are stopped with
    SIGTERM, so they commit; once every one of them has exited and reported, the changed and
    new containers start with the new version. Containers whose model is unchanged keep
    running."""

    def __init__(self, coordinator: JobCoordinator, model: JobModel,
                 children: dict[str, _Child], spawn: Callable[[str, int], _Child],
                 stopping: Callable[[], bool]):
        self.coordinator = coordinator
        self.model = model
        self.version = coordinator.version_of(model)
        self.children = children
        self.spawn = spawn
        self.stopping = stopping
        self.retired: list[_Child] = []
        self._target: Any = None
        self._stopped: tuple[str, ...] = ()
        self._start: tuple[str, ...] = ()

    @property
    def busy(self) -> bool:
        return self._target is not None

    def tick(self) -> None:
        if self._target is None:
            snap = self.coordinator.snapshot
            if snap is None or snap.version == self.version or self.stopping() or \
                    any(c.failure is not None for c in self.children.values()):
                return
            restart, stop, start = plan_restarts(self.model, snap.model)
            self._target, self._stopped, self._start = snap, restart + stop, restart + start
            log.info("job model version %d: stopping container(s) %s with a final commit, "
                     "then starting %s", snap.version, ", ".join(self._stopped) or "none",
                     ", ".join(self._start) or "none")
            for cid in self._stopped:
                _stop_child(self.children[cid])
        for cid in self._stopped:
            child = self.children[cid]
            if child.process.is_alive() or (child.result is None and child.failure is None
                                            and not child.unreported):
                return  # still stopping, or its last report is not read yet
        if self.stopping() or any(c.failure is not None for c in self.children.values()):
            self._target = None  # the job is stopping: start nothing new
            return
        target = self._target
        for cid in self._stopped:
            self.retired.append(self.children.pop(cid))
        for cid in self._start:
            child = self.spawn(cid, target.version)
            self.children[cid] = child
            _start_child(child)
        log.info("job model version %d is running (containers %s)", target.version,
                 ", ".join(self.children))
        self.model, self.version, self._target = target.model, target.version, None
