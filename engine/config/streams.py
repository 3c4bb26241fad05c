"""Stream-level configuration: job inputs, broadcast inputs and ``samza.*`` stream properties.

A stream property (``samza.bootstrap``, ``samza.priority``, ``samza.key.serde`` ...) is looked
up in Samza's order, first hit wins (docs/SYSTEMS.md):

1. ``streams.<id>.<prop>`` for the stream id mapped to (system, physical name)
   (``streams.<id>.samza.system`` / ``streams.<id>.samza.physical.name``; an id without a
   physical name maps to itself);
2. ``systems.<system>.streams.<physical>.<prop>``;
3. ``systems.<system>.default.stream.<prop>``.

Example::

    >>> from weir.stores.config import Config
    >>> cfg = Config({"task.inputs": "filelog.transactions, filelog.currency-codes",
    ...               "systems.filelog.streams.currency-codes.samza.bootstrap": "true"})
    >>> [str(s) for s in job_inputs(cfg)]
    ['filelog.transactions', 'filelog.currency-codes']
    >>> stream_property(cfg, SystemStream("filelog", "currency-codes"), "samza.bootstrap")
    'true'
"""

from __future__ import annotations

import re

from weir.stores.config import Config, ConfigError, declare, parse_bool

from weir.engine.model import SystemStream, SystemStreamPartition

__all__ = [
    "TASK_INPUTS",
    "TASK_BROADCAST_INPUTS",
    "job_inputs",
    "broadcast_inputs",
    "all_input_streams",
    "stream_property",
    "stream_id_for",
    "broadcast_streams",
    "STREAM_BROADCAST",
]

TASK_INPUTS = declare(
    "task.inputs", list, [], "Input streams of the job, comma-separated `system.stream` "
    "(the first dot separates system from stream).", component="job model")
TASK_BROADCAST_INPUTS = declare(
    "task.broadcast.inputs", list, [], "Partitions given to every task: `system.stream#N` or "
    "`system.stream#[N-M]` (inclusive), comma-separated.", component="job model")

STREAM_SYSTEM = declare(
    "streams.<id>.samza.system", str, None, "System of the stream with this stream id.",
    component="streams")
STREAM_PHYSICAL_NAME = declare(
    "streams.<id>.samza.physical.name", str, None,
    "Physical name of the stream with this stream id (defaults to the id).", component="streams")
JOB_DEFAULT_SYSTEM = declare(
    "job.default.system", str, None, "System of stream ids that name no system.",
    component="streams")

STREAM_BROADCAST = declare(
    "systems.<system>.streams.<stream>.samza.broadcast", bool, False,
    "An input every task reads whole: each of its partitions goes to every task (as if "
    "`task.broadcast.inputs` listed them all), none makes a task of its own. Samza's flag "
    "of broadcast streams.", component="job model",
    aliases=("streams.<id>.samza.broadcast", "systems.<system>.default.stream.samza.broadcast"))

_BROADCAST_RE = re.compile(r"^(?P<ss>.+)#(?:(?P<one>\d+)|\[(?P<lo>\d+)-(?P<hi>\d+)\])$")


def _parse_ss(config: Config, key: str, entry: str) -> SystemStream:
    try:
        return SystemStream.parse(entry)
    except ValueError:
        raise ConfigError(f"bad entry {entry!r}: expected `system.stream`",
                          key=key, origin=config.origin(key)) from None


def job_inputs(config: Config) -> list[SystemStream]:
    """``task.inputs`` in order, without duplicates."""
    out: list[SystemStream] = []
    for entry in TASK_INPUTS.get(config):
        ss = _parse_ss(config, TASK_INPUTS.name, entry)
        if ss not in out:
            out.append(ss)
    return out


def broadcast_inputs(config: Config) -> list[SystemStreamPartition]:
    """``task.broadcast.inputs`` expanded to SSPs. ``#N > #M`` ranges are empty (Samza logs a
    warning); an entry without ``#`` or with a malformed partition part raises ConfigError."""
    out: list[SystemStreamPartition] = []
    key = TASK_BROADCAST_INPUTS.name
    for entry in TASK_BROADCAST_INPUTS.get(config):
        m = _BROADCAST_RE.match(entry)
        if not m:
            raise ConfigError(
                f"bad entry {entry!r}: expected `system.stream#N` or `system.stream#[N-M]`",
                key=key, origin=config.origin(key))
        ss = _parse_ss(config, key, m["ss"])
        if m["one"] is not None:
            parts = [int(m["one"])]
        else:
            parts = list(range(int(m["lo"]), int(m["hi"]) + 1))
        for p in parts:
            ssp = SystemStreamPartition(ss.system, ss.stream, p)
            if ssp not in out:
                out.append(ssp)
    return out


def broadcast_streams(config: Config) -> list[SystemStream]:
    """The ``task.inputs`` streams whose ``samza.broadcast`` property is true (every task
    reads each of their partitions)."""
    out = []
    for ss in job_inputs(config):
        raw = stream_property(config, ss, "samza.broadcast")
        if raw is None:
            continue
        where = stream_property_origin(config, ss, "samza.broadcast")
        try:
            flag = parse_bool(raw)
        except ValueError:
            raise ConfigError(f"bad value {raw!r}: expected true or false",
                              key=where[0] if where else None,
                              origin=where[1] if where else None) from None
        if flag:
            out.append(ss)
    return out


def all_input_streams(config: Config) -> list[SystemStream]:
    """The ``task.inputs`` streams and the streams named in broadcast inputs."""
    out = job_inputs(config)
    for ssp in broadcast_inputs(config):
        if ssp.system_stream not in out:
            out.append(ssp.system_stream)
    return out


def stream_id_for(config: Config, ss: SystemStream) -> str | None:
    """The stream id whose (system, physical name) is ``ss``, if any is configured."""
    default_system = JOB_DEFAULT_SYSTEM.get(config)
    for key in config:
        if key.startswith("streams.") and key.endswith(".samza.system"):
            sid = key[len("streams."):-len(".samza.system")]
        elif key.startswith("streams.") and key.endswith(".samza.physical.name"):
            sid = key[len("streams."):-len(".samza.physical.name")]
        else:
            continue
        system = config.get_str(f"streams.{sid}.samza.system", default_system)
        physical = config.get_str(f"streams.{sid}.samza.physical.name", sid)
        if system == ss.system and physical == ss.stream:
            return sid
    return None


def stream_property(config: Config, ss: SystemStream, prop: str) -> str | None:
    """The raw value of stream property ``prop`` (e.g. ``"samza.priority"``) for ``ss``, or None."""
    sid = stream_id_for(config, ss)
    candidates = []
    if sid is not None:
        candidates.append(f"streams.{sid}.{prop}")
    candidates.append(f"systems.{ss.system}.streams.{ss.stream}.{prop}")
    candidates.append(f"systems.{ss.system}.default.stream.{prop}")
    for key in candidates:
        if key in config:
            return config[key].strip()
    return None


def stream_property_origin(config: Config, ss: SystemStream, prop: str) -> tuple[str, str | None] | None:
    """``(key, origin)`` of the config entry that ``stream_property`` would use, for errors."""
    sid = stream_id_for(config, ss)
    for key in ([f"streams.{sid}.{prop}"] if sid is not None else []) + [
            f"systems.{ss.system}.streams.{ss.stream}.{prop}",
            f"systems.{ss.system}.default.stream.{prop}"]:
        if key in config:
            return key, config.origin(key)
    return None


__all__.append("stream_property_origin")
