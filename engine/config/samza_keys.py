"""Samza keys Weir accepts and does not use, and what it does instead: the notes.

A real Samza job config carries keys for YARN, ZooKeeper, Kafka clients and brokers, its
config loader and replication factors. None of them changes what the job computes, so Weir
accepts them and says once, per topic, what it uses instead (a :class:`ConfigNote`): ``weir
config show`` prints the notes, ``weir run`` logs them, and the rest of the job runs
unchanged. docs/PORTING.md has the table.

* keys of one exact name are declared here (they are typed and listed in docs/CONFIG.md);
* whole namespaces (``yarn.*``, ``job.coordinator.zk.*``, the Kafka client settings of a
  system whose factory is Samza's ``KafkaSystemFactory``) are recognised by :func:`topic_of`.

A replication factor must still be an integer of at least 1: a value Samza would refuse is
refused here too.

Example::

    >>> from weir.stores.config import Config
    >>> notes = samza_notes(Config({"job.factory.class": "org.apache.samza.job.yarn.YarnJobFactory",
    ...                             "yarn.package.path": "file:///x.tar.gz"}))
    >>> [n.topic.value for n in notes]
    ['yarn']
    >>> notes[0].keys
    ('job.factory.class', 'yarn.package.path')
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from weir.stores.config import Config, declare, find_declared
from weir.stores.errors import ConfigError

__all__ = ["SamzaTopic", "ConfigNote", "samza_notes", "topic_of", "is_kafka_system",
           "KAFKA_SYSTEM_FACTORY"]

_C = "Samza keys Weir accepts and does not use"

KAFKA_SYSTEM_FACTORY = "org.apache.samza.system.kafka.KafkaSystemFactory"
"""Samza's Kafka system: the file log here (``weir.engine.systems.registry``)."""


class SamzaTopic(Enum):
    """What a group of Samza keys is about; each has one note."""

    YARN = "yarn"
    ZOOKEEPER = "zookeeper"
    KAFKA = "kafka"
    REPLICATION = "replication"
    CONFIG_LOADER = "config-loader"
    METRICS_TIMERS = "metrics-timers"
    DELETE_COMMITTED = "delete-committed-messages"
    BOUNDED = "bounded"
    JVM = "jvm"


_EXPLAIN: dict[SamzaTopic, str] = {
    SamzaTopic.YARN:
        "Weir has no YARN: `weir run` runs the job on this machine (one process per "
        "container, job.container.count), and for more than one machine on a Spark cluster "
        "(`weir run --runner spark`, docs/SPARK.md). Accepted and not used; the rest of the "
        "job runs unchanged",
    SamzaTopic.ZOOKEEPER:
        "Weir has no ZooKeeper: its job coordinator keeps the job model in the coordinator "
        "stream on the file log and serves it to the containers over HTTP "
        "(docs/COORDINATOR.md). Accepted and not used; the rest of the job runs unchanged",
    SamzaTopic.KAFKA:
        "Weir has no Kafka client: a system whose factory is Samza's KafkaSystemFactory is "
        "Weir's durable file log (docs/FILELOG.md), its topics file-log streams under "
        "systems.<system>.root (default ./weir-data/log; create them with `weir log create`). "
        "Kafka client and broker settings are accepted and not used (the file log's own "
        "consumer.* and producer.* keys, docs/CONFIG.md, still apply); the rest of the job "
        "runs unchanged",
    SamzaTopic.REPLICATION:
        "the file log keeps one copy of each stream, on this machine's disk (no broker "
        "replicas): what a commit wrote survives a process crash, and with "
        "systems.<system>.fsync.every.* a machine crash. Accepted (an integer >= 1) and not "
        "used",
    SamzaTopic.CONFIG_LOADER:
        "Weir reads the config file given to `weir run` (with --set overrides); Samza's "
        "config loader settings are accepted and not used",
    SamzaTopic.METRICS_TIMERS:
        "Weir's timers are always on (process-ns is sampled every 64th message on the "
        "inline path); accepted and not used",
    SamzaTopic.DELETE_COMMITTED:
        "Weir does not delete a stream's messages after each commit: the file log removes "
        "old segments by retention (systems.<system>.retention.ms / retention.bytes, "
        "docs/FILELOG.md). Accepted and not used; intermediate streams keep what retention "
        "keeps",
    SamzaTopic.BOUNDED:
        "in Weir an input ends when its stream ends: a file-log stream created with `weir "
        "log create --bounded` ends with `weir log produce --end` (or the producer's "
        "end_stream), and the job ends once every input ended. samza.bounded does not end a "
        "stream by itself; accepted and not used",
    SamzaTopic.JVM:
        "Weir runs Python, not a JVM: Java options and the Java home of the containers are "
        "accepted and not used (job.container.memory.mb sizes a container's caches)",
}


@dataclass(frozen=True)
class _UnusedKey:
    """A Samza key of one exact name (or pattern) that Weir declares and does not use."""

    name: str
    type: type
    default: object
    topic: SamzaTopic
    doc: str
    aliases: tuple[str, ...] = ()


_UNUSED_KEYS = (
    _UnusedKey("job.factory.class", str, None, SamzaTopic.YARN,
               "Samza's job factory (YarnJobFactory, ProcessJobFactory, ThreadJobFactory); "
               "accepted and not used: `weir run` runs the job on this machine, `--runner "
               "spark` on Spark."),
    _UnusedKey("job.config.loader.factory", str, None, SamzaTopic.CONFIG_LOADER,
               "Samza's config loader; accepted and not used: Weir reads the file given to "
               "`weir run`."),
    _UnusedKey("job.config.loader.properties.path", str, None, SamzaTopic.CONFIG_LOADER,
               "Samza's config loader's file; accepted and not used (see "
               "job.config.loader.factory)."),
    _UnusedKey("job.coordinator.factory", str, None, SamzaTopic.ZOOKEEPER,
               "Samza's job coordinator (ZkJobCoordinatorFactory, "
               "PassthroughJobCoordinatorFactory ...); accepted and not used: Weir's job "
               "coordinator uses the coordinator stream (docs/COORDINATOR.md)."),
    _UnusedKey("app.runner.class", str, None, SamzaTopic.YARN,
               "Samza's application runner (LocalApplicationRunner, RemoteApplicationRunner); "
               "accepted and not used: `weir run` runs applications."),
    _UnusedKey("job.coordinator.replication.factor", int, None, SamzaTopic.REPLICATION,
               "Samza's replication factor of the coordinator stream topic; accepted and not "
               "used: the file log keeps one copy."),
    _UnusedKey("task.checkpoint.replication.factor", int, None, SamzaTopic.REPLICATION,
               "Samza's replication factor of the checkpoint topic; accepted and not used: the "
               "file log keeps one copy."),
    _UnusedKey("job.standbytasks.replication.factor", int, None, SamzaTopic.REPLICATION,
               "Samza's standby tasks (replicas of each task's state); accepted and not used: "
               "Weir keeps no standby copies, a restarted container restores its stores from "
               "their changelogs."),
    _UnusedKey("systems.<system>.default.stream.replication.factor", int, None,
               SamzaTopic.REPLICATION,
               "Kafka's replication factor of the system's topics; accepted and not used: the "
               "file log keeps one copy."),
    _UnusedKey("metrics.timer.enabled", bool, True, SamzaTopic.METRICS_TIMERS,
               "Samza's switch of its timer metrics; accepted and not used: Weir's are always "
               "on."),
    _UnusedKey("metrics.timer.debug.enabled", bool, False, SamzaTopic.METRICS_TIMERS,
               "Samza's switch of its debug timers; accepted and not used."),
    _UnusedKey("task.opts", str, None, SamzaTopic.JVM,
               "Samza's JVM options of the containers; accepted and not used: Weir runs "
               "Python."),
    _UnusedKey("systems.<system>.streams.<stream>.samza.delete.committed.messages", bool,
               False, SamzaTopic.DELETE_COMMITTED,
               "Samza deletes a stream's messages once every reader committed past them; "
               "accepted and not used: the file log removes old segments by retention "
               "(retention.ms, retention.bytes).",
               ("streams.<id>.samza.delete.committed.messages",
                "systems.<system>.default.stream.samza.delete.committed.messages",
                "systems.<system>.samza.delete.committed.messages")),
    _UnusedKey("systems.<system>.streams.<stream>.samza.bounded", bool, False,
               SamzaTopic.BOUNDED,
               "Samza's flag of a bounded input (a batch job when every input has it); "
               "accepted and not used: an input ends when its stream ends (`weir log create "
               "--bounded`, then `weir log produce --end`).",
               ("streams.<id>.samza.bounded", "systems.<system>.default.stream.samza.bounded")),
)

for _key in _UNUSED_KEYS:
    declare(_key.name, _key.type, _key.default, _key.doc, component=_C, aliases=_key.aliases)
del _key

# Keys of one exact name with a note; the patterns (a "<...>" part) go by topic_of's rules.
_EXACT: dict[str, SamzaTopic] = {
    **{k.name: k.topic for k in _UNUSED_KEYS if "<" not in k.name},
    "job.debounce.time.ms": SamzaTopic.ZOOKEEPER,
    "task.java.home": SamzaTopic.JVM,
    "stores.default.changelog.replication.factor": SamzaTopic.REPLICATION,  # weir.stores.spec
}
_KAFKA_FACTORY_KEYS = ("systems.{s}.samza.factory", "systems.{s}.factory")


def is_kafka_system(config: Config, system: str) -> bool:
    """Whether ``system``'s factory is Samza's KafkaSystemFactory."""
    for pattern in _KAFKA_FACTORY_KEYS:
        value = config.get_str(pattern.format(s=system))
        if value is not None:
            return value == KAFKA_SYSTEM_FACTORY
    return False


def topic_of(config: Config, key: str) -> SamzaTopic | None:
    """The Samza topic ``key`` belongs to (None: not a Samza key Weir leaves unused)."""
    topic = _EXACT.get(key)
    if topic is not None:
        return topic
    parts = key.split(".")
    if parts[0] == "yarn" and find_declared(key) is None:  # yarn.container.count is read
        return SamzaTopic.YARN
    if key.startswith("job.coordinator.zk.") or key.startswith("job.coordination."):
        return SamzaTopic.ZOOKEEPER
    if key.endswith(".replication.factor") and parts[0] in ("stores", "systems"):
        return SamzaTopic.REPLICATION
    if key.endswith(".samza.delete.committed.messages"):
        return SamzaTopic.DELETE_COMMITTED
    if key.endswith(".samza.bounded"):
        return SamzaTopic.BOUNDED
    if parts[0] == "systems" and len(parts) > 2 and is_kafka_system(config, parts[1]) \
            and (find_declared(key) is None or parts[2] in ("samza", "factory")):
        if key in (f"systems.{parts[1]}.samza.factory", f"systems.{parts[1]}.factory") or (
                ".samza." not in key and parts[2] != "samza"):
            return SamzaTopic.KAFKA  # the factory, client settings, topic settings
    return None


@dataclass(frozen=True)
class ConfigNote:
    """Samza keys of one topic that Weir accepts and does not use (or maps), with what it
    does instead."""

    topic: SamzaTopic
    keys: tuple[str, ...]
    origins: tuple[str | None, ...]

    @property
    def message(self) -> str:
        where = _first(self.origins)
        listed = ", ".join(self.keys[:6]) + (f" and {len(self.keys) - 6} more"
                                             if len(self.keys) > 6 else "")
        at = f" (first at {where})" if where else ""
        return f"Samza keys {listed}{at}: {_EXPLAIN[self.topic]}."

    def __str__(self) -> str:
        return self.message


def _first(origins: tuple[str | None, ...]) -> str | None:
    """The origin that comes first in its file (``file:line``), else the first given."""
    def place(origin: str) -> tuple[str, int]:
        path, _, line = origin.rpartition(":")
        return (path, int(line)) if line.isdigit() else (origin, 0)
    known = [o for o in origins if o]
    return min(known, key=place) if known else None


def _check_value(config: Config, key: str, topic: SamzaTopic) -> None:
    if topic is SamzaTopic.REPLICATION:
        raw = config[key]
        try:
            value = int(raw.strip())
        except ValueError:
            value = 0
        if value < 1:
            raise ConfigError(f"bad value {raw!r}: a replication factor is an integer >= 1",
                              key=key, origin=config.origin(key))


def samza_notes(config: Config) -> list[ConfigNote]:
    """One note per topic the config's keys touch (keys in order); a replication factor that
    is not an integer >= 1 raises ConfigError naming it."""
    found: dict[SamzaTopic, list[str]] = {}
    for key in sorted(config):
        topic = topic_of(config, key)
        if topic is None:
            continue
        _check_value(config, key, topic)
        found.setdefault(topic, []).append(key)
    return [ConfigNote(topic, tuple(keys), tuple(config.origin(k) for k in keys))
            for topic, keys in found.items()]
