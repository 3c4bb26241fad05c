"""Choosing the next message: the MessageChooser contract, the built-in choosers and the
DefaultChooser that composes them from config. See docs/CHOOSER.md."""

from .base import BaseMessageChooser, ChooserError, MessageChooser
from .batching import DEFAULT_BATCH_SIZE, BatchingChooser
from .bootstrapping import BootstrapLag, BootstrappingChooser
from .default import DefaultChooser, chooser_from_config
from .priority import TieredPriorityChooser
from .round_robin import RoundRobinChooser
from .spec import BOOTSTRAP_PRIORITY, ChooserSpec, Tiebreak, bootstrap_streams
from .time_aligned import TimeAlignedChooser

__all__ = [
    "MessageChooser",
    "BaseMessageChooser",
    "ChooserError",
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
