"""Config keys of control messages, watermarks and drain, parsed once into
:class:`ControlSettings`.

Samza's names where Samza has the concept: ``task.watermark.idle.timeout.ms``, the quorum
fraction ``task.watermark.quorum.size.percentage`` (Samza's own spelling,
``task.watermark.quorum.size,percentage`` with a comma, is read as an alias),
``streams.<id>.samza.intermediate`` and ``job.intermediate.stream.partitions`` (declared by
the application planner). Weir's own: the watermark timer, the out-of-orderness bound of
source partitions, the upstream task count of an intermediate stream, and where drain
requests are written.

Example::

    >>> from weir.stores.config import Config
    >>> s = ControlSettings.from_config(Config({"task.watermark.quorum.size,percentage": "0.75"}))
    >>> (s.quorum_pct, s.idle_timeout_ms, s.interval_ms)
    (0.75, -1, 200)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from weir.stores.config import Config, ConfigError, declare

from weir.engine.config.streams import stream_property
from weir.engine.model import SystemStream

__all__ = [
    "TASK_WATERMARK_IDLE_TIMEOUT_MS",
    "TASK_WATERMARK_QUORUM_PCT",
    "TASK_WATERMARK_INTERVAL_MS",
    "TASK_WATERMARK_MAX_OUT_OF_ORDERNESS_MS",
    "STREAM_INTERMEDIATE",
    "STREAM_UPSTREAM_TASKS",
    "JOB_DRAIN_PATH",
    "TASK_DRAIN_POLL_INTERVAL_MS",
    "ControlSettings",
    "is_intermediate",
    "upstream_task_count",
]

_C = "control messages"

TASK_WATERMARK_IDLE_TIMEOUT_MS = declare(
    "task.watermark.idle.timeout.ms", int, -1,
    "A source partition without a message for this long (milliseconds) is idle: left out of "
    "its stream's watermark, so one quiet partition does not stall event time. A task whose "
    "inputs feeding a partition_by are all idle says so downstream (an IDLE watermark status, "
    "as Flink's), and the next stage leaves it out until it sends again; an upstream task is "
    "never left out for being slow or quiet. -1: never idle.",
    component=_C)
TASK_WATERMARK_QUORUM_PCT = declare(
    "task.watermark.quorum.size.percentage", float, 0.5,
    "Fraction of an intermediate partition's upstream tasks that must be active (not declared "
    "idle) for the watermark to advance while some are idle (truncated: int(tasks x "
    "fraction)). Samza's "
    "key, spelled with a comma in Samza's TaskConfig, is accepted as an alias.",
    component=_C, aliases=("task.watermark.quorum.size,percentage",))
TASK_WATERMARK_INTERVAL_MS = declare(
    "task.watermark.interval.ms", int, 200,
    "How often the run loop generates the watermarks of source partitions, re-checks idle "
    "partitions and looks for a drain request (milliseconds; Flink's "
    "pipeline.auto-watermark-interval). A run loop that has nothing to process generates "
    "the watermarks its processed messages moved at once (at most every 20 ms), so this is "
    "the interval under load. Only tasks with control bookkeeping are affected.",
    component=_C)
TASK_WATERMARK_MAX_OUT_OF_ORDERNESS_MS = declare(
    "task.watermark.max.out.of.orderness.ms", int, 0,
    "Bounded out-of-orderness of source partitions: a source partition's watermark is its "
    "largest event time minus this bound minus 1 ms, so messages up to this much late are "
    "still on time.", component=_C)
STREAM_INTERMEDIATE = declare(
    "streams.<id>.samza.intermediate", bool, False,
    "The stream is an intermediate stream: every message carries a type byte and control "
    "messages travel in-band (the application planner sets it).", component=_C)
STREAM_UPSTREAM_TASKS = declare(
    "streams.<id>.intermediate.upstream.tasks", int, None,
    "How many upstream tasks write control messages to this intermediate stream (the "
    "application planner sets it). Unset: learned from the first message's taskCount. A "
    "message whose taskCount disagrees stops the task with BadTaskCountError.",
    component=_C)
JOB_DRAIN_PATH = declare(
    "job.drain.path", str, None,
    "The drain request file `weir drain` writes and running jobs watch. Default: "
    "`drain-request.json` in the checkpoint directory (`task.checkpoint.path`); every "
    "stage of an application shares the application's.", component=_C)
TASK_DRAIN_POLL_INTERVAL_MS = declare(
    "task.drain.poll.interval.ms", int, 1000,
    "How often a running job looks at its drain request file (milliseconds).", component=_C)


def is_intermediate(config: Config, ss: SystemStream) -> bool:
    """``samza.intermediate`` of the stream (Samza's stream-property lookup order)."""
    raw = stream_property(config, ss, "samza.intermediate")
    return raw is not None and raw.strip().lower() == "true"


def upstream_task_count(config: Config, ss: SystemStream) -> int | None:
    raw = stream_property(config, ss, "intermediate.upstream.tasks")
    if raw is None:
        return None
    try:
        count = int(raw)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"bad value {raw!r}: expected a positive integer (upstream tasks of "
                          f"{ss})", key="streams.<id>.intermediate.upstream.tasks")
    return count


@dataclass(frozen=True)
class ControlSettings:
    """The control keys of one job, parsed once."""

    idle_timeout_ms: int = -1
    quorum_pct: float = 0.5
    interval_ms: int = 200
    out_of_orderness_ms: int = 0
    drain_path: Path | None = None
    drain_poll_ms: int = 1000

    @classmethod
    def from_config(cls, config: Config, *, checkpoint_dir: Path | None = None) -> "ControlSettings":
        cfg = config if isinstance(config, Config) else Config(config)
        pct = TASK_WATERMARK_QUORUM_PCT.get(cfg)
        if not 0.0 <= pct <= 1.0:
            key = next((k for k in (TASK_WATERMARK_QUORUM_PCT.name, *TASK_WATERMARK_QUORUM_PCT.aliases)
                        if k in cfg), TASK_WATERMARK_QUORUM_PCT.name)
            raise ConfigError(f"must be between 0 and 1, got {pct}", key=key, origin=cfg.origin(key))
        interval = TASK_WATERMARK_INTERVAL_MS.get(cfg)
        if interval < 1:
            raise ConfigError(f"must be >= 1, got {interval}", key=TASK_WATERMARK_INTERVAL_MS.name,
                              origin=cfg.origin(TASK_WATERMARK_INTERVAL_MS.name))
        bound = TASK_WATERMARK_MAX_OUT_OF_ORDERNESS_MS.get(cfg)
        if bound < 0:
            key = TASK_WATERMARK_MAX_OUT_OF_ORDERNESS_MS.name
            raise ConfigError(f"must be >= 0, got {bound}", key=key, origin=cfg.origin(key))
        raw_path = JOB_DRAIN_PATH.get(cfg)
        if raw_path:
            drain_path: Path | None = Path(raw_path)
        elif checkpoint_dir is not None:
            drain_path = Path(checkpoint_dir) / "drain-request.json"
        else:
            drain_path = None
        return cls(TASK_WATERMARK_IDLE_TIMEOUT_MS.get(cfg), float(pct), interval, bound,
                   drain_path, max(1, TASK_DRAIN_POLL_INTERVAL_MS.get(cfg)))
