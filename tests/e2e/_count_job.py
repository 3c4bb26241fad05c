"""The stateful count job of the SIGKILL test (``task.class=tests.e2e._count_job:CountJob``).

Counts each word in the logged store ``counts``; for every input message sends
``"<partition>:<offset>"`` to ``seen`` (proof that it was processed at least once); at end of
stream sends every count to ``totals``. Output goes to the partition the task reads.
"""

from __future__ import annotations

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.task import EndOfStreamListenerTask, InitableTask, StreamTask

__all__ = ["CountJob", "count_job_properties"]

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


_COUNT_JOB = {
    "task.inputs": "filelog.words",
    "systems.filelog.factory": "filelog",
    "systems.filelog.root": "log",
    "systems.filelog.samza.key.serde": "string",
    "systems.filelog.samza.msg.serde": "string",
    "systems.filelog.streams.totals.samza.msg.serde": "int64",
    "systems.filelog.default.stream.samza.offset.default": "oldest",
    "stores.counts.key.serde": "string",
    "stores.counts.msg.serde": "int64",
    "stores.counts.changelog": "filelog.counts-changelog",
    "stores.counts.object.cache.size": "16",
    "stores.counts.write.batch.size": "8",
}


def count_job_properties(engine: str, keys: dict[str, str]) -> str:
    """The ``job.properties`` text of a count job over ``filelog.words`` (string serdes,
    ``totals`` as int64) with its store ``counts`` on ``engine``, logged to
    ``filelog.counts-changelog`` with a small cache and write batch, so that restores and
    write-downs happen often; ``keys`` (the job's name, task class, commit interval, ...) are
    added and win."""
    lines = {"stores.counts.factory": engine, **_COUNT_JOB, **keys}
    return "".join(f"{k}={v}\n" for k, v in lines.items())

