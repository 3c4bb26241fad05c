"""Checkpoints: the value type, the file format and the file checkpoint manager."""

from __future__ import annotations

import os
import pickle
import re

import crc32c
import orjson
import pytest

from weir.recovery.checkpoint import (Checkpoint, CheckpointManager, CorruptCheckpointPolicy,
                                 FileCheckpointManager, MemoryCheckpointManager,
                                 decode_checkpoint, encode_checkpoint)
from weir.recovery.errors import CheckpointCorruptError, CheckpointRegressionError, RecoveryError
from weir.recovery.job_lock import JobLock
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
    assert doc["format"] == 2
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
    assert stray.exists()  # start() never removes temp files: one may be a live writer's
    assert restarted.read_last(TASK) == _checkpoint(5)
    with JobLock.acquire(manager.directory, job="t") as lock:
        assert restarted.remove_stray_temps(lock) == [stray]
    assert not stray.exists()
    assert restarted.read_last(TASK) == _checkpoint(5)


def test_stray_temps_are_removed_only_under_the_job_lock_of_that_directory(tmp_path, manager):
    other = tmp_path / "other"
    with JobLock.acquire(other, job="t") as lock:
        with pytest.raises(RecoveryError, match="needs the job lock"):
            manager.remove_stray_temps(lock)
    with pytest.raises(RecoveryError, match="needs the job lock"):
        manager.remove_stray_temps(lock)  # released


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
    assert "weir checkpoint use-previous" in message and ".prev" in message
    assert "weir checkpoint reset" in message
    assert "Do not delete the file" in message  # the old advice doubled every count


def test_a_flipped_format_digit_is_corruption_not_a_newer_weir(manager):
    manager.write(TASK, _checkpoint())
    path = manager.path_for(TASK)
    for digit in (b"1", b"3", b"9"):
        path.write_bytes(path.read_bytes().replace(b'"format": 2', b'"format": ' + digit, 1)
                         .replace(b'"format": 1', b'"format": ' + digit, 1)
                         .replace(b'"format": 3', b'"format": ' + digit, 1))
        with pytest.raises(CheckpointCorruptError, match="fails its checksum"):
            manager.read_last(TASK)


def test_format_1_files_are_still_read(manager):
    body = _checkpoint().to_json_body(TASK, written_at_ms=5)
    body.pop("changelog_identities")
    crc = f"{crc32c.crc32c(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)):08x}"
    manager.path_for(TASK).write_bytes(orjson.dumps(
        {"format": 1, "crc32c": crc, "checkpoint": body}))
    assert manager.read_last(TASK) == _checkpoint()


def test_identities_round_trip_and_old_checkpoints_have_none(manager):
    cp = Checkpoint({("filelog", "clicks", 0): 4}, {"counts": 2}, {},
                    {("filelog", "clicks", 0): "abc"}, {"counts": "def"})
    manager.write(TASK, cp)
    back = manager.read_last(TASK)
    assert back.input_identities == {("filelog", "clicks", 0): "abc"}
    assert back.changelog_identities == {"counts": "def"}
    assert _checkpoint().input_identities == {}


def test_bound_identities_are_recorded_in_every_checkpoint_written(manager):
    manager.bind(TASK, inputs={("filelog", "clicks", 0): "in-1"}, changelogs={"counts": "cl-1"})
    manager.write(TASK, _checkpoint())
    doc = orjson.loads(manager.path_for(TASK).read_bytes())["checkpoint"]
    assert {"system": "filelog", "stream": "clicks", "partition": 0, "offset": 41,
            "identity": "in-1"} in doc["input_offsets"]
    assert doc["changelog_identities"] == {"counts": "cl-1"}
    assert manager.read_last(TASK).input_identities[("filelog", "clicks", 0)] == "in-1"


def test_bound_changelog_partitions_are_recorded_and_read_back(manager):
    manager.bind(TASK, changelog_partitions={"counts": ("filelog", "counts-changelog", 3)})
    manager.write(TASK, _checkpoint())
    doc = orjson.loads(manager.path_for(TASK).read_bytes())["checkpoint"]
    assert doc["changelog_partitions"] == {
        "counts": {"system": "filelog", "stream": "counts-changelog", "partition": 3}}
    back = manager.read_last(TASK)
    assert back.changelog_partitions == {"counts": ("filelog", "counts-changelog", 3)}
    assert pickle.loads(pickle.dumps(back)) == back


def test_a_checkpoint_without_changelog_partitions_still_loads_as_unknown(manager):
    """Files written before the field existed (format 2 without it) read as they are."""
    body = _checkpoint().to_json_body(TASK, written_at_ms=5)
    assert "changelog_partitions" not in body
    covered = orjson.dumps({"checkpoint": body, "format": 2}, option=orjson.OPT_SORT_KEYS)
    manager.path_for(TASK).write_bytes(orjson.dumps(
        {"format": 2, "crc32c": f"{crc32c.crc32c(covered):08x}", "checkpoint": body}))
    back = manager.read_last(TASK)
    assert back == _checkpoint() and back.changelog_partitions == {}


def test_a_checkpoint_never_moves_an_input_offset_backwards(manager):
    manager.write(TASK, _checkpoint(41))
    before = manager.path_for(TASK).read_bytes()
    with pytest.raises(CheckpointRegressionError) as err:
        manager.write(TASK, _checkpoint(40))
    assert err.value.previous == 41 and err.value.offset == 40
    assert "filelog.clicks partition 0 back from offset 41 to 40" in str(err.value)
    assert manager.path_for(TASK).read_bytes() == before  # nothing written
    manager.write(TASK, _checkpoint(41))  # staying is fine, so is moving on
    manager.write(TASK, _checkpoint(42))


def test_the_rule_holds_for_a_new_manager_reading_the_file(manager):
    manager.write(TASK, _checkpoint(41))
    fresh = FileCheckpointManager(manager.directory)
    with pytest.raises(CheckpointRegressionError):
        fresh.write(TASK, _checkpoint(3))


def test_a_reset_on_purpose_may_move_back_once(manager):
    manager.write(TASK, _checkpoint(41))
    manager.allow_rewind(TASK, [("filelog", "clicks", 0)])
    manager.write(TASK, _checkpoint(3))
    with pytest.raises(CheckpointRegressionError):
        manager.write(TASK, _checkpoint(2))


def test_another_incarnation_of_the_stream_starts_its_offsets_over(manager):
    ssp = ("filelog", "clicks", 0)
    manager.write(TASK, Checkpoint({ssp: 41}, {}, {}, {ssp: "old"}))
    manager.write(TASK, Checkpoint({ssp: 3}, {}, {}, {ssp: "new"}))
    with pytest.raises(CheckpointRegressionError):
        manager.write(TASK, Checkpoint({ssp: 2}, {}, {}, {ssp: "new"}))


def test_the_memory_manager_keeps_the_same_rule():
    memory = MemoryCheckpointManager()
    memory.write(TASK, _checkpoint(41))
    with pytest.raises(CheckpointRegressionError):
        memory.write(TASK, _checkpoint(40))


def test_use_previous_keeps_the_replaced_file_and_never_leaves_the_task_without_one(manager):
    manager.write(TASK, _checkpoint(1))
    manager.write(TASK, _checkpoint(2))
    path = manager.path_for(TASK)
    path.write_bytes(b"{damaged")
    kept = manager.use_previous(TASK, suffix="replaced-x")
    assert kept == path.with_name(path.name + ".replaced-x")
    assert kept.read_bytes() == b"{damaged"
    assert manager.read_last(TASK) == _checkpoint(1)
    manager.write(TASK, _checkpoint(2))  # moving on from the older checkpoint


def test_use_previous_refuses_without_an_intact_previous_file(manager):
    manager.write(TASK, _checkpoint(1))
    with pytest.raises(CheckpointCorruptError, match="no previous checkpoint"):
        manager.use_previous(TASK)
    manager.write(TASK, _checkpoint(2))
    manager.previous_path_for(TASK).write_bytes(b"garbage")
    with pytest.raises(CheckpointCorruptError):
        manager.use_previous(TASK)
    assert manager.read_last(TASK) == _checkpoint(2)


def test_move_aside_moves_checkpoint_files_and_keeps_the_lock(tmp_path, manager):
    manager.write(TASK, _checkpoint(1))
    manager.write(TASK, _checkpoint(2))
    with JobLock.acquire(manager.directory, job="t"):
        moved = manager.move_aside(tmp_path / "aside")
        assert sorted(p.name for p in moved) == ["Partition%200.json", "Partition%200.json.prev"]
        assert [p.name for p in manager.directory.iterdir()] == ["JOB.LOCK"]
    assert manager.read_last(TASK) is None


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
    doc["format"] = 99  # what a newer Weir writes: its checksum covers its format number
    doc["crc32c"] = f"{crc32c.crc32c(orjson.dumps({'checkpoint': doc['checkpoint'], 'format': 99}, option=orjson.OPT_SORT_KEYS)):08x}"
    with pytest.raises(RecoveryError, match="newer") as err:
        decode_checkpoint(orjson.dumps(doc), source="x.json")
    assert not isinstance(err.value, CheckpointCorruptError)


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
