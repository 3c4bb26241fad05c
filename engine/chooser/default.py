"""The DefaultChooser: the built-in choosers composed from config.

From the inside out:

1. a *leaf* chooser per tier: the user's ``task.chooser.class``, else round robin or
   time-aligned per ``task.chooser.tiebreak``;
2. when ``task.chooser.batch.size`` > 0, each leaf is wrapped in a :class:`BatchingChooser`;
3. when any priority or bootstrap stream is configured, a :class:`TieredPriorityChooser`
   with one tier per distinct priority plus a default tier: every input stream has priority
   0, explicit priorities (>= 0) override that, and every bootstrap stream gets
   ``BOOTSTRAP_PRIORITY`` (2**31 - 1, Samza's ``Int.MaxValue``) *plus* its explicit priority,
   so bootstrap streams always rank above every other stream and explicit priorities only
   order them among themselves;
4. when bootstrap heads are given, a :class:`BootstrappingChooser` outermost.

This keeps Samza's DefaultChooser outer layers (docs/CHOOSER.md) (bootstrapping outside everything) but moves
batching from outside the tiers to inside each tier, so a batch can never serve a lower
priority while a higher one waits; and a bootstrap stream's explicit priority can no longer
drop it below non-bootstrap streams (in Samza it can, which breaks the bootstrap guarantee).
See docs/CHOOSER.md.

Inside a container, :class:`~weir.engine.consumers.consumers.SystemConsumers` reads the bootstrap heads and
gates ``choose`` itself, so the chooser there is built without heads (``chooser_from_config
(config)``). Pass ``bootstrap_heads`` to use the DefaultChooser on its own.

Example::

    >>> from weir.stores.config import Config
    >>> c = chooser_from_config(Config({"task.inputs": "m.a,m.b", "task.chooser.batch.size": "10",
    ...                                 "systems.m.streams.b.samza.priority": "2"}))
    >>> c.describe()
    'Tiered[2: Batching(RoundRobin, 10), 0: Batching(RoundRobin, 10), default: Batching(RoundRobin, 10)]'
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Callable, Literal

from weir.stores.config import Config

from weir.engine.model import IncomingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import PartitionMetadata
from weir.engine.chooser.base import (BaseMessageChooser, ChooserCapability, MessageChooser,
                                      chooser_capabilities)
from weir.engine.chooser.batching import BatchingChooser
from weir.engine.chooser.bootstrapping import BootstrapLag, BootstrappingChooser
from weir.engine.chooser.priority import TieredPriorityChooser
from weir.engine.chooser.round_robin import RoundRobinChooser
from weir.engine.chooser.spec import BOOTSTRAP_PRIORITY, ChooserSpec, Tiebreak
from weir.engine.chooser.time_aligned import TimeAlignedChooser

__all__ = ["DefaultChooser", "chooser_from_config", "BOOTSTRAP_PRIORITY"]


class DefaultChooser(BaseMessageChooser):
    """The composition above, built from a :class:`ChooserSpec`. ``config`` is what a user
    chooser class is constructed with. ``bootstrap_heads`` maps each bootstrap SSP to its
    metadata at start; without it there is no gating layer (SystemConsumers gates)."""

    def __init__(self, spec: ChooserSpec, *, config: Config | Mapping[str, str] | None = None,
                 bootstrap_heads: Mapping[SystemStreamPartition, PartitionMetadata]
                 | BootstrapLag | None = None) -> None:
        self.spec = spec
        self._config = config if isinstance(config, Config) else Config(config or {})
        self.priorities: dict[SystemStream, int] = self._priorities(spec)
        root: MessageChooser
        if spec.uses_priority:
            tiers = {p: self._tier_chooser() for p in set(self.priorities.values())}
            root = TieredPriorityChooser(self.priorities, tiers, default=self._tier_chooser())
        else:
            root = self._tier_chooser()
        if bootstrap_heads is not None and spec.bootstrap_streams:
            root = BootstrappingChooser(root, bootstrap_heads)
        self.root = root
        # The hot path goes straight to the root chooser: no extra Python frame per message.
        self.update: Callable[[IncomingMessageEnvelope], None] = root.update
        self.choose: Callable[[], IncomingMessageEnvelope | None] = root.choose

    # -- MessageChooser --------------------------------------------------------------------
    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        self.root.register(ssp, offset)

    def start(self) -> None:
        self.root.start()

    def update(self, envelope: IncomingMessageEnvelope) -> None:  # type: ignore[no-redef]
        self.root.update(envelope)

    def choose(self) -> IncomingMessageEnvelope | None:  # type: ignore[no-redef]
        return self.root.choose()

    def stop(self) -> None:
        self.root.stop()

    # -- capabilities (BaseMessageChooser) --------------------------------------------------
    def fast_lane(self) -> tuple[deque, set] | Literal[ChooserCapability.NO_FAST_LANE]:
        """The root chooser's fast lane (a plain round robin's); NO_FAST_LANE for any other
        composition, and for a user chooser that does not declare one."""
        return chooser_capabilities(self.root).fast_lane()

    def priority_of(self, ss: SystemStream) -> int | None:
        """The stream's priority tier (:attr:`priorities`); None without priorities."""
        return self.priorities.get(SystemStream(*ss))

    # -- inspection ------------------------------------------------------------------------
    def describe(self) -> str:
        """The composition in one line, for logs and docs."""
        return _describe(self.root)

    # -- building --------------------------------------------------------------------------
    @staticmethod
    def _priorities(spec: ChooserSpec) -> dict[SystemStream, int]:
        if not spec.uses_priority:
            return {}
        out = {ss: 0 for ss in spec.inputs}
        out.update(spec.priorities)
        for ss in spec.bootstrap_streams:
            out[ss] = BOOTSTRAP_PRIORITY + spec.priorities.get(ss, 0)
        return out

    def _leaf(self) -> MessageChooser:
        if self.spec.user_class is not None:
            return self.spec.user_class(self._config)
        if self.spec.tiebreak is Tiebreak.TIME:
            return TimeAlignedChooser()
        return RoundRobinChooser()

    def _tier_chooser(self) -> MessageChooser:
        leaf = self._leaf()
        return BatchingChooser(leaf, self.spec.batch_size) if self.spec.batch_size > 0 else leaf


def chooser_from_config(config: Config | Mapping[str, str], *,
                        bootstrap_heads: Mapping[SystemStreamPartition, PartitionMetadata]
                        | BootstrapLag | None = None) -> DefaultChooser:
    """The DefaultChooser for a job config (see the module docstring)."""
    config = config if isinstance(config, Config) else Config(config)
    return DefaultChooser(ChooserSpec.from_config(config), config=config,
                          bootstrap_heads=bootstrap_heads)


def _describe(chooser: Any) -> str:
    if isinstance(chooser, BootstrappingChooser):
        return f"Bootstrapping({_describe(chooser.wrapped)})"
    if isinstance(chooser, BatchingChooser):
        return f"Batching({_describe(chooser.wrapped)}, {chooser.batch_size})"
    if isinstance(chooser, TieredPriorityChooser):
        parts = [f"{p}: {_describe(c)}" for p, c in chooser.tiers]
        if chooser.default is not None:
            parts.append(f"default: {_describe(chooser.default)}")
        return f"Tiered[{', '.join(parts)}]"
    if isinstance(chooser, DefaultChooser):
        return _describe(chooser.root)
    return type(chooser).__name__.removesuffix("Chooser")
