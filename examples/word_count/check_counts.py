"""Check the word count's outputs against its input: the last count emitted for every word
equals the number of times the word occurs in ``words``, however often the job was killed.

Run it in the directory of ``job.properties`` after the job ended. It also reports how many
counts were emitted more than once: by default outputs are at-least-once (a run killed after
sending a count and before its next commit sends it again when the restarted job reprocesses
that message), while the counts in the store are exact. With
``task.processing.guarantee=exactly_once`` none is: it reads committed data (the default
``isolation.level``), and then every word's counts are 1..n, each once.
"""

import sys
from collections import Counter
from pathlib import Path

from weir.engine.config.job import load_config
from weir.engine.model import SystemStream, SystemStreamPartition
from weir.engine.systems.registry import SystemRegistry


def read(registry: SystemRegistry, stream: str) -> list:
    """Every message of ``stream``, partition by partition, deserialized."""
    ss = SystemStream("filelog", stream)
    count = registry.partition_counts([ss])[ss]
    ssps = [SystemStreamPartition("filelog", stream, p) for p in range(count)]
    consumer = registry.consumer("filelog")
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    serdes = registry.serdes_for(ss)
    messages = []
    try:
        while True:
            got = consumer.poll(ssps, 0.1)
            envelopes = [e for envs in got.values() for e in envs if not e.is_end_of_stream]
            if not envelopes:
                return messages
            messages.extend(serdes.deserialize(e).message for e in envelopes)
    finally:
        consumer.stop()


def main() -> int:
    registry = SystemRegistry(load_config(Path(sys.argv[1] if len(sys.argv) > 1
                                               else "job.properties")))
    truth = Counter(m["word"] for m in read(registry, "words"))
    outputs = read(registry, "word-counts")
    last: dict[str, int] = {}
    for message in outputs:  # a word's counts all go to one partition, in order
        last[message["word"]] = message["count"]
    wrong = {w: (last.get(w), n) for w, n in truth.items() if last.get(w) != n}
    repeated = len(outputs) - sum(truth.values())
    kind = "at-least-once output" if repeated else "each count once"
    print(f"{len(truth):,} words, {sum(truth.values()):,} input messages, {len(outputs):,} "
          f"counts emitted ({repeated:,} emitted again after a restart: {kind})")
    if wrong:
        word, (got, want) = next(iter(wrong.items()))
        print(f"MISMATCH: {len(wrong):,} words have a wrong last count, e.g. {word}: {got} "
              f"instead of {want}")
        return 1
    print("every word's last count equals its occurrences in the input: nothing counted twice")
    return 0


if __name__ == "__main__":
    sys.exit(main())
