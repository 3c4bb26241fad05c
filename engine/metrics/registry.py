"""Metrics: counters, gauges, timers and histograms grouped in registries, and a task's own.

Each task instance has a :class:`TaskMetrics` (group = the task name) with the counters the
run loop keeps for it; the run loop has its own :class:`MetricsRegistry`, and the consumer
multiplexer its own. ``snapshot()`` returns plain JSON-able dicts. The hot path increments
``counter.count`` directly (no method call, no lock); readers tolerate the slightly stale
values that gives on other threads.

Tasks add their own metrics through ``context.metrics`` (docs/TASKS.md, "Metrics"): the
task's :class:`TaskMetrics`, whose :meth:`~TaskMetrics.counter`, :meth:`~TaskMetrics.gauge`,
:meth:`~TaskMetrics.timer` and :meth:`~TaskMetrics.histogram` make (or return) a metric of a
*group*, as Samza's ``MetricsRegistry.newCounter(group, name)``; the group is keyword-only,
so Samza's ``(group, name)`` order cannot be ported by mistake. Every reporter exports them.

Example::

    >>> reg = MetricsRegistry("Partition 0")
    >>> reg.counter("messages-processed").inc(3)
    >>> reg.timer("process-ns").update(1500)
    >>> reg.snapshot()["messages-processed"]
    3
    >>> reg.snapshot()["process-ns"]["mean-ns"]
    1500
    >>> task = TaskMetrics("Partition 0")
    >>> task.counter("repeat-edits", group="edit-counters").inc()
    >>> task.snapshot()["user"]
    {'edit-counters': {'repeat-edits': {'count': 1}}}
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "Counter",
    "Timer",
    "Gauge",
    "Histogram",
    "MetricsRegistry",
    "TaskMetrics",
    "DEFAULT_GROUP",
    "USER_KEY",
    "TASK_COUNTERS",
    "RUN_LOOP_COUNTERS",
]

DEFAULT_GROUP = "task"
"""The group of a task's own metric when ``group`` is not given."""

USER_KEY = "user"
"""Where a task's snapshot holds the task's own metrics (by group, then name)."""

TASK_COUNTERS = frozenset({"messages-processed", "window-calls", "commit-calls",
                           "exceptions-ignored", "messages-skipped"})
"""The counters among a task's built-in metrics (the others are timers and gauges;
``exception-ignored-<class>`` counters too): what exporters that type metrics need."""

RUN_LOOP_COUNTERS = frozenset({"null-choices", "blocked-waits", "skipped-envelopes"})
"""The counters among the run loop's metrics."""


class Counter:
    """A count. Hot paths may do ``counter.count += 1``; ``dec`` exists for Samza's
    ``Counter.dec``. Its user snapshot is ``{"count": n}``."""

    __slots__ = ("name", "count")

    def __init__(self, name: str):
        self.name = name
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n

    def value(self) -> int:
        return self.count

    def described(self) -> dict[str, Any]:
        return {"count": self.count}


class Timer:
    """Durations in nanoseconds: count, total, max; the snapshot adds the mean.

    ``with timer.time(): ...`` measures a block. Example::

        >>> t = Timer("lookup-ns")
        >>> with t.time():
        ...     pass
        >>> t.count
        1
    """

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

    @contextmanager
    def time(self) -> Iterator[None]:
        """Measure the block (``time.perf_counter_ns``), also when it raises."""
        started = time.perf_counter_ns()
        try:
            yield
        finally:
            self.update(time.perf_counter_ns() - started)

    def value(self) -> dict[str, int]:
        count = self.count
        return {"count": count, "total-ns": self.total_ns, "max-ns": self.max_ns,
                "mean-ns": self.total_ns // count if count else 0}

    described = value


class Gauge:
    """A value: read from ``read`` when the snapshot is taken, or ``set`` by the task
    (Samza's ``Gauge.set``). Its user snapshot is ``{"value": v}``."""

    __slots__ = ("name", "_read", "_value")

    def __init__(self, name: str, read: Callable[[], Any] | None = None, value: Any = 0):
        self.name = name
        self._read = read
        self._value = value

    def set(self, value: Any) -> None:
        if self._read is not None:
            raise ValueError(f"gauge '{self.name}' reads its value from a function; it "
                             f"cannot be set")
        self._value = value

    def value(self) -> Any:
        return self._read() if self._read is not None else self._value

    def described(self) -> dict[str, Any]:
        return {"value": self.value()}


class Histogram:
    """A distribution of values (batch sizes, lags, amounts): count, sum, min, max, mean,
    and the 50th/75th/95th/99th percentiles of the last ``window`` values (a sliding
    reservoir, as Samza's timers keep).

    Example::

        >>> h = Histogram("batch-size", window=100)
        >>> for v in range(1, 101):
        ...     h.update(v)
        >>> s = h.value()
        >>> s["count"], s["min"], s["max"], s["p50"], s["p99"]
        (100, 1, 100, 50, 99)
    """

    __slots__ = ("name", "count", "sum", "min", "max", "_window", "_values", "_next")

    DEFAULT_WINDOW = 1028
    """Values kept for the percentiles (Dropwizard's reservoir size)."""

    def __init__(self, name: str, window: int = DEFAULT_WINDOW):
        if window < 1:
            raise ValueError("window must be at least 1")
        self.name = name
        self.count = 0
        self.sum: float = 0
        self.min: float | None = None
        self.max: float | None = None
        self._window = window
        self._values: list[float] = []
        self._next = 0

    def update(self, value: float) -> None:
        self.count += 1
        self.sum += value
        if self.min is None or value < self.min:
            self.min = value
        if self.max is None or value > self.max:
            self.max = value
        if len(self._values) < self._window:
            self._values.append(value)
        else:
            self._values[self._next] = value
            self._next = (self._next + 1) % self._window

    def value(self) -> dict[str, Any]:
        values = sorted(self._values)
        out: dict[str, Any] = {"count": self.count, "sum": self.sum, "min": self.min,
                               "max": self.max,
                               "mean": self.sum / self.count if self.count else 0}
        for q in (50, 75, 95, 99):
            out[f"p{q}"] = _percentile(values, q)
        return out

    described = value


def _percentile(values: list[float], q: int) -> float | None:
    """The nearest-rank percentile of sorted ``values`` (None when empty)."""
    if not values:
        return None
    rank = max(1, math.ceil(q / 100 * len(values)))
    return values[rank - 1]


Metric = Counter | Timer | Gauge | Histogram


class MetricsRegistry:
    """Named metrics of one group (a task, the run loop, the consumers)."""

    __slots__ = ("group", "_metrics")

    def __init__(self, group: str):
        self.group = group
        self._metrics: dict[str, Metric] = {}

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

    def gauge(self, name: str, read: Callable[[], Any] | None = None, value: Any = 0) -> Gauge:
        return self._get(name, Gauge, read, value)

    def histogram(self, name: str) -> Histogram:
        return self._get(name, Histogram)

    def metrics(self) -> list[Metric]:
        """The metrics, in the order they were made."""
        return list(self._metrics.values())

    def snapshot(self) -> dict[str, Any]:
        return {name: metric.value() for name, metric in list(self._metrics.items())}


class TaskMetrics:
    """The metrics of one task instance: the run loop's counters as attributes for its hot
    path, and the task's own metrics (``context.metrics``) by group.

    ``processed`` counts messages whose processing finished (callbacks released);
    ``process_ns`` is sampled on the inline path (every 64th message) and measured for
    every message on thread-pool and async paths; ``ignored`` counts messages whose
    exception was skipped (per class as ``exception-ignored-<class>``).

    The task's own metrics appear in :meth:`snapshot` under ``"user"``, by group and name,
    each as ``{"count": n}`` (counter), ``{"value": v}`` (gauge), the timer's or the
    histogram's fields; asking twice for the same group and name returns the same metric.
    """

    __slots__ = ("registry", "processed", "process_ns", "windows", "window_ns", "commits",
                 "commit_ns", "ignored", "skipped", "last_commit_ms", "_user")

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
        self._user: dict[str, MetricsRegistry] = {}

    def ignored_exception(self, class_name: str) -> None:
        self.ignored.count += 1
        self.registry.counter(f"exception-ignored-{class_name}").count += 1

    # -- the task's own metrics (context.metrics) -------------------------------------------
    def _group(self, group: str) -> MetricsRegistry:
        if not isinstance(group, str) or not group:
            raise ValueError(f"a metric group is a non-empty string, got {group!r}")
        registry = self._user.get(group)
        if registry is None:
            registry = self._user[group] = MetricsRegistry(group)
        return registry

    def counter(self, name: str, *, group: str = DEFAULT_GROUP) -> Counter:
        """The task's counter ``name`` of ``group`` (Samza:
        ``getTaskMetricsRegistry().newCounter(group, name)``)."""
        return self._group(group).counter(name)

    def gauge(self, name: str, value: Any = 0, *, group: str = DEFAULT_GROUP,
              read: Callable[[], Any] | None = None) -> Gauge:
        """The task's gauge ``name`` of ``group``: ``set`` it, or give ``read``, a function
        called at each snapshot (Samza: ``newGauge(group, name, value)``)."""
        return self._group(group).gauge(name, read, value)

    def timer(self, name: str, *, group: str = DEFAULT_GROUP) -> Timer:
        """The task's timer ``name`` of ``group``: ``update(ns)`` or ``with timer.time():``
        (Samza: ``newTimer(group, name)``)."""
        return self._group(group).timer(name)

    def histogram(self, name: str, *, group: str = DEFAULT_GROUP) -> Histogram:
        """The task's histogram ``name`` of ``group``: ``update(value)``; its snapshot
        holds count, sum, min, max, mean and percentiles."""
        return self._group(group).histogram(name)

    def user_groups(self) -> dict[str, list[Metric]]:
        """The task's own metrics by group."""
        return {group: reg.metrics() for group, reg in list(self._user.items())}

    def snapshot(self) -> dict[str, Any]:
        snap = self.registry.snapshot()
        if self._user:
            snap[USER_KEY] = {group: {m.name: m.described() for m in metrics}
                                for group, metrics in self.user_groups().items()}
        return snap
