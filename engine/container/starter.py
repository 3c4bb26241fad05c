"""How the embedded runner starts container processes: from a warm fork server by default.

A container process needs Weir's engine, its stores and the coordinator client imported
before it can read its job model; in a fresh interpreter (``spawn``) that costs ~0.3-0.5 s of
CPU per container, a sixth of a one-million-event job on two cores. With
``job.container.start.method=forkserver`` (the default where the platform has it) ``weir run``
starts one *fork server* as soon as it has read the config and knows the job may use more than
one process (before it imports the runner; :func:`run_job` does it too when called directly): a
single-threaded process that imports those modules once and forks each container from
itself. Its import overlaps the runner's own start (coordinator stream, job model), and every
container, including ones restarted for a new job model version, starts in milliseconds.

Forking from the server, not from the runner, keeps what ``spawn`` guarantees: no thread,
lock or open file of the runner (its HTTP server, its job lock, its coordinator-stream
writer) reaches a container. Each container still gets the runner's current ``sys.path``,
working directory and main module (multiprocessing prepares them per child), and its own
environment variables through :func:`weir.engine.container.process.container_process_main`
(a forked child would otherwise see the server's environment).

The fork server outlives a SIGTERM sent to the whole process group (``kill -TERM -PGID``,
``timeout``, systemd's default stop): it starts with SIGTERM blocked
(:func:`start_process`), so the signal meant to stop the job cannot kill it while its
containers still commit (the runner would read their lost exit status as code 255). It still
goes away with the runner (it exits when the runner's end of its pipe closes). Its children
inherit the blocked signal; :func:`~weir.engine.container.process.container_process_main`
unblocks it first thing, so a SIGTERM sent while a container starts is delivered then.

``spawn`` remains available (``job.container.start.method=spawn``), and is used where the
platform has no fork server.

Example::

    >>> from weir.stores.config import Config
    >>> StartMethod.from_config(Config({"job.container.start.method": "spawn"})).value
    'spawn'
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from enum import Enum
from typing import Any

from weir.stores.config import Config, declare
from weir.stores.engines.registry import preload_modules

__all__ = ["StartMethod", "JOB_CONTAINER_START_METHOD", "process_context", "start_process",
           "unblock_stop_signal", "warm_up", "warm_up_for", "PRELOAD", "preload"]

log = logging.getLogger("weir.runner")


class StartMethod(Enum):
    """How container processes start (``multiprocessing`` start methods)."""

    FORKSERVER = "forkserver"
    """Forked from a single-threaded server that imported Weir once (the default)."""
    SPAWN = "spawn"
    """A fresh interpreter per container (imports everything again)."""

    @classmethod
    def from_config(cls, config: Config) -> "StartMethod":
        """The configured method, ``spawn`` where the platform has no fork server. Imports
        ``multiprocessing`` (a one-container job in this process never calls it)."""
        import multiprocessing

        method = cls(JOB_CONTAINER_START_METHOD.get(config))
        if method is cls.FORKSERVER and "forkserver" not in multiprocessing.get_all_start_methods():
            return cls.SPAWN
        return method


JOB_CONTAINER_START_METHOD = declare(
    "job.container.start.method", str, StartMethod.FORKSERVER.value,
    "How the runner starts container processes when a job has more than one container: "
    "`forkserver` forks each from one server process that imported Weir once (started early, "
    "so its imports overlap the runner's start; containers start in milliseconds), `spawn` "
    "starts a fresh interpreter per container. Neither passes the runner's threads, locks or "
    "open files to a container. `forkserver` falls back to `spawn` where the platform lacks it.",
    component="container", choices=tuple(m.value for m in StartMethod))

PRELOAD = ("weir.engine.container.process", "weir.engine.container.container",
           "weir.engine.coordinator.client", "weir.engine.systems.filelog")
"""What the fork server imports once for every container, before the modules the registered
store engines name (:func:`preload`). A module that fails to import is skipped: the container
imports it itself, or reports the error."""


def preload() -> list[str]:
    """Every module the fork server imports: :data:`PRELOAD`, then each registered store
    engine's ``preload`` (docs/ENGINES.md)."""
    return [*PRELOAD, *(m for m in preload_modules() if m not in PRELOAD)]

_guard = threading.Lock()


def process_context(config: Config) -> Any:
    """The ``multiprocessing`` context that starts the job's container processes."""
    import multiprocessing

    method = StartMethod.from_config(config)
    ctx = multiprocessing.get_context(method.value)
    if method is StartMethod.FORKSERVER:
        with _guard:
            ctx.set_forkserver_preload(preload())
    return ctx


@contextlib.contextmanager
def _stop_signal_blocked() -> Iterator[None]:
    """SIGTERM blocked in the calling thread for the block: a process started in it (the fork
    server, a spawned container) inherits the blocked signal; a SIGTERM that reaches this
    process meanwhile is delivered when the block ends."""
    # Starting multiprocessing's resource tracker unblocks SIGTERM in the calling thread (it
    # blocks it around its own start): the tracker runs before the mask is set, so a start
    # inside the block finds it running and leaves the mask alone.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def start_process(process: Any) -> None:
    """Start a container ``process`` of a context from :func:`process_context`, with SIGTERM
    blocked in what it starts: a fork server started (or restarted) for it survives a SIGTERM
    to the process group; the container unblocks it itself
    (:func:`unblock_stop_signal`)."""
    with _stop_signal_blocked():
        process.start()


def unblock_stop_signal() -> None:
    """Undo what :func:`start_process` passed on: called first thing in a container process.
    A SIGTERM that arrived since the process started is delivered now."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def warm_up(config: Config) -> None:
    """Start the fork server now (it imports in its own process while the caller goes on), so
    that its imports are done by the time the first container starts. Does nothing for
    ``spawn``; never fails the job (the first start would report a real error)."""
    if StartMethod.from_config(config) is not StartMethod.FORKSERVER:
        return
    process_context(config)  # sets the preload list
    try:
        from multiprocessing import forkserver
        with _guard, _stop_signal_blocked():
            forkserver.ensure_running()  # starts it and returns; it imports in parallel
    except Exception as exc:  # noqa: BLE001 - the first container start reports it
        log.debug("the container fork server did not start early: %s", exc)


def warm_up_for(config: Config) -> None:
    """:func:`warm_up` when ``config`` may give the job more than one container (an explicit
    count above 1, or ``auto`` on a machine with more than one usable core). Raises
    ConfigError for a bad ``job.container.start.method`` (before anything ran)."""
    from weir.engine.jobmodel.model import requested_container_count, usable_cores
    from weir.stores.errors import ConfigError

    StartMethod(JOB_CONTAINER_START_METHOD.get(config))  # a bad value fails here, nothing ran
    try:
        count = requested_container_count(config)
    except ConfigError:
        return  # the job's checks report it
    if (usable_cores() > 1) if count is None else count > 1:
        warm_up(config)
