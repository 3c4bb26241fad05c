"""A task's own metrics (``context.metrics``): kinds, groups, snapshots."""

from __future__ import annotations

import pytest

from weir.engine.metrics import Histogram, TaskMetrics


def test_a_tasks_own_metrics_appear_in_its_snapshot_by_group_and_name():
    metrics = TaskMetrics("Partition 0")
    metrics.counter("repeat-edits", group="edit-counters").inc(2)
    metrics.gauge("queue", 5).set(7)
    metrics.timer("lookup-ns", group="edit-counters").update(300)
    metrics.histogram("batch", group="sizes").update(4)

    user = metrics.snapshot()["user"]

    assert user["edit-counters"]["repeat-edits"] == {"count": 2}
    assert user["task"]["queue"] == {"value": 7}
    assert user["edit-counters"]["lookup-ns"]["mean-ns"] == 300
    assert user["sizes"]["batch"]["count"] == 1 and user["sizes"]["batch"]["p99"] == 4
    assert metrics.snapshot()["messages-processed"] == 0  # built-in metrics unchanged


def test_samzas_group_name_order_is_a_type_error_not_a_swapped_metric():
    metrics = TaskMetrics("Partition 0")
    with pytest.raises(TypeError):
        metrics.counter("edit-counters", "repeat-edits")  # Samza: newCounter(group, name)


def test_asking_twice_returns_the_same_metric_and_another_kind_is_refused():
    metrics = TaskMetrics("Partition 0")
    assert metrics.counter("n") is metrics.counter("n")
    with pytest.raises(ValueError, match="is a Counter, not a Timer"):
        metrics.timer("n")


def test_a_gauge_read_from_a_function_cannot_be_set():
    metrics = TaskMetrics("Partition 0")
    gauge = metrics.gauge("depth", read=lambda: 3)
    assert gauge.value() == 3
    with pytest.raises(ValueError, match="cannot be set"):
        gauge.set(4)


def test_a_histogram_keeps_percentiles_of_its_last_window_of_values():
    h = Histogram("lag", window=10)
    for v in range(100):
        h.update(v)

    s = h.value()

    assert (s["count"], s["min"], s["max"], s["sum"]) == (100, 0, 99, 4950)
    assert (s["p50"], s["p99"]) == (94, 99)  # of the last 10 values: 90..99
