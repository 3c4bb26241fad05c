"""Samza's JMX reporter, here: the metrics as Prometheus text at the job coordinator.

``metrics.reporter.<name>.class=org.apache.samza.metrics.reporter.JmxReporterFactory`` (or
``prometheus``) has no JMX to register with; the same metrics are served at the job
coordinator's ``/metrics`` (``weir run`` then serves its HTTP endpoint for every run, also a
job whose one container runs inside it; the URL is logged). Each container publishes its
metrics every ``metrics.reporter.<name>.interval`` seconds (default 10) and once when it
stops: a container inside ``weir run`` directly (:func:`publish`), a container process with
``PUT /metrics/<container id>`` to the coordinator's URL. A scrape shows the last publication
of every container, labelled ``job`` and ``container`` (and ``task``, ``store``):

| Weir metric | Prometheus family |
|---|---|
| a task's counters (``messages-processed`` ...) | ``weir_task_messages_processed_total`` (counter) |
| a task's timers (``process-ns`` ...) | ``weir_task_process_seconds`` (summary: ``_count``, ``_sum``) |
| ``last-commit-ms`` | ``weir_task_last_commit_ms`` (gauge) |
| ``context.metrics`` counter ``repeat-edits`` of group ``edit-counters`` | ``weir_user_edit_counters_repeat_edits_total`` |
| ... its gauges, timers, histograms | gauge; summary in seconds; summary with ``quantile`` 0.5/0.75/0.95/0.99 |
| the run loop's, the consumers' metrics | ``weir_run_loop_*``, ``weir_consumers_*`` |
| stores' object caches | ``weir_store_cache_*`` (gauges, labels ``task``, ``store``) |

Names are lower-cased with every other character than ``[a-z0-9_]`` turned into ``_``.

Example::

    >>> snap = {"tasks": {"Partition 0": {"messages-processed": 5,
    ...         "user": {"edit-counters": {"repeat-edits": {"count": 3}}}}}}
    >>> fams = {f.name: f for f in families(snap, job="stats-1", container="0")}
    >>> fams["weir_user_edit_counters_repeat_edits_total"].samples
    [({'job': 'stats-1', 'container': '0', 'task': 'Partition 0'}, 3)]
"""

from __future__ import annotations

import logging
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from numbers import Real
from typing import Any

import orjson

from weir.engine.coordinator.prometheus import Family
from weir.engine.metrics.registry import RUN_LOOP_COUNTERS, TASK_COUNTERS, USER_KEY
from weir.engine.metrics.settings import MetricsSettings, ReporterSpec

__all__ = ["PrometheusReporter", "families", "publish", "published_families",
           "families_from_json", "families_to_json", "forget_published", "METRICS_PATH"]

log = logging.getLogger("weir.metrics")

METRICS_PATH = "/metrics"
"""The coordinator's path a container process PUTs its families to (``/metrics/<id>``)."""

_ENV_URL = "SAMZA_COORDINATOR_URL"
_ENV_CONTAINER = "SAMZA_CONTAINER_ID"
_QUANTILES = (("p50", "0.5"), ("p75", "0.75"), ("p95", "0.95"), ("p99", "0.99"))
_CONSUMER_GAUGES = frozenset({"buffered"})
_BAD = re.compile(r"[^a-z0-9_]")


def _name(*parts: str) -> str:
    return "_".join(_BAD.sub("_", p.lower()) for p in parts if p)


class _Families:
    """Families being built, each sample added under its family (HELP/TYPE once)."""

    def __init__(self) -> None:
        self.by_name: dict[str, Family] = {}

    def add(self, name: str, kind: str, help_text: str, labels: dict[str, str], value: Any,
            suffix: str = "") -> None:
        if isinstance(value, bool) or not isinstance(value, Real):
            return  # Prometheus carries numbers only
        family = self.by_name.get(name)
        if family is None:
            family = self.by_name[name] = Family(name, kind, help_text, [])
        elif family.type != kind:
            return  # the same name as another kind: keep the first
        family.samples.append((labels, value, suffix) if suffix else (labels, value))

    def metric(self, base: str, value: Any, labels: dict[str, str], counter: bool,
               what: str) -> None:
        """One Weir metric value: a timer or histogram dict, a ``{"count"}``/``{"value"}``
        user metric, or a plain number (a counter when ``counter``)."""
        if isinstance(value, dict):
            if "total-ns" in value:
                name = _name(base.removesuffix("-ns") if base.endswith("-ns") else base,
                             "seconds")
                self.add(name, "summary", f"{what} (seconds)", labels, value["count"], "_count")
                self.add(name, "summary", f"{what} (seconds)", labels,
                         value["total-ns"] / 1e9, "_sum")
            elif "p50" in value:
                name = _name(base)
                for field, q in _QUANTILES:
                    if value.get(field) is not None:
                        self.add(name, "summary", what, {**labels, "quantile": q},
                                 value[field])
                self.add(name, "summary", what, labels, value.get("sum", 0), "_sum")
                self.add(name, "summary", what, labels, value.get("count", 0), "_count")
            elif set(value) == {"count"}:
                self.add(_name(base, "total"), "counter", what, labels, value["count"])
            elif set(value) == {"value"}:
                self.add(_name(base), "gauge", what, labels, value["value"])
            return
        if counter:
            self.add(_name(base, "total"), "counter", what, labels, value)
        else:
            self.add(_name(base), "gauge", what, labels, value)


def families(snapshot: Mapping[str, Any], *, job: str, container: str) -> list[Family]:
    """The Prometheus families of one run-loop snapshot (see the module docstring)."""
    out = _Families()
    base = {"job": job, "container": container}
    for key, value in snapshot.items():
        if key == "tasks":
            for task, metrics in (value or {}).items():
                labels = {**base, "task": str(task)}
                for name, v in (metrics or {}).items():
                    if name == USER_KEY:
                        for group, named in (v or {}).items():
                            for metric, mv in named.items():
                                out.metric(f"weir_user_{group}_{metric}", mv, labels, False,
                                           f"{group}.{metric} of the task (context.metrics)")
                    elif name.startswith("exception-ignored-"):
                        out.add("weir_task_exceptions_ignored_by_class_total", "counter",
                                "Exceptions ignored (task.ignored.exceptions), by class.",
                                {**labels, "class": name[len("exception-ignored-"):]}, v)
                    else:
                        out.metric(f"weir_task_{name}", v, labels, name in TASK_COUNTERS,
                                   f"Weir task metric {name}.")
        elif key == "stores":
            for task, stores in (value or {}).items():
                for store, stats in (stores or {}).items():
                    labels = {**base, "task": str(task), "store": str(store)}
                    for name, v in (stats or {}).items():
                        out.add(_name("weir_store_cache", name), "gauge",
                                f"Object cache {name} of the store.", labels, v)
        elif key == "consumers" and isinstance(value, dict):
            for name, v in value.items():
                if isinstance(v, dict):
                    for partition, n in v.items():
                        out.add(_name("weir_consumers", name, "total"), "counter",
                                f"Consumers' {name}.", {**base, "partition": str(partition)}, n)
                else:
                    out.metric(f"weir_consumers_{name}", v, base, name not in _CONSUMER_GAUGES,
                               f"Consumers' {name}.")
        elif isinstance(value, dict):
            for name, v in value.items():
                out.metric(f"weir_{key}_{name}", v, base,
                           key == "run-loop" and name in RUN_LOOP_COUNTERS,
                           f"Weir {key} metric {name}.")
        else:
            out.add(_name("weir", key), "gauge", f"Weir metric {key}.", base, value)
    return list(out.by_name.values())


# -- publication --------------------------------------------------------------------------------

_published: dict[tuple[str, str], list[Family]] = {}
_lock = threading.Lock()


def publish(job: str, container: str, fams: list[Family]) -> None:
    """Make ``fams`` the families of ``container`` of ``job`` at this process's coordinator
    ``/metrics`` (replacing what it published before)."""
    with _lock:
        _published[(job, container)] = list(fams)


def forget_published(job: str | None = None) -> None:
    """Drop what containers of ``job`` (every job: None) published."""
    with _lock:
        for key in [k for k in _published if job is None or k[0] == job]:
            del _published[key]


def published_families(job: str | None = None) -> list[Family]:
    """The families every container of ``job`` (``<job.name>-<job.id>``; None: of every job)
    published, merged by name (HELP and TYPE once)."""
    with _lock:
        items = sorted((k, v) for k, v in _published.items() if job is None or k[0] == job)
    merged: dict[str, Family] = {}
    for _, fams in items:
        for fam in fams:
            have = merged.get(fam.name)
            if have is None:
                merged[fam.name] = Family(fam.name, fam.type, fam.help, list(fam.samples))
            elif have.type == fam.type:
                have.samples.extend(fam.samples)
    return list(merged.values())


def families_to_json(fams: Iterable[Family]) -> bytes:
    """What a container process PUTs: ``[{name, type, help, samples}]``."""
    return orjson.dumps([{"name": f.name, "type": f.type, "help": f.help,
                          "samples": [list(s) for s in f.samples]} for f in fams])


def families_from_json(body: bytes) -> list[Family]:
    """The families of a PUT body; ValueError when it is not what
    :func:`families_to_json` writes."""
    try:
        data = orjson.loads(body)
        out = []
        for f in data:
            samples = []
            for s in f["samples"]:
                labels, value = dict(s[0]), s[1]
                if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
                    raise ValueError("labels must map strings to strings")
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(f"sample value {value!r} is not a number")
                suffix = str(s[2]) if len(s) > 2 else ""
                samples.append((labels, value, suffix) if suffix else (labels, value))
            if f["type"] not in ("counter", "gauge", "summary"):
                raise ValueError(f"unknown family type {f['type']!r}")
            out.append(Family(str(f["name"]), f["type"], str(f["help"]), samples))
        return out
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"expected [{{name, type, help, samples}}]: {exc}") from None


class PrometheusReporter:
    """Publishes a container's metrics for the coordinator's ``/metrics`` (see the module
    docstring). Made by :meth:`~weir.engine.metrics.reporters.MetricsReporter.from_settings`."""

    def __init__(self, spec: ReporterSpec, settings: MetricsSettings, source: str, *,
                 environ: Mapping[str, str] | None = None):
        env = os.environ if environ is None else environ
        self.spec = spec
        self.interval_ms = spec.interval_ms
        self.job = f"{settings.job_name}-{settings.job_id}"
        self.container = env.get(_ENV_CONTAINER) or source.removeprefix("container-")
        url = env.get(_ENV_URL)
        self._url = f"{url.rstrip('/')}{METRICS_PATH}/{self.container}" if url else None
        self.reports = 0
        self._warned = False

    def report(self, metrics: dict[str, Any]) -> None:
        fams = families(metrics, job=self.job, container=self.container)
        if self._url is None:
            publish(self.job, self.container, fams)
        else:
            self._put(families_to_json(fams))
        self.reports += 1

    def _put(self, body: bytes) -> None:
        request = urllib.request.Request(self._url, data=body, method="PUT",
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                response.read()
        except (urllib.error.URLError, OSError) as exc:
            if not self._warned:  # once: the coordinator may be stopping
                log.warning("metrics reporter '%s': cannot publish to %s (%s); the job "
                            "coordinator's /metrics shows older values", self.spec.name,
                            self._url, exc)
                self._warned = True

    def close(self) -> None:
        pass
