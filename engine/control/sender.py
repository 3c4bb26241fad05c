"""Sending control messages down intermediate streams (docs/CONTROL.md, "Who sends what").

A task that writes an intermediate stream sends its control messages through its own
message collector, so they are ordered with its user messages per partition and become
durable at the same commit. Each message goes to **every partition** of the stream, carrying
the sender's task name and the number of upstream tasks (``taskCount``):

* ``end_of_stream(stream)`` once every input feeding the stream has ended;
* ``watermark(stream, ts)`` whenever the sender's output watermark advances;
* ``drain(stream, run_id)`` when the sender drained;
* ``watermark_status(stream, status)`` when the sender's inputs feeding the stream went idle
  or resumed (docs/CONTROL.md, "Idle upstream tasks").

Samza instead sends one copy to an *aggregation partition* whose consumer re-broadcasts the
aggregate to the other partitions. Weir does not: the re-broadcast would make a downstream
task write its own input stream, which a split stage job must never do and the file log allows
from one process per partition only. The price is ``upstream tasks x partitions`` messages per
event instead of ``upstream tasks + partitions - 1``; with watermarks sent at most once per
``task.watermark.interval.ms`` that is small (see bench/RESULTS.md).

Example::

    >>> sent = []
    >>> class Collector:
    ...     def send(self, envelope): sent.append((envelope.partition, envelope.message))
    >>> sender = ControlMessageSender(Collector(), "Partition 0", lambda ss: 2)
    >>> sender.watermark(SystemStream("filelog", "p1"), 99, task_count=3)
    >>> sent[1]
    (1, WatermarkMessage(timestamp=99, task_name='Partition 0', task_count=3, version=1))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.engine.control.messages import (ControlMessage, DrainMessage, EndOfStreamMessage,
                                          WatermarkMessage, WatermarkStatus,
                                          WatermarkStatusMessage)
from weir.engine.model import SystemStream, make_outgoing

__all__ = ["ControlMessageSender"]


class ControlMessageSender:
    """Sends one task's control messages to every partition of a stream."""

    def __init__(self, collector: Any, task_name: str,
                 partition_count: Callable[[SystemStream], int]):
        self.collector = collector
        self.task_name = str(task_name)
        self._partition_count = partition_count
        self._counts: dict[SystemStream, int] = {}
        self.sent = 0

    def partitions(self, ss: SystemStream) -> int:
        count = self._counts.get(ss)
        if count is None:
            count = self._counts[ss] = self._partition_count(ss)
        return count

    def send(self, ss: SystemStream, message: ControlMessage) -> None:
        """One copy of ``message`` to every partition of ``ss``."""
        send = self.collector.send
        for partition in range(self.partitions(ss)):
            send(make_outgoing(ss, message, None, None, partition))
        self.sent += 1

    def watermark(self, ss: SystemStream, timestamp: int, *, task_count: int | None) -> None:
        self.send(ss, WatermarkMessage(timestamp, self.task_name, task_count))

    def end_of_stream(self, ss: SystemStream, *, task_count: int | None) -> None:
        self.send(ss, EndOfStreamMessage(self.task_name, task_count))

    def drain(self, ss: SystemStream, run_id: str, *, task_count: int | None) -> None:
        self.send(ss, DrainMessage(run_id, self.task_name, task_count))

    def watermark_status(self, ss: SystemStream, status: WatermarkStatus, *,
                         task_count: int | None) -> None:
        self.send(ss, WatermarkStatusMessage(status, self.task_name, task_count))
