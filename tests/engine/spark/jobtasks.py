"""Task classes for the tests of jobs on Spark (named in configs as ``module:Class``)."""

from __future__ import annotations

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.task import EndOfStreamListenerTask, InitableTask, RequestScope, StreamTask

__all__ = ["CountAndVote", "InitCounter"]


class CountAndVote(StreamTask, InitableTask, EndOfStreamListenerTask):
    """Counts words in store ``counts``; the message ``vote`` is this task's vote to stop
    (``shutdown(CURRENT_TASK)``), ``stop-all`` asks its container to stop at once
    (``ALL_TASKS_IN_CONTAINER``). At end of stream every count goes to
    ``<system>.counts-out``."""

    def init(self, context):
        self.counts = context.store("counts")
        ssp = min(context.ssps)
        self.system, self.partition = ssp.system, ssp.partition

    def process(self, envelope, collector, coordinator):
        word = envelope.message
        if word == "vote":
            coordinator.shutdown(RequestScope.CURRENT_TASK)
            return
        if word == "stop-all":
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)
            return
        self.counts.put(word, (self.counts.get(word) or 0) + 1)

    def on_end_of_stream(self, collector, coordinator):
        with self.counts.all() as it:
            for word, n in it:
                collector.send(OutgoingMessageEnvelope(
                    SystemStream(self.system, "counts-out"), n, key=word, partition=self.partition))


INITS: list[str] = []


class InitCounter(CountAndVote):
    """CountAndVote that records every ``init`` (a task object reused across batches is not
    initialised again)."""

    def init(self, context):
        INITS.append(str(context.task_name))
        super().init(context)
