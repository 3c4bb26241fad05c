"""Choosing the next message: the MessageChooser contract, the built-in choosers and the
DefaultChooser that composes them from config. See docs/CHOOSER.md."""

from weir.engine.chooser.base import (NO_FAST_LANE, BaseMessageChooser, ChooserCapability,
                                      ChooserError, MessageChooser, chooser_capabilities)
from weir.engine.chooser.batching import DEFAULT_BATCH_SIZE, BatchingChooser
from weir.engine.chooser.bootstrapping import BootstrapLag, BootstrappingChooser
from weir.engine.chooser.default import DefaultChooser, chooser_from_config
from weir.engine.chooser.priority import TieredPriorityChooser
from weir.engine.chooser.round_robin import RoundRobinChooser
from weir.engine.chooser.spec import BOOTSTRAP_PRIORITY, ChooserSpec, Tiebreak, bootstrap_streams
from weir.engine.chooser.time_aligned import TimeAlignedChooser

__all__ = [
    "MessageChooser",
    "BaseMessageChooser",
    "ChooserError",
    "ChooserCapability",
    "NO_FAST_LANE",
    "chooser_capabilities",
    "RoundRobinChooser",
    "TimeAlignedChooser",
    "TieredPriorityChooser",
    "BatchingChooser",
    "DEFAULT_BATCH_SIZE",
    "BootstrapLag",
    "BootstrappingChooser",
    "DefaultChooser",
    "chooser_from_config",
    "ChooserSpec",
    "Tiebreak",
    "BOOTSTRAP_PRIORITY",
    "bootstrap_streams",
]
