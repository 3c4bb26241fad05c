"""Running tasks: the task instance (one task's collector, coordinator, stores and offsets)
and the run loop that dispatches messages, windows, commits and end-of-stream to them
(inline, on a thread pool, through callbacks or on an asyncio thread), reading from an
:class:`~weir.engine.runloop.source.EnvelopeSource`. Names are imported on first use, so a
module that needs only the source seam does not load the loop."""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

_LAZY = {
    "Coordinator": "weir.engine.runloop.coordinator",
    "InstanceContext": "weir.engine.runloop.context",
    "InstanceState": "weir.engine.runloop.instance",
    "ProducerCollector": "weir.engine.runloop.collector",
    "StoreDisposal": "weir.engine.runloop.instance",
    "TaskInstance": "weir.engine.runloop.instance",
    "RunLoop": "weir.engine.runloop.loop",
    "RunLoopConfig": "weir.engine.runloop.loop",
    "RunSummary": "weir.engine.runloop.loop",
    "StopReason": "weir.engine.runloop.loop",
    "EnvelopeSource": "weir.engine.runloop.source",
    "SourceCapability": "weir.engine.runloop.source",
    "NO_METRICS": "weir.engine.runloop.source",
}

__all__ = ["Coordinator", "InstanceContext", "InstanceState", "ProducerCollector",
           "StoreDisposal", "TaskInstance", "EnvelopeSource", "SourceCapability", "NO_METRICS",
           "RunLoop", "RunLoopConfig", "RunSummary", "StopReason"]

__getattr__ = lazy_exports(__name__, _LAZY, globals())
