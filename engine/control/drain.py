"""Drain requests: stop a pipeline cleanly for a redeploy (SAMZA-REFERENCE 2.9).

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

Example::

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "drain-request.json"
    ...     request = write_drain_request(path)
    ...     read_drain_request(path) == request
    True
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from weir.engine.control.errors import DrainRequestError

__all__ = ["DrainMode", "DrainRequest", "write_drain_request", "read_drain_request",
           "drain_path_of", "request_drain", "DrainMonitor"]

DrainMode = str
DEFAULT_DRAIN_MODE: DrainMode = "DEFAULT"


@dataclass(frozen=True)
class DrainRequest:
    """Samza's DrainNotification: ``uuid``, ``runId`` (the id drain messages carry),
    ``drainMode`` and when it was written."""

    uuid: str
    run_id: str
    drain_mode: DrainMode = DEFAULT_DRAIN_MODE
    created_ms: int = 0

    def to_json(self) -> bytes:
        return orjson.dumps({"uuid": self.uuid, "runId": self.run_id,
                             "drainMode": self.drain_mode, "createdMs": self.created_ms},
                            option=orjson.OPT_INDENT_2)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_drain_request(path: Path, *, run_id: str | None = None) -> DrainRequest:
    """Write a new drain request (a fresh id; ``run_id`` defaults to it) atomically."""
    request_id = str(uuid.uuid4())
    request = DrainRequest(request_id, run_id or request_id, DEFAULT_DRAIN_MODE,
                           time.time_ns() // 1_000_000)
    _atomic_write(Path(path), request.to_json())
    return request


def drain_path_of(config: Any) -> Path:
    """The drain file of a job's (or an application's) config: ``job.drain.path``, else
    ``drain-request.json`` in its checkpoint directory."""
    from weir.engine.config.job import JobConfig
    from weir.engine.control.settings import ControlSettings

    job = JobConfig.from_config(config)
    return ControlSettings.from_config(config, checkpoint_dir=job.checkpoint_dir).drain_path


def request_drain(config: Any) -> DrainRequest:
    """Ask the running job (every stage of an application) of ``config`` to drain: what
    ``weir drain`` does. Returns the request written."""
    return write_drain_request(drain_path_of(config))


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
                            int(raw.get("createdMs", 0)))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DrainRequestError(f"the drain request {path} is not valid ({exc}); delete it and "
                                f"run `weir drain` again") from None


class DrainMonitor:
    """Looks at a drain request file at most every ``poll_ms``; shared by the tasks of one
    container. ``current()`` is the request seen last (None: there is none)."""

    def __init__(self, path: Path | None, poll_ms: int = 1000, *,
                 clock: Callable[[], float] = time.monotonic):
        self.path = Path(path) if path is not None else None
        self.poll_s = poll_ms / 1000.0
        self._clock = clock
        self._next = 0.0
        self._current: DrainRequest | None = None

    def current(self, *, force: bool = False) -> DrainRequest | None:
        if self.path is None:
            return None
        now = self._clock()
        if force or now >= self._next:
            self._next = now + self.poll_s
            self._current = read_drain_request(self.path)
        return self._current
