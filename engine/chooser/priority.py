"""Tiered priority: streams with a higher priority are always chosen first.

Each priority value has its own chooser (a *tier*); ``choose()`` asks the tiers from the
highest priority to the lowest and returns the first envelope any of them gives, then falls
back to the ``default`` chooser (streams that have no priority). Within a tier the tier's own
chooser decides (round robin, time-aligned, batching, or a user chooser).

Differences from Samza's TieredPriorityChooser (docs/CHOOSER.md), both fail-earlier fixes:
``register`` goes only to the tier that owns the SSP (Samza forwards it to every tier), and an
SSP that no tier accepts is refused at ``register`` as well as at ``update``.

Example::

    >>> from weir.engine.chooser import RoundRobinChooser
    >>> from weir.engine.model import IncomingMessageEnvelope as Env, SystemStream, SystemStreamPartition as SSP
    >>> c = TieredPriorityChooser({SystemStream("m", "hi"): 5, SystemStream("m", "lo"): 0},
    ...                           {5: RoundRobinChooser(), 0: RoundRobinChooser()})
    >>> c.update(Env(SSP("m", "lo", 0), 0, None, b""))
    >>> c.update(Env(SSP("m", "hi", 0), 0, None, b""))
    >>> [c.choose().ssp.stream, c.choose().ssp.stream]
    ['hi', 'lo']
"""

from __future__ import annotations

from collections.abc import Mapping

from weir.engine.model import IncomingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.chooser.base import BaseMessageChooser, ChooserError, MessageChooser

__all__ = ["TieredPriorityChooser"]


class TieredPriorityChooser(BaseMessageChooser):
    """``priorities`` maps a stream to its priority; ``choosers`` maps every priority value
    used there to that tier's chooser; ``default`` takes the streams without a priority (and
    is consulted only after every tier returned None)."""

    __slots__ = ("_priorities", "_tiers", "_choosers", "_default", "_route")

    def __init__(self, priorities: Mapping[SystemStream, int],
                 choosers: Mapping[int, MessageChooser],
                 default: MessageChooser | None = None) -> None:
        missing = sorted({p for p in priorities.values() if p not in choosers})
        if missing:
            raise ChooserError(
                f"TieredPriorityChooser: priorities {missing} have no chooser; give one chooser "
                f"per distinct priority value")
        self._priorities = {SystemStream(*ss): p for ss, p in priorities.items()}
        self._tiers: dict[int, MessageChooser] = dict(choosers)
        # Highest priority first; ``choose`` walks this tuple.
        self._choosers: tuple[MessageChooser, ...] = tuple(
            self._tiers[p] for p in sorted(self._tiers, reverse=True))
        self._default = default
        self._route: dict[SystemStreamPartition, MessageChooser] = {}

    @property
    def tiers(self) -> list[tuple[int, MessageChooser]]:
        """``(priority, chooser)`` from the highest priority to the lowest."""
        return [(p, self._tiers[p]) for p in sorted(self._tiers, reverse=True)]

    @property
    def default(self) -> MessageChooser | None:
        return self._default

    def priority_of(self, ss: SystemStream) -> int | None:
        """The stream's priority, or None when it goes to the default chooser."""
        return self._priorities.get(SystemStream(*ss))

    def _chooser_for(self, ssp: SystemStreamPartition) -> MessageChooser:
        chooser = self._route.get(ssp)
        if chooser is None:
            priority = self._priorities.get(ssp.system_stream)
            chooser = self._tiers[priority] if priority is not None else self._default
            if chooser is None:
                raise ChooserError(
                    f"TieredPriorityChooser: {ssp} belongs to stream "
                    f"{ssp.system_stream} which has no priority, and there is no default "
                    f"chooser; give the stream a priority or build the chooser with a default")
            self._route[ssp] = chooser
        return chooser

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        self._chooser_for(ssp).register(ssp, offset)

    def start(self) -> None:
        for chooser in self._choosers:
            chooser.start()
        if self._default is not None:
            self._default.start()

    def update(self, envelope: IncomingMessageEnvelope) -> None:
        chooser = self._route.get(envelope.ssp) or self._chooser_for(envelope.ssp)
        chooser.update(envelope)

    def choose(self) -> IncomingMessageEnvelope | None:
        for chooser in self._choosers:
            envelope = chooser.choose()
            if envelope is not None:
                return envelope
        if self._default is not None:
            return self._default.choose()
        return None

    def stop(self) -> None:
        for chooser in self._choosers:
            chooser.stop()
        if self._default is not None:
            self._default.stop()
