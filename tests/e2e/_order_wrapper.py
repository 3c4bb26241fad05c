"""A task wrapper that records the order in which a job's tasks process messages (in-process
runs only): ``ORDER`` gets ``(stream, key)`` per processed message."""

from __future__ import annotations

import threading

from weir.engine.task import TaskWrapper

__all__ = ["ORDER", "RecordOrder"]

ORDER: list[tuple[str, object]] = []
_lock = threading.Lock()


class RecordOrder(TaskWrapper):
    def process(self, envelope, collector, coordinator):
        with _lock:
            ORDER.append((envelope.ssp.stream, envelope.key))
        return self.wrapped.process(envelope, collector, coordinator)
