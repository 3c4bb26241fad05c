"""Starting offsets and the per-task "caught-up" filter (docs/CHOOSER.md, "Starting offsets").

Pure functions of config, checkpoints and partition metadata; the container calls
:func:`starting_offsets` once per task at start and keeps one :class:`CaughtUpFilter` per task
in the run loop.

For each SSP of a task, the starting offset (the first record to read) is:

1. the checkpointed *last processed* offset plus one, unless the stream has
   ``samza.reset.offset=true`` (then the checkpoint is ignored);
2. overridden by a startpoint for that SSP, if the caller has one;
3. otherwise the stream's ``samza.offset.default`` (``oldest``, ``newest`` or ``upcoming``;
   stream property, then ``systems.<s>.default.stream.samza.offset.default``, then the
   deprecated ``systems.<s>.samza.offset.default``, then ``upcoming``) looked up in the
   partition's metadata; an empty partition starts at its upcoming offset.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.model import SystemStreamPartition as SSP
    >>> from weir.engine.systems.api import PartitionMetadata as MD
    >>> cfg = Config({"systems.m.default.stream.samza.offset.default": "oldest"})
    >>> a, b = SSP("m", "a", 0), SSP("m", "b", 0)
    >>> starting_offsets(cfg, [a, b], {a: 41}, {a: MD(0, 99, 100), b: MD(5, 9, 10)})
    {SystemStreamPartition(system='m', stream='a', partition=0): 42, SystemStreamPartition(system='m', stream='b', partition=0): 5}
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from weir.stores.config import Config, ConfigError, declare

from weir.engine.errors import EngineError
from weir.engine.model import EnvelopeKind, IncomingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.config.streams import stream_property, stream_property_origin
from weir.engine.systems.api import OffsetType, PartitionMetadata

__all__ = [
    "OffsetPolicy",
    "offset_policy",
    "starting_offsets",
    "CaughtUpFilter",
    "MissingMetadataError",
    "STREAM_RESET_OFFSET",
    "STREAM_OFFSET_DEFAULT",
    "SYSTEM_OFFSET_DEFAULT",
]

_log = logging.getLogger(__name__)
_COMPONENT = "offsets"

STREAM_RESET_OFFSET = declare(
    "systems.<system>.streams.<stream>.samza.reset.offset", bool, False,
    "Ignore the checkpointed offset of this input stream at start and begin from its "
    "`samza.offset.default`. A value other than true/false is treated as false (warning).",
    component=_COMPONENT,
    aliases=("streams.<id>.samza.reset.offset",
             "systems.<system>.default.stream.samza.reset.offset"))
STREAM_OFFSET_DEFAULT = declare(
    "systems.<system>.streams.<stream>.samza.offset.default", str, OffsetType.UPCOMING.value,
    "Where an input stream starts without a checkpoint: `oldest`, `newest` or `upcoming`.",
    component=_COMPONENT, choices=tuple(t.value for t in OffsetType),
    aliases=("streams.<id>.samza.offset.default",
             "systems.<system>.default.stream.samza.offset.default"))
SYSTEM_OFFSET_DEFAULT = declare(
    "systems.<system>.samza.offset.default", str, OffsetType.UPCOMING.value,
    "Deprecated system-wide form of `systems.<system>.default.stream.samza.offset.default`.",
    component=_COMPONENT, choices=tuple(t.value for t in OffsetType))


class MissingMetadataError(EngineError):
    """An SSP needs a default starting offset but its partition has no metadata."""

    def __init__(self, ssp: SystemStreamPartition):
        super().__init__(
            f"{ssp}: no partition metadata to compute a starting offset from; check that the "
            f"stream exists with at least {ssp.partition + 1} partitions "
            f"(`weir log describe {ssp.stream}`)")
        self.ssp = ssp


@dataclass(frozen=True, slots=True)
class OffsetPolicy:
    """A stream's ``samza.reset.offset`` and ``samza.offset.default``."""

    reset: bool = False
    default: OffsetType = OffsetType.UPCOMING


def offset_policy(config: Config | Mapping[str, str], ss: SystemStream) -> OffsetPolicy:
    """The offset policy of one input stream, with Samza's lookup order and parsing."""
    config = config if isinstance(config, Config) else Config(config)
    ss = SystemStream(*ss)
    reset = False
    raw = stream_property(config, ss, "samza.reset.offset")
    if raw is not None:
        low = raw.strip().lower()
        if low in ("true", "false"):
            reset = low == "true"
        else:
            key, origin = stream_property_origin(config, ss, "samza.reset.offset") or ("", None)
            _log.warning("config key '%s'%s: %r is neither true nor false; treating it as false",
                         key, f" (set at {origin})" if origin else "", raw)
    raw = stream_property(config, ss, "samza.offset.default")
    found = stream_property_origin(config, ss, "samza.offset.default")
    if raw is None:
        deprecated = SYSTEM_OFFSET_DEFAULT.key(system=ss.system)
        raw = config.get_str(deprecated)
        found = (deprecated, config.origin(deprecated)) if raw is not None else None
    default = OffsetType.UPCOMING
    if raw is not None:
        try:
            default = OffsetType(raw.strip().lower())
        except ValueError:
            key, origin = found or (None, None)
            raise ConfigError(f"bad value {raw!r}: expected one of oldest, newest, upcoming",
                              key=key, origin=origin) from None
    return OffsetPolicy(reset, default)


def starting_offsets(config: Config | Mapping[str, str] | None,
                     ssps: Iterable[SystemStreamPartition],
                     last_processed: Mapping[SystemStreamPartition, int],
                     metadata: Mapping[SystemStreamPartition, PartitionMetadata], *,
                     startpoints: Mapping[SystemStreamPartition, int] | None = None,
                     policies: Mapping[SystemStream, OffsetPolicy] | None = None,
                     ) -> dict[SystemStreamPartition, int]:
    """The first offset to read for each of one task's ``ssps``.

    ``last_processed`` is the task's checkpoint (entries for SSPs not in ``ssps`` are
    ignored); ``metadata`` is needed for every SSP that ends up on its default offset.
    Raises :class:`MissingMetadataError` when that metadata is absent and ConfigError for a
    bad ``samza.offset.default``. ``policies`` holds the streams' policies when they were
    parsed already (the container's :class:`JobSettings`); others come from ``config``.
    """
    config = config if isinstance(config, Config) else Config(config or {})
    policies = dict(policies or {})  # parsed once by the container; else parsed here per stream
    out: dict[SystemStreamPartition, int] = {}
    for ssp in ssps:
        ssp = SystemStreamPartition(*ssp)
        ss = ssp.system_stream
        policy = policies.get(ss)
        if policy is None:
            policy = policies[ss] = offset_policy(config, ss)
        last = None if policy.reset else last_processed.get(ssp)
        start = None if last is None else last + 1
        if startpoints and startpoints.get(ssp) is not None:
            start = startpoints[ssp]
        if start is None:
            md = metadata.get(ssp)
            if md is None:
                raise MissingMetadataError(ssp)
            start = md.upcoming if md.is_empty else md.offset_of(policy.default)
        out[ssp] = start
    return out


class CaughtUpFilter:
    """Per task: skip envelopes of an SSP that come before the task's own starting offset.

    When several tasks share an SSP (broadcast inputs) the consumer starts from the lowest
    registered offset, so a task that registered a later offset sees older envelopes first;
    those are skipped for that task (no process call, no offset update). An SSP is caught up
    once an envelope at or past the task's starting offset arrives, or any control envelope
    (end-of-stream, watermark); an SSP that starts at its partition's upcoming offset is
    caught up from the start.
    """

    __slots__ = ("_starting", "_pending")

    def __init__(self, starting: Mapping[SystemStreamPartition, int],
                 metadata: Mapping[SystemStreamPartition, PartitionMetadata] | None = None):
        self._starting = {SystemStreamPartition(*s): o for s, o in starting.items()}
        md = metadata or {}
        self._pending = {ssp for ssp, offset in self._starting.items()
                         if not (ssp in md and offset == md[ssp].upcoming)}

    def accept(self, envelope: IncomingMessageEnvelope) -> bool:
        """True when the task should process ``envelope``."""
        pending = self._pending
        if not pending or envelope.ssp not in pending:
            return True
        if envelope.kind is not EnvelopeKind.MESSAGE or envelope.offset >= self._starting[envelope.ssp]:
            pending.discard(envelope.ssp)
            return True
        return False

    def is_caught_up(self, ssp: SystemStreamPartition) -> bool:
        return ssp not in self._pending
