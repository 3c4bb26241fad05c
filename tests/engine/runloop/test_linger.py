"""What a task sends reaches readers of the file log long before the next commit, in every
concurrency mode: the run loop writes out what the tasks sent when it goes idle, and the
producers' linger timer does it while the loop is busy. A real container, a real file log,
a reader in the test; commits an hour apart, so every record seen was written out before the
next commit. No timing: the test waits for the records (bounded by the test timeout)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from weir.engine.container.container import Container
from weir.engine.jobmodel.model import build_job_model
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.linger import LINGER
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config

from tests.engine import _jobs

HOUR = "3600000"
PARTITIONS = 2
N = 40

MODES = {
    "inline": {"task.class": "tests.engine._jobs:PassThrough"},
    "thread-pool": {"task.class": "tests.engine._jobs:PassThrough",
                    "job.container.thread.pool.size": "2"},
    "thread-pool-concurrency-4": {"task.class": "tests.engine._jobs:PassThrough",
                                  "job.container.thread.pool.size": "2",
                                  "task.max.concurrency": "4"},
    "callback": {"task.class": "tests.engine._jobs:PassThroughCallback"},
    "coroutine-concurrency-4": {"task.class": "tests.engine._jobs:PassThroughCoroutine",
                                "task.max.concurrency": "4"},
}


def _config(tmp_path: Path, linger_ms: str, **extra: str) -> Config:
    return Config({
        "job.name": "linger", "task.inputs": "fl.words",
        "job.data.dir": str(tmp_path / "data"), "job.container.count": "1",
        "systems.fl.factory": "filelog", "systems.fl.root": str(tmp_path / "log"),
        "systems.fl.default.stream.samza.offset.default": "oldest",
        "systems.fl.producer.linger.ms": linger_ms,
        "task.commit.ms": HOUR, **extra})


class Running:
    """A container running on a thread until :meth:`stop`."""

    def __init__(self, config: Config):
        self.registry = SystemRegistry(config)
        admin = self.registry.admin("fl")
        admin.create_stream(StreamSpec("words", PARTITIONS))
        admin.create_stream(StreamSpec("words-out", PARTITIONS))
        ssps = [SystemStream("fl", "words")]
        model = build_job_model(config, self.registry.partition_counts(ssps))
        self.container = Container(config, model, "0", registry=self.registry)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.container.run()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.error = exc

    def send(self, n: int) -> None:
        producer = self.registry.producer("fl")
        producer.register("test")
        for i in range(n):
            producer.send("test", OutgoingMessageEnvelope(SystemStream("fl", "words"),
                                                          b"m%03d" % i, key=b"k",
                                                          partition=i % PARTITIONS))
        producer.stop()   # flushed: the job reads them at once

    def read_outputs(self, n: int) -> list[bytes]:
        consumer = self.registry.consumer("fl")
        ssps = [SystemStreamPartition("fl", "words-out", p) for p in range(PARTITIONS)]
        for ssp in ssps:
            consumer.register(ssp, 0)
        consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < n:
                assert self.error is None, self.error
                for envelopes in consumer.poll(ssps, 0.5).values():
                    got += [e.message for e in envelopes]
        finally:
            consumer.stop()
        return got

    def commits(self) -> list[int]:
        return [inst.metrics.commits.count for inst in self.container.instances]

    def stop(self) -> None:
        self.container.shutdown()
        self.thread.join(120)
        assert self.error is None, self.error


@pytest.mark.parametrize("mode", list(MODES))
def test_what_a_task_sent_is_written_out_when_the_loop_goes_idle_in_every_mode(tmp_path, mode):
    # An hour of linger: only the run loop's idle write-out can make the outputs visible.
    running = Running(_config(tmp_path, HOUR, **MODES[mode]))
    try:
        running.send(N)
        got = running.read_outputs(N)
        assert sorted(got) == [b"m%03d" % i for i in range(N)]
        assert running.commits() == [1] * PARTITIONS   # the first one, at start: no other
    finally:
        running.stop()


def test_the_linger_timer_writes_out_while_a_task_keeps_the_loop_busy(tmp_path):
    _jobs.HOLD_RELEASE.clear()
    running = Running(_config(tmp_path, "1", **{
        "task.class": "tests.engine._jobs:HoldAfterSending", "task.max.concurrency": "8"}))
    try:
        running.send(4)          # every call stays in flight: the loop never goes idle
        assert sorted(running.read_outputs(4)) == [b"m%03d" % i for i in range(4)]
        assert running.commits() == [1] * PARTITIONS
    finally:
        _jobs.HOLD_RELEASE.set()
        running.stop()
        LINGER.write_out()
