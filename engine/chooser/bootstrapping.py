"""Bootstrap streams: nothing else is chosen until they have caught up with their head.

A bootstrap stream (``samza.bootstrap=true``, e.g. a table of currency codes) must be read up
to the end *as it was when the container started* before any other message is processed.

:class:`BootstrapLag` keeps that bookkeeping (docs/CHOOSER.md) and is shared by the
:class:`BootstrappingChooser` and by :class:`~weir.engine.consumers.consumers.SystemConsumers`, which gates
its own ``choose`` calls with it:

* every registered SSP of a bootstrap stream starts *lagging*, unless its starting offset is
  at or past the partition's *upcoming* offset, or the partition was empty at start (Weir's
  fix for Samza quirk 4: an empty partition, or one whose records were all deleted, can
  never deliver the envelope that would catch it up, and would stall the job forever);
* a lagging SSP catches up when an envelope of it is chosen whose offset is at or past the
  partition's *newest* offset recorded at start, or when its end-of-stream is chosen;
* **gating**: while any SSP lags, choosing is allowed only when the chooser holds at least
  one envelope from every stream that still has a lagging partition. Gating is global: it
  holds back every stream, not only the bootstrap ones. Messages written after start do not
  extend the bootstrap, and a stream that falls behind later is not bootstrapped again.

When an SSP is registered several times (broadcast + bootstrap: one registration per task)
the lowest offset counts.

Example::

    >>> from weir.engine.chooser import RoundRobinChooser
    >>> from weir.engine.model import IncomingMessageEnvelope as Env, SystemStreamPartition as SSP
    >>> from weir.engine.systems.api import PartitionMetadata
    >>> codes, tx = SSP("m", "codes", 0), SSP("m", "tx", 0)
    >>> c = BootstrappingChooser(RoundRobinChooser(), {codes: PartitionMetadata(0, 1, 2)})
    >>> c.register(codes, 0); c.start()
    >>> c.update(Env(tx, 0, None, b""))
    >>> c.choose() is None          # codes#0 lags and has nothing held: gated
    True
"""

from __future__ import annotations

from collections.abc import Mapping

from weir.engine.model import IncomingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import PartitionMetadata
from weir.engine.chooser.base import MessageChooser

__all__ = ["BootstrapLag", "BootstrappingChooser"]


class BootstrapLag:
    """Which bootstrap SSPs still lag behind the head recorded at start, and whether
    choosing is allowed. ``heads`` holds the metadata of every bootstrap SSP, read once at
    start; SSPs in ``heads`` that are never registered are ignored (SAMZA-720)."""

    __slots__ = ("_heads", "_registered", "_lagging", "_lag_counts", "_held", "_ready",
                 "_started")

    def __init__(self, heads: Mapping[SystemStreamPartition, PartitionMetadata]) -> None:
        self._heads = {SystemStreamPartition(*ssp): md for ssp, md in heads.items()}
        self._registered: dict[SystemStreamPartition, int] = {}
        self._lagging: set[SystemStreamPartition] = set()
        self._lag_counts: dict[SystemStream, int] = {}
        self._held: dict[SystemStream, int] = {}
        self._ready = 0
        self._started = False

    # -- setup -----------------------------------------------------------------------------
    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        """Record a starting offset; for an SSP registered more than once the lowest wins."""
        current = self._registered.get(ssp)
        if current is None or offset < current:
            self._registered[ssp] = offset

    def start(self) -> None:
        """Decide which registered bootstrap SSPs lag. Idempotent."""
        if self._started:
            return
        self._started = True
        for ssp, offset in self._registered.items():
            md = self._heads.get(ssp)
            if md is None or md.is_empty or offset >= md.upcoming:
                continue
            self._lagging.add(ssp)
            ss = ssp.system_stream
            self._lag_counts[ss] = self._lag_counts.get(ss, 0) + 1
            self._held.setdefault(ss, 0)

    # -- queries ---------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """True while some bootstrap SSP lags."""
        return bool(self._lagging)

    @property
    def ok_to_choose(self) -> bool:
        """Every stream with a lagging partition has an envelope held by the chooser."""
        return self._ready == len(self._lag_counts)

    def is_lagging(self, ssp: SystemStreamPartition) -> bool:
        return ssp in self._lagging

    @property
    def lagging_ssps(self) -> frozenset[SystemStreamPartition]:
        """Samza's ``lagging-batch-streams`` gauge is the size of this set."""
        return frozenset(self._lagging)

    def lagging_partitions(self, ss: SystemStream) -> int:
        """Samza's ``<system>-<stream>-lagging-partitions`` gauge."""
        return self._lag_counts.get(SystemStream(*ss), 0)

    def head_of(self, ssp: SystemStreamPartition) -> PartitionMetadata | None:
        return self._heads.get(ssp)

    # -- events ----------------------------------------------------------------------------
    def on_update(self, envelope: IncomingMessageEnvelope) -> None:
        """An envelope was handed to the chooser."""
        if envelope.ssp in self._lagging:
            ss = envelope.ssp.system_stream
            held = self._held[ss]
            self._held[ss] = held + 1
            if held == 0:
                self._ready += 1

    def on_chosen(self, envelope: IncomingMessageEnvelope) -> None:
        """An envelope left the chooser; catch its SSP up when it reached the head."""
        ssp = envelope.ssp
        if ssp not in self._lagging:
            return
        ss = ssp.system_stream
        held = self._held[ss] - 1
        self._held[ss] = held
        if held == 0:
            self._ready -= 1
        if envelope.is_end_of_stream or envelope.offset >= self._heads[ssp].newest:
            self.mark_caught_up(ssp)

    def mark_caught_up(self, ssp: SystemStreamPartition) -> None:
        if ssp not in self._lagging:
            return
        self._lagging.discard(ssp)
        ss = ssp.system_stream
        left = self._lag_counts[ss] - 1
        if left:
            self._lag_counts[ss] = left
            return
        del self._lag_counts[ss]
        if self._held.pop(ss, 0) > 0:
            self._ready -= 1


class BootstrappingChooser:
    """Wraps one chooser and holds back every ``choose`` while a bootstrap stream lags
    without an envelope in the wrapped chooser. ``gated`` counts the choices held back."""

    __slots__ = ("_wrapped", "_lag", "gated")

    def __init__(self, wrapped: MessageChooser,
                 heads: Mapping[SystemStreamPartition, PartitionMetadata] | BootstrapLag) -> None:
        self._wrapped = wrapped
        self._lag = heads if isinstance(heads, BootstrapLag) else BootstrapLag(heads)
        self.gated = 0

    @property
    def wrapped(self) -> MessageChooser:
        return self._wrapped

    @property
    def lag(self) -> BootstrapLag:
        return self._lag

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        self._lag.register(ssp, offset)
        self._wrapped.register(ssp, offset)

    def start(self) -> None:
        self._lag.start()
        self._wrapped.start()

    def stop(self) -> None:
        self._wrapped.stop()

    def update(self, envelope: IncomingMessageEnvelope) -> None:
        self._wrapped.update(envelope)
        self._lag.on_update(envelope)

    def choose(self) -> IncomingMessageEnvelope | None:
        lag = self._lag
        if not lag.active:
            return self._wrapped.choose()
        if not lag.ok_to_choose:
            self.gated += 1
            return None
        envelope = self._wrapped.choose()
        if envelope is not None:
            lag.on_chosen(envelope)
        return envelope
