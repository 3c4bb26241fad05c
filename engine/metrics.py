"""Metrics: counters, timers and gauges grouped in registries, and a JSON-lines reporter.

Each task instance has a :class:`MetricsRegistry` (group = the task name) with the counters
the run loop keeps for it (:class:`TaskMetrics`); the run loop has its own registry, and the
consumer multiplexer its own. ``snapshot()`` returns plain JSON-able dicts. The hot path
increments ``counter.count`` directly (no method call, no lock); readers tolerate the
slightly stale values that gives on other threads.

With ``metrics.reporter.interval.ms`` > 0 a :class:`MetricsReporter` writes one JSON line per
interval to ``metrics.reporter.file`` (appended; standard error when unset)::

    {"timestamp": 1718000000000, "source": "container-0", "metrics": {...}}

Example::

    >>> reg = MetricsRegistry("Partition 0")
    >>> reg.counter("messages-processed").inc(3)
    >>> reg.timer("process-ns").update(1500)
    >>> reg.snapshot()["messages-processed"]
    3
    >>> reg.snapshot()["process-ns"]["mean-ns"]
    1500
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import orjson

from weir.stores.config import Config, declare

__all__ = [
    "MetricsSettings",
    "METRICS_REPORTER_INTERVAL_MS",
    "METRICS_REPORTER_FILE",
    "Counter",
    "Timer",
    "Gauge",
    "MetricsRegistry",
    "TaskMetrics",
    "MetricsReporter",
]

_C = "metrics"
METRICS_REPORTER_INTERVAL_MS = declare(
    "metrics.reporter.interval.ms", int, 0,
    "Write a JSON line of every metric this often (milliseconds); 0 or less: no reporter.",
    component=_C)
METRICS_REPORTER_FILE = declare(
    "metrics.reporter.file", str, None,
    "File the metrics reporter appends its JSON lines to; unset: standard error.",
    component=_C)


class Counter:
    """A monotonically increasing count. Hot paths may do ``counter.count += 1``."""

    __slots__ = ("name", "count")

    def __init__(self, name: str):
        self.name = name
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def value(self) -> int:
        return self.count


class Timer:
    """Durations in nanoseconds: count, total, max; the snapshot adds the mean."""

    __slots__ = ("name", "count", "total_ns", "max_ns")

    def __init__(self, name: str):
        self.name = name
        self.count = 0
        self.total_ns = 0
        self.max_ns = 0

    def update(self, ns: int) -> None:
        self.count += 1
        self.total_ns += ns
        if ns > self.max_ns:
            self.max_ns = ns

    def value(self) -> dict[str, int]:
        count = self.count
        return {"count": count, "total-ns": self.total_ns, "max-ns": self.max_ns,
                "mean-ns": self.total_ns // count if count else 0}


class Gauge:
    """A value read when the snapshot is taken."""

    __slots__ = ("name", "_read")

    def __init__(self, name: str, read: Callable[[], Any]):
        self.name = name
        self._read = read

    def value(self) -> Any:
        return self._read()


class MetricsRegistry:
    """Named metrics of one group (a task, the run loop, the consumers)."""

    __slots__ = ("group", "_metrics")

    def __init__(self, group: str):
        self.group = group
        self._metrics: dict[str, Counter | Timer | Gauge] = {}

    def _get(self, name: str, kind: type, *args: Any) -> Any:
        metric = self._metrics.get(name)
        if metric is None:
            metric = self._metrics[name] = kind(name, *args)
        elif type(metric) is not kind:
            raise ValueError(f"metric '{name}' of group '{self.group}' is a "
                             f"{type(metric).__name__}, not a {kind.__name__}")
        return metric

    def counter(self, name: str) -> Counter:
        return self._get(name, Counter)

    def timer(self, name: str) -> Timer:
        return self._get(name, Timer)

    def gauge(self, name: str, read: Callable[[], Any]) -> Gauge:
        return self._get(name, Gauge, read)

    def snapshot(self) -> dict[str, Any]:
        return {name: metric.value() for name, metric in list(self._metrics.items())}


class TaskMetrics:
    """The metrics of one task instance, as attributes for the run loop's hot path.

    ``processed`` counts messages whose processing finished (callbacks released);
    ``process_ns`` is sampled on the inline path (every 64th message) and measured for
    every message on thread-pool and async paths; ``ignored`` counts messages whose
    exception was skipped (per class as ``exception-ignored-<class>``).
    """

    __slots__ = ("registry", "processed", "process_ns", "windows", "window_ns", "commits",
                 "commit_ns", "ignored", "skipped", "last_commit_ms")

    def __init__(self, task_name: str):
        reg = self.registry = MetricsRegistry(task_name)
        self.processed = reg.counter("messages-processed")
        self.process_ns = reg.timer("process-ns")
        self.windows = reg.counter("window-calls")
        self.window_ns = reg.timer("window-ns")
        self.commits = reg.counter("commit-calls")
        self.commit_ns = reg.timer("commit-ns")
        self.ignored = reg.counter("exceptions-ignored")
        self.skipped = reg.counter("messages-skipped")
        self.last_commit_ms = 0
        reg.gauge("last-commit-ms", lambda: self.last_commit_ms)

    def ignored_exception(self, class_name: str) -> None:
        self.ignored.count += 1
        self.registry.counter(f"exception-ignored-{class_name}").count += 1

    def snapshot(self) -> dict[str, Any]:
        return self.registry.snapshot()


@dataclass(frozen=True)
class MetricsSettings:
    """``metrics.reporter.*``, parsed once: a report every ``interval_ms`` (0 or less: none)
    to ``file`` (None: standard error)."""

    interval_ms: int = 0
    file: str | None = None

    @classmethod
    def from_config(cls, config: Config) -> "MetricsSettings":
        return cls(METRICS_REPORTER_INTERVAL_MS.get(config), METRICS_REPORTER_FILE.get(config))


class MetricsReporter:
    """Writes ``{"timestamp", "source", "metrics"}`` as one JSON line per :meth:`report`.

    The owner (the run loop) calls :meth:`report` with a snapshot every ``interval_ms`` from
    its own thread, so snapshots never race with the metrics they read, and once more when
    it stops. Example::

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
    def from_config(cls, config: Config, source: str) -> "MetricsReporter | None":
        """A reporter per ``metrics.reporter.*``, or None when the interval is 0 or less."""
        return cls.from_settings(MetricsSettings.from_config(config), source)

    @classmethod
    def from_settings(cls, settings: MetricsSettings, source: str) -> "MetricsReporter | None":
        """A reporter per ``settings``, or None when its interval is 0 or less."""
        if settings.interval_ms <= 0:
            return None
        return cls(source, interval_ms=settings.interval_ms, path=settings.file)

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
