"""Weir's streams and processing: config, model, systems, chooser, run loop, runners.

The task API and the stream model are imported eagerly (tasks import them); the runner, the
container and the system registry are re-exported lazily so ``import engine`` and the ``weir``
command stay fast.

Example::

    >>> from engine import StreamTask, SystemStream
    >>> class Upper(StreamTask):
    ...     def process(self, envelope, collector, coordinator):
    ...         collector.send(OutgoingMessageEnvelope(SystemStream("filelog", "out"),
    ...                                                envelope.message.upper()))
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import (
    CallbackTimeoutError,
    CorruptRecordError,
    DeserializationError,
    EngineError,
    PartitionLockedError,
    StreamNotFoundError,
    TaskError,
)
from .model import (
    NO_TIMESTAMP,
    EnvelopeKind,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    SystemStream,
    SystemStreamPartition,
    TaskName,
)
from .task import (
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    MessageCollector,
    RequestScope,
    ShutdownScope,
    StreamTask,
    TaskCallback,
    TaskContext,
    TaskCoordinator,
    TaskWrapper,
    WindowableTask,
)

__version__ = "0.1.0"

_LAZY = {
    "load_config": "engine.config",
    "JobConfig": "engine.config",
    "build_job_model": "engine.jobmodel",
    "JobModel": "engine.jobmodel",
    "run_job": "engine.runner",
    "JobResult": "engine.runner",
    "ExitCode": "engine.runner",
    "Container": "engine.container",
    "SystemRegistry": "engine.systems.registry",
    "chooser_from_config": "engine.chooser",
    "SystemConsumers": "engine.consumers",
    "RunLoop": "engine.runloop",
}

__all__ = [
    "__version__",
    "CallbackTimeoutError", "CorruptRecordError", "DeserializationError", "EngineError",
    "PartitionLockedError", "StreamNotFoundError", "TaskError",
    "NO_TIMESTAMP", "EnvelopeKind", "IncomingMessageEnvelope", "OutgoingMessageEnvelope",
    "SystemStream", "SystemStreamPartition", "TaskName",
    "AsyncStreamTask", "ClosableTask", "EndOfStreamListenerTask", "InitableTask",
    "MessageCollector", "RequestScope", "ShutdownScope", "StreamTask", "TaskCallback",
    "TaskContext", "TaskCoordinator", "TaskWrapper", "WindowableTask",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
