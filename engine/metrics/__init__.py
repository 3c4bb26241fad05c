"""Metrics: what tasks and the engine count, and the reporters that export it.

* :mod:`~weir.engine.metrics.registry`: counters, gauges, timers, histograms, registries, a
  task's metrics (``context.metrics``, docs/TASKS.md "Metrics");
* :mod:`~weir.engine.metrics.settings`: the ``metrics.*`` keys (:class:`MetricsSettings`);
* :mod:`~weir.engine.metrics.reporters`: Weir's JSON-lines reporter and every configured
  reporter as one (what the run loop drives);
* :mod:`~weir.engine.metrics.snapshot_stream`: Samza's snapshot reporter, to a stream;
* :mod:`~weir.engine.metrics.prometheus`: Samza's JMX reporter as Prometheus text at the job
  coordinator's ``/metrics``.

The last two load on first use.
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

from weir.engine.metrics.registry import (DEFAULT_GROUP, RUN_LOOP_COUNTERS, TASK_COUNTERS,
                                          USER_KEY, Counter, Gauge, Histogram, MetricsRegistry,
                                          TaskMetrics, Timer)
from weir.engine.metrics.reporters import MetricsReporter, Reporter, ReporterGroup
from weir.engine.metrics.settings import (METRICS_REPORTER_BLACKLIST, METRICS_REPORTER_CLASS,
                                          METRICS_REPORTER_FILE, METRICS_REPORTER_INTERVAL,
                                          METRICS_REPORTER_INTERVAL_MS, METRICS_REPORTER_STREAM,
                                          METRICS_REPORTERS, MetricsSettings, ReporterKind,
                                          ReporterSpec)

_LAZY = {
    "SnapshotStreamReporter": "weir.engine.metrics.snapshot_stream",
    "PrometheusReporter": "weir.engine.metrics.prometheus",
    "published_families": "weir.engine.metrics.prometheus",
}

__all__ = [
    "Counter", "Gauge", "Histogram", "Timer", "MetricsRegistry", "TaskMetrics",
    "DEFAULT_GROUP", "USER_KEY", "TASK_COUNTERS", "RUN_LOOP_COUNTERS",
    "MetricsReporter", "Reporter", "ReporterGroup",
    "MetricsSettings", "ReporterKind", "ReporterSpec",
    "METRICS_REPORTER_INTERVAL_MS", "METRICS_REPORTER_FILE", "METRICS_REPORTERS",
    "METRICS_REPORTER_CLASS", "METRICS_REPORTER_STREAM", "METRICS_REPORTER_INTERVAL",
    "METRICS_REPORTER_BLACKLIST",
    *_LAZY,
]

__getattr__ = lazy_exports(__name__, _LAZY, globals())
