"""Tasks of the job benchmarks (bench/job_compare.py, bench/peers_e2e.py, bench/latency.py),
named in their configs as ``module:Class``."""

from __future__ import annotations

import os
import time

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.task import InitableTask, RequestScope, StreamTask

__all__ = ["PassThrough", "Count", "CountJson", "CountEmit", "CountEcho", "StopAtFirst"]

OUT = SystemStream("filelog", "bench-out")


class PassThrough(StreamTask):
    """Sends every message on to ``bench-out``, same key, same partition."""

    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message, key=envelope.key,
                                               partition=envelope.ssp.partition))


class Count(StreamTask, InitableTask):
    """Running count per message key in store ``counts`` (bytes keys, int64 counts)."""

    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        counts, key = self.counts, envelope.key
        counts.put(key, (counts.get(key) or 0) + 1)


class CountEmit(StreamTask, InitableTask):
    """The word count's shape: a running count per message key in store ``counts``, and
    every new count sent to ``bench-out`` (key: the message key, value: the count as int64
    bytes), same partition."""

    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        counts, key = self.counts, envelope.key
        n = (counts.get(key) or 0) + 1
        counts.put(key, n)
        collector.send(OutgoingMessageEnvelope(OUT, n.to_bytes(8, "little"), key=key,
                                               partition=envelope.ssp.partition))


class CountEcho(StreamTask, InitableTask):
    """bench/latency.py's job: a running count per message key in store ``counts`` (a logged
    store), and every message sent on with its count appended (8 bytes) to the stream named
    by the config's ``bench.output`` (default ``bench-out``), same key, same partition. The
    value starts with what the producer put there (its scheduled send time), so a consumer
    of the last stream of a chain of these jobs can time every record."""

    def init(self, context):
        self.counts = context.store("counts")
        self.out = SystemStream("filelog", context.config.get("bench.output", "bench-out"))

    def process(self, envelope, collector, coordinator):
        counts, key = self.counts, envelope.key
        n = (counts.get(key) or 0) + 1
        counts.put(key, n)
        collector.send(OutgoingMessageEnvelope(self.out, envelope.message + n.to_bytes(8, "little"),
                                               key=key, partition=envelope.ssp.partition))


class StopAtFirst(StreamTask):
    """Notes the time of the first message (``StopAtFirst.first_at``, ``time.perf_counter``,
    which on Linux is ``CLOCK_MONOTONIC``, one clock for every process) and asks the
    container to stop: bench/peers_e2e.py's start-up probe. With ``WEIR_BENCH_FIRST_AT`` set
    to a path, the time is also written there (the whole-process probe, ``weir run``); with
    ``WEIR_BENCH_FIRST_CPU``, the process's CPU time then (``time.process_time``)."""

    first_at: float | None = None

    def process(self, envelope, collector, coordinator):
        if StopAtFirst.first_at is None:
            StopAtFirst.first_at = time.perf_counter()
            path = os.environ.get("WEIR_BENCH_FIRST_AT")
            if path:
                with open(path, "w") as out:
                    out.write(repr(StopAtFirst.first_at))
            path = os.environ.get("WEIR_BENCH_FIRST_CPU")
            if path:  # bench/startup_cpu.py: this process's CPU seconds so far
                with open(path, "w") as out:
                    out.write(repr(time.process_time()))
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)


class CountJson(StreamTask, InitableTask):
    """bench/peers_e2e.py's JSON variant: a running count per ``message["k"]`` (a string; the
    input stream's ``json`` serde decoded the message) in store ``counts`` (string keys,
    int64 counts)."""

    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        counts, key = self.counts, envelope.message["k"]
        counts.put(key, (counts.get(key) or 0) + 1)
