"""The containers' side of the job coordinator's HTTP endpoint.

A container process started by ``weir run`` finds the coordinator's URL in its environment
(``SAMZA_COORDINATOR_URL``, Samza's variable; its own id in ``SAMZA_CONTAINER_ID``), reads
the job model and the config with their origins over HTTP, and reports the host it runs on.
Connection failures, timeouts, 404 (no model yet) and 5xx answers are retried with backoff
(50 ms doubling to 2 s) for ``WEIR_COORDINATOR_RETRY_MS`` (the runner passes
``job.coordinator.http.client.retry.ms``); then :class:`CoordinatorUnavailableError` names the
URL and the last failure, with advice that follows it (:class:`CoordinatorFailure`: nothing
listens, the endpoint is overloaded, it timed out ...). A container sends the token it finds in
``WEIR_COORDINATOR_TOKEN`` (``X-Weir-Container-Token``): the endpoint keeps connections for
the job's containers when every other one is busy (docs/COORDINATOR.md).

Example::

    client = CoordinatorClient.from_environment()
    setup = client.container_setup()      # ContainerSetup(config, model, version)
    client.report_locality(setup.container_id, socket.gethostname())
"""

from __future__ import annotations

import http.client
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from weir.stores.config import Config

from weir.engine.coordinator.errors import (CoordinatorError, CoordinatorFailure,
                                            CoordinatorUnavailableError)
from weir.engine.jobmodel.model import JobModel, JobModelError

__all__ = ["CoordinatorClient", "ContainerSetup", "ENV_COORDINATOR_URL", "ENV_CONTAINER_ID",
           "ENV_MODEL_VERSION", "ENV_TIMEOUT_MS", "ENV_RETRY_MS", "ENV_TOKEN",
           "container_environment", "setup_from_coordinator"]

ENV_COORDINATOR_URL = "SAMZA_COORDINATOR_URL"
ENV_CONTAINER_ID = "SAMZA_CONTAINER_ID"
ENV_MODEL_VERSION = "WEIR_JOB_MODEL_VERSION"
ENV_TIMEOUT_MS = "WEIR_COORDINATOR_TIMEOUT_MS"
ENV_RETRY_MS = "WEIR_COORDINATOR_RETRY_MS"
ENV_TOKEN = "WEIR_COORDINATOR_TOKEN"
TOKEN_HEADER = "X-Weir-Container-Token"  # connections.CONTAINER_TOKEN_HEADER (not imported:
# a container process imports the client only, not the server's modules)

_BACKOFF_FIRST_S = 0.05
_BACKOFF_MAX_S = 2.0
_RETRY_STATUSES = frozenset({404, 408, 429, 500, 502, 503, 504})
_STATUS_FAILURES = {404: CoordinatorFailure.NO_MODEL, 408: CoordinatorFailure.TIMEOUT,
                    429: CoordinatorFailure.OVERLOADED, 503: CoordinatorFailure.OVERLOADED}


def _failure_of(error: BaseException) -> CoordinatorFailure:
    """What a network error of one attempt means (see CoordinatorFailure)."""
    cause = getattr(error, "reason", error)
    if isinstance(cause, ConnectionRefusedError):
        return CoordinatorFailure.NOT_LISTENING
    if isinstance(cause, (TimeoutError, socket.timeout)):
        return CoordinatorFailure.TIMEOUT
    if isinstance(cause, (http.client.RemoteDisconnected, ConnectionResetError,
                          BrokenPipeError, http.client.BadStatusLine)):
        return CoordinatorFailure.CLOSED
    return CoordinatorFailure.UNREACHABLE


@dataclass(frozen=True)
class ContainerSetup:
    """What a container reads from the coordinator before it starts."""

    container_id: str
    config: Config
    model: JobModel
    version: int


class CoordinatorClient:
    """HTTP client of one job coordinator (``url``); see the module docstring."""

    def __init__(self, url: str, *, timeout_ms: int = 10_000, retry_ms: int = 30_000,
                 token: str = ""):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_ms / 1000
        self.retry_s = retry_ms / 1000
        self.token = token

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> "CoordinatorClient":
        env = os.environ if environ is None else environ
        url = env.get(ENV_COORDINATOR_URL)
        if not url:
            raise CoordinatorError(f"{ENV_COORDINATOR_URL} is not set: a container started by "
                                   f"`weir run` gets the job coordinator's URL there")
        return cls(url, timeout_ms=int(env.get(ENV_TIMEOUT_MS, 10_000)),
                   retry_ms=int(env.get(ENV_RETRY_MS, 30_000)), token=env.get(ENV_TOKEN, ""))

    # -- requests ------------------------------------------------------------------------
    def _request(self, path: str, *, method: str = "GET", body: bytes | None = None
                 ) -> tuple[int, dict[str, str], bytes]:
        """One request with retries; returns status, headers, body of a final answer."""
        url = self.url + path
        deadline = time.monotonic() + self.retry_s
        sleep, attempts, reason = _BACKOFF_FIRST_S, 0, ""
        failure = CoordinatorFailure.UNREACHABLE
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self.token:
            headers[TOKEN_HEADER] = self.token
        while True:
            attempts += 1
            request = urllib.request.Request(url, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return response.status, dict(response.headers.items()), response.read()
            except urllib.error.HTTPError as exc:
                payload = exc.read()
                if exc.code not in _RETRY_STATUSES:
                    return exc.code, dict(exc.headers.items()), payload
                failure = _STATUS_FAILURES.get(exc.code, CoordinatorFailure.SERVER_ERROR)
                reason = f"HTTP {exc.code}" + (f" {payload[:300].decode('utf-8', 'replace')}"
                                                if payload else "")
            except (urllib.error.URLError, OSError, TimeoutError,
                    http.client.HTTPException) as exc:
                cause = getattr(exc, "reason", exc)
                failure = _failure_of(exc)
                reason = f"{type(cause).__name__}: {cause}"
            if time.monotonic() + sleep > deadline:
                raise CoordinatorUnavailableError(url, reason, attempts, failure)
            time.sleep(sleep)
            sleep = min(sleep * 2, _BACKOFF_MAX_S)

    def _get_json(self, path: str) -> tuple[dict, dict[str, str]]:
        status, headers, payload = self._request(path)
        if status != 200:
            raise CoordinatorError(f"GET {self.url}{path} answered HTTP {status}: "
                                   f"{payload[:200].decode('utf-8', 'replace')}")
        try:
            return orjson.loads(payload), headers
        except orjson.JSONDecodeError as exc:
            raise CoordinatorError(f"GET {self.url}{path} answered with invalid JSON "
                                   f"({exc})") from None

    @staticmethod
    def _versioned(path: str, version: int | None) -> str:
        return path if version is None else f"{path}?version={int(version)}"

    def job_model(self, version: int | None = None) -> tuple[JobModel, int]:
        """The job model (config without origins) and its version; ``version`` asks for
        that version rather than the newest."""
        data, _ = self._get_json(self._versioned("/", version))
        try:
            return JobModel.from_dict(data), int(data.get("job-model-version", 0))
        except JobModelError as exc:
            raise CoordinatorError(f"GET {self.url}/ answered a job model that cannot be "
                                   f"read: {exc}") from None

    def config(self, version: int | None = None) -> tuple[Config, int]:
        """The job's config with the origin of every key, and the model version it belongs to."""
        data, _ = self._get_json(self._versioned("/config", version))
        return (Config(data.get("config") or {}, origins=data.get("origins") or {}),
                int(data.get("job-model-version", 0)))

    def container_setup(self, container_id: str | None = None, version: int | None = None, *,
                        environ: Mapping[str, str] | None = None) -> ContainerSetup:
        """Model and config of one version: ``version`` (else ``WEIR_JOB_MODEL_VERSION``,
        else the newest, re-read when a new version appeared between the two requests)."""
        env = os.environ if environ is None else environ
        cid = container_id if container_id is not None else env.get(ENV_CONTAINER_ID)
        if cid is None:
            raise CoordinatorError(f"{ENV_CONTAINER_ID} is not set: which container is this?")
        if version is None and env.get(ENV_MODEL_VERSION):
            version = int(env[ENV_MODEL_VERSION])
        for _ in range(5):
            model, got = self.job_model(version)
            config, config_version = self.config(got)
            if config_version == got:
                break
        version = got
        if cid not in model.containers:
            raise CoordinatorError(f"the job model (version {version}) from {self.url} has no "
                                   f"container {cid!r}; it has {', '.join(model.containers)}")
        model = JobModel(config, model.containers)
        return ContainerSetup(str(cid), config, model, version)

    def report_locality(self, container_id: str, host: str, *, jmx_url: str = "",
                        jmx_tunneling_url: str = "") -> None:
        """``PUT /locality/<id>``: record where the container runs."""
        body = orjson.dumps({"host": host, "jmx-url": jmx_url,
                             "jmx-tunneling-url": jmx_tunneling_url})
        status, _, payload = self._request(f"/locality/{container_id}", method="PUT", body=body)
        if status != 204:
            raise CoordinatorError(f"PUT {self.url}/locality/{container_id} answered HTTP "
                                   f"{status}: {payload[:200].decode('utf-8', 'replace')}")


def container_environment(url: str, container_id: str, version: int, *, timeout_ms: int,
                          retry_ms: int, token: str = "") -> dict[str, str]:
    """The environment variables a container process is started with (``token``: the
    endpoint's :attr:`~weir.engine.coordinator.server.CoordinatorServer.container_token`)."""
    env = {ENV_COORDINATOR_URL: url, ENV_CONTAINER_ID: str(container_id),
           ENV_MODEL_VERSION: str(version), ENV_TIMEOUT_MS: str(timeout_ms),
           ENV_RETRY_MS: str(retry_ms)}
    if token:
        env[ENV_TOKEN] = token
    return env


def setup_from_coordinator(container_id: str, host: str) -> ContainerSetup:
    """What a container process started by ``weir run`` does first: read its model and
    config from the coordinator named in its environment, and report its host."""
    client = CoordinatorClient.from_environment()
    setup = client.container_setup(container_id)
    client.report_locality(setup.container_id, host)
    return setup
