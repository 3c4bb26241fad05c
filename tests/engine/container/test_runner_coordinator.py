"""What ``run_job`` does with the job coordinator: the coordinator stream is written and read
for every job; the HTTP endpoint is served only where something reads it (container
processes) or where the user asks for it (``job.coordinator.http.serve=always``, a port)."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections import Counter

import orjson

from weir.engine.container.runner import ExitCode, containers_in_process, prepare, run_job
from weir.engine.container.status import StatusMode
from weir.engine.coordinator import (CoordinatorMessage, CoordinatorState, CoordinatorStreamStore,
                                     JobCoordinator)
from weir.engine.task import StreamTask

from tests.engine.coordinator._helpers import (create_inputs, emitted_counts, job_config, produce,
                                               words)

PARTITIONS = 2
HTTP_THREAD = "weir-coordinator-http"


class ThreadProbe(StreamTask):
    """Notes the names of the threads alive at its first message, and what ``GET url`` then
    answers when ``url`` is set (class attributes: the job runs in the test's process)."""

    threads: set[str] | None = None
    url: str | None = None
    answer: dict | None = None

    def process(self, envelope, collector, coordinator):
        if ThreadProbe.threads is None:
            ThreadProbe.threads = {t.name for t in threading.enumerate()}
            if ThreadProbe.url:
                with urllib.request.urlopen(ThreadProbe.url, timeout=10) as response:
                    ThreadProbe.answer = orjson.loads(response.read())


def _probe_job(tmp_path, **extra):
    ThreadProbe.threads, ThreadProbe.answer = None, None
    ThreadProbe.url = extra.pop("url", None)
    config = job_config(tmp_path, **{"task.class": f"{__name__}:ThreadProbe",
                                     "job.container.count": "1", **extra})
    create_inputs(config, PARTITIONS)
    produce(config, words(20), PARTITIONS, end=True)
    return config


def _stream_state(config) -> CoordinatorState:
    with CoordinatorStreamStore.for_job(config, source="test") as store:
        store.bootstrap()
        return CoordinatorState.from_store(store)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_one_in_process_container_runs_without_http_and_still_records_the_stream(tmp_path):
    config = _probe_job(tmp_path)

    result = run_job(config, status=StatusMode.OFF)

    assert result.exit_code is ExitCode.OK, result.summary_lines()
    assert HTTP_THREAD not in ThreadProbe.threads
    assert "weir-coordinator-catch-up" in ThreadProbe.threads  # dynamic config is followed
    state = _stream_state(config)
    assert state.config["task.class"] == f"{__name__}:ThreadProbe"
    assert state.changelog == {"Partition 0": 0, "Partition 1": 1}
    assert state.task_containers == {"Partition 0": "0", "Partition 1": "0"}
    assert state.locality["0"].host == socket.gethostname()


def test_prepare_publishes_model_version_one_and_writes_locality_with_the_assignments(tmp_path):
    config = _probe_job(tmp_path)
    with JobCoordinator(config) as coordinator:
        prepared = prepare(config, registry=coordinator.registry, coordinator=coordinator)

        assert containers_in_process(prepared.model) == ("0",)
        assert coordinator.version_of(prepared.model) == 1
        assert coordinator.snapshot.model is prepared.model
        assert coordinator.url is None  # nothing served yet
        written = coordinator.store.messages_written
        # One batch: config, assignments, and the locality of the in-process container.
        assert written == len(coordinator.store.entries("set-config")) + 2 + 2 + 2 + 1
        assert coordinator.locality()["0"].host == coordinator.host
        assert coordinator.counters.locality_writes == 1
        # The container's own report finds the stream saying so already: nothing written.
        coordinator.record_locality("0", coordinator.host)
        assert coordinator.store.messages_written == written


def test_http_serve_always_serves_the_endpoint_for_an_in_process_container(tmp_path):
    config = _probe_job(tmp_path, **{"job.coordinator.http.serve": "always"})

    result = run_job(config, status=StatusMode.OFF)

    assert result.exit_code is ExitCode.OK, result.summary_lines()
    assert HTTP_THREAD in ThreadProbe.threads


def test_a_configured_port_serves_the_endpoint_for_an_in_process_container(tmp_path):
    port = _free_port()
    config = _probe_job(tmp_path, **{"job.coordinator.http.port": str(port),
                                     "url": f"http://127.0.0.1:{port}/health"})

    result = run_job(config, status=StatusMode.OFF)

    assert result.exit_code is ExitCode.OK, result.summary_lines()
    assert ThreadProbe.answer["status"] == "ok"
    assert ThreadProbe.answer["job-model-version"] == 1
    assert ThreadProbe.answer["containers"] == 1


def test_two_container_processes_take_their_first_model_through_the_fork_and_their_host_is_recorded(
        tmp_path, caplog):
    config = job_config(tmp_path, **{"job.container.count": "2"})
    create_inputs(config, PARTITIONS)
    items = words(200)
    produce(config, items, PARTITIONS, end=True)

    with caplog.at_level("INFO"):
        result = run_job(config, status=StatusMode.OFF)

    assert result.exit_code is ExitCode.OK, result.summary_lines()
    assert sorted(c.container_id for c in result.containers) == ["0", "1"]
    assert emitted_counts(config, PARTITIONS) == Counter(items)
    # Neither process waited for the endpoint to read its model (the runner handed it over);
    # the host of each is in the coordinator stream.
    assert [r.getMessage() for r in caplog.records
            if "from the job coordinator" in r.getMessage()] == []
    assert set(_stream_state(config).locality) == {"0", "1"}


def test_config_written_while_the_coordinator_starts_is_what_the_model_is_built_from(tmp_path):
    config = _probe_job(tmp_path)
    coordinator = JobCoordinator(config)
    store = coordinator.store
    write = store.write

    def racing_write(messages):
        # `weir coordinator set-config` writes between the bootstrap and the start's write.
        store.write = write
        with CoordinatorStreamStore.for_job(config, source="coordinator-stream-writer") as other:
            other.write([CoordinatorMessage.set_config("task.commit.ms", "1234",
                                                       source="coordinator-stream-writer")])
        write(messages)

    store.write = racing_write
    with coordinator:
        model = coordinator.start(local=containers_in_process)

        assert model.config["task.commit.ms"] == "1234"
        assert coordinator.snapshot.model.config["task.commit.ms"] == "1234"
    state = _stream_state(config)
    assert state.config["task.commit.ms"] == "1234"
    assert state.changelog == {"Partition 0": 0, "Partition 1": 1}
