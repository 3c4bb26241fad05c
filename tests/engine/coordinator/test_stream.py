"""The coordinator stream store on the real file log: bootstrap, deletes, compaction, catch-up,
read-your-writes, a writer in another process, and damaged records."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from weir.engine.coordinator.errors import CoordinatorStreamCorruptError, CoordinatorWriteError
from weir.engine.coordinator.messages import CoordinatorMessage, MessageType
from weir.engine.coordinator.stream import CoordinatorStreamStore
from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config

ROOT = Path(__file__).resolve().parents[3]
STREAM = "__samza_coordinator_cs-job_1"


def job_config(tmp_path: Path, **extra: str) -> Config:
    return Config({"job.name": "cs_job", "task.inputs": "filelog.words",
                   "systems.filelog.root": str(tmp_path / "log"), **extra})


def open_store(tmp_path: Path, **extra: str) -> CoordinatorStreamStore:
    return CoordinatorStreamStore.for_job(job_config(tmp_path, **extra), source="test")


def test_the_stream_is_created_with_one_compacted_partition_named_as_samza_names_it(tmp_path):
    store = open_store(tmp_path)

    assert store.create() is True
    assert store.create() is False
    admin = store.registry.admin("filelog")
    assert admin.partition_count(STREAM) == 1
    assert admin.stream_meta(STREAM).cleanup_policy.value == "compact"


def test_bootstrap_keeps_the_last_value_of_each_key_and_deletes_remove_keys(tmp_path):
    with open_store(tmp_path) as writer:
        writer.write([CoordinatorMessage.set_config("a", "1", source="t"),
                      CoordinatorMessage.set_config("b", "2", source="t"),
                      CoordinatorMessage.set_config("a", "3", source="t"),
                      CoordinatorMessage.delete(MessageType.SET_CONFIG, "b", source="t"),
                      CoordinatorMessage.set_changelog("Partition 0", 0, source="t")])

    with open_store(tmp_path) as store:
        assert store.bootstrap() == 5
        assert dict(store.config()) == {"a": "3"}
        assert store.config().origin("a") == f"coordinator stream {STREAM} offset 2"
        assert store.get(MessageType.SET_CHANGELOG, "Partition 0").value("Partition") == "0"
        assert store.types() == ["set-changelog", "set-config"]


def test_a_compacted_stream_reads_the_same_as_the_full_one(tmp_path):
    extra = {"systems.filelog.segment.bytes": "300", "systems.filelog.compaction.min.lag.ms": "0",
             "systems.filelog.compaction.tombstone.retention.ms": "0"}
    with open_store(tmp_path, **extra) as writer:
        for i in range(40):
            writer.write([CoordinatorMessage.set_config(f"k{i % 5}", str(i), source="t")])
        writer.write([CoordinatorMessage.delete(MessageType.SET_CONFIG, "k0", source="t")])
        writer.write([CoordinatorMessage.set_config("last", "x", source="t")])
        full = dict(writer.config())
    admin = SystemRegistry(job_config(tmp_path, **extra)).admin("filelog")
    admin.compact(STREAM)

    with open_store(tmp_path, **extra) as store:
        read = store.bootstrap()
        assert dict(store.config()) == full == {"k1": "36", "k2": "37", "k3": "38", "k4": "39",
                                                "last": "x"}
        assert read < 42  # compaction removed superseded records


def test_catch_up_returns_only_messages_written_since_and_writes_are_read_back(tmp_path):
    with open_store(tmp_path) as store, open_store(tmp_path) as other:
        store.write([CoordinatorMessage.set_config("a", "1", source="t")])
        assert store.config()["a"] == "1"  # read-your-writes
        other.bootstrap()
        store.write([CoordinatorMessage.set_config("b", "2", source="t")])

        caught = other.catch_up()

        assert [(m.key, m.value("value")) for m in caught] == [("b", "2")]
        assert other.catch_up() == []


def writer_holder(tmp_path, then: str) -> subprocess.Popen:
    """Another process that takes the coordinator stream's writer (``w``), prints ``locked``
    once it holds it, then runs the Python code ``then`` (its stdin is a pipe)."""
    return subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from weir.engine.systems.filelog import FileLogAdmin, FileLogSettings
from weir.stores.config import Config
admin = FileLogAdmin(FileLogSettings.from_config("filelog", Config({{"systems.filelog.root": {str(tmp_path / 'log')!r}}})))
w = admin.writer({STREAM!r}, 0)
print("locked", flush=True)
{then}
"""], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)


def test_a_writer_in_another_process_is_waited_for_then_the_write_goes_through(tmp_path):
    store = open_store(tmp_path, **{"job.coordinator.write.timeout.ms": "20000"})
    store.create()
    holder = writer_holder(tmp_path, "time.sleep(1.0)\nw.close()")
    try:
        assert holder.stdout.readline().strip() == "locked"
        store.write([CoordinatorMessage.set_config("a", "1", source="t")])
    finally:
        holder.wait(timeout=30)
    assert store.config()["a"] == "1"


def test_a_writer_that_never_lets_go_gives_a_write_error_naming_the_stream(tmp_path):
    store = open_store(tmp_path, **{"job.coordinator.write.timeout.ms": "200"})
    store.create()
    holder = writer_holder(tmp_path, "sys.stdin.read()")
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(CoordinatorWriteError, match=f"{STREAM}.*being written by another"):
            store.write([CoordinatorMessage.set_config("a", "1", source="t")])
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_message_over_the_size_limit_is_refused_before_anything_is_written(tmp_path):
    with open_store(tmp_path, **{"job.coordinator.max.message.bytes": "100"}) as store:
        with pytest.raises(CoordinatorWriteError, match="job.coordinator.max.message.bytes=100"):
            store.write([CoordinatorMessage.set_config("ok", "1", source="t"),
                         CoordinatorMessage.set_config("big", "x" * 200, source="t")])
        assert store.bootstrap() == 0 and store.next_offset == 0


def _append_raw(tmp_path: Path, key: bytes | None, value: bytes | None) -> None:
    registry = SystemRegistry(job_config(tmp_path))
    producer = registry.producer("filelog")
    producer.register("raw")
    producer.start()
    producer.send("raw", OutgoingMessageEnvelope(SystemStream("filelog", STREAM), value, key=key,
                                                 partition=0))
    producer.flush("raw")
    producer.stop()


def test_a_record_that_is_not_a_coordinator_message_gives_a_typed_error_naming_its_offset(tmp_path):
    with open_store(tmp_path) as store:
        store.write([CoordinatorMessage.set_config("a", "1", source="t"),
                     CoordinatorMessage.set_config("b", "2", source="t")])
    _append_raw(tmp_path, b'[1,"set-config","c"]', b'{"host": "h", "values": "oops"}')

    with open_store(tmp_path) as store, pytest.raises(CoordinatorStreamCorruptError) as info:
        store.bootstrap()

    assert info.value.offset == 2 and info.value.stream == STREAM
    assert f"coordinator stream '{STREAM}' offset 2" in str(info.value)
    assert "restore the stream's directory from a backup" in str(info.value)


def test_a_record_damaged_on_disk_gives_a_typed_error_naming_its_offset(tmp_path):
    with open_store(tmp_path) as store:
        store.write([CoordinatorMessage.set_config(f"k{i}", str(i), source="t") for i in range(3)])
    segment = next((tmp_path / "log" / STREAM / "0").glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[30] ^= 0xFF  # inside the first record's key
    segment.write_bytes(bytes(data))

    with open_store(tmp_path) as store, pytest.raises(CoordinatorStreamCorruptError) as info:
        store.bootstrap()

    assert info.value.offset == 0
    assert "fails its check" in str(info.value)


def test_the_tail_command_a_damaged_stream_advises_runs_as_given_from_anywhere(tmp_path):
    # It used to say `weir log tail <stream> --from N`, which looks in ./weir-data/log and
    # fails with "does not exist" wherever the job's file log is elsewhere.
    import re
    import shlex

    with open_store(tmp_path) as store:
        store.write([CoordinatorMessage.set_config(f"k{i}", str(i), source="t") for i in range(3)])
    segment = next((tmp_path / "log" / STREAM / "0").glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    with open_store(tmp_path) as store, pytest.raises(CoordinatorStreamCorruptError) as info:
        store.bootstrap()

    (command,) = re.findall(r"`(weir log tail [^`]*)`", str(info.value))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run([sys.executable, "-m", "weir", *shlex.split(command)[1:]],
                            cwd=elsewhere, capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "does not exist" not in result.stderr, result.stderr
    assert f"offset {info.value.offset}" in result.stderr  # it finds the stream and the damage
