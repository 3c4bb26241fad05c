"""The second job of the exactly-once pipeline test (``tests/e2e/test_exactly_once.py``):
reads the word count's ``word-counts`` and, per word, counts the counts it has seen (a logged
store) and sends ``{"word", "count", "seen"}`` to ``word-count-checks``. End to end exactly
once, ``seen`` equals ``count`` and runs 1..n per word."""

from weir import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream

CHECKS = SystemStream("filelog", "word-count-checks")


class CountCheck(StreamTask, InitableTask):
    def init(self, context):
        self.seen = context.store("seen")

    def process(self, envelope, collector, coordinator):
        word = envelope.message["word"]
        seen = (self.seen.get(word) or 0) + 1
        self.seen.put(word, seen)
        collector.send(OutgoingMessageEnvelope(
            CHECKS, {"word": word, "count": envelope.message["count"], "seen": seen}, key=word))
