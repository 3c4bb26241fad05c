"""Time-aligned choosing: the held envelope with the smallest event timestamp goes first.

Samza breaks ties between SSPs of one priority by arrival order only, so a fast stream can run
far ahead of a slow one in event time. This chooser aligns them: among the envelopes it holds
it returns the one with the smallest ``timestamp`` (ties by arrival).

Envelopes without an event time (``NO_TIMESTAMP``, or any negative value; end-of-stream and
other control envelopes) are ordered by arrival: such an envelope is returned as soon as it
arrived before the earliest-timestamp envelope held. That keeps both kinds starvation-free:
neither an untimestamped SSP nor a timestamped one can be passed over forever, because each
new arrival queues behind what is already held.

Example::

    >>> from weir.engine.model import IncomingMessageEnvelope as Env, SystemStreamPartition as SSP
    >>> c = TimeAlignedChooser()
    >>> c.update(Env(SSP("memory", "fast", 0), 7, None, b"", timestamp=2_000))
    >>> c.update(Env(SSP("memory", "slow", 0), 3, None, b"", timestamp=1_000))
    >>> c.choose().ssp.stream
    'slow'
"""

from __future__ import annotations

import heapq
from collections import deque
from itertools import count

from weir.engine.model import IncomingMessageEnvelope
from weir.engine.chooser.base import BaseMessageChooser, _second_envelope_error

__all__ = ["TimeAlignedChooser"]


class TimeAlignedChooser(BaseMessageChooser):
    """Smallest event timestamp first; untimestamped envelopes by arrival (see module doc)."""

    __slots__ = ("_timed", "_untimed", "_held", "_seq")

    def __init__(self, config: object = None) -> None:
        # ``config`` is accepted (and unused) so the class can be named in task.chooser.class.
        self._timed: list[tuple[int, int, IncomingMessageEnvelope]] = []
        self._untimed: deque[tuple[int, IncomingMessageEnvelope]] = deque()
        self._held: set = set()
        self._seq = count()

    def update(self, envelope: IncomingMessageEnvelope) -> None:
        ssp = envelope.ssp
        if ssp in self._held:
            raise _second_envelope_error("TimeAlignedChooser", envelope)
        self._held.add(ssp)
        seq = next(self._seq)
        if envelope.timestamp < 0:
            self._untimed.append((seq, envelope))
        else:
            heapq.heappush(self._timed, (envelope.timestamp, seq, envelope))

    def choose(self) -> IncomingMessageEnvelope | None:
        timed, untimed = self._timed, self._untimed
        if untimed and (not timed or untimed[0][0] < timed[0][1]):
            envelope = untimed.popleft()[1]
        elif timed:
            envelope = heapq.heappop(timed)[2]
        else:
            return None
        self._held.discard(envelope.ssp)
        return envelope

    @property
    def buffered(self) -> int:
        return len(self._timed) + len(self._untimed)
