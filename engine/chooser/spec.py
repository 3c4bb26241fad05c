"""The chooser's configuration, parsed once: :class:`ChooserSpec`.

Keys (every one declared here; ``docs/CHOOSER.md`` explains them):

* ``task.chooser.class=module:Class``: a user chooser, built once per priority tier (and once
  for the default tier) with the job config as its only argument;
* ``task.chooser.tiebreak=roundrobin|time``: the built-in chooser within a tier;
* ``task.chooser.batch.size`` (Samza: ``task.consumer.batch.size``): batching, 0 = off;
* ``task.chooser.priorities.<system>.<stream>`` (Weir) and the stream property
  ``samza.priority`` (Samza; ``systems.<s>.streams.<t>.samza.priority``,
  ``streams.<id>.samza.priority``): the stream's priority tier, higher first. The Weir key
  wins when both are set. Values below 0 mean "not prioritised", as in Samza;
* the stream property ``samza.bootstrap=true``: a bootstrap stream.

Only input streams count (``task.inputs`` and ``task.broadcast.inputs``): a stream that is
configured as bootstrap or prioritised but is not an input is ignored, as in Samza (docs/CHOOSER.md, "Configuration").

Example::

    >>> from weir.stores.config import Config
    >>> spec = ChooserSpec.from_config(Config({
    ...     "task.inputs": "filelog.tx,filelog.codes",
    ...     "systems.filelog.streams.codes.samza.bootstrap": "true",
    ...     "task.chooser.priorities.filelog.tx": "3"}))
    >>> sorted(str(s) for s in spec.bootstrap_streams), {str(k): v for k, v in spec.priorities.items()}
    (['filelog.codes'], {'filelog.tx': 3})
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from weir.stores.config import Config, ConfigError, declare

from weir.engine.model import SystemStream
from weir.engine.config.streams import all_input_streams, stream_property, stream_property_origin

__all__ = [
    "BOOTSTRAP_PRIORITY",
    "ChooserSpec",
    "Tiebreak",
    "bootstrap_streams",
    "TASK_CHOOSER_CLASS",
    "TASK_CHOOSER_TIEBREAK",
    "TASK_CHOOSER_BATCH_SIZE",
    "TASK_CHOOSER_PRIORITY",
    "STREAM_PRIORITY",
    "STREAM_BOOTSTRAP",
]

_COMPONENT = "chooser"

BOOTSTRAP_PRIORITY = 2**31 - 1
"""The priority every bootstrap stream gets (plus its explicit priority, if any); explicit
priorities of other streams must stay below it."""


class Tiebreak(Enum):
    """How the built-in chooser orders envelopes of one priority tier."""

    ROUND_ROBIN = "roundrobin"
    TIME = "time"


TASK_CHOOSER_CLASS = declare(
    "task.chooser.class", str, None,
    "A user chooser `module:Class` (its constructor gets the job config), built once per "
    "priority tier; priorities, bootstrap and batching still wrap it. Samza's "
    "RoundRobinChooserFactory name means the built-in round robin.", component=_COMPONENT)
TASK_CHOOSER_TIEBREAK = declare(
    "task.chooser.tiebreak", str, Tiebreak.ROUND_ROBIN.value,
    "Order within one priority tier: `roundrobin` (arrival order) or `time` (smallest event "
    "timestamp first).", component=_COMPONENT, choices=tuple(t.value for t in Tiebreak))
TASK_CHOOSER_BATCH_SIZE = declare(
    "task.chooser.batch.size", int, 0,
    "Serve the SSP chosen last up to this many envelopes in a row (within its priority "
    "tier); 0 or less turns batching off.", component=_COMPONENT,
    aliases=("task.consumer.batch.size",))
TASK_CHOOSER_PRIORITY = declare(
    "task.chooser.priorities.<system>.<stream>", int, None,
    "Priority of an input stream (higher is chosen first; below 0 = not prioritised). "
    "Wins over the stream's `samza.priority`.", component=_COMPONENT)
STREAM_PRIORITY = declare(
    "systems.<system>.streams.<stream>.samza.priority", int, -1,
    "Samza's priority of an input stream (higher first; -1 = not prioritised).",
    component=_COMPONENT,
    aliases=("streams.<id>.samza.priority", "systems.<system>.default.stream.samza.priority"))
STREAM_BOOTSTRAP = declare(
    "systems.<system>.streams.<stream>.samza.bootstrap", bool, False,
    "A bootstrap stream: every message present at start is processed before any other "
    "message. `true` (any case) means yes, anything else no.", component=_COMPONENT,
    aliases=("streams.<id>.samza.bootstrap", "systems.<system>.default.stream.samza.bootstrap"))

_CHOOSER_METHODS = ("register", "start", "update", "choose", "stop")
_SAMZA_ROUND_ROBIN = {"org.apache.samza.system.chooser.RoundRobinChooserFactory",
                      "RoundRobinChooserFactory"}


@dataclass(frozen=True)
class ChooserSpec:
    """Everything the DefaultChooser needs, parsed once from config.

    ``priorities`` holds only the explicit priorities (>= 0) of input streams;
    ``user_class`` is the loaded ``task.chooser.class`` (None for the built-ins).
    """

    inputs: tuple[SystemStream, ...] = ()
    priorities: Mapping[SystemStream, int] = field(default_factory=dict)
    bootstrap_streams: frozenset[SystemStream] = frozenset()
    batch_size: int = 0
    tiebreak: Tiebreak = Tiebreak.ROUND_ROBIN
    user_class: type | None = None

    @classmethod
    def from_config(cls, config: Config | Mapping[str, str]) -> "ChooserSpec":
        config = config if isinstance(config, Config) else Config(config)
        inputs = tuple(all_input_streams(config))
        batch = TASK_CHOOSER_BATCH_SIZE.get(config)
        tiebreak = Tiebreak(TASK_CHOOSER_TIEBREAK.get(config))
        user_class = _load_user_class(config)
        if user_class is not None and TASK_CHOOSER_TIEBREAK.name in config:
            raise ConfigError(
                f"is set together with task.chooser.class={config[TASK_CHOOSER_CLASS.name]!r}; "
                f"the user chooser orders each tier itself, so remove one of the two",
                key=TASK_CHOOSER_TIEBREAK.name, origin=config.origin(TASK_CHOOSER_TIEBREAK.name))
        boot = frozenset(bootstrap_streams(config))
        priorities = {ss: p for ss in inputs
                      if (p := _priority(config, ss, ss in boot)) is not None}
        return cls(inputs=inputs, priorities=priorities, bootstrap_streams=boot,
                   batch_size=max(0, batch), tiebreak=tiebreak, user_class=user_class)

    @property
    def uses_priority(self) -> bool:
        """Tiers are built when any priority or bootstrap stream is configured."""
        return bool(self.priorities) or bool(self.bootstrap_streams)


def bootstrap_streams(config: Config | Mapping[str, str]) -> list[SystemStream]:
    """The input streams whose ``samza.bootstrap`` is ``true`` (case-insensitive), in input
    order. Streams that are not inputs are ignored."""
    config = config if isinstance(config, Config) else Config(config)
    out = []
    for ss in all_input_streams(config):
        raw = stream_property(config, ss, "samza.bootstrap")
        if raw is not None and raw.strip().lower() == "true":
            out.append(ss)
    return out


def _priority(config: Config, ss: SystemStream, bootstrap: bool) -> int | None:
    """The explicit priority (>= 0) of ``ss``: the Weir key first, then ``samza.priority``."""
    weir_key = TASK_CHOOSER_PRIORITY.key(system=ss.system, stream=ss.stream)
    if weir_key in config:
        key, origin = weir_key, config.origin(weir_key)
        value = config.get_int(weir_key)
    else:
        raw = stream_property(config, ss, "samza.priority")
        if raw is None:
            return None
        key, origin = stream_property_origin(config, ss, "samza.priority") or (None, None)
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"bad value {raw!r}: expected an integer priority",
                              key=key, origin=origin) from None
    if value >= BOOTSTRAP_PRIORITY and not bootstrap:
        raise ConfigError(f"priority {value} of input stream {ss} is reserved for bootstrap "
                          f"streams; use a value below {BOOTSTRAP_PRIORITY}",
                          key=key, origin=origin)
    return value if value >= 0 else None


def _load_user_class(config: Config) -> type | None:
    name = TASK_CHOOSER_CLASS.get(config)
    if not name or name in _SAMZA_ROUND_ROBIN:
        return None
    key, origin = TASK_CHOOSER_CLASS.name, config.origin(TASK_CHOOSER_CLASS.name)
    module_name, sep, attr = name.partition(":")
    if not sep:
        module_name, _, attr = name.rpartition(".")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"cannot load chooser class {name!r} ({exc}); give `module:Class` "
                          f"of an importable class", key=key, origin=origin) from None
    missing = [m for m in _CHOOSER_METHODS if not hasattr(obj, m)]
    if not isinstance(obj, type) or missing:
        raise ConfigError(f"{name!r} is not a chooser class (missing {', '.join(missing) or 'a class'}"
                          f"); implement weir.engine.chooser.MessageChooser, e.g. by subclassing "
                          f"weir.engine.chooser.BaseMessageChooser", key=key, origin=origin)
    return obj
