"""The job coordinator's HTTP endpoint (uvicorn, an ASGI server, running on its own thread).

| method and path | answer |
|---|---|
| ``GET /`` | the job model in Samza's JSON shape (``application/json;charset=UTF-8``), plus ``"job-model-version"``; 404 with no body before the first model; ``?version=N`` one of the last 16 versions (410 when older) |
| ``GET /config`` | ``{"job-model-version", "config": {key: value}, "origins": {key: where it was set}}`` |
| ``GET /locality`` | ``{"job-model-version", "processor-localities": {id: {"id", "host", "jmx-url", "jmx-tunneling-url"}}}`` |
| ``PUT /locality/<container id>`` | a container reports where it runs: ``{"host": ..., "jmx-url": ...}``; 204 |
| ``PUT /metrics/<container id>`` | a container's Prometheus reporter publishes its metrics (weir.engine.metrics.prometheus); 204 |
| ``GET /health`` | ``{"status": "ok" ...}`` (200), 503 while the coordinator stream cannot be read |
| ``GET /metrics`` | Prometheus text format 0.0.4 |

Every response carries ``X-Weir-Job-Model-Version``. The endpoint binds to
``job.coordinator.http.host`` (127.0.0.1) and ``job.coordinator.http.port`` (0: a free
port). It is concurrent (one event loop; the model is served from bytes serialized once per
version) and bounded (:mod:`weir.engine.coordinator.connections`): connections without a
request close after ``job.coordinator.http.keepalive.ms``, a request must arrive within
``job.coordinator.http.request.timeout.ms`` (else 408), at most
``job.coordinator.http.max.connections`` stay open (``...max.connections.per.client`` from
one address; a new one closes the oldest idle one), a few more are kept for the job's own
containers (they send :attr:`CoordinatorServer.container_token`; anyone else gets 503 there),
and request bodies are limited to 64 KiB (16 MiB for a container's metrics). uvicorn parses HTTP (with httptools); nothing here
parses HTTP by hand.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from urllib.parse import parse_qs

import orjson

from weir.engine.coordinator.connections import (ADMISSION_SCOPE_KEY, CONTAINER_TOKEN_HEADER,
                                                 Admission, CloseReason, ConnectionCounts,
                                                 ConnectionLimits, ConnectionTable,
                                                 bounded_protocol)
from weir.engine.coordinator.errors import CoordinatorError
from weir.engine.coordinator.prometheus import CONTENT_TYPE as PROMETHEUS_CONTENT_TYPE
from weir.engine.coordinator.prometheus import Family, render
from weir.engine.coordinator.settings import CoordinatorSettings

if TYPE_CHECKING:
    from weir.engine.coordinator.coordinator import JobCoordinator

__all__ = ["CoordinatorServer", "JSON_CONTENT_TYPE", "VERSION_HEADER", "MAX_BODY_BYTES"]

log = logging.getLogger("weir.coordinator.http")

JSON_CONTENT_TYPE = "application/json;charset=UTF-8"
VERSION_HEADER = "X-Weir-Job-Model-Version"
MAX_BODY_BYTES = 64 * 1024
METRICS_MAX_BODY_BYTES = 16 * 1024 * 1024
"""A container's metrics (every task's) may be far larger than a locality report."""
_START_TIMEOUT_S = 10.0
_PATHS = ("/", "/config", "/locality", "/locality/{id}", "/health", "/metrics", "other")


class _HttpMetrics:
    """Samza's endpoint metrics (incoming-requests, successful-responses, failed-responses)
    per path, and time spent. Updated on the event loop thread only."""

    def __init__(self) -> None:
        self.incoming = dict.fromkeys(_PATHS, 0)
        self.successful = dict.fromkeys(_PATHS, 0)
        self.failed = dict.fromkeys(_PATHS, 0)
        self.seconds = dict.fromkeys(_PATHS, 0.0)

    def families(self, connections: ConnectionTable | None = None) -> list[Family]:
        def samples(values: dict) -> list[tuple]:
            return [({"path": p}, v) for p, v in values.items()]
        bounded = [] if connections is None else [
            Family("weir_coordinator_http_open_connections", "gauge",
                   "Connections open to the job coordinator's endpoint.",
                   [({}, connections.counts().open)]),
            Family("weir_coordinator_http_closed_connections_total", "counter",
                   "Connections the endpoint closed: idle past keepalive.ms, request not in "
                   "within request.timeout.ms, evicted for a new one, refused over every "
                   "limit, or in a containers' slot without being one.",
                   [({"reason": r.value}, n) for r, n in connections.closed.items()]),
        ]
        return [*bounded,
            Family("weir_coordinator_http_incoming_requests_total", "counter",
                   "HTTP requests received by the job coordinator.", samples(self.incoming)),
            Family("weir_coordinator_http_successful_responses_total", "counter",
                   "HTTP responses with a 2xx status.", samples(self.successful)),
            Family("weir_coordinator_http_failed_responses_total", "counter",
                   "HTTP responses with a 4xx or 5xx status.", samples(self.failed)),
            Family("weir_coordinator_http_request_seconds_total", "counter",
                   "Time spent answering HTTP requests.", samples(self.seconds)),
        ]


def _prompt_server(uvicorn: Any) -> type:
    """uvicorn's ``Server`` that stops as soon as asked: its main loop waits for
    :meth:`request_stop` instead of polling a flag every 0.1 s, and its shutdown waits for open
    connections in 5 ms steps (up to ``timeout_graceful_shutdown``) instead of a fixed 0.1 s
    sleep first. uvicorn's own took 0.1-0.2 s off the end of every job with container
    processes (bench/RESULTS.md)."""

    class PromptServer(uvicorn.Server):  # type: ignore[misc,name-defined]
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self._wake: asyncio.Event | None = None
            self._loop: asyncio.AbstractEventLoop | None = None

        def request_stop(self) -> None:
            """Ask the server to stop (from any thread)."""
            self.should_exit = True
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                try:
                    loop.call_soon_threadsafe(wake.set)
                except RuntimeError:
                    pass  # the loop has already closed: the server is stopped

        async def main_loop(self) -> None:
            self._wake = asyncio.Event()
            self._loop = asyncio.get_running_loop()  # set last: request_stop sees both
            if not self.should_exit:
                await self._wake.wait()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            for server in self.servers:
                server.close()
            for sock in sockets or []:
                sock.close()
            state = self.server_state
            for connection in list(state.connections):
                connection.shutdown()  # idle ones close now, busy ones after their response
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.config.timeout_graceful_shutdown
            while (state.connections or state.tasks) and loop.time() < deadline:
                await asyncio.sleep(0.005)
            for task in list(state.tasks):
                task.cancel()

    return PromptServer


class CoordinatorServer:
    """Serves one :class:`~weir.engine.coordinator.coordinator.JobCoordinator` over HTTP."""

    def __init__(self, coordinator: "JobCoordinator", settings: CoordinatorSettings):
        self.coordinator = coordinator
        self.settings = settings
        self.metrics = _HttpMetrics()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.url = ""
        self._failure: BaseException | None = None
        self.connection_table = ConnectionTable(ConnectionLimits.from_settings(settings))
        self.container_token = secrets.token_urlsafe(24)
        """What the job's container processes send (``X-Weir-Container-Token``, given to them
        as ``WEIR_COORDINATOR_TOKEN``): their requests are served in the connections kept for
        them when every other one is busy."""

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, *, wait: bool = True) -> str:
        """Listen on the configured address and serve from a thread; returns the URL. With
        ``wait`` False it returns as soon as the socket listens (clients that connect before
        the server runs wait in the socket's backlog) and :meth:`wait_started` reports how
        the start went."""
        import uvicorn

        host, port = self.settings.http_host, self.settings.http_port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise CoordinatorError(
                f"the job coordinator cannot listen on {host}:{port} ({exc.strerror}); set "
                f"job.coordinator.http.port to a free port, or 0 for any") from None
        sock.listen(1024)
        sock.set_inheritable(False)
        self._socket = sock
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        self.url = f"http://{shown}:{bound}"
        # Connections are bounded by the protocol (connections.py), not by uvicorn's
        # limit_concurrency: that one answers 503 to every request, the containers' too, as
        # long as as many connections are open as the limit, idle or not.
        config = uvicorn.Config(
            self.app, interface="asgi3", http=bounded_protocol(self.connection_table),
            loop="asyncio", lifespan="off", log_config=None,
            access_log=False, server_header=False, date_header=False,
            timeout_keep_alive=max(1, self.settings.http_keepalive_ms // 1000),
            timeout_graceful_shutdown=2)
        self._server = _prompt_server(uvicorn)(config)

        def run() -> None:
            try:
                asyncio.run(self._server.serve(sockets=[sock]))
            except BaseException as exc:  # noqa: BLE001 - reported by start()/logged
                self._failure = exc
                log.error("the job coordinator's HTTP endpoint stopped: %s", exc)

        self._thread = threading.Thread(target=run, name="weir-coordinator-http", daemon=True)
        self._thread.start()
        if wait:
            self.wait_started()
        return self.url

    def wait_started(self) -> None:
        """Return once the server runs; raise CoordinatorError when it failed to start or did
        not start within 10 s."""
        if self._server is None or self._thread is None:
            return
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._server.started:
            if self._failure is not None or not self._thread.is_alive():
                raise CoordinatorError(f"the job coordinator's HTTP endpoint at {self.url} "
                                       f"failed to start: {self._failure}")
            if time.monotonic() > deadline:
                raise CoordinatorError(f"the job coordinator's HTTP endpoint at {self.url} "
                                       f"did not start within {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.005)

    def connections(self) -> ConnectionCounts:
        """The open connections now (any thread)."""
        return self.connection_table.counts()

    def stop(self) -> None:
        if self._server is not None:
            self._server.request_stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    # -- the ASGI application ------------------------------------------------------------
    async def app(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        method, path, query = scope["method"], scope["path"], scope.get("query_string", b"")
        label = path if path in _PATHS else ("/locality/{id}" if path.startswith("/locality/")
                                             else "other")
        self.metrics.incoming[label] += 1
        try:
            admission, limit = scope.get(ADMISSION_SCOPE_KEY, (Admission.SERVE, ""))
            if admission is Admission.CONTAINERS_ONLY and not self._from_container(scope):
                status, headers, body = self._no_slot(scope, limit)
            else:
                status, headers, body = await self._route(method, path, query, receive)
        except Exception as exc:  # noqa: BLE001 - a 500, logged, never a dead endpoint
            log.exception("job coordinator: %s %s failed", method, path)
            status, headers, body = 500, [], orjson.dumps({"error": f"{type(exc).__name__}: {exc}"})
            headers.append((b"content-type", JSON_CONTENT_TYPE.encode()))
        snap = self.coordinator.snapshot
        if snap is not None:
            headers.append((VERSION_HEADER.lower().encode(), str(snap.version).encode()))
        if status != 204:
            headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
        if status < 300:
            self.metrics.successful[label] += 1
        elif status >= 400:
            self.metrics.failed[label] += 1
        self.metrics.seconds[label] += time.perf_counter() - started

    def _from_container(self, scope: dict) -> bool:
        name = CONTAINER_TOKEN_HEADER.lower().encode()
        sent = next((value for key, value in scope["headers"] if key == name), b"")
        return hmac.compare_digest(sent, self.container_token.encode())

    def _no_slot(self, scope: dict, limit: str) -> tuple[int, list, bytes]:
        """The answer in a connection kept for the job's containers to anyone else: 503, and
        the connection closes."""
        self.connection_table.count_closed(CloseReason.NOT_A_CONTAINER)
        client = (scope.get("client") or ("?",))[0]
        limits = self.connection_table.limits
        per_client = limit.endswith("per.client")
        value = limits.per_client if per_client else limits.max_connections
        whose = f" from {client}" if per_client else ""
        return 503, [(b"content-type", JSON_CONTENT_TYPE.encode()), (b"connection", b"close"),
                     (b"retry-after", b"1")], orjson.dumps({
            "error": f"the job coordinator's endpoint has {value} busy connections open"
                     f"{whose} ({limit}={value}); the ones beyond are kept for the job's "
                     f"containers. Retry later, close connections held open to it, or raise "
                     f"{limit}"})

    async def _route(self, method: str, path: str, query: bytes,
                     receive: Any) -> tuple[int, list, bytes]:
        json_type = (b"content-type", JSON_CONTENT_TYPE.encode())
        if path.startswith("/locality/"):
            if method not in ("PUT", "POST"):
                return _not_allowed("PUT, POST")
            return await self._put_locality(path[len("/locality/"):], receive)
        if path.startswith("/metrics/"):
            if method not in ("PUT", "POST"):
                return _not_allowed("PUT, POST")
            return await self._put_metrics(path[len("/metrics/"):], receive)
        if path not in _PATHS or path == "/locality/{id}":
            return 404, [json_type], orjson.dumps({"error": f"no resource {path}", "paths": list(
                p for p in _PATHS if p != "other")})
        if method not in ("GET", "HEAD"):
            return _not_allowed("GET, HEAD")
        snap = self.coordinator.snapshot
        if query and path in ("/", "/config"):
            version = parse_qs(query.decode("latin-1")).get("version", [""])[0]
            if not version.isdigit():
                return 400, [json_type], orjson.dumps({"error": f"bad version {version!r}"})
            snap = self.coordinator.snapshot_of(int(version))
            if snap is None:
                return 410, [json_type], orjson.dumps({
                    "error": f"job model version {version} is no longer kept; the current "
                             f"version is {self.coordinator.snapshot.version}"})
        if path == "/":
            if snap is None:
                return 404, [], b""  # Samza: no job model yet, no body, no content type
            return 200, [json_type], snap.model_json
        if path == "/config":
            if snap is None:
                return 404, [], b""
            return 200, [json_type], snap.config_json
        if path == "/locality":
            localities = self.coordinator.locality()
            return 200, [json_type], orjson.dumps({
                "job-model-version": snap.version if snap else None,
                "processor-localities": {cid: loc.to_dict() for cid, loc in sorted(localities.items())}})
        if path == "/health":
            health = self.coordinator.health()
            status = 503 if health["status"] != "ok" else 200
            return status, [json_type], orjson.dumps(health)
        # /metrics
        from weir.engine.metrics.prometheus import published_families
        text = render([*self.coordinator.metric_families(),
                       *self.metrics.families(self.connection_table),
                       *published_families(self._job_key)])
        return 200, [(b"content-type", PROMETHEUS_CONTENT_TYPE.encode())], text.encode()

    @property
    def _job_key(self) -> str:
        """The ``job`` label of the job's published metrics (``<job.name>-<job.id>``)."""
        settings = self.coordinator.settings
        return f"{settings.job_name}-{settings.job_id}"

    async def _container_body(self, container_id: str, receive: Any, limit: int
                              ) -> bytes | tuple[int, list, bytes]:
        """The body of a container's PUT, or the answer refusing it: over ``limit`` bytes
        (413), or no such container in the job model (404)."""
        json_type = (b"content-type", JSON_CONTENT_TYPE.encode())
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > limit:
                return 413, [json_type], orjson.dumps({"error": f"body over {limit} bytes"})
            if not message.get("more_body"):
                break
        snap = self.coordinator.snapshot
        if snap is None or container_id not in snap.model.containers:
            return 404, [json_type], orjson.dumps({"error": f"no container {container_id!r} in "
                                                            f"the job model"})
        return bytes(body)

    async def _put_metrics(self, container_id: str, receive: Any) -> tuple[int, list, bytes]:
        """A container process's metrics (its Prometheus reporter, weir.engine.metrics.prometheus)."""
        from weir.engine.metrics.prometheus import families_from_json, publish
        body = await self._container_body(container_id, receive, METRICS_MAX_BODY_BYTES)
        if not isinstance(body, bytes):
            return body
        try:
            families = families_from_json(body)
        except ValueError as exc:
            return 400, [(b"content-type", JSON_CONTENT_TYPE.encode())], orjson.dumps(
                {"error": str(exc)})
        publish(self._job_key, container_id, families)
        return 204, [], b""

    async def _put_locality(self, container_id: str, receive: Any) -> tuple[int, list, bytes]:
        json_type = (b"content-type", JSON_CONTENT_TYPE.encode())
        body = await self._container_body(container_id, receive, MAX_BODY_BYTES)
        if not isinstance(body, bytes):
            return body
        try:
            data = orjson.loads(body)
            host = data["host"]
            if not isinstance(host, str) or not host:
                raise ValueError("host must be a non-empty string")
            jmx = str(data.get("jmx-url", ""))
            tunnel = str(data.get("jmx-tunneling-url", ""))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            return 400, [json_type], orjson.dumps({"error": f"expected {{\"host\": ...}}: {exc}"})
        await asyncio.to_thread(self.coordinator.record_locality, container_id, host,
                                jmx_url=jmx, jmx_tunneling_url=tunnel)
        return 204, [], b""


def _not_allowed(allow: str) -> tuple[int, list, bytes]:
    return 405, [(b"allow", allow.encode()), (b"content-type", JSON_CONTENT_TYPE.encode())], \
        orjson.dumps({"error": f"method not allowed; use {allow}"})
