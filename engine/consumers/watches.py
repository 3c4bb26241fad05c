"""Pieces of :mod:`weir.engine.consumers.consumers`: its counters, refill mode, the priority watch that
keeps a drained high-priority SSP from waiting for polls while lower tiers are served, and the
rate-limited log of dropped undeserializable messages.

Kept apart so :mod:`weir.engine.consumers.consumers` reads as polling and choosing; the public names are
re-exported there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from enum import Enum

from weir.engine.chooser.base import MessageChooser, chooser_capabilities
from weir.engine.model import SystemStreamPartition

__all__ = [
    "Refill",
    "ConsumerCounters",
    "PriorityWatch",
    "DroppedMessageLog",
    "TIER_POLL_INTERVAL_S",
    "DROP_LOG_INTERVAL_S",
]

DROP_LOG_INTERVAL_S = 10.0
"""At most one log line per this many seconds about dropped undeserializable messages."""

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
    deserialization_errors_by_partition: dict[str, int] = field(default_factory=dict)
    """The same, per input partition (``system.stream#partition``)."""
    buffered: int = 0
    """Envelopes polled and not yet handed to the chooser (``unprocessed-messages``)."""
    tier_polls: int = 0
    """Polls of drained higher-priority SSPs made while a lower tier was being served."""

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


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

    def __init__(self, chooser: MessageChooser, ssps: Iterable[SystemStreamPartition],
                 interval: float):
        priority_of = chooser_capabilities(chooser).priority_of
        tier_of = {ssp: _rank(priority_of(ssp.system_stream)) for ssp in ssps}
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


class DroppedMessageLog:
    """Logs messages dropped because they could not be deserialized
    (``task.drop.deserialization.errors=true``) without flooding the log: the first drop at
    once, naming stream, partition, offset and the error; after that at most one line per
    ``interval`` seconds counting the drops since the last line and naming the latest. A
    count not logged yet is logged by :meth:`flush` (when the consumers stop)."""

    def __init__(self, logger: logging.Logger, interval: float = DROP_LOG_INTERVAL_S, *,
                 clock: Callable[[], float] = time.monotonic):
        self._log, self._interval, self._clock = logger, interval, clock
        self._next = 0.0
        self._pending = 0
        self._since = 0.0
        self._latest: tuple[SystemStreamPartition, int, BaseException] | None = None

    def dropped(self, ssp: SystemStreamPartition, offset: int, error: BaseException) -> None:
        now = self._clock()
        self._pending += 1
        self._latest = (ssp, offset, error)
        if self._pending == 1 and self._next == 0.0:
            self._emit(now, first=True)
        elif now >= self._next:
            self._emit(now, first=False)

    def flush(self) -> None:
        if self._pending:
            self._emit(self._clock(), first=False)

    def _emit(self, now: float, *, first: bool) -> None:
        assert self._latest is not None
        ssp, offset, error = self._latest
        what = f"{type(error).__name__}: {error}"
        if first:
            self._log.warning(
                "dropped the message at %s offset %d: it cannot be deserialized (%s); "
                "task.drop.deserialization.errors=true drops such messages (counted in the "
                "consumers' deserialization_errors metric)", ssp, offset, what)
        else:
            self._log.warning(
                "dropped %d more message(s) that cannot be deserialized in the last %.0f s; "
                "the latest at %s offset %d (%s)", self._pending, now - self._since, ssp,
                offset, what)
        self._pending = 0
        self._since = now
        self._next = now + self._interval
