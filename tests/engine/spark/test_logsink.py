"""The weirlog sink's commit, without Spark: each batch id reaches the file log once, whatever
came before (a replayed batch, a commit that died half-way), and a foreign writer is refused."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest

from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.spark.errors import SparkJobError
from weir.engine.spark.jobplan import JobPlan
from weir.engine.spark.logsource import LogSink, StagedRows
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config


@pytest.fixture
def sink(tmp_path):
    config = {"systems.filelog.factory": "filelog", "systems.filelog.root": str(tmp_path / "log")}
    registry = SystemRegistry(Config(config))
    registry.admin("filelog").create_stream(StreamSpec("out", 2))
    plan = JobPlan("j", "j-1", str(tmp_path / "ckpt"), config, {}, "", ())
    return LogSink(plan), registry


def stage(directory: Path, name: str, rows: list[tuple], task: int = 0) -> StagedRows:
    directory.mkdir(parents=True, exist_ok=True)
    batch = pa.RecordBatch.from_pydict({
        "system": [r[0] for r in rows], "stream": [r[1] for r in rows],
        "partition": pa.array([r[2] for r in rows], pa.int32()),
        "key": pa.array([r[3] for r in rows], pa.binary()),
        "value": pa.array([r[4] for r in rows], pa.binary()),
        "timestamp": pa.array([r[5] for r in rows], pa.int64())})
    buf = io.BytesIO()
    with pa.ipc.new_stream(buf, batch.schema) as w:
        w.write_batch(batch)
    path = directory / name
    path.write_bytes(buf.getvalue())
    return StagedRows(str(path), len(rows), task, 0)


def rows(n: int, partition: int, tag: str) -> list[tuple]:
    return [("filelog", "out", partition, f"{tag}{i}".encode(), b"v", i) for i in range(n)]


def log_contents(registry, partition: int) -> list[bytes]:
    ssp = SystemStreamPartition("filelog", "out", partition)
    consumer = registry.consumer("filelog")
    consumer.register(ssp, 0)
    consumer.start()
    out = []
    try:
        while True:
            got = consumer.poll([ssp], 0.05)
            if not got:
                return out
            out.extend(e.key for e in got[ssp])
    finally:
        consumer.stop()


def test_a_batch_is_written_once_and_a_replay_writes_nothing(sink, tmp_path):
    log_sink, registry = sink
    staging = tmp_path / "staged"
    first = [stage(staging, "a", rows(3, 0, "a")), stage(staging, "b", rows(2, 1, "b"), task=1)]
    assert log_sink.commit(0, first) == {"filelog.out": 5}
    replay = [stage(staging, "a2", rows(3, 0, "a")), stage(staging, "b2", rows(2, 1, "b"), 1)]
    assert log_sink.commit(0, replay) == {"filelog.out": 5}
    assert log_contents(registry, 0) == [b"a0", b"a1", b"a2"]
    assert log_contents(registry, 1) == [b"b0", b"b1"]
    assert not any(staging.iterdir())                    # staged files of both attempts gone


def test_a_commit_that_died_half_way_is_finished_exactly(sink, tmp_path):
    log_sink, registry = sink
    staging = tmp_path / "staged"
    first = [stage(staging, "a", rows(4, 0, "a"))]
    intent = log_sink._intent(7, first)                  # the dead commit got this far ...
    producer = registry.producer("filelog")
    producer.register("dead")
    producer.start()
    for key in (b"a0", b"a1"):                           # ... and appended two records
        producer.send("dead", OutgoingMessageEnvelope(
            SystemStream("filelog", "out"), b"v", key=key, partition=0, timestamp=0))
    producer.flush("dead")
    producer.stop()
    retry = [stage(staging, "a-retry", rows(4, 0, "different"))]
    log_sink.commit(7, retry)
    assert intent["staged"] == [first[0].path]
    assert log_contents(registry, 0) == [b"a0", b"a1", b"a2", b"a3"]


def test_another_writer_of_an_output_partition_is_refused(sink, tmp_path):
    log_sink, registry = sink
    staging = tmp_path / "staged"
    first = [stage(staging, "a", rows(2, 0, "a"))]
    log_sink._intent(3, first)
    producer = registry.producer("filelog")
    producer.register("other")
    producer.start()
    for i in range(5):
        producer.send("other", OutgoingMessageEnvelope(
            SystemStream("filelog", "out"), b"v", key=b"x%d" % i, partition=0, timestamp=0))
    producer.flush("other")
    producer.stop()
    with pytest.raises(SparkJobError, match="only writer"):
        log_sink.commit(3, first)
