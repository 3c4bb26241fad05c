"""The word-count jobs' input: random words keyed by themselves, sent to their key's partition
of a bounded ``filelog.words`` stream (shared by the e2e word-count tests)."""

from __future__ import annotations

import random
from collections import Counter

from weir.engine.model import OutgoingMessageEnvelope, SystemStream, partition_for

__all__ = ["produce_words"]

WORDS = SystemStream("filelog", "words")


def produce_words(registry, messages: int, vocabulary: int, seed: int,
                  partitions: int) -> Counter:
    """Send ``messages`` words drawn from ``vocabulary`` (``random.Random(seed)``) to
    ``filelog.words`` (created by the caller), end the stream; returns the words' counts."""
    rng = random.Random(seed)
    words = [f"w{rng.randrange(vocabulary):03d}" for _ in range(messages)]
    producer = registry.producer("filelog")
    producer.register("test")
    producer.start()
    serdes = registry.serdes_for(WORDS)
    for word in words:
        key = serdes.serialize_key(word)
        producer.send("test", OutgoingMessageEnvelope(
            WORDS, serdes.serialize_message({"word": word}), key=key,
            partition=partition_for(key, partitions)))
    producer.end_stream("words")
    producer.stop()
    return Counter(words)
