"""Weir's streams and processing: config, model, systems, chooser, run loop, runners."""

from .errors import EngineError
from .model import (
    NO_TIMESTAMP,
    EnvelopeKind,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    SystemStream,
    SystemStreamPartition,
    TaskName,
)

__version__ = "0.1.0"

__all__ = ["__version__", "EngineError", "NO_TIMESTAMP", "EnvelopeKind", "IncomingMessageEnvelope",
           "OutgoingMessageEnvelope", "SystemStream", "SystemStreamPartition", "TaskName"]
