"""Checkpoints: the value type, the file format and the file checkpoint manager."""

from __future__ import annotations

import os
import pickle
import re

import orjson
import pytest

from weir.recovery.checkpoint import (Checkpoint, CheckpointManager, CorruptCheckpointPolicy,
                                 FileCheckpointManager, MemoryCheckpointManager,
                                 decode_checkpoint, encode_checkpoint)
from weir.recovery.errors import CheckpointCorruptError, RecoveryError
from weir.stores.changelog import NO_OFFSET

TASK = "Partition 0"


def _checkpoint(offset: int = 41, changelog: int = 17) -> Checkpoint:
    return Checkpoint({("filelog", "clicks", 0): offset, ("filelog", "views", 3): 7},
                      {"counts": changelog, "empty": NO_OFFSET},
                      {"eos": {"upstream": ["t1", "t2"]}, "watermark": 12.5})


@pytest.fixture
def manager(tmp_path):
    mgr = FileCheckpointManager(tmp_path / "checkpoints")
    mgr.register(TASK)
    mgr.start()
    yield mgr
    mgr.stop()


def test_checkpoint_round_trips_through_the_file_manager(manager):
    cp = _checkpoint()
    manager.write(TASK, cp)
    assert manager.read_last(TASK) == cp


def test_read_last_without_a_checkpoint_returns_none(manager):
    assert manager.read_last(TASK) is None


def test_checkpoint_accepts_ssp_named_tuples_and_looks_them_up_by_plain_tuple():
    from weir.engine.model import SystemStreamPartition
    ssp = SystemStreamPartition("filelog", "clicks", 2)
    cp = Checkpoint({ssp: 9}, {})
    assert cp.input_offsets[("filelog", "clicks", 2)] == 9
    assert cp.input_offsets[ssp] == 9


def test_checkpoint_is_immutable():
    cp = _checkpoint()
    with pytest.raises(TypeError):
        cp.input_offsets[("a", "b", 0)] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        cp.extras = {}  # type: ignore[misc]


def test_checkpoint_pickles_for_other_processes():
    cp = _checkpoint()
    assert pickle.loads(pickle.dumps(cp)) == cp


@pytest.mark.parametrize("inputs, changelogs, needle", [
    ({("s", "t", 0): -1}, {}, "input s.t#0"),
    ({("s", "t", 0): True}, {}, "input s.t#0"),
    ({("s", "t"): 1}, {}, "not a (system, stream, partition)"),
    ({}, {"counts": -2}, "store 'counts'"),
    ({}, {"counts": "5"}, "store 'counts'"),
])
def test_checkpoint_rejects_bad_offsets_naming_them(inputs, changelogs, needle):
    with pytest.raises(RecoveryError, match=re.escape(needle)):
        Checkpoint(inputs, changelogs)


def test_checkpoint_rejects_extras_that_are_not_json():
    with pytest.raises(RecoveryError, match="JSON-compatible"):
        Checkpoint({}, {}, {"bad": object()})


def test_file_is_readable_json_with_format_version_and_checksum(manager):
    manager.write(TASK, _checkpoint())
    doc = orjson.loads(manager.path_for(TASK).read_bytes())
    assert doc["format"] == 1
    assert len(doc["crc32c"]) == 8
    assert doc["checkpoint"]["task"] == TASK
    assert {"system": "filelog", "stream": "clicks", "partition": 0, "offset": 41} in \
        doc["checkpoint"]["input_offsets"]


def test_reindenting_the_file_keeps_it_valid(manager):
    manager.write(TASK, _checkpoint())
    path = manager.path_for(TASK)
    path.write_bytes(orjson.dumps(orjson.loads(path.read_bytes())))
    assert manager.read_last(TASK) == _checkpoint()


def test_each_write_keeps_the_previous_checkpoint(manager):
    manager.write(TASK, _checkpoint(1))
    manager.write(TASK, _checkpoint(2))
    manager.write(TASK, _checkpoint(3))
    assert manager.read_last(TASK) == _checkpoint(3)
    assert manager.read_previous(TASK) == _checkpoint(2)


def test_stray_temp_file_from_a_crash_before_rename_leaves_previous_checkpoint(manager):
    manager.write(TASK, _checkpoint(5))
    path = manager.path_for(TASK)
    # A writer killed between writing its temp file and renaming it leaves exactly this.
    stray = path.with_name(f"{path.name}.99999.tmp")
    stray.write_bytes(encode_checkpoint(TASK, _checkpoint(6))[:40])
    assert manager.read_last(TASK) == _checkpoint(5)
    restarted = FileCheckpointManager(manager.directory)
    restarted.register(TASK)
    restarted.start()
    assert not stray.exists()
    assert restarted.read_last(TASK) == _checkpoint(5)


def test_corrupt_checkpoint_error_names_the_file_and_the_way_out(manager):
    manager.write(TASK, _checkpoint())
    path = manager.path_for(TASK)
    data = bytearray(path.read_bytes())
    data[data.index(b'"offset": 41') + 11] = ord("9")  # flip one digit: 41 -> 49
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointCorruptError) as err:
        manager.read_last(TASK)
    message = str(err.value)
    assert str(path) in message
    assert "checksum" in message
    assert "delete it" in message and ".prev" in message


def test_truncated_checkpoint_file_is_reported_corrupt(manager):
    manager.write(TASK, _checkpoint())
    path = manager.path_for(TASK)
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(CheckpointCorruptError, match="not a valid checkpoint"):
        manager.read_last(TASK)


def test_corrupt_checkpoint_falls_back_to_previous_only_when_asked(tmp_path):
    mgr = FileCheckpointManager(tmp_path, on_corrupt=CorruptCheckpointPolicy.USE_PREVIOUS)
    mgr.register(TASK)
    mgr.start()
    mgr.write(TASK, _checkpoint(1))
    mgr.write(TASK, _checkpoint(2))
    mgr.path_for(TASK).write_bytes(b"{garbage")
    assert mgr.read_last(TASK) == _checkpoint(1)
    with pytest.raises(CheckpointCorruptError):
        FileCheckpointManager(tmp_path).read_last(TASK)


def test_checkpoint_of_another_task_is_refused(manager):
    manager.write("Partition 1", _checkpoint())
    os.replace(manager.path_for("Partition 1"), manager.path_for(TASK))
    with pytest.raises(CheckpointCorruptError, match="belongs to task 'Partition 1'"):
        manager.read_last(TASK)


def test_newer_format_asks_for_a_newer_weir():
    doc = orjson.loads(encode_checkpoint(TASK, _checkpoint()))
    doc["format"] = 99
    with pytest.raises(RecoveryError, match="newer"):
        decode_checkpoint(orjson.dumps(doc), source="x.json")


def test_task_names_with_slashes_and_spaces_get_distinct_files(manager):
    names = ["Partition 0", "Partition_0", "SystemStreamPartition [filelog, a/b, 0]"]
    for i, name in enumerate(names):
        manager.write(name, _checkpoint(i))
    assert [manager.read_last(n) for n in names] == [_checkpoint(i) for i in range(3)]
    assert sorted(manager.list_tasks()) == sorted(names)


def test_stopped_manager_refuses_use(manager):
    manager.stop()
    with pytest.raises(RecoveryError, match="stopped"):
        manager.write(TASK, _checkpoint())


def test_managers_satisfy_the_protocol(tmp_path):
    assert isinstance(FileCheckpointManager(tmp_path), CheckpointManager)
    memory = MemoryCheckpointManager()
    assert isinstance(memory, CheckpointManager)
    memory.write(TASK, _checkpoint())
    assert memory.read_last(TASK) == _checkpoint()
