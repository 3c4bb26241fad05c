"""Bounded connections of the job coordinator's HTTP endpoint.

uvicorn arms its keep-alive timer only after a response, and its ``limit_concurrency`` counts
open connections: connections that never send a request stayed open for ever, and once as many
were open as the limit, every request, the job's containers' included, was answered 503. This
module bounds what a client can hold, in uvicorn's own HTTP protocol (a subclass of its
httptools protocol, :func:`bounded_protocol`), and keeps room for the job's own containers:

* **idle**: a connection without a request in progress (new, or between requests) closes
  after ``job.coordinator.http.keepalive.ms``;
* **request read**: from a request's first byte, its headers and body must arrive within
  ``job.coordinator.http.request.timeout.ms``; else it is answered 408 and closed;
* **connections** (:class:`ConnectionTable`): at most ``job.coordinator.http.max.connections``
  open, at most ``job.coordinator.http.max.connections.per.client`` from one address. A new
  connection over a limit closes the oldest idle one under it (the client's own, for the
  per-client limit), so a flood of idle sockets never locks anyone out. When every one is
  busy, the new connection takes one of :data:`CONTAINER_SLOTS` further slots, where only a
  request of the job's containers (their token, :data:`CONTAINER_TOKEN_HEADER`) is served and
  anything else is answered 503 with ``connection: close``; when those are taken too it is
  closed at once (clients retry).

Everything here runs on the endpoint's event loop thread; :meth:`ConnectionTable.counts` may
be read from any thread.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Any

from weir.engine.coordinator.settings import (JOB_COORDINATOR_HTTP_MAX_CONNECTIONS,
                                              JOB_COORDINATOR_HTTP_MAX_CONNECTIONS_PER_CLIENT,
                                              JOB_COORDINATOR_HTTP_REQUEST_TIMEOUT_MS,
                                              CoordinatorSettings)

__all__ = ["Admission", "CloseReason", "ConnectionCounts", "ConnectionLimits",
           "ConnectionTable", "CONTAINER_SLOTS", "CONTAINER_TOKEN_HEADER", "ADMISSION_SCOPE_KEY",
           "bounded_protocol"]

log = logging.getLogger("weir.coordinator.http")

CONTAINER_SLOTS = 16
"""Connections beyond ``job.coordinator.http.max.connections`` that serve only the job's own
containers."""
CONTAINER_TOKEN_HEADER = "X-Weir-Container-Token"
"""The header a container of the job sends its token in (``WEIR_COORDINATOR_TOKEN``)."""
ADMISSION_SCOPE_KEY = "weir.admission"
"""The ASGI scope key that carries a request's connection's :class:`Admission` (with the
limit it is over) to the application."""
_WARN_EVERY_S = 10.0


class Admission(Enum):
    """What a new connection may do."""

    SERVE = "serve"
    """Within the limits: every request is served."""
    CONTAINERS_ONLY = "containers-only"
    """In a slot kept for the job's containers: other requests get 503 and the connection
    closes."""
    REFUSE = "refuse"
    """Over every limit: closed at once."""


class CloseReason(Enum):
    """Why the endpoint closed a connection (the ``reason`` label of
    ``weir_coordinator_http_closed_connections_total``)."""

    IDLE = "idle"
    REQUEST_TIMEOUT = "request-timeout"
    EVICTED = "evicted"
    REFUSED = "refused"
    NOT_A_CONTAINER = "not-a-container"


@dataclass(frozen=True)
class ConnectionLimits:
    """The endpoint's connection limits, in seconds where they are times."""

    max_connections: int = 256
    per_client: int = 64
    keepalive_s: float = 5.0
    request_s: float = 10.0
    container_slots: int = CONTAINER_SLOTS

    @classmethod
    def from_settings(cls, settings: CoordinatorSettings) -> "ConnectionLimits":
        return cls(settings.http_max_connections, settings.http_max_connections_per_client,
                   settings.http_keepalive_ms / 1000, settings.http_request_timeout_ms / 1000)


@dataclass(frozen=True)
class ConnectionCounts:
    """A snapshot of the open connections."""

    open: int
    reading: int
    """Connections whose request is being read (its first byte arrived, not its end)."""
    container_slots: int
    """Connections in the slots kept for the job's containers."""


@dataclass
class _Entry:
    client: str
    slot: Admission


class ConnectionTable:
    """The open connections of one endpoint (see the module docstring); a connection is any
    object with ``is_idle()`` and ``close_now(reason)``."""

    def __init__(self, limits: ConnectionLimits):
        self.limits = limits
        self._open: dict[Any, _Entry] = {}  # insertion order: oldest first
        self._general = 0
        self._per_client: Counter[str] = Counter()
        self._slots = 0
        self.reading = 0
        self.closed: dict[CloseReason, int] = dict.fromkeys(CloseReason, 0)
        self._warned: dict[str, float] = {}

    def counts(self) -> ConnectionCounts:
        return ConnectionCounts(self._general + self._slots, self.reading, self._slots)

    def admit(self, conn: Any, client: str) -> tuple[Admission, str]:
        """Place a new connection from ``client``; returns its admission and, unless SERVE,
        the config key of the limit it is over. Over a limit, the oldest idle connection
        under it is closed for this one."""
        if self._per_client[client] >= self.limits.per_client:
            if not self._evict_oldest_idle(client):
                return self._container_slot(conn, client,
                                            JOB_COORDINATOR_HTTP_MAX_CONNECTIONS_PER_CLIENT.name)
            self._warn("per-client", f"{self.limits.per_client} connections open from {client} "
                       f"({JOB_COORDINATOR_HTTP_MAX_CONNECTIONS_PER_CLIENT.name}="
                       f"{self.limits.per_client}): closed its oldest idle one for a new one")
        if self._general >= self.limits.max_connections:
            if not self._evict_oldest_idle(None):
                return self._container_slot(conn, client, JOB_COORDINATOR_HTTP_MAX_CONNECTIONS.name)
            self._warn("total", f"{self.limits.max_connections} connections open "
                       f"({JOB_COORDINATOR_HTTP_MAX_CONNECTIONS.name}="
                       f"{self.limits.max_connections}; most from "
                       f"{self._busiest()}): closed the oldest idle one for a new one from "
                       f"{client}")
        self._open[conn] = _Entry(client, Admission.SERVE)
        self._general += 1
        self._per_client[client] += 1
        return Admission.SERVE, ""

    def remove(self, conn: Any) -> None:
        """Forget a closed connection (any number of times)."""
        entry = self._open.pop(conn, None)
        if entry is None:
            return
        if entry.slot is Admission.SERVE:
            self._general -= 1
            self._per_client[entry.client] -= 1
            if not self._per_client[entry.client]:
                del self._per_client[entry.client]
        else:
            self._slots -= 1

    def count_closed(self, reason: CloseReason) -> None:
        self.closed[reason] += 1

    def _container_slot(self, conn: Any, client: str, limit: str) -> tuple[Admission, str]:
        if self._slots >= self.limits.container_slots:
            self.count_closed(CloseReason.REFUSED)
            self._warn("refused", f"every connection is busy ({limit}) and the "
                       f"{self.limits.container_slots} kept for the job's containers are "
                       f"taken: closed a new connection from {client} at once")
            return Admission.REFUSE, limit
        self._open[conn] = _Entry(client, Admission.CONTAINERS_ONLY)
        self._slots += 1
        self._warn("slots", f"every connection is busy ({limit}): a new connection from "
                   f"{client} is served only if it is one of the job's containers")
        return Admission.CONTAINERS_ONLY, limit

    def _evict_oldest_idle(self, client: str | None) -> bool:
        victim = next((conn for conn, entry in self._open.items()
                       if entry.slot is Admission.SERVE
                       and (client is None or entry.client == client) and conn.is_idle()), None)
        if victim is None:
            return False
        self.remove(victim)
        self.count_closed(CloseReason.EVICTED)
        victim.close_now()
        return True

    def _busiest(self) -> str:
        if not self._per_client:
            return "nobody"
        client, n = self._per_client.most_common(1)[0]
        return f"{client}: {n}"

    def _warn(self, kind: str, message: str) -> None:
        """Log ``message`` at most once every 10 s per kind (a flood would log per socket)."""
        now = time.monotonic()
        if now - self._warned.get(kind, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned[kind] = now
            log.warning("job coordinator endpoint: %s", message)


def _timeout_response() -> bytes:
    body = (f"the request did not arrive within {JOB_COORDINATOR_HTTP_REQUEST_TIMEOUT_MS.name}"
            ).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n"
            + body)


def bounded_protocol(table: ConnectionTable) -> type:
    """uvicorn's httptools HTTP protocol with the bounds of ``table`` (see the module
    docstring): the ``http`` class of the endpoint's ``uvicorn.Config``."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    limits = table.limits

    class BoundedHttpProtocol(HttpToolsProtocol):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.timeout_keep_alive = limits.keepalive_s  # uvicorn's is whole seconds
            self._read_timer: Any = None
            self._admission = Admission.SERVE
            self._limit = ""

        # -- connection ------------------------------------------------------------------
        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            client = self.client[0] if self.client else ""
            self._admission, self._limit = table.admit(self, client)
            if self._admission is Admission.REFUSE:
                transport.close()
                return
            # Idle until its first request: closed after keepalive.ms like an idle one
            # between requests (uvicorn cancels this timer when data arrives).
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler)

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_reading()
            table.remove(self)
            super().connection_lost(exc)

        def is_idle(self) -> bool:
            """No request in progress: none being read, answered or waiting in line."""
            return self._read_timer is None and not self.pipeline and (
                self.cycle is None or self.cycle.response_complete)

        def close_now(self) -> None:
            self._stop_reading()
            self._unset_keepalive_if_required()
            self.transport.close()

        def timeout_keep_alive_handler(self) -> None:
            if not self.transport.is_closing():
                table.count_closed(CloseReason.IDLE)
            super().timeout_keep_alive_handler()

        # -- reading a request -----------------------------------------------------------
        def data_received(self, data: bytes) -> None:
            if self._read_timer is None and (self.cycle is None or self.cycle.response_complete):
                table.reading += 1
                self._read_timer = self.loop.call_later(limits.request_s, self._read_timed_out)
            super().data_received(data)

        def on_headers_complete(self) -> None:
            self.scope[ADMISSION_SCOPE_KEY] = (self._admission, self._limit)  # type: ignore
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._stop_reading()

        def _stop_reading(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None
                table.reading -= 1

        def _read_timed_out(self) -> None:
            self._read_timer = None
            table.reading -= 1
            if self.transport.is_closing():
                return
            table.count_closed(CloseReason.REQUEST_TIMEOUT)
            if self.cycle is None or self.cycle.response_complete:  # its headers are not in
                self.transport.write(_timeout_response())
            self.transport.close()

    return BoundedHttpProtocol
