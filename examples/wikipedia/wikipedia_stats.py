"""hello-samza's WikipediaStatsStreamTask, ported to Weir.

Counts the edits of ``wikipedia-edits`` per window (``task.window.ms``): edits, bytes added,
unique titles, how often each flag was set, and the edits of all time kept in the RocksDB
store ``wikipedia-stats``; a task metric counts repeat edits of a title within a window.
Each window's counts go to ``wikipedia-stats``. The port keeps the Java original's structure
and behaviour, including its quirk: a flag's count starts at 0 on its first edit
(``counts.compute(k, (k, v) -> v == null ? 0 : v + 1)``), so every flag count is one less
than the edits that set it. docs/PORTING.md lists the changes:

* ``taskContext.getStore("wikipedia-stats")`` is ``context.store("wikipedia-stats")``;
* ``getTaskMetricsRegistry().newCounter("edit-counters", "repeat-edits")`` is
  ``context.metrics.counter("repeat-edits", group="edit-counters")`` (the group by keyword);
* Weir addition: ``on_end_of_stream`` sends the last, partial window when a bounded input
  ends (the Java job never ends, so its last window always comes).
"""

from __future__ import annotations

from weir import (EndOfStreamListenerTask, InitableTask, OutgoingMessageEnvelope, StreamTask,
                  SystemStream, WindowableTask)

__all__ = ["WikipediaStatsStreamTask"]

OUTPUT_STREAM = SystemStream("kafka", "wikipedia-stats")


class WikipediaStatsStreamTask(StreamTask, InitableTask, WindowableTask,
                               EndOfStreamListenerTask):
    def __init__(self):
        self.edits = 0
        self.byte_diff = 0
        self.titles: set[str] = set()
        self.counts: dict[str, int] = {}

    def init(self, context):
        self.store = context.store("wikipedia-stats")
        # Example metric: repeat edits of the same title within a single window.
        self.repeat_edits = context.metrics.counter("repeat-edits", group="edit-counters")

    def process(self, envelope, collector, coordinator):
        edit = envelope.message
        flags = edit["flags"]

        edits_all_time = self.store.get("count-edits-all-time") or 0
        self.store.put("count-edits-all-time", edits_all_time + 1)

        self.edits += 1
        self.byte_diff += edit["diff-bytes"]
        new_title = edit["title"] not in self.titles
        self.titles.add(edit["title"])

        for flag, value in flags.items():
            if value is True:
                self.counts[flag] = 0 if flag not in self.counts else self.counts[flag] + 1

        if not new_title:
            self.repeat_edits.inc()

    def window(self, collector, coordinator):
        self.counts["edits"] = self.edits
        self.counts["bytes-added"] = self.byte_diff
        self.counts["unique-titles"] = len(self.titles)
        self.counts["edits-all-time"] = self.store.get("count-edits-all-time")

        collector.send(OutgoingMessageEnvelope(OUTPUT_STREAM, self.counts))

        # Reset counts after windowing.
        self.edits = 0
        self.byte_diff = 0
        self.titles = set()
        self.counts = {}

    def on_end_of_stream(self, collector, coordinator):
        if self.edits:
            self.window(collector, coordinator)
