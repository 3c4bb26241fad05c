"""Containers read their job model over HTTP: real processes, a real coordinator, and a
coordinator that is gone."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from weir.engine.container.process import EventKind, container_process_main
from weir.engine.coordinator import CoordinatorFailure, CoordinatorUnavailableError
from weir.engine.coordinator.client import CoordinatorClient, container_environment
from weir.engine.coordinator.messages import MessageType

from tests.engine.coordinator._helpers import busy_connections, serving

ROOT = Path(__file__).resolve().parents[3]


def test_a_container_process_reads_its_model_and_config_over_http_and_reports_its_host(coordinator):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **container_environment(
        coordinator.url, "1", 1, timeout_ms=5000, retry_ms=5000))
    code = ("from weir.engine.coordinator.client import setup_from_coordinator\n"
            "import orjson\n"
            "s = setup_from_coordinator('1', 'host-of-1')\n"
            "print(orjson.dumps({'version': s.version, 'tasks': sorted(s.model.containers['1'].tasks),"
            " 'origin': s.config.origin('task.inputs')}).decode())\n")

    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)

    assert out.returncode == 0, out.stderr
    got = orjson.loads(out.stdout)
    assert got["version"] == 1 and got["tasks"] == ["Partition 1", "Partition 3"]
    assert got["origin"].endswith("job.properties:3")
    assert coordinator.store.get(MessageType.SET_CONTAINER_HOST_ASSIGNMENT, "1").value("host") \
        == "host-of-1"


def test_a_container_asks_for_the_version_it_was_started_with(coordinator):
    client = CoordinatorClient(coordinator.url)

    setup = client.container_setup("0", 1)

    assert setup.version == 1 and setup.model == coordinator.model


def test_the_client_fails_naming_the_url_when_no_coordinator_answers(coordinator):
    url = coordinator.url
    coordinator.stop()
    client = CoordinatorClient(url, timeout_ms=200, retry_ms=300)

    with pytest.raises(CoordinatorUnavailableError) as info:
        client.container_setup("0")

    assert info.value.url == url + "/" and info.value.attempts >= 2
    assert f"cannot read the job model from the job coordinator at {url}/" in str(info.value)
    assert "ConnectionRefusedError" in str(info.value)
    assert info.value.failure is CoordinatorFailure.NOT_LISTENING
    assert "that process has stopped" in str(info.value)


def test_a_client_refused_by_a_busy_coordinator_is_told_it_is_overloaded_not_gone(tmp_path):
    coordinator = serving(tmp_path, **{"job.coordinator.http.max.connections": "2"})
    try:
        busy = busy_connections(coordinator, 2)
        client = CoordinatorClient(coordinator.url, timeout_ms=2000, retry_ms=300)  # no token

        with pytest.raises(CoordinatorUnavailableError) as info:
            client.container_setup("0")

        assert info.value.failure is CoordinatorFailure.OVERLOADED
        message = str(info.value)
        assert "HTTP 503" in message and "job.coordinator.http.max.connections=2" in message
        assert "The coordinator is up but had no free connection" in message
        assert "has stopped" not in message
        for sock in busy:
            sock.close()
    finally:
        coordinator.stop()


def test_a_container_process_whose_coordinator_is_gone_reports_a_clear_failure(coordinator):
    url = coordinator.url
    coordinator.stop()
    ctx = multiprocessing.get_context("spawn")
    events = ctx.Queue()
    saved = dict(os.environ)
    os.environ.update(container_environment(url, "0", 1, timeout_ms=200, retry_ms=500))
    try:
        proc = ctx.Process(target=container_process_main, args=(None, None, "0", events, 1000))
        proc.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    event = events.get(timeout=60)
    while event.kind is EventKind.LOG:  # the container's log records come to the runner too
        event = events.get(timeout=60)
    proc.join(timeout=60)

    assert proc.exitcode == 1
    assert event.kind is EventKind.FAILED and event.container_id == "0"
    assert event.payload.error_type == "CoordinatorUnavailableError"
    assert url in event.payload.message
