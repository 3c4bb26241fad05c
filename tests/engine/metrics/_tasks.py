"""A task that keeps metrics of its own (every kind), for the reporter tests."""

from __future__ import annotations

from weir import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream

__all__ = ["EditStats"]


class EditStats(StreamTask, InitableTask):
    """Counts repeat titles (Samza's hello-samza metric), the largest diff (gauge), the diff
    sizes (histogram) and the time of a lookup (timer); passes each edit on."""

    def init(self, context):
        self.titles = set()
        self.repeats = context.metrics.counter("repeat-edits", group="edit-counters")
        self.largest = context.metrics.gauge("largest-diff", 0, group="edit-counters")
        self.sizes = context.metrics.histogram("diff-bytes", group="edit-counters")
        self.lookup = context.metrics.timer("lookup-ns", group="edit-counters")

    def process(self, envelope, collector, coordinator):
        edit = envelope.message
        with self.lookup.time():
            seen = edit["title"] in self.titles
        if seen:
            self.repeats.inc()
        self.titles.add(edit["title"])
        self.largest.set(max(self.largest.value(), edit["diff"]))
        self.sizes.update(edit["diff"])
        collector.send(OutgoingMessageEnvelope(SystemStream("filelog", "edits-out"), edit))
