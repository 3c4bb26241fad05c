"""Two containers (processes) of one job write ONE output partition through shared file-log
writers; the job is SIGKILLed at random points and run to the end.

The README's word count with ``job.container.count=2``: four tasks (two per container) send
every count to the single partition of ``word-counts``. With
``task.processing.guarantee=exactly_once`` (transactional producers of both containers
interleaving batches and markers in that partition) read committed holds each word's counts
1..n exactly once, in order; without it, the last count of every word is the truth and nothing
is missing (at least once).

``WEIR_SHARED_OUTPUT_KILLS`` kills per test (default 3).
"""

from __future__ import annotations

import os
import random
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from weir.engine.config.job import load_config
from weir.engine.model import SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry

from tests.e2e.test_exactly_once import ROOT, _kill_at, _start
from tests.e2e._words_input import produce_words

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("WEIR_SHARED_OUTPUT_KILLS", "3"))
PARTITIONS = 4


def _setup(tmp_path: Path, guarantee: str, messages: int) -> tuple[SystemRegistry, Counter]:
    text = (ROOT / "examples" / "word_count" / "job.properties").read_text()
    text += ("\ntask.commit.ms=200\njob.container.count=2\n"
             "systems.filelog.streams.word-counts.segment.bytes=65536\n"
             f"systems.filelog.root={tmp_path}/log\njob.data.dir={tmp_path}/data\n")
    if guarantee:
        text += f"task.processing.guarantee={guarantee}\n"
    (tmp_path / "job.properties").write_text(text)
    registry = SystemRegistry(load_config(tmp_path / "job.properties"))
    admin = registry.admin("filelog")
    admin.create_stream(StreamSpec("words", PARTITIONS, bounded=True))
    admin.create_stream(StreamSpec("word-counts", 1))          # every task writes here
    return registry, produce_words(registry, messages, 500, 7, PARTITIONS)


def _run_with_kills(tmp_path: Path, messages: int, seed: str) -> int:
    rng = random.Random(seed)
    targets = sorted(rng.uniform(0.05, 0.9) * messages for _ in range(KILLS))
    killed = sum(_kill_at(tmp_path, "word_count", ["words"], int(t), rng) for t in targets)
    final = _start(tmp_path, "word_count")
    output, _ = final.communicate(timeout=300)
    assert final.returncode == 0, output
    return killed


def _counts(registry: SystemRegistry) -> dict[str, list[int]]:
    consumer = registry.consumer("filelog")
    ssp = SystemStreamPartition("filelog", "word-counts", 0)
    consumer.register(ssp, 0)
    consumer.start()
    serdes = registry.serdes_for(SystemStream("filelog", "word-counts"))
    out: dict[str, list[int]] = defaultdict(list)
    try:
        while True:
            got = consumer.poll([ssp], 0.2)
            if not any(got.values()):
                return out
            for env in got.get(ssp, []):
                message = serdes.deserialize(env).message
                out[message["word"]].append(message["count"])
    finally:
        consumer.stop()


def test_two_containers_sharing_one_output_partition_are_exactly_once_under_sigkill(
        tmp_path):
    messages = 30_000
    registry, truth = _setup(tmp_path, "exactly_once", messages)
    assert _run_with_kills(tmp_path, messages, "shared-eos") >= 1
    emitted = _counts(registry)
    wrong = {w: (c[:5], truth[w]) for w, c in emitted.items()
             if c != list(range(1, truth[w] + 1))}
    assert not wrong, f"{len(wrong)} words are not 1..n exactly once, e.g. " \
                      f"{next(iter(wrong.items()))}"
    assert emitted.keys() == truth.keys()


def test_two_containers_sharing_one_output_partition_are_at_least_once_under_sigkill(
        tmp_path):
    messages = 30_000
    registry, truth = _setup(tmp_path, "", messages)
    _run_with_kills(tmp_path, messages, "shared-alo")
    emitted = _counts(registry)
    assert {w: c[-1] for w, c in emitted.items()} == dict(truth)
    for word, counts in emitted.items():  # every count 1..n is there (repeats allowed)
        assert set(counts) == set(range(1, truth[word] + 1)), word
