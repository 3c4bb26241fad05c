"""The coordinator's config keys, parsed once into :class:`CoordinatorSettings`.

Samza's names where Samza has the key (``job.coordinator.system``,
``job.coordinator.segment.bytes``, ``job.coordinator.max.message.bytes``,
``job.host-affinity.enabled``); the HTTP endpoint, catch-up and client keys are Weir's
(``job.coordinator.http.*``, ``job.coordinator.catchup.interval.ms``).

Example::

    >>> from weir.stores.config import Config
    >>> s = CoordinatorSettings.from_config(Config({"job.name": "wc", "task.inputs": "filelog.words"}))
    >>> s.system, s.stream, s.http_host, s.http_port
    ('filelog', '__samza_coordinator_wc_1', '127.0.0.1', 0)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from weir.stores.config import Config, declare
from weir.stores.errors import ConfigError

from weir.engine.config.job import JOB_COORDINATOR_SYSTEM, JOB_ID, JOB_NAME
from weir.engine.config.streams import JOB_DEFAULT_SYSTEM, job_inputs
from weir.engine.metrics.settings import MetricsSettings

__all__ = [
    "CoordinatorSettings",
    "HttpServe",
    "coordinator_stream_name",
    "coordinator_system",
    "JOB_COORDINATOR_SEGMENT_BYTES",
    "JOB_COORDINATOR_MAX_MESSAGE_BYTES",
    "JOB_COORDINATOR_CATCHUP_INTERVAL_MS",
    "JOB_COORDINATOR_WRITE_TIMEOUT_MS",
    "JOB_COORDINATOR_HTTP_SERVE",
    "JOB_COORDINATOR_HTTP_HOST",
    "JOB_COORDINATOR_HTTP_PORT",
    "JOB_COORDINATOR_HTTP_MAX_CONNECTIONS",
    "JOB_COORDINATOR_HTTP_MAX_CONNECTIONS_PER_CLIENT",
    "JOB_COORDINATOR_HTTP_KEEPALIVE_MS",
    "JOB_COORDINATOR_HTTP_REQUEST_TIMEOUT_MS",
    "JOB_COORDINATOR_HTTP_CLIENT_TIMEOUT_MS",
    "JOB_COORDINATOR_HTTP_CLIENT_RETRY_MS",
    "JOB_HOST_AFFINITY_ENABLED",
]

_C = "job coordinator"

JOB_COORDINATOR_SEGMENT_BYTES = declare(
    "job.coordinator.segment.bytes", int, None,
    "Segment size of the coordinator stream when it is created (unset: the system's "
    "`segment.bytes`).", minimum=1, component=_C)
JOB_COORDINATOR_MAX_MESSAGE_BYTES = declare(
    "job.coordinator.max.message.bytes", int, 1_000_012,
    "Largest coordinator message (key plus value bytes) a writer sends; a larger config "
    "value is refused before anything is written.", minimum=64, component=_C)
JOB_COORDINATOR_CATCHUP_INTERVAL_MS = declare(
    "job.coordinator.catchup.interval.ms", int, 1000,
    "How often the running job coordinator reads new coordinator stream messages (config "
    "written by `weir coordinator set-config`); 0: never while running.", minimum=0, component=_C)
JOB_COORDINATOR_WRITE_TIMEOUT_MS = declare(
    "job.coordinator.write.timeout.ms", int, 30_000,
    "How long a writer of the coordinator stream waits for another process that is writing "
    "it (the file log has one writer per partition) before failing.", minimum=0, component=_C)


class HttpServe(Enum):
    """When ``weir run`` serves the job coordinator's HTTP endpoint."""

    AUTO = "auto"
    """While container processes run (they read their job model and config over it), and
    for every run when ``job.coordinator.http.port`` names a port. A job whose one container
    runs inside ``weir run`` needs no endpoint and starts faster without one."""
    ALWAYS = "always"
    """For every run, also when the one container runs inside ``weir run`` (``/health``,
    ``/metrics``, ``/config`` of such a job, on a free port unless one is set)."""


JOB_COORDINATOR_HTTP_SERVE = declare(
    "job.coordinator.http.serve", HttpServe, HttpServe.AUTO,
    "When `weir run` serves the job coordinator's HTTP endpoint: `auto` while container "
    "processes run (they read their job model over it) and for every run when "
    "`job.coordinator.http.port` names a port; `always` also when the one container runs "
    "inside `weir run`. The coordinator stream is written and followed either way.",
    component=_C)
JOB_COORDINATOR_HTTP_HOST = declare(
    "job.coordinator.http.host", str, "127.0.0.1",
    "Address the job coordinator's HTTP endpoint binds to. The default serves this machine "
    "only; `0.0.0.0` serves every interface (the endpoint has no authentication).",
    component=_C)
JOB_COORDINATOR_HTTP_PORT = declare(
    "job.coordinator.http.port", int, 0,
    "Port of the job coordinator's HTTP endpoint; 0 picks a free port (containers are told "
    "the URL).", minimum=0, maximum=65535, component=_C)
JOB_COORDINATOR_HTTP_MAX_CONNECTIONS = declare(
    "job.coordinator.http.max.connections", int, 256,
    "Connections the HTTP endpoint keeps open. A new connection over the limit closes the "
    "oldest idle one; when every one is busy it gets one of 16 further connections kept for "
    "the job's own containers (anyone else is answered 503 there), or is closed at once.",
    minimum=1, component=_C)
JOB_COORDINATOR_HTTP_MAX_CONNECTIONS_PER_CLIENT = declare(
    "job.coordinator.http.max.connections.per.client", int, 64,
    "Connections one client address keeps open to the HTTP endpoint; over it, the client's "
    "oldest idle connection is closed for the new one (when none is idle, as over "
    "`job.coordinator.http.max.connections`). The job's containers share the runner's "
    "address: keep it above the container count.", minimum=1, component=_C)
JOB_COORDINATOR_HTTP_KEEPALIVE_MS = declare(
    "job.coordinator.http.keepalive.ms", int, 5000,
    "How long the HTTP endpoint keeps a connection open without a request: a new one that "
    "sends nothing, or an idle one between requests.", minimum=1, component=_C)
JOB_COORDINATOR_HTTP_REQUEST_TIMEOUT_MS = declare(
    "job.coordinator.http.request.timeout.ms", int, 10_000,
    "How long the HTTP endpoint waits for a whole request (headers and body) from its first "
    "byte; a slower one is answered 408 and its connection closed.", minimum=1, component=_C)
JOB_COORDINATOR_HTTP_CLIENT_TIMEOUT_MS = declare(
    "job.coordinator.http.client.timeout.ms", int, 10_000,
    "Time limit of one request of a container to the job coordinator.", minimum=1, component=_C)
JOB_COORDINATOR_HTTP_CLIENT_RETRY_MS = declare(
    "job.coordinator.http.client.retry.ms", int, 30_000,
    "How long a container keeps retrying (with backoff from 50 ms doubling to 2 s) before it "
    "fails with an error naming the coordinator's URL.", minimum=0, component=_C)
JOB_HOST_AFFINITY_ENABLED = declare(
    "job.host-affinity.enabled", bool, False,
    "Host affinity: containers record the host they ran on (`set-container-host-assignment`) "
    "so their local state is found again; the container count of such a job cannot change "
    "between runs without `--reset-state`.", component=_C)


def coordinator_stream_name(job_name: str, job_id: str) -> str:
    """``__samza_coordinator_<name>_<id>``, with ``_`` inside name and id turned into ``-``.

    >>> coordinator_stream_name("test_job", "1")
    '__samza_coordinator_test-job_1'
    """
    return f"__samza_coordinator_{job_name.replace('_', '-')}_{job_id.replace('_', '-')}"


def coordinator_system(config: Config) -> str:
    """``job.coordinator.system``, else ``job.default.system``, else the system of the first
    stream in ``task.inputs`` (Samza raises instead; an embedded job keeps its coordinator
    stream beside its inputs)."""
    system = JOB_COORDINATOR_SYSTEM.get(config) or JOB_DEFAULT_SYSTEM.get(config)
    if system:
        return system
    inputs = job_inputs(config)
    if not inputs:
        raise ConfigError("is not set, nor job.default.system, and task.inputs is empty; set "
                          "it to the system that holds the coordinator stream",
                          key=JOB_COORDINATOR_SYSTEM.name)
    return inputs[0].system


@dataclass(frozen=True)
class CoordinatorSettings:
    """The coordinator keys of one job, parsed once."""

    job_name: str
    job_id: str
    system: str
    stream: str
    segment_bytes: int | None = None
    max_message_bytes: int = 1_000_012
    catchup_interval_ms: int = 1000
    write_timeout_ms: int = 30_000
    http_serve: HttpServe = HttpServe.AUTO
    http_host: str = "127.0.0.1"
    http_port: int = 0
    http_max_connections: int = 256
    http_max_connections_per_client: int = 64
    http_keepalive_ms: int = 5000
    http_request_timeout_ms: int = 10_000
    client_timeout_ms: int = 10_000
    client_retry_ms: int = 30_000
    host_affinity: bool = False
    serves_metrics: bool = False
    """A Prometheus reporter (Samza's JmxReporterFactory, weir.engine.metrics.prometheus)
    publishes at the endpoint's ``/metrics``: it is served for every run."""

    @classmethod
    def from_config(cls, config: Config) -> "CoordinatorSettings":
        name = config.require(JOB_NAME.name)
        job_id = JOB_ID.get(config)
        return cls(
            job_name=name, job_id=job_id, system=coordinator_system(config),
            stream=coordinator_stream_name(name, job_id),
            segment_bytes=JOB_COORDINATOR_SEGMENT_BYTES.get(config),
            max_message_bytes=JOB_COORDINATOR_MAX_MESSAGE_BYTES.get(config),
            catchup_interval_ms=JOB_COORDINATOR_CATCHUP_INTERVAL_MS.get(config),
            write_timeout_ms=JOB_COORDINATOR_WRITE_TIMEOUT_MS.get(config),
            http_serve=JOB_COORDINATOR_HTTP_SERVE.get(config),
            http_host=JOB_COORDINATOR_HTTP_HOST.get(config),
            http_port=JOB_COORDINATOR_HTTP_PORT.get(config),
            http_max_connections=JOB_COORDINATOR_HTTP_MAX_CONNECTIONS.get(config),
            http_max_connections_per_client=JOB_COORDINATOR_HTTP_MAX_CONNECTIONS_PER_CLIENT.get(
                config),
            http_keepalive_ms=JOB_COORDINATOR_HTTP_KEEPALIVE_MS.get(config),
            http_request_timeout_ms=JOB_COORDINATOR_HTTP_REQUEST_TIMEOUT_MS.get(config),
            client_timeout_ms=JOB_COORDINATOR_HTTP_CLIENT_TIMEOUT_MS.get(config),
            client_retry_ms=JOB_COORDINATOR_HTTP_CLIENT_RETRY_MS.get(config),
            host_affinity=JOB_HOST_AFFINITY_ENABLED.get(config),
            serves_metrics=MetricsSettings.from_config(config).prometheus)

    @property
    def serves_in_process(self) -> bool:
        """Whether the HTTP endpoint is served while the job's one container runs inside
        ``weir run`` (:class:`HttpServe`, or a Prometheus metrics reporter); container
        processes always get it."""
        return self.http_serve is HttpServe.ALWAYS or self.http_port != 0 or self.serves_metrics
