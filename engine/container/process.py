"""One container in its own OS process: the child side of the embedded runner.

The runner starts :func:`container_process_main` from its fork server (or with *spawn*, see
``starter.py``): either way no thread, lock or open file of the runner reaches the child; in
particular the child does not share the runner's job lock. The child reads its job model and config from the job
coordinator's HTTP endpoint named in its environment (``SAMZA_COORDINATOR_URL``,
:mod:`weir.engine.coordinator.client`) and reports its host there, or rebuilds the model from
JSON it was given: the runner hands the first job model version's containers their model and
config through the fork (they start without waiting for the endpoint, whose start, uvicorn's
import included, costs the runner ~0.25 s of CPU; the runner records their host, its own),
and containers started for a later version read theirs over HTTP. It takes its own container lock (``CONTAINER-<id>.LOCK`` in the checkpoint
directory) for its whole life, so a new run of the job refuses to start while it still works,
e.g. during its final commit after the runner died. It runs its container with SIGINT/SIGTERM
wired to a graceful stop, and reports over a ``multiprocessing`` queue:

* ``PROGRESS`` every ``interval_ms``: a :class:`~weir.engine.container.container.ContainerProgress`;
* ``DONE``: the :class:`~weir.engine.container.container.ContainerResult` (exit code 0);
* ``FAILED``: a :class:`~weir.engine.container.runner.ContainerFailure` with the error (exit code 1).

When the runner process dies without stopping it (SIGKILL, a crash), the child notices (its
parent's sentinel becomes ready) and stops as on SIGTERM: work in flight finishes, every task
commits, the process exits. No container outlives its runner.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from enum import Enum
from typing import Any

from weir.recovery.storage import ProgressMode
from weir.stores.config import Config

from weir.engine.container.starter import unblock_stop_signal

__all__ = ["EventKind", "ChildEvent", "GracefulStop", "container_process_main"]

log = logging.getLogger("weir.runner")


class EventKind(Enum):
    PROGRESS = "progress"
    DONE = "done"
    FAILED = "failed"
    LOG = "log"
    """A log record of the container: the runner logs it with its own handler, so every
    line has one format and none lands on the status line."""


@dataclass(frozen=True)
class ChildEvent:
    kind: EventKind
    container_id: str
    payload: Any


class _RunnerLogHandler(logging.Handler):
    """Sends the container's log records to the runner (``EventKind.LOG``), the message
    prefixed ``[container N]``; writes them to standard error itself once the runner is gone
    (:meth:`orphaned`) or when the queue refuses them."""

    def __init__(self, events: Any, container_id: str):
        super().__init__()
        self.events = events
        self.container_id = container_id
        self._stderr: logging.Handler | None = None

    def orphaned(self) -> None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(
            f"%(asctime)s %(levelname)s [container {self.container_id}] %(name)s: %(message)s"))
        self._stderr = handler

    def emit(self, record: logging.LogRecord) -> None:
        if self._stderr is not None:
            self._stderr.handle(record)
            return
        try:
            message = f"[container {self.container_id}] {record.getMessage()}"
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            self.events.put(ChildEvent(EventKind.LOG, self.container_id, {
                "name": record.name, "levelno": record.levelno, "levelname": record.levelname,
                "msg": message, "created": record.created, "msecs": record.msecs}))
        except Exception:  # noqa: BLE001 - the queue is closing: say it here
            self.orphaned()
            self._stderr.handle(record)


def _configure_child_logging(container_id: str, events: Any) -> _RunnerLogHandler | None:
    root = logging.getLogger()
    if root.handlers:
        return None
    handler = _RunnerLogHandler(events, container_id)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler


class GracefulStop:
    """A container process's SIGTERM/SIGINT handler: stop the container with a final commit
    (after the first signal, SIGINT raises KeyboardInterrupt: a second Ctrl-C stops at once).

    Never re-entered: a signal that lands while the handler runs returns at once. The process
    group's SIGTERM and the runner's forwarded one arrive together, and Python runs the second
    handler inside the first; ``Container.shutdown`` sets a ``threading.Event``, whose lock
    the nested handler would then wait for for ever (the container hung after its group was
    stopped)."""

    def __init__(self, container: Any, container_id: str):
        self.container = container
        self.container_id = container_id
        self._running = False  # handlers run on the main thread only: no lock needed

    def __call__(self, signum: int, frame: Any) -> None:
        if self._running:
            return  # the outer call is stopping the container
        self._running = True
        try:
            if not self.container.stop_requested:
                log.info("container %s: received %s, stopping with a final commit",
                         self.container_id, signal.Signals(signum).name)
                signal.signal(signal.SIGINT, signal.default_int_handler)
            self.container.shutdown()
        finally:
            self._running = False


def _stop_when_parent_dies(container: Any, events: Any,
                           handler: _RunnerLogHandler | None = None) -> None:
    """Stop ``container`` gracefully once the runner process is gone."""
    import multiprocessing  # here: the runner imports this module for a container process's
    from multiprocessing.connection import wait  # target, and may never start one

    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        if handler is not None:
            handler.orphaned()  # nobody logs what the queue carries now
        log.error("container %s: the runner process (pid %s) is gone; stopping with a final "
                  "commit", container.container_id, parent.pid)
        events.cancel_join_thread()  # nobody reads the queue now: never block exit on it
        container.shutdown()

    threading.Thread(target=watch, name="weir-parent-watch", daemon=True).start()


def container_process_main(config: Config | None, model_json: str | None, container_id: str,
                           events: Any, interval_ms: int,
                           environment: dict[str, str] | None = None) -> None:
    """The target of a container process; exits with 0 (done) or 1 (failed). With
    ``model_json`` None, config and model come from the job coordinator named in
    ``environment``. ``environment`` (the runner's, when it started this container) replaces
    this process's first: a process forked from the fork server starts with the server's."""
    unblock_stop_signal()  # started with SIGTERM blocked (starter.start_process)
    if environment is not None:
        os.environ.clear()
        os.environ.update(environment)
    from weir.engine.config.job import JobConfig
    from weir.engine.container.container import Container
    from weir.engine.jobmodel.model import JobModel
    from weir.engine.container.progress import ContainerFailure
    from weir.recovery.job_lock import hold_container_lock

    handler = _configure_child_logging(container_id, events)
    try:
        if model_json is None:
            config, model = _from_coordinator(container_id)
        else:
            model = JobModel.from_json(model_json)
        # Held until this process exits: a new run of the job refuses to start while this
        # container still works, even after its runner died (see recovery.job_lock).
        job = JobConfig.from_config(config)
        container_lock = hold_container_lock(job.checkpoint_dir, container_id, job=job.name)
        container = Container(config, model, container_id, progress=ProgressMode.LOG)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit 1
        log.error("container %s failed to start: %s", container_id, exc)
        events.put(ChildEvent(EventKind.FAILED, container_id,
                              ContainerFailure(container_id, type(exc).__name__, str(exc))))
        events.close()
        events.join_thread()
        sys.exit(1)

    on_signal = GracefulStop(container, container_id)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _stop_when_parent_dies(container, events, handler)
    done = threading.Event()

    def report_progress() -> None:
        while not done.wait(interval_ms / 1000):
            try:
                events.put(ChildEvent(EventKind.PROGRESS, container_id,
                                      container.progress_snapshot()))
            except Exception:  # noqa: BLE001 - progress is best effort
                return

    reporter = threading.Thread(target=report_progress, name="weir-progress", daemon=True)
    reporter.start()
    try:
        result = container.run()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit 1
        done.set()
        log.error("container %s failed: %s", container_id, exc)
        events.put(ChildEvent(EventKind.FAILED, container_id,
                              ContainerFailure(container_id, type(exc).__name__, str(exc))))
        events.close()
        events.join_thread()
        sys.exit(1)
    done.set()
    events.put(ChildEvent(EventKind.DONE, container_id, result))
    events.close()
    events.join_thread()
    container_lock.release()


def _from_coordinator(container_id: str) -> tuple[Config, Any]:
    """Config and job model from the job coordinator (``SAMZA_COORDINATOR_URL``), after
    reporting this container's host."""
    import socket

    from weir.engine.coordinator.client import setup_from_coordinator

    setup = setup_from_coordinator(container_id, socket.gethostname())
    log.info("container %s: read job model version %d (%d tasks) from the job coordinator",
             container_id, setup.version, len(setup.model.containers[container_id].tasks))
    return setup.config, setup.model
