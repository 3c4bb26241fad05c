"""Weir: stateful stream processing for Python, in the lineage of Apache Samza.

This package is the install namespace (``weir.stores``, ``weir.recovery``, ``weir.engine``;
their sources are the repository's ``stores/``, ``recovery/`` and ``engine/`` folders) and
re-exports what a task author needs, so a task module imports from one place.

Example::

    >>> from weir import OutgoingMessageEnvelope, StreamTask, SystemStream
    >>> OUT = SystemStream("filelog", "upper")
    >>> class Upper(StreamTask):
    ...     def process(self, envelope, collector, coordinator):
    ...         collector.send(OutgoingMessageEnvelope(OUT, envelope.message.upper()))
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

from weir.engine.errors import (
    CallbackTimeoutError,
    CorruptRecordError,
    DeserializationError,
    EngineError,
    StreamNotFoundError,
    TaskError,
)
from weir.engine.model import (
    NO_TIMESTAMP,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    SystemStream,
    SystemStreamPartition,
    TaskName,
)
from weir.engine.task import (
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
    WatermarkListenerTask,
    DrainListenerTask,
)
from weir.stores.api import KeyValueIterator, KeyValueStore, ReadOnlyKeyValueStore
from weir.stores.errors import (
    ConfigError,
    NullKeyOrValueError,
    ReadOnlyStoreError,
    StoreClosedError,
    StoreError,
    WeirError,
)
from weir.stores.serdes import Serde

__version__ = "0.1.0"

# Heavier entry points load on first use, so ``import weir`` in a task module stays cheap.
_LAZY = {
    "load_config": "weir.engine.config.job",
    "run_job": "weir.engine.container.runner",
    "JobResult": "weir.engine.container.runner",
    "ExitCode": "weir.engine.container.runner",
}

__all__ = [
    "__version__",
    "AsyncStreamTask", "ClosableTask", "EndOfStreamListenerTask", "InitableTask",
    "MessageCollector", "RequestScope", "ShutdownScope", "StreamTask", "TaskCallback",
    "TaskContext", "TaskCoordinator", "TaskWrapper", "WindowableTask",
    "WatermarkListenerTask", "DrainListenerTask",
    "NO_TIMESTAMP", "IncomingMessageEnvelope", "OutgoingMessageEnvelope", "SystemStream",
    "SystemStreamPartition", "TaskName",
    "KeyValueIterator", "KeyValueStore", "ReadOnlyKeyValueStore", "Serde",
    "CallbackTimeoutError", "CorruptRecordError", "DeserializationError", "EngineError",
    "StreamNotFoundError", "TaskError",
    "ConfigError", "NullKeyOrValueError", "ReadOnlyStoreError", "StoreClosedError",
    "StoreError", "WeirError",
    *_LAZY,
]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
