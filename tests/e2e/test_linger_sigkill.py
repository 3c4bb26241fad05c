"""A job killed (SIGKILL) after its linger wrote outputs out, long before its next commit,
re-sends at most what followed its checkpoint: the outputs of messages its checkpoint covers
appear once, the others at most twice, and none is lost. A real `weir run`, a real file log.

The task echoes every message's partition and offset and asks for a commit at a marked
message; commits are otherwise an hour apart. The test waits until every output is visible
(written out by the linger, never committed past the marked message), kills the job, ends the
input and runs the job again to its end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from weir.engine.config.job import load_config
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry

from tests._processes import start_weir
from tests.e2e.test_job_sigkill import committed

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2            # as test_job_sigkill's (whose ``committed`` reads the checkpoints)
PER_PARTITION = 300
COMMIT_AT = 120           # the offset of the message "commit" in every partition
JOB = """\
job.name=linger-echo
task.class=tests.e2e._linger_job:EchoCommitAt
task.inputs=filelog.words
task.commit.ms=3600000
job.container.count=1
systems.filelog.factory=filelog
systems.filelog.root=log
systems.filelog.default.stream.samza.offset.default=oldest
"""


def _start(tmp_path: Path) -> subprocess.Popen:
    return start_weir(tmp_path, start_new_session=True)


def _echoes(registry: SystemRegistry, want: int) -> Counter:
    """Read ``echo`` until ``want`` records (or, with ``want`` 0, until it stays empty)."""
    consumer = registry.consumer("filelog")
    ssps = [SystemStreamPartition("filelog", "echo", p) for p in range(PARTITIONS)]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    seen: Counter = Counter()
    try:
        while True:
            got = consumer.poll(ssps, 0.2)
            if not got and (want == 0 or sum(seen.values()) >= want):
                return seen
            for envelopes in got.values():
                seen.update(e.message.decode() for e in envelopes)
    finally:
        consumer.stop()


def test_a_job_killed_after_its_linger_wrote_out_resends_only_what_followed_its_checkpoint(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.properties").write_text(JOB)
    registry = SystemRegistry(load_config(tmp_path / "job.properties"))
    admin = registry.admin("filelog")
    admin.create_stream(StreamSpec("words", PARTITIONS, bounded=True))
    admin.create_stream(StreamSpec("echo", PARTITIONS))
    producer = registry.producer("filelog")
    producer.register("test")
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.send("test", OutgoingMessageEnvelope(
                SystemStream("filelog", "words"), b"commit" if i == COMMIT_AT else b"m", key=None,
                partition=p))
    producer.flush("test")

    job = _start(tmp_path)
    try:
        _echoes(registry, PARTITIONS * PER_PARTITION)   # all visible, via the linger
        deadline = time.monotonic() + 120
        while committed(tmp_path) != {p: COMMIT_AT for p in range(PARTITIONS)}:
            assert time.monotonic() < deadline, committed(tmp_path)
            time.sleep(0.01)
    finally:
        os.killpg(job.pid, signal.SIGKILL)      # the machine loses the whole job at once
        output, _ = job.communicate(timeout=60)
    assert job.returncode == -signal.SIGKILL, output
    checkpointed = committed(tmp_path)
    assert checkpointed == {p: COMMIT_AT for p in range(PARTITIONS)}

    producer.end_stream("words")
    producer.stop()
    final = _start(tmp_path)
    output, _ = final.communicate(timeout=120)
    assert final.returncode == 0, output

    seen = _echoes(registry, 0)
    for p in range(PARTITIONS):
        for offset in range(PER_PARTITION):
            n = seen[f"{p}:{offset}"]
            if offset <= checkpointed[p]:
                assert n == 1, (p, offset, n)     # covered by the checkpoint: never again
            else:
                assert n == 2, (p, offset, n)     # written out before the kill, sent again
