"""Metrics reporters: Weir's JSON lines, and every configured reporter as one.

The run loop builds its reporter with :meth:`MetricsReporter.from_settings` and calls
``report(snapshot)`` every ``interval_ms`` from its own thread (so snapshots never race with
the metrics they read), once more when it stops, then ``close()``. With several reporters
(the JSON lines, Samza's snapshot reporter, the Prometheus one) :class:`ReporterGroup` is that
one reporter: it ticks at the shortest interval, hands each snapshot to the reporters whose
own interval has passed, and at ``close`` gives the last snapshot to those that skipped it, so
every reporter ends with the final values.

The JSON-lines reporter writes ``{"timestamp", "source", "metrics"}`` per report::

    {"timestamp": 1718000000000, "source": "container-0", "metrics": {...}}
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, Protocol

import orjson

from weir.engine.metrics.settings import MetricsSettings, ReporterKind

__all__ = ["Reporter", "MetricsReporter", "ReporterGroup"]

log = logging.getLogger("weir.metrics")


class Reporter(Protocol):
    """What the run loop drives: ``report`` a snapshot (plain dicts), ``close`` at the end."""

    interval_ms: int
    reports: int

    def report(self, metrics: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class MetricsReporter:
    """Writes ``{"timestamp", "source", "metrics"}`` as one JSON line per :meth:`report`.

    Example::

        >>> import io
        >>> out = io.BytesIO()
        >>> reporter = MetricsReporter("container-0", interval_ms=1000, stream=out)
        >>> reporter.report({"tasks": {"Partition 0": {"messages-processed": 3}}})
        >>> out.getvalue().splitlines()[0].endswith(b'"metrics":{"tasks":{"Partition 0":{"messages-processed":3}}}}')
        True
    """

    def __init__(self, source: str, *, interval_ms: int, path: str | None = None,
                 stream: IO[bytes] | None = None):
        if interval_ms <= 0:
            raise ValueError("interval_ms must be positive")
        self.source = source
        self.interval_ms = interval_ms
        self._path = path
        self._own = path is not None and stream is None
        self._out: IO[bytes] | None = stream
        self.reports = 0

    @classmethod
    def from_config(cls, config: Any, source: str) -> "Reporter | None":
        """Every reporter ``metrics.*`` configures, as one (None when nothing reports)."""
        return cls.from_settings(MetricsSettings.from_config(config), source)

    @classmethod
    def from_settings(cls, settings: MetricsSettings, source: str) -> "Reporter | None":
        """Every reporter ``settings`` names, as one: the JSON lines (when
        ``interval_ms`` > 0) and each named reporter; None when nothing reports."""
        reporters: list[Reporter] = []
        if settings.interval_ms > 0:
            reporters.append(cls(source, interval_ms=settings.interval_ms, path=settings.file))
        for spec in settings.reporters:
            if spec.kind is ReporterKind.SNAPSHOT:
                from weir.engine.metrics.snapshot_stream import SnapshotStreamReporter
                reporters.append(SnapshotStreamReporter(spec, settings, source))
            else:
                from weir.engine.metrics.prometheus import PrometheusReporter
                reporters.append(PrometheusReporter(spec, settings, source))
        if not reporters:
            return None
        return reporters[0] if len(reporters) == 1 else ReporterGroup(reporters)

    def _stream(self) -> IO[bytes]:
        if self._out is None:
            self._out = open(self._path, "ab") if self._path else sys.stderr.buffer
        return self._out

    def report(self, metrics: dict[str, Any]) -> None:
        line = orjson.dumps({"timestamp": time.time_ns() // 1_000_000, "source": self.source,
                             "metrics": metrics}, option=orjson.OPT_NON_STR_KEYS)
        out = self._stream()
        out.write(line + b"\n")
        out.flush()
        self.reports += 1

    def close(self) -> None:
        if self._own and self._out is not None:
            self._out.close()
        self._out = None


class ReporterGroup:
    """Several reporters as one (see the module docstring). A reporter that fails is logged
    and skipped: metrics never stop processing, nor one reporter another.

    Example::

        >>> import io
        >>> fast = MetricsReporter("c", interval_ms=10, stream=io.BytesIO())
        >>> slow = MetricsReporter("c", interval_ms=60_000, stream=io.BytesIO())
        >>> clock = iter([0.0, 0.02, 0.04]).__next__
        >>> group = ReporterGroup([fast, slow], clock=clock)
        >>> group.interval_ms
        10
        >>> group.report({"n": 1}); group.report({"n": 2}); group.close()
        >>> fast.reports, slow.reports
        (2, 1)
    """

    def __init__(self, reporters: Sequence[Reporter], *,
                 clock: Callable[[], float] = time.monotonic):
        if not reporters:
            raise ValueError("a reporter group needs at least one reporter")
        self.reporters = list(reporters)
        self.interval_ms = min(r.interval_ms for r in self.reporters)
        self._clock = clock
        started = clock()
        self._due = [started + r.interval_ms / 1000 for r in self.reporters]
        self._behind = [False] * len(self.reporters)
        self._last: dict[str, Any] | None = None
        self.reports = 0

    def report(self, metrics: dict[str, Any]) -> None:
        now = self._clock()
        self._last = metrics
        for i, reporter in enumerate(self.reporters):
            if now + 0.0005 >= self._due[i]:  # a tick a hair early still counts
                self._due[i] = now + reporter.interval_ms / 1000
                self._behind[i] = not _report(reporter, metrics)
            else:
                self._behind[i] = True
        self.reports += 1

    def close(self) -> None:
        for i, reporter in enumerate(self.reporters):
            if self._behind[i] and self._last is not None:
                _report(reporter, self._last)
            try:
                reporter.close()
            except Exception:
                log.exception("metrics reporter %s failed to close", type(reporter).__name__)


def _report(reporter: Reporter, metrics: dict[str, Any]) -> bool:
    try:
        reporter.report(metrics)
        return True
    except Exception:
        log.exception("metrics reporter %s failed", type(reporter).__name__)
        return False
