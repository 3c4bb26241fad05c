"""Weir's streams and processing: config, model, systems, chooser, run loop, runners.

The task API and the stream model are imported eagerly (tasks import them); the runner, the
container and the system registry are re-exported lazily so ``import weir.engine`` and the ``weir``
command stay fast.

Example::

    >>> from weir.engine import OutgoingMessageEnvelope, StreamTask, SystemStream
    >>> class Upper(StreamTask):
    ...     def process(self, envelope, collector, coordinator):
    ...         collector.send(OutgoingMessageEnvelope(SystemStream("filelog", "out"),
    ...                                                envelope.message.upper()))
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

from weir.engine.errors import (
    CallbackTimeoutError,
    ChangelogNotCompactedError,
    CorruptRecordError,
    DeserializationError,
    EngineError,
    PartitionLockedError,
    StreamIdentityMismatchError,
    StreamNotFoundError,
    TaskError,
)
from weir.engine.model import (
    NO_TIMESTAMP,
    EnvelopeKind,
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
    WatermarkListenerTask,
    WindowableTask,
    DrainListenerTask,
)

__version__ = "0.1.0"

_LAZY = {
    "load_config": "weir.engine.config.job",
    "JobConfig": "weir.engine.config.job",
    "build_job_model": "weir.engine.jobmodel.model",
    "JobModel": "weir.engine.jobmodel.model",
    "run_job": "weir.engine.container.runner",
    "JobResult": "weir.engine.container.runner",
    "ExitCode": "weir.engine.container.runner",
    "Container": "weir.engine.container.container",
    "SystemRegistry": "weir.engine.systems.registry",
    "chooser_from_config": "weir.engine.chooser",
    "SystemConsumers": "weir.engine.consumers.consumers",
    "RunLoop": "weir.engine.runloop.loop",
}

__all__ = [
    "__version__",
    "CallbackTimeoutError", "ChangelogNotCompactedError", "CorruptRecordError", "DeserializationError", "EngineError",
    "PartitionLockedError", "StreamIdentityMismatchError", "StreamNotFoundError", "TaskError",
    "NO_TIMESTAMP", "EnvelopeKind", "IncomingMessageEnvelope", "OutgoingMessageEnvelope",
    "SystemStream", "SystemStreamPartition", "TaskName",
    "AsyncStreamTask", "ClosableTask", "EndOfStreamListenerTask", "InitableTask",
    "MessageCollector", "RequestScope", "ShutdownScope", "StreamTask", "TaskCallback",
    "TaskContext", "TaskCoordinator", "TaskWrapper", "WindowableTask",
    "WatermarkListenerTask", "DrainListenerTask",
    *_LAZY,
]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
