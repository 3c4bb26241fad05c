"""Every reporter exports a task's own metrics: Weir's JSON lines, Samza's snapshot stream,
the Prometheus endpoint. Settings errors name their key."""

from __future__ import annotations

import io
import re

import orjson
import pytest

from weir.engine.metrics import MetricsReporter, MetricsSettings, ReporterGroup
from weir.engine.metrics.prometheus import published_families
from weir.engine.coordinator.prometheus import render
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.testing import TestRunner

from tests.engine.metrics._tasks import EditStats

EDITS = [{"title": t, "diff": d} for t, d in
         [("A", 5), ("B", 40), ("A", 7), ("C", 1), ("A", 12)]]
JOB = {"job.name": "edit-stats", "systems.filelog.samza.msg.serde": "json"}
SNAPSHOT = "org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory"
JMX = "org.apache.samza.metrics.reporter.JmxReporterFactory"


def run_edit_stats(tmp_path, **config) -> TestRunner:
    runner = TestRunner(EditStats, config={**JOB, **config})
    runner.input("filelog.edits", EDITS)
    runner.output("filelog.edits-out")
    runner.run()
    return runner


def test_the_json_lines_reporter_writes_a_tasks_own_metrics(tmp_path):
    out = tmp_path / "metrics.jsonl"
    with run_edit_stats(tmp_path, **{"metrics.reporter.interval.ms": "60000",
                                     "metrics.reporter.file": str(out)}):
        last = orjson.loads(out.read_bytes().splitlines()[-1])

    user = last["metrics"]["tasks"]["Partition 0"]["user"]["edit-counters"]
    assert user["repeat-edits"] == {"count": 2}
    assert user["largest-diff"] == {"value": 40}
    assert user["diff-bytes"]["count"] == 5 and user["diff-bytes"]["max"] == 40


def test_samzas_snapshot_reporter_writes_samza_snapshots_to_its_stream(tmp_path):
    with run_edit_stats(tmp_path, **{"metrics.reporters": "snapshot",
                                     "metrics.reporter.snapshot.class": SNAPSHOT,
                                     "metrics.reporter.snapshot.stream": "filelog.metrics",
                                     "metrics.reporter.snapshot.blacklist": r".*\.lookup-ns"}
                        ) as runner:
        messages = [r.message for r in runner.read("filelog.metrics")]

    by_source = {m["header"]["source"]: m for m in messages}
    task = by_source["TaskName-Partition 0"]
    assert task["header"]["job-name"] == "edit-stats"
    assert task["header"]["samza-version"].startswith("weir-")
    assert task["metrics"]["edit-counters"]["repeat-edits"] == 2
    assert task["metrics"]["edit-counters"]["largest-diff"] == 40
    assert "lookup-ns" not in task["metrics"]["edit-counters"]  # blacklisted
    assert task["metrics"]["weir.task"]["messages-processed"] == 5
    assert "weir.run-loop" in by_source["container-0"]["metrics"]


def test_samzas_jmx_reporter_serves_the_metrics_as_prometheus_text(tmp_path):
    with run_edit_stats(tmp_path, **{"metrics.reporters": "jmx",
                                     "metrics.reporter.jmx.class": JMX}):
        text = render(published_families("edit-stats-1"))

    assert "# TYPE weir_user_edit_counters_repeat_edits_total counter" in text
    assert re.search(r'weir_user_edit_counters_repeat_edits_total\{job="edit-stats-1",'
                     r'container="0",task="Partition 0"\} 2\n', text)
    assert 'weir_user_edit_counters_largest_diff{' in text
    assert 'weir_user_edit_counters_diff_bytes{job="edit-stats-1",container="0",' \
           'task="Partition 0",quantile="0.5"}' in text
    assert "weir_user_edit_counters_lookup_seconds_count{" in text
    assert re.search(r'weir_task_messages_processed_total\{[^}]*\} 5\n', text)


def test_a_reporter_group_gives_the_last_snapshot_to_reporters_that_skipped_it():
    fast = MetricsReporter("c", interval_ms=1, stream=io.BytesIO())
    slow = MetricsReporter("c", interval_ms=3_600_000, stream=io.BytesIO())
    ticks = iter([0.0, 1.0, 2.0]).__next__
    group = ReporterGroup([fast, slow], clock=ticks)

    group.report({"n": 1})
    group.report({"n": 2})
    group.close()

    assert fast.reports == 2 and slow.reports == 1


def test_a_failing_reporter_does_not_stop_the_others(caplog):
    class Broken:
        interval_ms, reports = 1, 0

        def report(self, metrics):
            raise OSError("disk full")

        def close(self):
            pass

    good = MetricsReporter("c", interval_ms=1, stream=io.BytesIO())
    group = ReporterGroup([Broken(), good], clock=iter([0.0, 1.0, 2.0]).__next__)
    group.report({"n": 1})
    group.close()
    assert good.reports == 1 and "metrics reporter Broken failed" in caplog.text


@pytest.mark.parametrize("config,key,message", [
    ({"metrics.reporters": "snapshot"}, "metrics.reporters",
     "metrics.reporter.snapshot.class is not set"),
    ({"metrics.reporters": "x", "metrics.reporter.x.class": "com.example.GraphiteFactory"},
     "metrics.reporter.x.class", "MetricsSnapshotReporterFactory"),
    ({"metrics.reporters": "s", "metrics.reporter.s.class": "snapshot"},
     "metrics.reporter.s.stream", "is required"),
    ({"metrics.reporters": "s", "metrics.reporter.s.class": "snapshot",
      "metrics.reporter.s.stream": "metrics"}, "metrics.reporter.s.stream", "system.stream"),
    ({"metrics.reporters": "s", "metrics.reporter.s.class": "snapshot",
      "metrics.reporter.s.stream": "filelog.m", "metrics.reporter.s.blacklist": "(["},
     "metrics.reporter.s.blacklist", "bad regular expression"),
    ({"metrics.reporters": "j", "metrics.reporter.j.class": "jmx",
      "metrics.reporter.j.interval": "0"}, "metrics.reporter.j.interval", "at least 1"),
])
def test_a_bad_reporter_setting_is_refused_naming_its_key(config, key, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        MetricsSettings.from_config(Config(config))
    assert caught.value.key == key
