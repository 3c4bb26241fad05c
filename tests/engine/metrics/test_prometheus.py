"""Container processes publish their metrics to the job coordinator's ``/metrics`` (Samza's
JMX reporter, mapped to Prometheus): a real coordinator over loopback HTTP."""

from __future__ import annotations

import pytest

from weir.engine.coordinator.settings import CoordinatorSettings
from weir.engine.metrics import MetricsSettings, TaskMetrics
from weir.engine.metrics.prometheus import PrometheusReporter, families
from weir.stores.config import Config

from tests.engine.coordinator._helpers import serving_coordinator
from tests.engine.coordinator.test_server import request

JMX = {"metrics.reporters": "jmx",
       "metrics.reporter.jmx.class": "org.apache.samza.metrics.reporter.JmxReporterFactory"}


@pytest.fixture
def coordinator(tmp_path):
    yield from serving_coordinator(tmp_path, **JMX)


def container_snapshot() -> dict:
    task = TaskMetrics("Partition 1")
    task.processed.count = 9
    task.counter("repeat-edits", group="edit-counters").inc(4)
    return {"run-loop": {"null-choices": 3, "in-flight": 0},
            "tasks": {"Partition 1": task.snapshot()}}


def test_a_container_process_publishes_to_the_coordinators_metrics(coordinator):
    settings = MetricsSettings.from_config(Config({"job.name": "coord_test", **JMX}))
    reporter = PrometheusReporter(settings.reporters[0], settings, "container-1",
                                  environ={"SAMZA_COORDINATOR_URL": coordinator.url,
                                           "SAMZA_CONTAINER_ID": "1"})

    reporter.report(container_snapshot())
    status, _, body = request(coordinator.url + "/metrics")

    text = body.decode()
    assert status == 200
    assert ('weir_user_edit_counters_repeat_edits_total{job="coord_test-1",container="1",'
            'task="Partition 1"} 4') in text
    assert 'weir_task_messages_processed_total{job="coord_test-1",container="1",' \
           'task="Partition 1"} 9' in text
    assert 'weir_run_loop_null_choices_total{job="coord_test-1",container="1"} 3' in text
    assert "weir_coordinator_http_incoming_requests_total" in text  # the coordinator's own


@pytest.mark.parametrize("path,body,status", [
    ("/metrics/7", b"[]", 404),                       # no such container in the job model
    ("/metrics/1", b"{not json", 400),
    ("/metrics/1", b'[{"name": "x", "type": "histogram", "help": "", "samples": []}]', 400),
])
def test_a_bad_metrics_publication_gets_a_clear_status(coordinator, path, body, status):
    assert request(coordinator.url + path, "PUT", body)[0] == status


def test_a_jmx_reporter_makes_weir_run_serve_the_endpoint_for_one_container(tmp_path):
    config = Config({"job.name": "j", "task.inputs": "filelog.words", **JMX})
    assert CoordinatorSettings.from_config(config).serves_in_process
    assert not CoordinatorSettings.from_config(
        Config({"job.name": "j", "task.inputs": "filelog.words"})).serves_in_process


def test_prometheus_names_are_sanitised_and_non_numbers_left_out():
    fams = {f.name: f for f in families({"tasks": {"P 0": {"user": {"my group": {
        "hit rate!": {"value": 0.5}, "label": {"value": "text"}}}}}}, job="j", container="0")}
    assert fams["weir_user_my_group_hit_rate_"].samples == [
        ({"job": "j", "container": "0", "task": "P 0"}, 0.5)]
    assert "weir_user_my_group_label" not in fams
