"""The README's word count: counts each word in a logged RocksDB store and emits each new count.

``task.class=word_count:WordCount`` in ``job.properties`` beside this file (``weir run`` puts
the config file's directory first on ``sys.path``).
"""

from weir import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream

COUNTS = SystemStream("filelog", "word-counts")


class WordCount(StreamTask, InitableTask):
    def init(self, context):
        self.counts = context.store("counts")          # stores.counts.* in the job config

    def process(self, envelope, collector, coordinator):
        word = envelope.message["word"]
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        collector.send(OutgoingMessageEnvelope(COUNTS, {"word": word, "count": count}, key=word))
