"""The job coordinator's HTTP endpoint with a real HTTP client over loopback."""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import orjson
import pytest

from weir.engine.coordinator import JobCoordinator
from weir.engine.coordinator.client import CoordinatorClient, container_environment
from weir.engine.coordinator.messages import MessageType
from weir.engine.coordinator.server import VERSION_HEADER
from weir.engine.jobmodel.model import JobModel

from tests.engine.coordinator._helpers import (busy_connections, connect, create_inputs,
                                               job_config, read_to_end, serving)


def request(url: str, method: str = "GET", body: bytes | None = None):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_the_endpoint_binds_to_loopback_by_default(coordinator):
    assert coordinator.url.startswith("http://127.0.0.1:")


def test_get_root_serves_the_job_model_in_samzas_shape(coordinator):
    status, headers, body = request(coordinator.url + "/")

    assert status == 200
    assert headers["content-type"] == "application/json;charset=UTF-8"
    assert headers[VERSION_HEADER.lower()] == "1"
    data = orjson.loads(body)
    assert data["job-model-version"] == 1
    assert data["containers"]["1"]["processor-id"] == "1"
    assert data["containers"]["1"]["tasks"]["Partition 1"]["changelog-partition"] == 1
    assert JobModel.from_json(body) == coordinator.model


def test_get_config_serves_values_and_where_they_were_set(coordinator):
    status, _, body = request(coordinator.url + "/config")

    data = orjson.loads(body)
    assert status == 200 and data["config"] == dict(coordinator.model.config)
    assert data["origins"]["job.name"].endswith("job.properties:1")


def test_a_container_reports_its_locality_and_it_is_served_and_recorded(coordinator):
    status, _, _ = request(coordinator.url + "/locality/1", "PUT",
                           orjson.dumps({"host": "worker-7", "jmx-url": "jmx:x"}))
    assert status == 204

    _, _, body = request(coordinator.url + "/locality")

    assert orjson.loads(body)["processor-localities"] == {
        "1": {"id": "1", "host": "worker-7", "jmx-url": "jmx:x", "jmx-tunneling-url": ""}}
    msg = coordinator.store.get(MessageType.SET_CONTAINER_HOST_ASSIGNMENT, "1")
    assert msg.value("host") == "worker-7" and msg.source == "container-1"


@pytest.mark.parametrize("path, method, body, status", [
    ("/locality/9", "PUT", b'{"host": "h"}', 404),
    ("/locality/0", "PUT", b"not json", 400),
    ("/locality/0", "PUT", b'{"host": ""}', 400),
    ("/locality/0", "GET", None, 405),
    ("/", "POST", b"", 405),
    ("/nope", "GET", None, 404),
    ("/?version=x", "GET", None, 400),
    ("/?version=99", "GET", None, 410),
])
def test_bad_requests_get_clear_statuses(coordinator, path, method, body, status):
    got, _, payload = request(coordinator.url + path, method, body)

    assert got == status
    assert "error" in orjson.loads(payload)


def test_a_request_body_over_the_limit_is_refused(coordinator):
    status, _, _ = request(coordinator.url + "/locality/0", "PUT", b"x" * (65 * 1024))

    assert status == 413


def test_health_says_ok_with_the_model_version(coordinator):
    status, _, body = request(coordinator.url + "/health")

    health = orjson.loads(body)
    assert status == 200 and health["status"] == "ok"
    assert (health["job-model-version"], health["containers"], health["tasks"]) == (1, 2, 4)


def test_metrics_are_prometheus_text_with_request_counts(coordinator):
    for _ in range(3):
        request(coordinator.url + "/")
    status, headers, body = request(coordinator.url + "/metrics")

    text = body.decode()
    assert status == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert '# TYPE weir_coordinator_http_incoming_requests_total counter' in text
    assert 'weir_coordinator_http_successful_responses_total{path="/"} 3' in text
    assert 'weir_coordinator_job_model_version{job="coord_test",job_id="1"} 1' in text
    for line in text.splitlines():  # every sample line is `name{labels} number`
        if line and not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])


def test_fifty_concurrent_requests_all_get_the_same_model(coordinator):
    url = coordinator.url + "/"

    def fetch(_):
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()

    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(fetch, range(50)))

    assert {status for status, _ in answers} == {200}
    assert len({body for _, body in answers}) == 1
    assert coordinator._server.metrics.incoming["/"] >= 50


def test_before_the_first_model_the_root_is_404_without_a_body(tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    with JobCoordinator(config) as coordinator:
        coordinator.serve()
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(coordinator.url + "/", timeout=10)

        assert info.value.code == 404 and info.value.read() == b""
        assert info.value.headers.get("content-type") is None


def test_a_port_in_use_gives_an_error_naming_the_key(tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    with JobCoordinator(config) as first:
        first.serve()
        port = urlsplit(first.url).port
        busy = job_config(tmp_path, **{"job.coordinator.http.port": str(port)})
        with JobCoordinator(busy) as second, pytest.raises(Exception,
                                                           match="job.coordinator.http.port"):
            second.serve()


def test_stop_closes_idle_keepalive_connections_and_refuses_new_ones(tmp_path):
    config = job_config(tmp_path, **{"job.container.count": "2"})
    create_inputs(config, 4)
    coordinator = JobCoordinator(config)
    coordinator.start()
    parts = urlsplit(coordinator.serve())
    idle = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    idle.request("GET", "/health")
    assert idle.getresponse().read()  # the connection stays open (keep-alive)

    coordinator.stop()

    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        idle.request("GET", "/health")
        idle.getresponse()
    idle.close()
    with pytest.raises(OSError):
        request(f"http://{parts.hostname}:{parts.port}/health")


def test_stop_while_a_request_is_in_flight_lets_it_be_answered(tmp_path, monkeypatch):
    import threading

    import weir.engine.coordinator.server as server

    config = job_config(tmp_path, **{"job.container.count": "2"})
    create_inputs(config, 4)
    coordinator = JobCoordinator(config)
    coordinator.start()
    url = coordinator.serve()
    entered, release = threading.Event(), threading.Event()
    real_route = server.CoordinatorServer._route

    async def slow_route(self, *args):
        import asyncio
        entered.set()
        while not release.is_set():
            await asyncio.sleep(0.01)
        return await real_route(self, *args)

    monkeypatch.setattr(server.CoordinatorServer, "_route", slow_route)
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(request, url + "/health")
        assert entered.wait(10)
        stopper = threading.Thread(target=coordinator.stop)
        stopper.start()
        release.set()
        status, _, body = answer.result(timeout=10)
        stopper.join(timeout=10)
    assert status == 200 and orjson.loads(body)["status"] == "ok"
    assert not stopper.is_alive()


# -- bounded connections: idle floods, slow requests, one client's share -------------------

def _container_client(coordinator: JobCoordinator, cid: str = "1") -> CoordinatorClient:
    return CoordinatorClient.from_environment(container_environment(
        coordinator.url, cid, 1, timeout_ms=2000, retry_ms=2000,
        token=coordinator.container_token))


def test_a_flood_of_idle_connections_is_closed_and_never_locks_the_containers_out(tmp_path):
    # 300 loopback connections that send nothing: more than the endpoint's connection limit.
    coordinator = serving(tmp_path, **{"job.coordinator.http.keepalive.ms": "300"})
    try:
        idle = [connect(coordinator.url) for _ in range(300)]

        # The job's container reads its model while the flood is open, and so does anyone.
        setup = _container_client(coordinator).container_setup("1")
        assert setup.version == 1 and setup.model == coordinator.model
        status, _, body = request(coordinator.url + "/health")
        assert status == 200, body

        # Every idle connection is closed by the endpoint: the oldest to make room for new
        # ones, the rest after job.coordinator.http.keepalive.ms without a request.
        for sock in idle:
            assert read_to_end(sock) == b""
            sock.close()
        _, _, metrics = request(coordinator.url + "/metrics")
        closed = {line.split('"')[1]: float(line.rsplit(" ", 1)[1])
                  for line in metrics.decode().splitlines()
                  if line.startswith("weir_coordinator_http_closed_connections_total{")}
        assert closed["idle"] > 0 and closed["evicted"] > 0
        assert closed["idle"] + closed["evicted"] >= 300
    finally:
        coordinator.stop()


def test_a_request_whose_headers_do_not_arrive_in_time_gets_408_and_is_closed(tmp_path):
    coordinator = serving(tmp_path, **{"job.coordinator.http.request.timeout.ms": "300"})
    try:
        sock = connect(coordinator.url)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never the blank line

        answer = read_to_end(sock)
        sock.close()

        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"job.coordinator.http.request.timeout.ms" in answer
    finally:
        coordinator.stop()


def test_when_every_connection_is_busy_only_the_jobs_containers_get_the_reserved_slots(
        tmp_path):
    coordinator = serving(tmp_path, **{"job.coordinator.http.max.connections": "4"})
    try:
        busy = busy_connections(coordinator, 4)

        status, headers, body = request(coordinator.url + "/health")
        assert status == 503 and headers["connection"] == "close"
        assert "job.coordinator.http.max.connections" in orjson.loads(body)["error"]
        setup = _container_client(coordinator).container_setup("1")
        assert setup.version == 1
        for sock in busy:
            sock.close()
    finally:
        coordinator.stop()


def test_one_client_cannot_take_more_than_its_share_of_the_connections(tmp_path):
    coordinator = serving(tmp_path, **{"job.coordinator.http.max.connections.per.client": "3"})
    try:
        busy = busy_connections(coordinator, 3, source="127.0.0.2")  # another loopback address

        sock = connect(coordinator.url, "127.0.0.2")
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_to_end(sock)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"job.coordinator.http.max.connections.per.client" in answer
        status, _, _ = request(coordinator.url + "/health")  # from 127.0.0.1: served
        assert status == 200
        for sock in busy:
            sock.close()
    finally:
        coordinator.stop()
