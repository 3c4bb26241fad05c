"""Running tasks: the task instance (one task's collector, coordinator, stores and offsets)
and the run loop that dispatches messages, windows, commits and end-of-stream to them
(inline, on a thread pool, through callbacks or on an asyncio thread)."""

from weir.engine.runloop.instance import (
    Coordinator,
    InstanceState,
    ProducerCollector,
    StoreDisposal,
    TaskInstance,
)
from weir.engine.runloop.loop import EnvelopeSource, RunLoop, RunLoopConfig, RunSummary, StopReason

__all__ = ["Coordinator", "InstanceState", "ProducerCollector", "StoreDisposal", "TaskInstance",
           "EnvelopeSource", "RunLoop", "RunLoopConfig", "RunSummary", "StopReason"]
