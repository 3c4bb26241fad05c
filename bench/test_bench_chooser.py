"""Chooser + SystemConsumers overhead per message on the file log, 8 SSPs.

Side by side in one run: (a) a plain loop that polls the 8 SSPs with one file-log consumer and
touches every envelope; (b) the same SSPs through ``SystemConsumers.choose()`` with the
DefaultChooser (round robin; and with priorities + batching). The goal is (b) >= 0.5x the
message rate of (a).

Run::

    .venv/bin/python -m pytest bench/test_bench_chooser.py --benchmark-enable -q -s

``test_side_by_side`` prints the rates, the ratio and the overhead per message.
"""

from __future__ import annotations

import time

import pytest

from weir.engine.consumers.consumers import SystemConsumers
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.stores.config import Config

pytest.importorskip("weir.engine.systems.filelog", reason="the file log system is not built yet")
from weir.engine.systems.registry import SystemRegistry  # noqa: E402

PARTITIONS = 8
PER_PARTITION = 25_000
TOTAL = PARTITIONS * PER_PARTITION
STREAM = SystemStream("filelog", "bench-chooser")
SSPS = [SystemStreamPartition("filelog", STREAM.stream, p) for p in range(PARTITIONS)]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-chooser")
    cfg = Config({"systems.filelog.factory": "filelog", "systems.filelog.root": str(root),
                  "task.inputs": str(STREAM)})
    reg = SystemRegistry(cfg)
    reg.admin("filelog").create_stream(StreamSpec(STREAM.stream, PARTITIONS))
    producer = reg.producer("filelog")
    producer.register("bench")
    producer.start()
    value = b"v" * 100
    for i in range(PER_PARTITION):
        key = b"k%07d" % i
        for p in range(PARTITIONS):
            producer.send("bench", OutgoingMessageEnvelope(STREAM, value, key=key, partition=p))
    producer.flush("bench")
    producer.stop()
    return reg


def plain_loop(reg) -> int:
    consumer = reg.consumer("filelog")
    for ssp in SSPS:
        consumer.register(ssp, 0)
    consumer.start()
    n = 0
    size = 0
    try:
        while n < TOTAL:
            for envelopes in consumer.poll(SSPS, 0.0).values():
                for envelope in envelopes:
                    size += envelope.size
                    n += 1
    finally:
        consumer.stop()
    return n


def system_consumers_loop(reg, extra: dict | None = None) -> int:
    cfg = reg.config.merged(extra or {})
    sc = SystemConsumers.from_registry(SystemRegistry(cfg), ["filelog"])
    for ssp in SSPS:
        sc.register(ssp, 0)
    sc.start()
    n = 0
    size = 0
    choose = sc.choose
    try:
        while n < TOTAL:
            envelope = choose(0.0)
            if envelope is not None:
                size += envelope.size
                n += 1
    finally:
        sc.stop()
    return n


def timed(fn, *args) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one run."""
    w0, c0 = time.perf_counter(), time.process_time()
    assert fn(*args) == TOTAL
    return time.perf_counter() - w0, time.process_time() - c0


def test_plain_poll_loop(benchmark, registry):
    assert benchmark.pedantic(plain_loop, args=(registry,), rounds=3, iterations=1) == TOTAL


def test_system_consumers_round_robin(benchmark, registry):
    assert benchmark.pedantic(system_consumers_loop, args=(registry,), rounds=3,
                              iterations=1) == TOTAL


def test_system_consumers_priorities_and_batching(benchmark, registry):
    extra = {"task.chooser.priorities.filelog.bench-chooser": "1", "task.chooser.batch.size": "100"}
    assert benchmark.pedantic(system_consumers_loop, args=(registry, extra), rounds=3,
                              iterations=1) == TOTAL


def test_side_by_side(registry):
    """Rounds interleaved (plain, rr, tiers, plain, ...), best of each; wall and CPU time
    (CPU time is steadier on a machine shared with other work)."""
    tiers = {"task.chooser.priorities.filelog.bench-chooser": "1", "task.chooser.batch.size": "100"}
    variants = {"plain poll loop": (plain_loop, registry),
                "SystemConsumers (rr)": (system_consumers_loop, registry),
                "SystemConsumers (tiers+batch)": (system_consumers_loop, registry, tiers)}
    best = {name: (float("inf"), float("inf")) for name in variants}
    for _ in range(5):
        for name, (fn, *args) in variants.items():
            wall, cpu = timed(fn, *args)
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    plain_wall, plain_cpu = best["plain poll loop"]
    print(f"\n{PARTITIONS} SSPs x {PER_PARTITION:,} records of 100 B, best of 5")
    for name, (wall, cpu) in best.items():
        print(f"{name:<30} wall {TOTAL / wall:>9,.0f} msg/s (ratio {plain_wall / wall:.2f})"
              f"   cpu {TOTAL / cpu:>9,.0f} msg/s (ratio {plain_cpu / cpu:.2f}, "
              f"overhead {(cpu - plain_cpu) / TOTAL * 1e6:.2f} us/msg)")
