"""Round robin: the envelopes held are returned in arrival order (a FIFO queue).

Because the container holds at most one envelope per SSP, arrival order across SSPs is a
fair rotation: an SSP whose envelope was just chosen gets its next one queued behind every
SSP already waiting.

Samza's RoundRobinChooser documents, but does not check, the one-envelope-per-SSP rule
(docs/CHOOSER.md, "Samza quirks: copied or fixed"). Weir checks it and raises :class:`ChooserError`.

Example::

    >>> from weir.engine.model import IncomingMessageEnvelope as Env, SystemStreamPartition as SSP
    >>> c = RoundRobinChooser()
    >>> for p in (2, 0, 1):
    ...     c.update(Env(SSP("memory", "s", p), 0, None, b""))
    >>> [c.choose().ssp.partition for _ in range(3)]
    [2, 0, 1]
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from weir.engine.model import IncomingMessageEnvelope
from weir.engine.chooser.base import (NO_FAST_LANE, BaseMessageChooser, ChooserCapability,
                                      _second_envelope_error)

__all__ = ["RoundRobinChooser"]


class RoundRobinChooser(BaseMessageChooser):
    """FIFO over the held envelopes; ``buffered`` is the number held (Samza's
    ``buffered-messages`` gauge)."""

    __slots__ = ("_queue", "_held")

    def __init__(self, config: object = None) -> None:
        # ``config`` is accepted (and unused) so the class can be named in task.chooser.class.
        self._queue: deque[IncomingMessageEnvelope] = deque()
        self._held: set = set()

    def update(self, envelope: IncomingMessageEnvelope) -> None:
        ssp = envelope.ssp
        if ssp in self._held:
            raise _second_envelope_error("RoundRobinChooser", envelope)
        self._held.add(ssp)
        self._queue.append(envelope)

    def choose(self) -> IncomingMessageEnvelope | None:
        if not self._queue:
            return None
        envelope = self._queue.popleft()
        self._held.discard(envelope.ssp)
        return envelope

    def fast_lane(self) -> tuple[deque, set] | Literal[ChooserCapability.NO_FAST_LANE]:
        """The FIFO and the set of SSPs held, for :class:`~weir.engine.consumers.SystemConsumers`'
        inline hot path: popping the head and appending the same SSP's next envelope is
        exactly ``choose()`` followed by ``update()`` of that envelope, in two C calls. Only a
        plain RoundRobinChooser offers it: a subclass may change ``choose``/``update``, which
        the lane would bypass."""
        if type(self) is not RoundRobinChooser:
            return NO_FAST_LANE
        return self._queue, self._held

    @property
    def buffered(self) -> int:
        return len(self._queue)
