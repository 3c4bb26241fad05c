"""The :class:`MessageChooser` contract shared by every chooser.

A chooser decides which SSP's envelope is processed next. The container hands it at most
**one outstanding envelope per SSP**: after ``update(e)`` for SSP X, the next ``update`` for X
comes only after ``choose()`` has returned ``e``. Several updates for different SSPs may come
between two ``choose()`` calls. A chooser therefore orders envelopes *across* SSPs, never
*within* one.

``choose()`` may return None even while envelopes are held (bootstrap gating, throttling).
A chooser never returns the same envelope twice, is not restored after a failure and need not
be thread-safe.

Example::

    >>> from weir.engine.chooser import RoundRobinChooser
    >>> from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
    >>> c = RoundRobinChooser()
    >>> c.start()
    >>> c.update(IncomingMessageEnvelope(SystemStreamPartition("memory", "a", 0), 0, None, b"x"))
    >>> c.choose().offset
    0
    >>> c.choose() is None
    True
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Literal, Protocol, runtime_checkable

from weir.engine.errors import EngineError
from weir.engine.model import IncomingMessageEnvelope, SystemStream, SystemStreamPartition

__all__ = ["MessageChooser", "BaseMessageChooser", "ChooserError", "ChooserCapability",
           "NO_FAST_LANE", "chooser_capabilities"]


class ChooserCapability(enum.Enum):
    """What an optional capability of a chooser returns when the chooser does not offer it."""

    NO_FAST_LANE = "no fast lane"


NO_FAST_LANE: Literal[ChooserCapability.NO_FAST_LANE] = ChooserCapability.NO_FAST_LANE
""":meth:`BaseMessageChooser.fast_lane` of a chooser whose ``choose``/``update`` must be called."""


class ChooserError(EngineError):
    """A chooser was used against its contract (a second envelope for an SSP whose first was
    not chosen yet, an envelope of a stream no tier accepts) or built from inconsistent
    parts."""


@runtime_checkable
class MessageChooser(Protocol):
    """Orders envelopes across SSPs; see the module docstring for the contract."""

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        """Called before :meth:`start`, once per task that owns ``ssp``, with the offset of
        the first record that task will read."""
        ...

    def start(self) -> None: ...

    def update(self, envelope: IncomingMessageEnvelope) -> None:
        """Offer one envelope; at most one per SSP is outstanding."""
        ...

    def choose(self) -> IncomingMessageEnvelope | None:
        """The next envelope to process, or None (nothing held, or held back)."""
        ...

    def stop(self) -> None: ...


class BaseMessageChooser:
    """The base of Weir's choosers: no-op ``register``, ``start`` and ``stop`` for choosers
    that need none of them, and the optional capabilities the consumer multiplexer calls
    (docs/ARCHITECTURE.md, "Seams"), with their defaults:

    - ``fast_lane()``: the chooser's FIFO and held set, when popping the FIFO's head and
      appending that SSP's next envelope is exactly ``choose()`` then ``update()`` (default
      :data:`NO_FAST_LANE`: call them);
    - ``priority_of(ss)``: the stream's priority tier, higher first (default None: no tiers).

    A chooser implementing only the :class:`MessageChooser` protocol (a user chooser class) is
    given these defaults by :func:`chooser_capabilities`.
    """

    __slots__ = ()

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        return None

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def fast_lane(self) -> tuple[deque, set] | Literal[ChooserCapability.NO_FAST_LANE]:
        """The FIFO and held set the consumers may serve directly; default NO_FAST_LANE."""
        return NO_FAST_LANE

    def priority_of(self, ss: SystemStream) -> int | None:
        """The priority tier of stream ``ss``; default None (no priority: the lowest tier)."""
        return None


_DEFAULTS = BaseMessageChooser()


def chooser_capabilities(chooser: MessageChooser) -> BaseMessageChooser:
    """Where to call ``chooser``'s optional capabilities: the chooser itself when it derives
    from :class:`BaseMessageChooser`, else the base's defaults (no fast lane, no priority
    tiers). Resolved once, when the consumers start.

    >>> class Plain:   # the MessageChooser protocol only
    ...     pass
    >>> chooser_capabilities(Plain()).fast_lane() is NO_FAST_LANE
    True
    """
    return chooser if isinstance(chooser, BaseMessageChooser) else _DEFAULTS


def _second_envelope_error(chooser: str, envelope: IncomingMessageEnvelope) -> ChooserError:
    """The error a leaf chooser raises when it is offered a second envelope for one SSP."""
    return ChooserError(
        f"{chooser} was offered {envelope.ssp} offset {envelope.offset} while it still holds an "
        f"earlier envelope of that SSP; a chooser holds at most one envelope per SSP, so call "
        f"choose() until that one is returned before updating the SSP again")
