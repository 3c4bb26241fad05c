"""The stateful count job of the SIGKILL test (``task.class=tests.e2e._count_job:CountJob``).

Counts each word in the logged store ``counts``; for every input message sends
``"<partition>:<offset>"`` to ``seen`` (proof that it was processed at least once); at end of
stream sends every count to ``totals``. Output goes to the partition the task reads.
"""

from __future__ import annotations

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.task import EndOfStreamListenerTask, InitableTask, StreamTask

__all__ = ["CountJob"]

SEEN = SystemStream("filelog", "seen")
TOTALS = SystemStream("filelog", "totals")


class CountJob(StreamTask, InitableTask, EndOfStreamListenerTask):
    def init(self, context):
        self.counts = context.store("counts")
        self.partition = min(context.ssps).partition

    def process(self, envelope, collector, coordinator):
        word = envelope.message
        self.counts.put(word, (self.counts.get(word) or 0) + 1)
        collector.send(OutgoingMessageEnvelope(
            SEEN, f"{envelope.ssp.partition}:{envelope.offset}", partition=self.partition))

    def on_end_of_stream(self, collector, coordinator):
        with self.counts.all() as counts:
            for word, n in counts:
                collector.send(OutgoingMessageEnvelope(TOTALS, n, key=word, partition=self.partition))
