"""Checkpoints in a compacted stream: the stream checkpoint manager keeps the file manager's
rules (checksum, previous generation, never backwards, use-previous keeps what it replaces)."""

from __future__ import annotations

import pytest

from weir.recovery.checkpoint import (Checkpoint, CheckpointManager, FileCheckpointManager,
                                      decode_checkpoint, encode_checkpoint)
from weir.recovery.checkpoint_stream import (MemoryCheckpointLog, StreamCheckpointManager,
                                             record_key)
from weir.recovery.errors import CheckpointCorruptError, CheckpointRegressionError, RecoveryError
from weir.stores.changelog import NO_OFFSET

TASK = "Partition 0"
OTHER = "Partition 1"
CLICKS = ("filelog", "clicks", 0)


def _checkpoint(offset: int = 41, changelog: int = 17) -> Checkpoint:
    return Checkpoint({CLICKS: offset}, {"counts": changelog, "empty": NO_OFFSET},
                      {"watermark": 12.5})


def _manager(log: MemoryCheckpointLog, **kw) -> StreamCheckpointManager:
    mgr = StreamCheckpointManager(log, {TASK: 0, OTHER: 1}, **kw)
    mgr.register(TASK)
    mgr.register(OTHER)
    mgr.start()
    return mgr


@pytest.fixture
def log():
    return MemoryCheckpointLog()


def test_checkpoint_round_trips_through_the_stream_manager(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint())
    assert manager.read_last(TASK) == _checkpoint()
    assert manager.read_last(OTHER) is None
    assert _manager(log).read_last(TASK) == _checkpoint()  # a new manager reads the stream


def test_each_task_writes_only_its_own_partition(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint())
    manager.write(OTHER, _checkpoint(5))
    assert {p: len(r) for p, r in log.partitions.items()} == {0: 1, 1: 1}


def test_the_record_value_is_exactly_the_checkpoint_file_bytes(log, tmp_path):
    manager = _manager(log)
    manager.write(TASK, _checkpoint())
    ((key, value),) = log.partitions[0]
    assert key == b'{"task":"Partition 0","type":"checkpoint"}'
    # the same bytes a file manager reads: the two are interchangeable
    (tmp_path / "cp").mkdir()
    files = FileCheckpointManager(tmp_path / "cp")
    files.path_for(TASK).write_bytes(value)
    assert files.read_last(TASK) == _checkpoint()


def test_each_write_keeps_the_previous_checkpoint(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint(1))
    manager.write(TASK, _checkpoint(2))
    fresh = _manager(log)
    assert fresh.read_last(TASK).input_offsets[CLICKS] == 2
    assert fresh.read_previous(TASK).input_offsets[CLICKS] == 1
    assert fresh.has_previous(TASK)


def test_a_write_cut_after_the_previous_record_keeps_the_last_checkpoint(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint(1))
    manager.write(TASK, _checkpoint(2))
    # a crash between the two records of a write: only "previous = current last" made it
    last = log.partitions[0][-1][1]
    log.partitions[0].append((record_key("checkpoint-previous", TASK), last))
    assert _manager(log).read_last(TASK).input_offsets[CLICKS] == 2


def test_a_damaged_record_is_corruption_naming_the_stream_and_the_way_out(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint())
    key, value = log.partitions[0][-1]
    log.partitions[0][-1] = (key, value.replace(b"41", b"42"))
    with pytest.raises(CheckpointCorruptError) as err:
        _manager(log, job_config="job.properties").read_last(TASK)
    message = str(err.value)
    assert "memory checkpoint log partition 0" in message
    assert "Partition 0" in message and "weir checkpoint use-previous" in message


def test_a_record_of_another_task_under_this_key_is_refused(log):
    log.partitions[0] = [(record_key("checkpoint", TASK), encode_checkpoint(OTHER, _checkpoint()))]
    with pytest.raises(CheckpointCorruptError, match="belongs to task 'Partition 1'"):
        _manager(log).read_last(TASK)


def test_a_checkpoint_never_moves_an_input_offset_backwards(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint(10))
    before = list(log.partitions[0])
    with pytest.raises(CheckpointRegressionError):
        _manager(log).write(TASK, _checkpoint(9))
    assert log.partitions[0] == before


def test_a_reset_on_purpose_may_move_back_once(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint(10))
    manager = _manager(log)
    manager.allow_rewind(TASK, [CLICKS])
    manager.write(TASK, _checkpoint(3))
    with pytest.raises(CheckpointRegressionError):
        manager.write(TASK, _checkpoint(2))


def test_bound_identities_are_recorded_in_every_checkpoint_written(log):
    manager = _manager(log)
    manager.bind(TASK, inputs={CLICKS: "in-1"}, changelogs={"counts": "cl-1"})
    manager.write(TASK, _checkpoint())
    cp = _manager(log).read_last(TASK)
    assert cp.input_identities[CLICKS] == "in-1"
    assert cp.changelog_identities["counts"] == "cl-1"


def test_use_previous_keeps_the_replaced_checkpoint_under_its_own_key(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint(1))
    manager.write(TASK, _checkpoint(2))
    kept = _manager(log).use_previous(TASK, suffix="replaced-20250101T000000Z")
    assert kept == ('{"at":"replaced-20250101T000000Z","task":"Partition 0",'
                    '"type":"checkpoint-replaced"}')
    fresh = _manager(log)
    assert fresh.read_last(TASK).input_offsets[CLICKS] == 1
    _, replaced = decode_checkpoint(dict(log.partitions[0])[kept.encode()], source="test")
    assert replaced.input_offsets[CLICKS] == 2
    # a damaged last checkpoint is the reason to go back: still works
    assert fresh.read_entry(TASK).current is not None


def test_use_previous_refuses_without_a_previous_checkpoint(log):
    manager = _manager(log)
    manager.write(TASK, _checkpoint(1))
    with pytest.raises(CheckpointCorruptError, match="no previous checkpoint"):
        manager.use_previous(TASK)
    assert _manager(log).read_last(TASK).input_offsets[CLICKS] == 1


def test_task_names_and_entries_for_the_tools(log):
    manager = _manager(log)
    manager.write(OTHER, _checkpoint(3))
    assert _manager(log).task_names() == [OTHER]
    entry = _manager(log).read_entry(OTHER)
    assert entry.current.checkpoint == _checkpoint(3) and entry.previous is None
    assert "partition 1" in entry.location


def test_a_task_without_a_partition_is_refused_naming_the_known_tasks(log):
    with pytest.raises(RecoveryError, match="known tasks: Partition 0, Partition 1"):
        _manager(log).register("Partition 7")


def test_a_stopped_manager_refuses_use(log):
    manager = _manager(log)
    manager.stop()
    with pytest.raises(RecoveryError, match="stopped"):
        manager.read_last(TASK)


def test_the_stream_manager_satisfies_the_protocol(log):
    assert isinstance(_manager(log), CheckpointManager)
