"""The metrics keys, parsed once into :class:`MetricsSettings`: Weir's JSON-lines reporter
and Samza's named reporters.

Two ways to configure reporting, usable together:

* Weir's JSON-lines reporter: ``metrics.reporter.interval.ms`` > 0 appends one JSON line per
  interval to ``metrics.reporter.file`` (standard error when unset);
* Samza's named reporters: ``metrics.reporters=snapshot,jmx`` and, for each name,
  ``metrics.reporter.<name>.class``:

  - ``org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory`` (or ``snapshot``):
    one message per source (the container, each task) every ``metrics.reporter.<name>.interval``
    seconds (default 60) to the stream ``metrics.reporter.<name>.stream`` (``system.stream``,
    on the file log), in Samza's ``{"header": ..., "metrics": {group: {name: value}}}``
    shape, without the metrics ``metrics.reporter.<name>.blacklist`` (a regular expression
    over ``group.name``) matches;
  - ``org.apache.samza.metrics.reporter.JmxReporterFactory`` (or ``prometheus``): Weir has no
    JMX; the same metrics are served as Prometheus text at the job coordinator's ``/metrics``
    (the endpoint is then served for every run), refreshed every
    ``metrics.reporter.<name>.interval`` seconds (default 10).

Any other class is refused, naming the key. Every key under ``metrics.`` is Weir's: an unknown
one is an error (``weir.engine.config.check``), so a misspelt ``metrics.reporter.intervl.ms``
never leaves reporting off in silence.

Example::

    >>> from weir.stores.config import Config
    >>> s = MetricsSettings.from_config(Config({
    ...     "metrics.reporters": "snapshot,jmx",
    ...     "metrics.reporter.snapshot.class": "org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory",
    ...     "metrics.reporter.snapshot.stream": "kafka.metrics",
    ...     "metrics.reporter.jmx.class": "org.apache.samza.metrics.reporter.JmxReporterFactory"}))
    >>> [(r.name, r.kind.value, str(r.stream), r.interval_ms) for r in s.reporters]
    [('snapshot', 'snapshot', 'kafka.metrics', 60000), ('jmx', 'prometheus', 'None', 10000)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from weir.stores.config import Config, declare
from weir.stores.errors import ConfigError

from weir.engine.model import SystemStream

__all__ = [
    "MetricsSettings",
    "ReporterKind",
    "ReporterSpec",
    "METRICS_REPORTER_INTERVAL_MS",
    "METRICS_REPORTER_FILE",
    "METRICS_REPORTERS",
    "METRICS_REPORTER_CLASS",
    "METRICS_REPORTER_STREAM",
    "METRICS_REPORTER_INTERVAL",
    "METRICS_REPORTER_BLACKLIST",
    "reporter_key_owner",
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
METRICS_REPORTERS = declare(
    "metrics.reporters", list, [],
    "Samza's named metrics reporters, comma-separated; each needs "
    "`metrics.reporter.<reporter>.class`.", component=_C)


class ReporterKind(Enum):
    """What a named reporter (``metrics.reporter.<name>.class``) does here."""

    SNAPSHOT = "snapshot"
    """Samza's ``MetricsSnapshotReporterFactory``: snapshots to a stream."""
    PROMETHEUS = "prometheus"
    """Samza's ``JmxReporterFactory``: the job coordinator's Prometheus ``/metrics``."""


_CLASSES = {
    "org.apache.samza.metrics.reporter.metricssnapshotreporterfactory": ReporterKind.SNAPSHOT,
    "snapshot": ReporterKind.SNAPSHOT,
    "org.apache.samza.metrics.reporter.jmxreporterfactory": ReporterKind.PROMETHEUS,
    "prometheus": ReporterKind.PROMETHEUS,
    "jmx": ReporterKind.PROMETHEUS,
}


class ReporterClass:
    """The value type of ``metrics.reporter.<name>.class``."""

    type_name = "reporter class"

    @staticmethod
    def parse_value(raw: str) -> ReporterKind:
        kind = _CLASSES.get(raw.strip().lower())
        if kind is None:
            raise ValueError(
                "Weir has Samza's org.apache.samza.metrics.reporter."
                "MetricsSnapshotReporterFactory (or `snapshot`: snapshots to a stream) and "
                "org.apache.samza.metrics.reporter.JmxReporterFactory (or `prometheus`: "
                "the job coordinator's /metrics); see docs/PORTING.md")
        return kind


METRICS_REPORTER_CLASS = declare(
    "metrics.reporter.<reporter>.class", ReporterClass, None,
    "What the reporter named in `metrics.reporters` is: Samza's "
    "`org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory` (or `snapshot`): "
    "snapshots to `metrics.reporter.<reporter>.stream`; "
    "`org.apache.samza.metrics.reporter.JmxReporterFactory` (or `prometheus`): Prometheus "
    "text at the job coordinator's `/metrics`, which is then served for every run.",
    component=_C)
METRICS_REPORTER_STREAM = declare(
    "metrics.reporter.<reporter>.stream", str, None,
    "A snapshot reporter's stream, `system.stream` (required); created with one partition "
    "when missing. Messages are Samza's MetricsSnapshot maps, serialized by the stream's msg "
    "serde (JSON when it has none).", component=_C)
METRICS_REPORTER_INTERVAL = declare(
    "metrics.reporter.<reporter>.interval", int, None,
    "Seconds between two reports of a named reporter (Samza's key): default 60 for a "
    "snapshot reporter, 10 for the Prometheus one.", component=_C)
METRICS_REPORTER_BLACKLIST = declare(
    "metrics.reporter.<reporter>.blacklist", str, None,
    "A snapshot reporter leaves out the metrics whose `group.name` this regular expression "
    "matches (Samza's key).", component=_C)

_DEFAULT_INTERVAL_S = {ReporterKind.SNAPSHOT: 60, ReporterKind.PROMETHEUS: 10}
_REPORTER_KEY = re.compile(r"^metrics\.reporter\.(?P<name>[^.]+)\.(?P<prop>class|stream|interval|blacklist)$")


def reporter_key_owner(key: str) -> tuple[str, str] | None:
    """``(reporter name, property)`` of a named reporter's key, or None."""
    m = _REPORTER_KEY.match(key)
    return (m.group("name"), m.group("prop")) if m else None


@dataclass(frozen=True)
class ReporterSpec:
    """One named reporter, parsed once."""

    name: str
    kind: ReporterKind
    interval_ms: int
    stream: SystemStream | None = None
    blacklist: str | None = None


@dataclass(frozen=True)
class MetricsSettings:
    """``metrics.*``, parsed once: the JSON-lines report every ``interval_ms`` (0 or less:
    none) to ``file`` (None: standard error), and the named ``reporters``. ``job_name`` /
    ``job_id`` go into the snapshot headers; ``config`` is the job's, for the systems a
    snapshot reporter writes to (None when no reporter needs it)."""

    interval_ms: int = 0
    file: str | None = None
    reporters: tuple[ReporterSpec, ...] = ()
    job_name: str = ""
    job_id: str = "1"
    config: Config | None = field(default=None, compare=False, repr=False)

    @property
    def any(self) -> bool:
        """Whether anything reports."""
        return self.interval_ms > 0 or bool(self.reporters)

    @property
    def prometheus(self) -> bool:
        """Whether a reporter serves the job coordinator's ``/metrics``."""
        return any(r.kind is ReporterKind.PROMETHEUS for r in self.reporters)

    @classmethod
    def from_config(cls, config: Config) -> "MetricsSettings":
        """Parse and check every metrics key: a listed reporter without a class, an unknown
        class, a snapshot reporter without a valid stream or with a bad blacklist, or a
        non-positive interval raise ConfigError naming the key."""
        specs = []
        names = METRICS_REPORTERS.get(config)
        for name in names:
            specs.append(_reporter(config, name))
        if len({s.name for s in specs}) != len(specs):
            key = METRICS_REPORTERS.name
            raise ConfigError(f"lists a reporter twice: {', '.join(names)}", key=key,
                              origin=config.origin(key))
        needs_config = any(s.kind is ReporterKind.SNAPSHOT for s in specs)
        return cls(METRICS_REPORTER_INTERVAL_MS.get(config), METRICS_REPORTER_FILE.get(config),
                   tuple(specs), config.get_str("job.name") or "",
                   config.get_str("job.id") or "1", config if needs_config else None)


def _reporter(config: Config, name: str) -> ReporterSpec:
    class_key = METRICS_REPORTER_CLASS.key(reporter=name)
    kind = METRICS_REPORTER_CLASS.get(config, reporter=name)
    if kind is None:
        key = METRICS_REPORTERS.name
        raise ConfigError(f"names the reporter '{name}' but {class_key} is not set; set it "
                          f"(see docs/PORTING.md) or remove '{name}' from the list",
                          key=key, origin=config.origin(key))
    interval_key = METRICS_REPORTER_INTERVAL.key(reporter=name)
    seconds = METRICS_REPORTER_INTERVAL.get(config, reporter=name)
    if seconds is None:
        seconds = _DEFAULT_INTERVAL_S[kind]
    elif seconds < 1:
        raise ConfigError(f"must be at least 1 (seconds), got {seconds}", key=interval_key,
                          origin=config.origin(interval_key))
    stream_key = METRICS_REPORTER_STREAM.key(reporter=name)
    blacklist_key = METRICS_REPORTER_BLACKLIST.key(reporter=name)
    stream = blacklist = None
    if kind is ReporterKind.SNAPSHOT:
        value = METRICS_REPORTER_STREAM.get(config, reporter=name)
        if not value:
            raise ConfigError(f"is required: the snapshot reporter '{name}' "
                              f"({config.get_str(class_key)}) writes to a `system.stream`",
                              key=stream_key, origin=config.origin(class_key))
        try:
            stream = SystemStream.parse(value)
        except ValueError:
            raise ConfigError(f"bad value {value!r}: expected `system.stream`", key=stream_key,
                              origin=config.origin(stream_key)) from None
        blacklist = METRICS_REPORTER_BLACKLIST.get(config, reporter=name)
        if blacklist is not None:
            try:
                re.compile(blacklist)
            except re.error as exc:
                raise ConfigError(f"bad regular expression {blacklist!r}: {exc}",
                                  key=blacklist_key, origin=config.origin(blacklist_key)) from None
    else:
        for key in (stream_key, blacklist_key):
            if key in config:
                raise ConfigError(f"is for snapshot reporters; '{name}' is "
                                  f"{kind.value} (the job coordinator's /metrics)", key=key,
                                  origin=config.origin(key))
    return ReporterSpec(name, kind, seconds * 1000, stream, blacklist)
