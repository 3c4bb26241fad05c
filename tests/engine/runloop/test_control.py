"""Control messages in the run loop, with low-level tasks: in-band reconciliation in order with
messages, ``on_watermark`` as a barrier on every dispatch path, the job stopping when every
input (direct and intermediate) ended, checkpointed bookkeeping, ``on_drain``."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from weir.engine.container.runner import ExitCode, run_job
from weir.engine.container.status import StatusMode
from weir.engine.control import (EndOfStreamMessage, WatermarkMessage, encode_control,
                                 write_drain_request)
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.checkpoint import FileCheckpointManager
from weir.recovery.storage import ProgressMode
from weir.stores.config import Config

pytestmark = pytest.mark.timeout(120)
INTER = SystemStream("filelog", "inter")


def job(tmp_path: Path, task: str, inputs: str = "filelog.inter", **extra) -> Config:
    values = {"job.name": "ll", "task.class": f"tests.engine.runloop._control_tasks:{task}",
              "task.inputs": inputs,
              "systems.filelog.root": str(tmp_path / "log"),
              "systems.filelog.default.stream.samza.offset.default": "oldest",
              "streams.inter.samza.system": "filelog",
              "streams.inter.samza.intermediate": "true",
              "streams.inter.intermediate.upstream.tasks": "2",
              "task.checkpoint.path": str(tmp_path / "cp"),
              "job.logged.store.base.dir": str(tmp_path / "st"),
              "job.non-logged.store.base.dir": str(tmp_path / "st"),
              "task.watermark.interval.ms": "20"}
    values.update({k.replace("__", "."): str(v) for k, v in extra.items()})
    return Config(values)


def write(config: Config, stream: str, partition: int, records) -> None:
    """``records``: bytes (already framed) written in order to one partition."""
    reg = SystemRegistry(config)
    producer = reg.producer("filelog")
    producer.register("test")
    producer.start()
    for rec in records:
        producer.send("test", OutgoingMessageEnvelope(SystemStream("filelog", stream), rec, key=None,
                                                      partition=partition))
    producer.stop()


def user(text: str) -> bytes:
    return b"\x00" + text.encode()


def ctl(message) -> bytes:
    return encode_control(message)


def setup(tmp_path, partitions=1):
    cfg = job(tmp_path, "Recorder")
    admin = SystemRegistry(cfg).admin("filelog")
    admin.create_stream(StreamSpec("inter", partitions))
    admin.create_stream(StreamSpec("log", partitions))
    return cfg


def read_log(config, partition=0):
    from tests.engine.app._pipeline import read_stream
    return [json.loads(v) for _, v, _, p in read_stream(SystemRegistry(config), SystemStream("filelog", "log"))
            if p == partition]


def run(config):
    result = run_job(config, status=StatusMode.OFF, progress=ProgressMode.QUIET)
    assert result.exit_code is ExitCode.OK, "\n".join(result.summary_lines())
    return result


def test_a_low_level_task_hears_watermarks_in_order_and_ends_when_every_upstream_task_ended(tmp_path):
    cfg = setup(tmp_path)
    write(cfg, "inter", 0, [
        user("a"), ctl(WatermarkMessage(10, "up0", 2)), user("b"),
        ctl(WatermarkMessage(7, "up1", 2)),          # min(10, 7) = 7: announced after b
        user("c"), ctl(WatermarkMessage(20, "up1", 2)),   # min(10, 20) = 10
        ctl(EndOfStreamMessage("up0", 2)), user("d"), ctl(EndOfStreamMessage("up1", 2))])
    result = run(cfg)
    assert read_log(cfg) == [["m", "a"], ["m", "b"], ["wm", 7], ["m", "c"], ["wm", 10],
                             ["wm", 20], ["m", "d"], ["wm", 2**63 - 1], ["eos"]]
    assert result.reason.startswith("ended (end-of-stream")
    cp = FileCheckpointManager(tmp_path / "cp").read_last("Partition 0")
    assert cp.input_offsets[("filelog", "inter", 0)] == 8    # control records count as processed
    state = cp.extras["control"]["endOfStream"]["filelog.inter#0"]
    assert state == {"tasks": ["up0", "up1"], "ended": True, "expected": 2}


def test_restarted_job_finds_its_ended_intermediate_partition_in_the_checkpoint(tmp_path):
    cfg = setup(tmp_path)
    write(cfg, "inter", 0, [user("a"), ctl(EndOfStreamMessage("up0", 2)),
                            ctl(EndOfStreamMessage("up1", 2))])
    run(cfg)
    second = run(cfg)       # nothing new to read: it would wait forever without the bookkeeping
    assert second.reason.startswith("ended (end-of-stream")
    assert read_log(cfg)[-1] == ["eos"]


def test_a_job_with_source_and_intermediate_inputs_stops_when_both_ended(tmp_path):
    cfg = job(tmp_path, "Recorder", inputs="filelog.inter,filelog.src")
    admin = SystemRegistry(cfg).admin("filelog")
    admin.create_stream(StreamSpec("inter", 1))
    admin.create_stream(StreamSpec("log", 1))
    admin.create_stream(StreamSpec("src", 1, bounded=True))
    write(cfg, "src", 0, [b"s1"])
    admin.end_stream("src")
    write(cfg, "inter", 0, [user("i1"), ctl(EndOfStreamMessage("up0", 2))])
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", run_job(
        cfg, status=StatusMode.OFF, progress=ProgressMode.QUIET)), daemon=True)
    t.start()
    t.join(1.0)
    assert t.is_alive()                     # the intermediate stream has not ended yet
    write(cfg, "inter", 0, [ctl(EndOfStreamMessage("up1", 2))])
    t.join(60)
    assert box["r"].exit_code is ExitCode.OK
    log = read_log(cfg)
    assert log[-1] == ["eos"] and ["m", "s1"] in log and ["m", "i1"] in log


@pytest.mark.parametrize("extra", [
    {"job.container.thread.pool.size": 2},
    {"job.container.thread.pool.size": 2, "task.max.concurrency": 4},
], ids=["pool", "pool-concurrency-4"])
def test_control_is_a_barrier_on_the_thread_pool(tmp_path, extra):
    cfg = setup(tmp_path).merged({k: str(v) for k, v in extra.items()})
    records = []
    for i in range(40):
        records.append(user(f"m{i}"))
        if i % 5 == 4:
            records += [ctl(WatermarkMessage(i, "up0", 2)), ctl(WatermarkMessage(i, "up1", 2))]
    records += [ctl(EndOfStreamMessage("up0", 2)), ctl(EndOfStreamMessage("up1", 2))]
    write(cfg, "inter", 0, records)
    run(cfg)
    log = read_log(cfg)
    wms = [e for e in log if e[0] == "wm"]
    assert [w[1] for w in wms] == [4, 9, 14, 19, 24, 29, 34, 39, 2**63 - 1]
    # every message before a watermark in the stream is logged before that watermark
    for i, entry in enumerate(log):
        if entry[0] == "wm" and entry[1] < 2**63 - 1:
            assert sorted(int(e[1][1:]) for e in log[:i] if e[0] == "m") == list(range(entry[1] + 1))


def test_control_is_a_barrier_for_coroutine_tasks_with_concurrency(tmp_path):
    cfg = setup(tmp_path).merged({"task.class": "tests.engine.runloop._control_tasks:AsyncRecorder",
                                  "task.max.concurrency": "8"})
    records = []
    for i in range(30):
        records.append(user(f"m{i}"))
        if i % 10 == 9:
            records += [ctl(WatermarkMessage(i, "up0", 2)), ctl(WatermarkMessage(i, "up1", 2))]
    records += [ctl(EndOfStreamMessage("up0", 2)), ctl(EndOfStreamMessage("up1", 2))]
    write(cfg, "inter", 0, records)
    run(cfg)
    log = read_log(cfg)
    wms = [e for e in log if e[0] == "wm"]
    assert [w[1] for w in wms] == [9, 19, 29, 2**63 - 1]
    assert all(w[2] == 0 for w in wms)          # nothing in flight during on_watermark
    for i, entry in enumerate(log):
        if entry[0] == "wm" and entry[1] < 2**63 - 1:
            assert len([e for e in log[:i] if e[0] == "m"]) == entry[1] + 1


def test_source_watermarks_of_a_low_level_listener_come_from_record_timestamps(tmp_path):
    cfg = job(tmp_path, "Recorder", inputs="filelog.src", task__watermark__max__out__of__orderness__ms=5)
    admin = SystemRegistry(cfg).admin("filelog")
    admin.create_stream(StreamSpec("log", 1))
    admin.create_stream(StreamSpec("src", 1, bounded=True))
    reg = SystemRegistry(cfg)
    producer = reg.producer("filelog")
    producer.register("t")
    producer.start()
    for ts in (100, 90, 130):
        producer.send("t", OutgoingMessageEnvelope(SystemStream("filelog", "src"), b"x", key=None,
                                                   partition=0, timestamp=ts))
    producer.end_stream("src")
    producer.stop()
    run(cfg)
    wms = [e[1] for e in read_log(cfg) if e[0] == "wm"]
    assert wms[-1] == 2**63 - 1 and all(w <= 124 for w in wms[:-1])
    assert wms == sorted(wms)


def test_on_drain_runs_instead_of_on_end_of_stream_and_the_job_stops(tmp_path):
    cfg = job(tmp_path, "Drainer", inputs="filelog.src", test__marker__dir=tmp_path,
              task__drain__poll__interval__ms=20)
    admin = SystemRegistry(cfg).admin("filelog")
    admin.create_stream(StreamSpec("src", 2, bounded=True))
    write(cfg, "src", 0, [b"a"] * 50)
    write(cfg, "src", 1, [b"b"] * 50)
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", run_job(
        cfg, status=StatusMode.OFF, progress=ProgressMode.QUIET)), daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "cp" / "Partition%201.json").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    write_drain_request(tmp_path / "cp" / "drain-request.json")
    t.join(60)
    assert box["r"].exit_code is ExitCode.OK
    assert sorted(p.name for p in tmp_path.glob("Partition*")) == ["Partition 0.drain",
                                                                   "Partition 1.drain"]
    # A redeploy runs normally: the stream was not ended, the drain was completed.
    admin.end_stream("src")
    again = run_job(cfg, status=StatusMode.OFF, progress=ProgressMode.QUIET)
    assert again.exit_code is ExitCode.OK and again.reason.startswith("ended (end-of-stream")
    assert (tmp_path / "Partition 0.eos").exists() and (tmp_path / "Partition 1.eos").exists()
    cp = FileCheckpointManager(tmp_path / "cp")
    assert all(cp.read_last(f"Partition {p}").input_offsets[("filelog", "src", p)] == 49
               for p in (0, 1))


def test_tasks_without_control_get_no_bookkeeping(tmp_path):
    from weir.engine.control.plane import ControlPlane
    plane = ControlPlane(Config({}))
    plain = type("Plain", (), {"process": lambda *a: None})()
    assert plane.task_control("Partition 0", [SystemStreamPartition("filelog", "x", 0)],
                              task=plain) is None
