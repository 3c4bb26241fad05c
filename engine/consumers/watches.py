"""Pieces of :mod:`weir.engine.consumers.consumers`: its counters, refill mode, and the priority watch that
keeps a drained high-priority SSP from waiting for polls while lower tiers are served.

Kept apart so :mod:`weir.engine.consumers.consumers` reads as polling and choosing; the public names are
re-exported there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from weir.engine.model import SystemStreamPartition

__all__ = [
    "Refill",
    "ConsumerCounters",
    "PriorityWatch",
    "TIER_POLL_INTERVAL_S",
]

TIER_POLL_INTERVAL_S = 0.001
"""Shortest gap between two polls of drained higher-priority SSPs made because a lower tier
is being served (or ``task.poll.interval.ms`` when that is shorter)."""


class Refill(Enum):
    """When the chooser gets an SSP's next buffered envelope after one was chosen."""

    IMMEDIATE = "immediate"
    """At once, inside ``choose()`` (the synchronous run loop)."""
    BY_CALLER = "by-caller"
    """When the caller calls :meth:`SystemConsumers.refill` (per-SSP flow control for a run
    loop that lets an SSP advance only once its previous message started processing)."""


@dataclass(slots=True)
class ConsumerCounters:
    """Counters for metrics (Samza's SystemConsumersMetrics, by other names)."""

    polls: int = 0
    """``consumer.poll`` calls."""
    empty_polls: int = 0
    """Polls that returned no envelope."""
    polled: int = 0
    """Envelopes returned by all polls."""
    chooses: int = 0
    """``choose()`` calls that returned an envelope (Samza's ``chose-object``)."""
    chose_null: int = 0
    """``choose()`` calls that returned None."""
    gated: int = 0
    """Times the chooser was not asked because a bootstrap stream lagged without an envelope."""
    deserialization_errors: int = 0
    """Envelopes dropped because they could not be deserialized."""
    buffered: int = 0
    """Envelopes polled and not yet handed to the chooser (``unprocessed-messages``)."""
    tier_polls: int = 0
    """Polls of drained higher-priority SSPs made while a lower tier was being served."""

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


def _priority_lookup(chooser: Any) -> Any:
    """``ssp -> priority or None`` from the chooser: a DefaultChooser's ``priorities``
    mapping or a TieredPriorityChooser's ``priority_of``; None for other choosers."""
    priorities = getattr(chooser, "priorities", None)
    if isinstance(priorities, dict) and priorities:
        return lambda ssp: priorities.get(ssp.system_stream)
    priority_of = getattr(chooser, "priority_of", None)
    if callable(priority_of):
        return lambda ssp: priority_of(ssp.system_stream)
    return None


class PriorityWatch:
    """The drained SSPs of priority tiers above the lowest, waiting for their next poll.

    With priorities, an SSP whose buffer ran dry would otherwise be polled again only at the
    next regular poll (``task.poll.interval.ms``), and meanwhile every envelope would come
    from lower tiers even when it has new data. SystemConsumers therefore polls the SSPs in
    ``waiting`` (without waiting) before it chooses, at most every ``interval`` seconds, so
    the first poll after an SSP runs dry happens before the next envelope is chosen. SSPs
    of the lowest tier (streams without a priority rank lowest) are never watched: nothing
    ranks below them.
    """

    __slots__ = ("tier_of", "waiting", "interval", "next_poll")

    def __init__(self, chooser: Any, ssps: Iterable[SystemStreamPartition], interval: float):
        lookup = _priority_lookup(chooser)
        tier_of = {ssp: _rank(lookup(ssp) if lookup is not None else None) for ssp in ssps}
        lowest = min(tier_of.values(), default=-1)
        self.tier_of = {ssp: p for ssp, p in tier_of.items() if p > lowest}
        """The priority of each watched SSP (those above the lowest tier)."""
        self.waiting: dict[SystemStreamPartition, None] = {}
        self.interval = interval
        self.next_poll = 0.0

    @property
    def active(self) -> bool:
        """Whether there are tiers to watch at all."""
        return bool(self.tier_of)

    def drained(self, ssp: SystemStreamPartition) -> None:
        """``ssp``'s buffer ran dry: watch it if it ranks above the lowest tier."""
        if ssp in self.tier_of:
            self.waiting[ssp] = None

    def filled(self, ssp: SystemStreamPartition) -> None:
        """``ssp`` got envelopes (or ended): stop watching it."""
        self.waiting.pop(ssp, None)


def _rank(priority: int | None) -> int:
    """A priority as the watch ranks it: no priority (or below 0) is -1, the lowest."""
    return -1 if priority is None or priority < 0 else priority
