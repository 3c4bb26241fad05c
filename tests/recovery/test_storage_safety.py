"""TaskStorageManager when the changelog, the OFFSET file or the local files are damaged.

Real RocksDB/LMDB directories and real file changelogs (``FileChangelog``) in one process; the
reliability suite (``tests/reliability``) does the same to real jobs through ``weir run``. The
rule under test: when the changelog cannot back the checkpoint, restore stops with a typed error
naming the offset and a safe next step, and no local file is deleted or changed; following the
advice gives the exact state.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.errors import (ChangelogDamagedError, ChangelogMismatchError,
                                  StoreRepairError)
from weir.recovery.offset_file import read_offset_file, write_offset_file
from weir.recovery.restore import Action, Repair
from weir.recovery.storage import ProgressMode, TaskStorageManager
from weir.stores.changelog import NO_OFFSET
from weir.stores.config import Config
from weir.testing import FileChangelog
from weir.stores.spec import StoreSpec

from tests.recovery.conftest import TASK, changelog_state, store_config

PERSISTENT = ["rocksdb", "lmdb"]


def contents(store) -> dict:
    with store.all() as it:
        return dict(it)


def tree(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (lock file aside) with a digest of its bytes."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != "WEIR.LOCK"}


def siblings(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.parent.iterdir())


def committed_task(make_task, engine: str, n: int = 40):
    """A task whose store holds ``n`` keys, committed (checkpoint C = n - 1) and closed cleanly
    (OFFSET says C). The changelog's batches hold five records each."""
    task = make_task(store_config(engine, cache=0))
    stores = task.open(None)
    put_in_batches(task, stores, [(f"k{i:02d}", i) for i in range(n)])
    checkpoint = task.commit()
    task.close()
    return task, checkpoint


def put_in_batches(task, stores, items) -> None:
    """Put ``items`` five at a time, each five flushed as one batch of the file changelog."""
    for i in range(0, len(items), 5):
        stores["counts"].put_all(items[i:i + 5])
        task.tsm.flush()


def batch_position(log_path: Path, offset: int) -> int:
    """Byte position of the batch that starts at ``offset`` in a file changelog."""
    with FileChangelog(log_path) as log:
        batches = log._batch_offsets  # noqa: SLF001 - test surgery
        return log._batch_positions[batches.index(offset)]  # noqa: SLF001


def cut_file_changelog(log_path: Path, keep_records: int,
                       position: int | None = None) -> None:
    """Cut a file changelog after its first ``keep_records`` records (a batch boundary)."""
    if position is None:
        position = batch_position(log_path, keep_records)
    with open(log_path, "r+b") as f:
        f.truncate(position)


# -- point 8: an OFFSET file never vouches for what its changelog cannot back -------------------

@pytest.mark.parametrize("engine", PERSISTENT)
def test_flush_with_a_changelog_reporting_no_offset_removes_the_offset_file(make_task, tmp_path,
                                                                          engine):
    task, _ = committed_task(make_task, engine, 5)
    assert read_offset_file(task.store_dir()).offset == 4
    # The store's files hold data, but its changelog (emptied: recreated under the store)
    # reports no newest offset at the next flush.
    config = Config(store_config(engine, cache=0))
    sink = FileChangelog(task.base / "changelogs" / "counts.log")
    emptied = FileChangelog(tmp_path / "recreated.log")
    tsm = TaskStorageManager(TASK, [StoreSpec.from_config(config, "counts")], task.base / "state",
                             {"counts": (sink, emptied)}, config, progress=ProgressMode.QUIET)
    tsm.open(None)
    assert contents(tsm.stores()["counts"]) == {}  # nothing in the changelog: nothing restored
    tsm.stores()["counts"].put("stale", 1)  # reaches the files, logged to the other file
    assert tsm.flush() == {"counts": NO_OFFSET}
    tsm.close()
    sink.close()
    assert read_offset_file(task.store_dir()) is None  # not "-1": nothing vouches for the files
    # The next start restores instead of reusing files the changelog does not describe.
    stores = task.open(Checkpoint({}, {"counts": NO_OFFSET}))
    assert task.stats().action is Action.REBUILD
    assert contents(stores["counts"]) == {}
    task.close()
    emptied.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_a_store_run_without_its_changelog_loses_its_offset_file(make_task, engine):
    task, checkpoint = committed_task(make_task, engine, 3)
    unlogged = make_task(store_config(engine, cache=0, logged=False))
    unlogged.open(Checkpoint({}, {}))["counts"].put("k00", 100)  # not in any changelog
    unlogged.close()
    assert read_offset_file(task.store_dir()) is None
    stores = task.open(checkpoint)
    assert task.stats().action is Action.REBUILD
    assert contents(stores["counts"]) == {"k00": 0, "k01": 1, "k02": 2}
    task.close()


# -- point 3: the changelog ends before the checkpoint ------------------------------------------

@pytest.mark.parametrize("engine", PERSISTENT)
def test_changelog_cut_before_the_checkpoint_stops_without_touching_the_local_copy(
        make_task, engine):
    task, checkpoint = committed_task(make_task, engine)
    before = tree(task.store_dir())
    cut_file_changelog(task.base / "changelogs" / "counts.log", keep_records=25)
    with pytest.raises(ChangelogMismatchError) as info:
        task.open(checkpoint)
    error = info.value
    assert (error.store, error.task, error.offset, error.checkpointed, error.newest) == (
        "counts", TASK, 25, 39, 24)
    assert error.local_offset == 39 and error.local_directory == str(task.store_dir())
    assert "changelog records 25..39 are missing" in str(error)
    assert "--keep-local" in str(error) and "nothing was changed" in str(error)
    assert tree(task.store_dir()) == before
    assert siblings(task.store_dir()) == ["Partition_0"]
    for log in task.logs.values():
        log.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_keep_local_repair_rewrites_the_missing_changelog_records_from_the_local_copy(
        make_task, engine):
    task, checkpoint = committed_task(make_task, engine)
    cut_file_changelog(task.base / "changelogs" / "counts.log", keep_records=25)
    stores = task.open(checkpoint, repairs={"counts": Repair.KEEP_LOCAL})
    assert task.stats().action is Action.REUSE and task.stats().realigned == 15
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(40)}
    assert task.log().newest_offset() == 39
    assert changelog_state(task.log()) == {k: v for k, v in _raw(task).items()}
    task.close()
    stores = task.open(checkpoint)  # the job starts again: the local copy is reused
    assert task.stats().action is Action.REUSE
    task.close()
    shutil.rmtree(task.base / "state")  # and the changelog alone gives the state back
    stores = task.open(checkpoint)
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(40)}
    task.close()


def _raw(task) -> dict[bytes, bytes]:
    """The open store's contents as bytes, read from its engine."""
    from weir.recovery.store_restore import bottom_engine  # noqa: PLC0415
    engine = bottom_engine(task.tsm.stores()["counts"], "counts")
    with engine.all() as it:
        return dict(it)


@pytest.mark.parametrize("engine", PERSISTENT)
def test_keep_local_repair_refuses_a_local_copy_its_offset_file_does_not_prove(make_task,
                                                                              engine):
    task, checkpoint = committed_task(make_task, engine)
    cut_file_changelog(task.base / "changelogs" / "counts.log", keep_records=25)
    (task.store_dir() / "OFFSET").unlink()
    before = tree(task.store_dir())
    with pytest.raises(StoreRepairError, match="keep-local needs a local copy proven"):
        task.open(checkpoint, repairs={"counts": Repair.KEEP_LOCAL})
    assert tree(task.store_dir()) == before
    for log in task.logs.values():
        log.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_accept_loss_repair_restores_what_the_changelog_proves_and_says_what_is_lost(
        make_task, engine):
    task, checkpoint = committed_task(make_task, engine)
    cut_file_changelog(task.base / "changelogs" / "counts.log", keep_records=25)
    (task.store_dir() / "OFFSET").unlink()  # nothing proves the local copy
    with pytest.raises(ChangelogMismatchError) as info:
        task.open(checkpoint)
    assert info.value.local_offset is None
    assert "--accept-loss" in str(info.value) and "--keep-local" not in str(info.value)
    assert "loses the effect of those 15 changelog records" in str(info.value)
    for log in task.logs.values():
        log.close()
    stores = task.open(checkpoint, repairs={"counts": Repair.ACCEPT_LOSS})
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(25)}
    assert task.log().newest_offset() == 39
    task.close()
    assert siblings(task.store_dir()) == ["Partition_0"]  # the old copy went after success
    shutil.rmtree(task.base / "state")
    stores = task.open(checkpoint)
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(25)}
    task.close()


def test_accept_loss_of_an_emptied_changelog_pads_it_with_a_tombstone_nobody_wrote(make_task):
    task, checkpoint = committed_task(make_task, "memory", 3)
    (task.base / "changelogs" / "counts.log").unlink()
    with pytest.raises(ChangelogMismatchError, match="is empty but the checkpoint covers"):
        task.open(checkpoint)
    for log in task.logs.values():
        log.close()
    stores = task.open(checkpoint, repairs={"counts": Repair.ACCEPT_LOSS})
    assert contents(stores["counts"]) == {}
    assert [v for _, _, v in task.log().read(0, 2)] == [None, None, None]
    task.close()


# -- point 3: a record of the changelog cannot be read -------------------------------------------

def damage_batch(log_path: Path, offset: int) -> None:
    """Flip a byte in the payload of the batch that starts at ``offset``."""
    position = batch_position(log_path, offset)
    with open(log_path, "r+b") as f:
        f.seek(position + 14)
        byte = f.read(1)
        f.seek(position + 14)
        f.write(bytes([byte[0] ^ 0xFF]))


def open_with_logs(task, checkpoint, before_restore=None, **kwargs):
    """``task.open`` with a hook between opening the changelog files and restoring."""
    config = task.config
    task.logs = {s.name: FileChangelog(task.base / "changelogs" / f"{s.name}.log")
                 for s in task.specs if s.logged}
    if before_restore is not None:
        before_restore()
    task.tsm = TaskStorageManager(TASK, task.specs, task.base / "state",
                                  {n: (log, log) for n, log in task.logs.items()}, config,
                                  progress=ProgressMode.QUIET, **kwargs)
    return task.tsm.open(checkpoint)


@pytest.mark.parametrize("engine", PERSISTENT)
def test_damage_found_while_rebuilding_puts_the_old_files_back(make_task, engine):
    task, checkpoint = committed_task(make_task, engine)
    (task.store_dir() / "OFFSET").unlink()  # as a crash leaves it: the store is rebuilt
    before = tree(task.store_dir())
    log_path = task.base / "changelogs" / "counts.log"
    pristine = log_path.read_bytes()
    with pytest.raises(ChangelogDamagedError) as info:
        open_with_logs(task, checkpoint, lambda: damage_batch(log_path, 15))
    error = info.value
    assert (error.offset, error.checkpointed) == (15, 39)
    assert "reading its changelog" in str(error) and "at or after offset 15" in str(error)
    assert "back from a backup" in error.advice[0]
    assert tree(task.store_dir()) == before  # nothing deleted, nothing half-written
    assert siblings(task.store_dir()) == ["Partition_0"]
    for log in task.logs.values():
        log.close()
    log_path.write_bytes(pristine)  # the first advice: the file back from a backup
    stores = task.open(checkpoint)
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(40)}
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_damage_after_the_checkpoint_is_reported_as_safe_to_cut(make_task, engine):
    task, checkpoint = committed_task(make_task, engine)
    stores = task.open(checkpoint)
    put_in_batches(task, stores, [(f"u{i}", i) for i in range(10)])  # uncommitted: 40..49
    task.tsm.flush()
    task.close()
    log_path = task.base / "changelogs" / "counts.log"
    cut_at = batch_position(log_path, 45)
    with pytest.raises(ChangelogDamagedError) as info:
        open_with_logs(task, checkpoint, lambda: damage_batch(log_path, 45))
    assert info.value.offset == 45
    assert "Only records after the checkpoint (45..49" in str(info.value)
    for log in task.logs.values():
        log.close()
    cut_file_changelog(log_path, 45, cut_at)  # following the advice
    stores = task.open(checkpoint)
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(40)}
    assert changelog_state(task.log()) == changelog_state_through(task, 39)
    task.close()


def changelog_state_through(task, offset: int) -> dict:
    state: dict = {}
    for _, key, value in task.log().read(0, offset):
        state[key] = value
    return {k: v for k, v in state.items() if v is not None}


# -- local files: rebuilds never delete first, OFFSET files that lie are caught -----------------

@pytest.mark.parametrize("engine", PERSISTENT)
def test_rebuild_sets_the_old_files_aside_and_removes_them_only_after_success(make_task,
                                                                             engine):
    task, checkpoint = committed_task(make_task, engine)
    (task.store_dir() / "OFFSET").unlink()
    seen = []
    from weir.recovery import store_restore
    real = store_restore.replay_runs

    def spy(*args, **kwargs):
        seen.append(siblings(task.store_dir()))
        return real(*args, **kwargs)

    store_restore.replay_runs = spy
    try:
        stores = task.open(checkpoint)
    finally:
        store_restore.replay_runs = real
    assert seen == [["Partition_0", "Partition_0.restore-aside"]]
    assert siblings(task.store_dir()) == ["Partition_0"]
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(40)}
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_an_interrupted_rebuild_is_finished_or_undone_at_the_next_start(make_task, engine):
    from weir.recovery._aside import SetAside
    task, checkpoint = committed_task(make_task, engine)
    (task.store_dir() / "OFFSET").unlink()
    SetAside.move(task.store_dir(), store="counts")  # killed right after setting aside ...
    (task.store_dir() / "partial").write_bytes(b"half a rebuild")  # ... and a bit later
    stores = task.open(checkpoint)
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(40)}
    task.close()
    assert siblings(task.store_dir()) == ["Partition_0"]
    assert not (task.store_dir() / "partial").exists()  # the partial rebuild went


@pytest.mark.parametrize("engine", PERSISTENT)
def test_an_offset_file_beside_files_it_was_not_written_for_is_not_trusted(make_task, engine):
    task, first = committed_task(make_task, engine, 10)
    backup = task.base / "backup"
    shutil.copytree(task.store_dir(), backup)  # the files at offset 9
    stores = task.open(first)
    stores["counts"].put_all([(f"k{i:02d}", 100 + i) for i in range(10)])
    second = task.commit()
    task.close()
    # Someone puts the old files back but keeps the newer OFFSET file (valid, offset 19).
    offset_file = (task.store_dir() / "OFFSET").read_bytes()
    shutil.rmtree(task.store_dir())
    shutil.copytree(backup, task.store_dir())
    (task.store_dir() / "OFFSET").write_bytes(offset_file)
    stores = task.open(second)
    assert task.stats().action is Action.REBUILD
    assert contents(stores["counts"]) == {f"k{i:02d}": 100 + i for i in range(10)}
    task.close()
    kept = [name for name in siblings(task.store_dir()) if ".kept-" in name]
    assert len(kept) == 1  # the suspicious files are kept, and the log said where


def test_a_deleted_lmdb_data_file_is_noticed_and_the_store_rebuilt(make_task):
    task, checkpoint = committed_task(make_task, "lmdb")
    (task.store_dir() / "data.mdb").unlink()  # LMDB would silently start an empty database
    stores = task.open(checkpoint)
    assert task.stats().action is Action.REBUILD
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(40)}
    task.close()


def test_rocksdb_files_that_no_longer_open_are_set_aside_and_rebuilt(make_task):
    task, checkpoint = committed_task(make_task, "rocksdb")
    sst = sorted(task.store_dir().glob("*.sst"))
    assert sst
    sst[0].unlink()
    stores = task.open(checkpoint)
    assert task.stats().action is Action.REBUILD
    assert contents(stores["counts"]) == {f"k{i:02d}": i for i in range(40)}
    task.close()
    assert any(".kept-" in name for name in siblings(task.store_dir()))


def test_offset_files_of_older_versions_without_a_marker_are_still_used(make_task):
    task, checkpoint = committed_task(make_task, "rocksdb", 5)
    write_offset_file(task.store_dir(), "counts", "filelog.counts-changelog", 4,
                      engine="rocksdb")
    assert read_offset_file(task.store_dir()).marker is None
    task.open(checkpoint)
    assert task.stats().action is Action.REUSE
    task.close()


def test_offset_file_records_the_engines_commit_marker(make_task):
    task, _ = committed_task(make_task, "lmdb", 5)
    assert read_offset_file(task.store_dir()).marker.startswith("lmdb-txn:")
