"""Weir's Spark metrics in Weir's metrics reporter.

Every Weir operator (:class:`~weir.engine.spark.operator.StateOperator`,
``transform_with_state``, a job's tasks) reports per batch, as observed metrics of the query
named ``weir.<operator>``: tasks, rows in and out, changes, state rows and bytes (exact row
counts, approximate bytes on disk), bytes of the published versions, versions published /
adopted (another attempt won) / replayed (published before the task started), replicas reused,
adopted from a dead worker and rebuilt, changelogs replayed, snapshots rewritten after damage,
and the largest restore, publish and snapshot times of the batch (task time is summed). Spark
shows them in ``query.lastProgress["observedMetrics"]``.

:class:`MetricsListener` is a Spark ``StreamingQueryListener`` that writes them to Weir's
JSON-lines reporter (``metrics.reporter.*``), one line per batch::

    {"timestamp": ..., "source": "spark", "metrics": {"query": "...", "batch": 3,
     "weir.counts": {"tasks": 4, "state_rows": 10000, "restore_ms": 2.1, ...}}}

Register it on the driver: ``spark.streams.addListener(MetricsListener(reporter))``; remove
it (:meth:`remove`) before the session stops.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from weir.engine.metrics import MetricsReporter

__all__ = ["MetricsListener", "weir_metrics"]


def weir_metrics(progress: Any) -> dict[str, dict[str, Any]]:
    """The ``weir.*`` observed metrics of a query progress (a StreamingQueryProgress or its
    dict), as plain dicts."""
    observed = progress.get("observedMetrics") if isinstance(progress, dict) else \
        getattr(progress, "observedMetrics", None)
    out = {}
    for name, row in (observed or {}).items():
        if name.startswith("weir."):
            out[name] = row.asDict() if hasattr(row, "asDict") else dict(row)
    return out


class MetricsListener(StreamingQueryListener):
    """Forwards every batch's Weir metrics to a :class:`MetricsReporter` (and keeps the last
    ones, per query, in :attr:`latest`)."""

    def __init__(self, reporter: MetricsReporter | None, *, spark: Any = None):
        self.reporter = reporter
        self.latest: dict[str, dict[str, Any]] = {}
        self.batches: list[tuple[str, int, dict[str, Any]]] = []
        self._spark = spark

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        metrics = weir_metrics(progress)
        query = str(progress.id)
        self.batches.append((query, progress.batchId, metrics))
        if metrics:
            self.latest[query] = metrics
            if self.reporter is not None:
                self.reporter.report({"query": query, "batch": progress.batchId, **metrics})

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def remove(self) -> None:
        if self._spark is not None:
            self._spark.streams.removeListener(self)
        if self.reporter is not None:
            self.reporter.close()
