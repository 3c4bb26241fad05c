"""The run loop's envelope source: the seam between the loop and what feeds it.

:class:`EnvelopeSource` declares every capability the run loop calls, the optional ones with
the default that means "cannot do better" (docs/ARCHITECTURE.md, "Seams"). The container's
:class:`~weir.engine.consumers.consumers.SystemConsumers` and a job on Spark's micro-batch
source derive from it; the loop reads the capabilities once when it is built and calls them
directly, so a source pays nothing per envelope for what it does not offer.

Example::

    >>> from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
    >>> class OneShot(EnvelopeSource):
    ...     def __init__(self, envelope):
    ...         self.left = [envelope]
    ...     def choose(self, timeout):
    ...         return self.left.pop() if self.left else None
    ...     def exhausted(self):
    ...         return not self.left
    >>> src = OneShot(IncomingMessageEnvelope(SystemStreamPartition("m", "s", 0), 0, None, b"x"))
    >>> src.choose_run(64), src.choose(0.0).offset, src.exhausted(), src.metrics() is NO_METRICS
    ((), 0, True, True)
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition

__all__ = ["EnvelopeSource", "SourceCapability", "NO_METRICS", "require_source"]


class SourceCapability(enum.Enum):
    """What an optional capability of a source returns when the source does not offer it."""

    NO_METRICS = "no metrics"


NO_METRICS: Literal[SourceCapability.NO_METRICS] = SourceCapability.NO_METRICS
""":meth:`EnvelopeSource.metrics` of a source without metrics of its own."""


class EnvelopeSource(ABC):
    """What the run loop reads from. Required: :meth:`choose`. Optional, with defaults:
    :meth:`choose_run` (none: one ``choose`` per envelope), :meth:`exhausted` (never: an
    unbounded source), :meth:`release` (nothing: the loop skips released partitions'
    envelopes itself), :meth:`metrics` (:data:`NO_METRICS`)."""

    __slots__ = ()

    @abstractmethod
    def choose(self, timeout: float) -> IncomingMessageEnvelope | None:
        """The next envelope, deserialized, waiting up to ``timeout`` seconds; None when
        none came."""

    def choose_run(self, limit: int) -> Sequence[IncomingMessageEnvelope]:
        """Up to ``limit`` envelopes at once: exactly what as many :meth:`choose` calls would
        return, in that order; empty when the source cannot serve the next one this way (the
        loop then calls :meth:`choose`). Default: always empty."""
        return ()

    def exhausted(self) -> bool:
        """True once the source will never hand out another envelope (a micro-batch of a job
        on Spark); the loop then stops as soon as nothing it took is waiting or in flight.
        Default: False (an unbounded source)."""
        return False

    def release(self, ssps: Iterable[SystemStreamPartition]) -> None:
        """No task reads ``ssps`` any more (drained sources, ended intermediate partitions):
        the source may stop polling them. Default: nothing (the loop skips their envelopes)."""
        return None

    def metrics(self) -> Callable[[], Mapping[str, Any]] | Literal[SourceCapability.NO_METRICS]:
        """What reads the source's metrics for the run loop's snapshot (under
        ``"consumers"``), or :data:`NO_METRICS` (the default)."""
        return NO_METRICS


def require_source(source: Any, owner: str) -> EnvelopeSource:
    """``source`` when it is an :class:`EnvelopeSource`; a TypeError naming ``owner`` and the
    fix otherwise (checked once, where the loop is built)."""
    if not isinstance(source, EnvelopeSource):
        raise TypeError(f"{owner}: the envelope source must derive from "
                        f"weir.engine.runloop.source.EnvelopeSource (choose(timeout), with "
                        f"defaults for choose_run, exhausted, release and metrics), got "
                        f"{type(source).__name__}")
    return source
