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

``spawn`` remains available (``job.container.start.method=spawn``), and is used where the
platform has no fork server.

Example::

    >>> from weir.stores.config import Config
    >>> StartMethod.from_config(Config({"job.container.start.method": "spawn"})).value
    'spawn'
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from enum import Enum
from typing import Any

from weir.stores.config import Config, declare

__all__ = ["StartMethod", "JOB_CONTAINER_START_METHOD", "process_context", "warm_up",
           "warm_up_for", "PRELOAD"]

log = logging.getLogger("weir.runner")


class StartMethod(Enum):
    """How container processes start (``multiprocessing`` start methods)."""

    FORKSERVER = "forkserver"
    """Forked from a single-threaded server that imported Weir once (the default)."""
    SPAWN = "spawn"
    """A fresh interpreter per container (imports everything again)."""

    @classmethod
    def from_config(cls, config: Config) -> "StartMethod":
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
           "weir.engine.coordinator.client", "weir.engine.systems.filelog",
           "weir.stores.engines.rocksdb", "weir.stores.engines.lmdb")
"""What the fork server imports once for every container (a module that fails to import is
skipped: the container imports it itself, or reports the error)."""

_guard = threading.Lock()


def process_context(config: Config) -> Any:
    """The ``multiprocessing`` context that starts the job's container processes."""
    method = StartMethod.from_config(config)
    ctx = multiprocessing.get_context(method.value)
    if method is StartMethod.FORKSERVER:
        with _guard:
            ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def warm_up(config: Config) -> None:
    """Start the fork server now (it imports in its own process while the caller goes on), so
    that its imports are done by the time the first container starts. Does nothing for
    ``spawn``; never fails the job (the first start would report a real error)."""
    if StartMethod.from_config(config) is not StartMethod.FORKSERVER:
        return
    process_context(config)  # sets the preload list
    try:
        from multiprocessing import forkserver
        with _guard:
            forkserver.ensure_running()  # starts it and returns; it imports in parallel
    except Exception as exc:  # noqa: BLE001 - the first container start reports it
        log.debug("the container fork server did not start early: %s", exc)


def warm_up_for(config: Config) -> None:
    """:func:`warm_up` when ``config`` may give the job more than one container (an explicit
    count above 1, or ``auto`` on a machine with more than one usable core). Raises
    ConfigError for a bad ``job.container.start.method`` (before anything ran)."""
    from weir.engine.jobmodel.model import requested_container_count, usable_cores
    from weir.stores.errors import ConfigError

    StartMethod.from_config(config)
    try:
        count = requested_container_count(config)
    except ConfigError:
        return  # the job's checks report it
    if (usable_cores() > 1) if count is None else count > 1:
        warm_up(config)
