"""A run loop with nothing to process ticks the control of the tasks whose source messages
moved event time: their watermarks (and what waits for them) go out at once instead of at the
next ``task.watermark.interval.ms`` -- which stays the interval under load. Here the interval
is an hour, so every watermark the reader sees came from an idle tick. A real container, a real
file log; the test waits for the watermark (bounded by the test timeout), nothing is timed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from weir.engine.container.container import Container
from weir.engine.jobmodel.model import build_job_model
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config

HOUR = "3600000"


@pytest.mark.parametrize("task", ["Recorder", "AsyncRecorder"])
def test_an_idle_loop_announces_the_watermark_its_source_messages_moved(tmp_path: Path, task):
    config = Config({
        "job.name": "idle-ticks", "task.class": f"tests.engine.runloop._control_tasks:{task}",
        "task.inputs": "filelog.views", "job.data.dir": str(tmp_path / "data"),
        "job.container.count": "1", "systems.filelog.root": str(tmp_path / "log"),
        "systems.filelog.default.stream.samza.offset.default": "oldest",
        "task.watermark.interval.ms": HOUR, "task.commit.ms": HOUR})
    registry = SystemRegistry(config)
    admin = registry.admin("filelog")
    admin.create_stream(StreamSpec("views", 1))
    admin.create_stream(StreamSpec("log", 1))
    model = build_job_model(config, registry.partition_counts([SystemStream("filelog", "views")]))
    container = Container(config, model, "0", registry=registry)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _run(container, errors))
    thread.start()
    try:
        producer = registry.producer("filelog")
        producer.register("test")
        for ts in (1_000, 2_000, 3_000):
            producer.send("test", OutgoingMessageEnvelope(SystemStream("filelog", "views"),
                                                          b"v", key=None, partition=0,
                                                          timestamp=ts))
        producer.stop()
        assert _watermark_reaching(registry, errors, 2_999) == 2_999
    finally:
        container.shutdown()
        thread.join(120)
    assert not errors, errors


def _run(container: Container, errors: list[BaseException]) -> None:
    try:
        container.run()
    except BaseException as exc:  # noqa: BLE001 - the test reports it
        errors.append(exc)


def _watermark_reaching(registry: SystemRegistry, errors: list[BaseException],
                       target: int) -> int:
    consumer = registry.consumer("filelog")
    ssp = SystemStreamPartition("filelog", "log", 0)
    consumer.register(ssp, 0)
    consumer.start()
    try:
        while True:
            assert not errors, errors
            for envelope in consumer.poll([ssp], 0.5).get(ssp, []):
                item = json.loads(envelope.message)
                if item[0] == "wm" and item[1] >= target:
                    return item[1]
    finally:
        consumer.stop()
