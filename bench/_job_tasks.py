"""Tasks of the job benchmark (bench/job_compare.py), named in its configs as ``module:Class``."""

from __future__ import annotations

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.task import InitableTask, StreamTask

__all__ = ["PassThrough", "Count"]

OUT = SystemStream("filelog", "bench-out")


class PassThrough(StreamTask):
    """Sends every message on to ``bench-out``, same key, same partition."""

    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message, envelope.key,
                                               partition=envelope.ssp.partition))


class Count(StreamTask, InitableTask):
    """Running count per message key in store ``counts`` (bytes keys, int64 counts)."""

    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        counts, key = self.counts, envelope.key
        counts.put(key, (counts.get(key) or 0) + 1)
