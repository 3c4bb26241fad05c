"""Samza's metrics snapshot reporter: the metrics as messages of a stream.

``metrics.reporter.<name>.class=org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory``
with ``metrics.reporter.<name>.stream=<system>.<stream>`` sends, every
``metrics.reporter.<name>.interval`` seconds (default 60) and once when the container stops,
one message per *source*, as Samza's ``MetricsSnapshotReporter`` does:

* the container (source = the container's name, e.g. ``container-0``), with the groups
  ``weir.run-loop``, ``weir.consumers`` and any other top-level group of the snapshot;
* each task (source ``TaskName-<task name>``, Samza's form), with the group ``weir.task``
  (the task's built-in metrics), ``weir.stores`` (``<store>.<metric>``) and each group of the
  task's own metrics (``context.metrics``).

A message is Samza's MetricsSnapshot map ``{"header": {...}, "metrics": {group: {name:
value}}}`` (header: ``job-name``, ``job-id``, ``container-name``, ``source``, ``version``,
``samza-version`` (Weir's), ``host``, ``time``, ``reset-time``...). Values are Samza's: a
counter's count, a gauge's value, a timer's mean in nanoseconds; a histogram (which Samza
lacks) its fields. Metrics whose ``group.name`` matches ``metrics.reporter.<name>.blacklist``
are left out. The message is serialized by the stream's msg serde (Samza's
``MetricsSnapshotSerdeFactory`` is JSON here) or as JSON when the stream has none; its
partition key is the host, as in Samza. The stream is created with one partition when it does
not exist.

Example::

    >>> snap = {"run-loop": {"null-choices": 2}, "tasks": {"Partition 0": {
    ...     "messages-processed": 5, "process-ns": {"count": 5, "total-ns": 50, "max-ns": 20,
    ...     "mean-ns": 10}, "user": {"edit-counters": {"repeat-edits": {"count": 3}}}}}}
    >>> for source, groups in samza_groups(snap, "container-0", None):
    ...     print(source, groups)
    container-0 {'weir.run-loop': {'null-choices': 2}}
    TaskName-Partition 0 {'weir.task': {'messages-processed': 5, 'process-ns': 10}, 'edit-counters': {'repeat-edits': 3}}
"""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import orjson

from weir.engine.metrics.registry import USER_KEY
from weir.engine.metrics.settings import MetricsSettings, ReporterSpec
from weir.engine.model import SystemStreamPartition, make_outgoing, partition_for

__all__ = ["SnapshotStreamReporter", "samza_groups", "samza_value", "TASK_SOURCE_PREFIX"]

log = logging.getLogger("weir.metrics")

TASK_SOURCE_PREFIX = "TaskName-"
"""Samza's source name of a task's registry: ``TaskName-<task name>``."""

_SNAPSHOT_VERSION = "0.0.1"


def samza_value(value: Any) -> Any:
    """A metric's value as Samza's snapshot carries it: a timer's mean, a counter's count, a
    gauge's value; anything else as it is."""
    if isinstance(value, dict):
        if "mean-ns" in value:
            return value["mean-ns"]
        if set(value) == {"count"}:
            return value["count"]
        if set(value) == {"value"}:
            return value["value"]
    return value


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """Nested dicts of plain values as ``a.b.c`` names (stores' and consumers' metrics)."""
    if isinstance(value, dict) and value and not ({"mean-ns", "count", "value"} & set(value)):
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = samza_value(value)


def samza_groups(snapshot: dict[str, Any], container: str, blacklist: re.Pattern | None
                 ) -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
    """``(source, {group: {name: value}})`` per source of a run-loop snapshot (see the
    module docstring); sources without any metric left are skipped."""
    container_groups: dict[str, dict[str, Any]] = {}
    for key, value in snapshot.items():
        if key in ("tasks", "stores"):
            continue
        group: dict[str, Any] = {}
        if isinstance(value, dict):
            for name, v in value.items():
                _flat(str(name), v, group)
            container_groups[f"weir.{key}"] = group
        else:
            container_groups.setdefault("weir", {})[key] = value
    tasks = snapshot.get("tasks") or {}
    stores = snapshot.get("stores") or {}
    out = [(container, container_groups)]
    for task in sorted(set(tasks) | set(stores)):
        groups: dict[str, dict[str, Any]] = {}
        metrics = dict(tasks.get(task) or {})
        user = metrics.pop(USER_KEY, {}) or {}
        groups["weir.task"] = {name: samza_value(v) for name, v in metrics.items()}
        if task in stores:
            flat: dict[str, Any] = {}
            _flat("", stores[task], flat)
            groups["weir.stores"] = flat
        for group, named in user.items():
            groups.setdefault(group, {}).update(
                {name: samza_value(v) for name, v in named.items()})
        out.append((f"{TASK_SOURCE_PREFIX}{task}", groups))
    for source, groups in out:
        kept = {}
        for group, named in groups.items():
            left = {n: v for n, v in named.items()
                    if blacklist is None or not blacklist.fullmatch(f"{group}.{n}")}
            if left:
                kept[group] = left
        if kept:
            yield source, kept


class SnapshotStreamReporter:
    """Sends Samza's metrics snapshots to a stream (see the module docstring). Made by
    :meth:`~weir.engine.metrics.reporters.MetricsReporter.from_settings`; reports from the
    run loop's thread."""

    def __init__(self, spec: ReporterSpec, settings: MetricsSettings, source: str, *,
                 registry: Any = None, host: str | None = None,
                 clock: Any = time.time):
        if spec.stream is None:
            raise ValueError(f"snapshot reporter '{spec.name}' has no stream")
        self.spec = spec
        self.interval_ms = spec.interval_ms
        self.container = source
        self.settings = settings
        self._registry = registry
        self._host = host or socket.gethostname()
        self._clock = clock
        self._reset_ms = int(clock() * 1000)
        self._blacklist = re.compile(spec.blacklist) if spec.blacklist else None
        self._producer: Any = None
        self._serdes: Any = None
        self._partition = 0
        self._source = f"metrics-{spec.name}-{source}"
        self.reports = 0
        self.sent = 0

    def _start(self) -> None:
        from weir.engine.errors import StreamNotFoundError
        from weir.engine.systems.api import StreamSpec
        from weir.engine.systems.registry import SystemRegistry

        if self._registry is None:
            self._registry = SystemRegistry(self.settings.config)
        ss = self.spec.stream
        try:
            count = self._registry.partition_counts([ss])[ss]
        except StreamNotFoundError:  # as Kafka would create the topic for Samza
            if self._registry.admin(ss.system).create_stream(StreamSpec(ss.stream, 1)):
                log.info("metrics reporter '%s': created the stream %s (1 partition)",
                         self.spec.name, ss)
            count = self._registry.partition_counts([ss])[ss]
        self._partition = partition_for(self._host.encode(), count)
        self._serdes = self._registry.serdes_for(ss)
        producer = self._registry.producer(ss.system)
        producer.register(self._source)
        producer.start()
        self._producer = producer

    def messages(self, snapshot: dict[str, Any]) -> list[dict[str, Any]]:
        """The MetricsSnapshot maps of one report."""
        now = int(self._clock() * 1000)
        out = []
        for source, groups in samza_groups(snapshot, self.container, self._blacklist):
            header = {"job-name": self.settings.job_name, "job-id": self.settings.job_id,
                      "container-name": self.container, "exec-env-container-id": "",
                      "samza-epoch-id": "", "source": source, "version": _SNAPSHOT_VERSION,
                      "samza-version": _weir_version(), "host": self._host, "time": now,
                      "reset-time": self._reset_ms}
            out.append({"header": header, "metrics": groups})
        return out

    def report(self, metrics: dict[str, Any]) -> None:
        if self._producer is None:
            self._start()
        ss = self.spec.stream
        for message in self.messages(metrics):
            if self._serdes.msg_serde is None:
                value = orjson.dumps(message, option=orjson.OPT_NON_STR_KEYS)
            else:
                value = self._serdes.serialize_message(message)
            self._producer.send(self._source, make_outgoing(
                ss, value, None, None, self._partition, int(self._clock() * 1000)))
            self.sent += 1
        self._producer.flush(self._source)
        self.reports += 1

    def close(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            producer.stop()

    @property
    def ssp(self) -> SystemStreamPartition:
        """Where the reports go."""
        ss = self.spec.stream
        return SystemStreamPartition(ss.system, ss.stream, self._partition)


def _weir_version() -> str:
    from weir.engine import __version__
    return f"weir-{__version__}"
