"""TaskStorageManager over real RocksDB/LMDB directories and real file changelogs: every
registered engine (an engine registered with ``pytest -p <module>`` runs these too)."""

from __future__ import annotations

import logging
import shutil

import pytest

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.errors import RecoveryError
from weir.recovery.offset_file import read_offset_file, write_offset_file
from weir.recovery.restore import Action
from weir.recovery.storage import SETTLE_MS
from weir.stores.changelog import NO_OFFSET
from weir.stores.locking import DirectoryLock
from weir.stores.errors import StoreLockedError

from tests.recovery.conftest import TASK, changelog_state, store_config
from tests.stores.stacks import ENGINES, PERSISTENT
DAY = 86_400_000


def contents(store) -> dict:
    with store.all() as it:
        return dict(it)


@pytest.mark.parametrize("engine", ENGINES)
def test_restore_from_an_empty_changelog_gives_an_empty_store(make_task, engine):
    task = make_task(store_config(engine))
    stores = task.open(None)
    assert contents(stores["counts"]) == {}
    assert task.stats().records == 0
    assert task.tsm.flush() == {"counts": NO_OFFSET}
    task.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_restore_without_checkpoint_replays_the_whole_changelog(make_task, engine):
    task = make_task(store_config(engine))
    stores = task.open(None)
    for i in range(100):
        stores["counts"].put(f"k{i % 10}", i)
    stores["counts"].delete("k3")
    task.tsm.flush()
    task.close()
    shutil.rmtree(task.base / "state", ignore_errors=True)  # a new machine: only the changelog
    stores = task.open(None)
    assert contents(stores["counts"]) == {f"k{i}": 90 + i for i in range(10) if i != 3}
    assert task.stats().action in (Action.REBUILD, Action.REPLAY)
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_clean_restart_reuses_the_local_copy_without_replaying(make_task, engine):
    task = make_task(store_config(engine))
    stores, checkpoint = task.open_and_commit([("a", 1), ("b", 2)])
    task.close()
    stores = task.open(checkpoint)
    assert task.stats().action is Action.REUSE and task.stats().records == 0
    assert contents(stores["counts"]) == {"a": 1, "b": 2}
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_a_close_after_the_last_commit_keeps_the_offset_the_checkpoint_recorded(
        make_task, engine):
    """After the last commit the changelog moves on without the store (with exactly-once,
    the commit marker of the last transaction): the clean stop still leaves the store at the
    checkpoint's offset, and the next start reuses it."""
    task = make_task(store_config(engine))
    stores, checkpoint = task.open_and_commit([("a", 1), ("b", 2)])
    task.log().append(b"\x00marker", None)  # an offset the store's state does not change by
    task.log().flush()
    task.close()
    assert read_offset_file(task.store_dir()).offset == checkpoint.changelog_offsets["counts"]
    task.open(checkpoint)
    assert task.stats().action is Action.REUSE and task.stats().records == 0
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_local_copy_behind_the_checkpoint_replays_only_the_records_after_its_offset(
        make_task, engine):
    task = make_task(store_config(engine))
    task.open_and_commit([("a", 1), ("b", 2)])
    task.close()
    backup = task.base / "backup"
    shutil.copytree(task.base / "state", backup)  # the store as of changelog offset 1
    stores = task.open(None)
    stores["counts"].put_all([("b", 20), ("c", 30)])
    stores["counts"].delete("a")
    checkpoint = task.commit()
    task.close()
    shutil.rmtree(task.base / "state")
    shutil.copytree(backup, task.base / "state")  # put the older copy back
    stores = task.open(checkpoint)
    stats = task.stats()
    assert (stats.action, stats.start, stats.target) == (Action.CATCH_UP, 2, 4)
    assert stats.records == 3
    assert contents(stores["counts"]) == {"b": 20, "c": 30}
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_local_copy_newer_than_the_checkpoint_is_wiped_and_rebuilt(make_task, engine):
    task = make_task(store_config(engine))
    stores, committed = task.open_and_commit()
    stores["counts"].put_all([("a", 2), ("b", 5)])  # flushed, never checkpointed
    task.tsm.flush()
    task.close()
    assert read_offset_file(task.store_dir()).offset == 2
    stores = task.open(committed)
    assert task.stats().action is Action.REBUILD
    assert "uncommitted" in task.stats().reason
    assert contents(stores["counts"]) == {"a": 1}
    assert task.stats().trimmed_keys == 2
    task.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_trim_makes_a_later_restore_ignore_records_written_after_the_checkpoint(
        make_task, engine):
    task = make_task(store_config(engine))
    stores, committed = task.open_and_commit()
    stores["counts"].put_all([("a", 7), ("b", 5)])  # a crashed run's uncommitted writes
    task.tsm.flush()
    task.close()

    stores = task.open(committed)  # restart: back to the checkpoint, uncommitted reverted
    assert contents(stores["counts"]) == {"a": 1}
    stores["counts"].put("c", 3)
    second = task.commit()
    task.close()

    shutil.rmtree(task.base / "state", ignore_errors=True)  # force a full replay
    stores = task.open(second)
    assert contents(stores["counts"]) == {"a": 1, "c": 3}
    task.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_after_restore_the_changelog_describes_exactly_the_restored_store(make_task, engine):
    task = make_task(store_config(engine, cache=0))
    stores, committed = task.open_and_commit([(f"k{i}", i) for i in range(20)])
    for i in range(10, 30):
        stores["counts"].put(f"k{i}", -i)
    stores["counts"].delete("k0")
    task.tsm.flush()
    task.close()
    task.open(committed)
    from weir.stores.serdes import Int64Serde
    expected = {f"k{i}".encode(): Int64Serde().to_bytes(i) for i in range(20)}
    assert changelog_state(task.log()) == expected
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_stale_local_copy_is_rebuilt(make_task, engine):
    task = make_task(store_config(engine))
    stores, checkpoint = task.open_and_commit()
    task.close()
    offset = read_offset_file(task.store_dir())
    write_offset_file(task.store_dir(), "counts", offset.changelog, offset.offset,
                      engine=offset.engine, now_ms=offset.written_at_ms - DAY)  # a day older
    stores = task.open(checkpoint)
    assert task.stats().action is Action.REBUILD and task.stats().records == 1
    assert contents(stores["counts"]) == {"a": 1}
    task.close()


def test_switching_the_engine_of_a_store_rebuilds_it(make_task):
    task = make_task(store_config("rocksdb"))
    _, checkpoint = task.open_and_commit()
    task.close()
    task.config = type(task.config)(store_config("lmdb"))
    stores = task.open(checkpoint)
    assert task.stats().action is Action.REBUILD and "rocksdb engine" in task.stats().reason
    assert contents(stores["counts"]) == {"a": 1}
    task.close()


def test_staleness_limit_comes_from_the_store_config(make_task):
    cfg = store_config("rocksdb")
    cfg["stores.counts.changelog.staleness.ms"] = "1"
    task = make_task(cfg, clock=lambda: 1_000_000)
    _, checkpoint = task.open_and_commit()
    task.close()
    task.clock = lambda: 1_000_001
    task.open(checkpoint)
    assert task.stats().action is Action.REBUILD
    task.close()


def test_flush_refreshes_the_offset_file_of_an_idle_store_before_it_could_look_stale(make_task):
    now = [1_000_000]
    task = make_task(store_config("rocksdb"), clock=lambda: now[0])
    task.open(None)["counts"].put("a", 1)
    task.tsm.flush()
    now[0] += 1000
    task.tsm.flush()  # idle since the last flush: settled
    assert read_offset_file(task.store_dir()).written_at_ms == 1_001_000
    now[0] += 1000
    task.tsm.flush()  # nothing changed, file recent: left alone
    assert read_offset_file(task.store_dir()).written_at_ms == 1_001_000
    now[0] += DAY // 2
    task.tsm.flush()
    assert read_offset_file(task.store_dir()).written_at_ms == now[0]
    task.close()


def test_in_memory_logged_store_replays_its_changelog_on_every_open(make_task):
    task = make_task(store_config("memory"))
    stores, checkpoint = task.open_and_commit([("a", 1), ("b", 2)])
    task.close()
    for _ in range(2):
        stores = task.open(checkpoint)
        assert task.stats().action is Action.REPLAY and task.stats().records == 2
        assert contents(stores["counts"]) == {"a": 1, "b": 2}
        task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_a_write_reaching_the_engine_after_a_flush_removes_the_offset_file(make_task, engine):
    task = make_task(store_config(engine, cache=0))  # no cache: every put goes down at once
    stores, _ = task.open_and_commit([("z", 0)])
    task.tsm.flush()  # idle: settled
    assert read_offset_file(task.store_dir()).offset == 0
    stores["counts"].put("a", 1)
    assert read_offset_file(task.store_dir()) is None
    task.tsm.flush()
    task.tsm.flush()
    assert read_offset_file(task.store_dir()).offset == 1
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_cached_writes_keep_the_offset_file_until_they_are_written_down(make_task, engine):
    task = make_task(store_config(engine))
    stores, _ = task.open_and_commit([("z", 0)])
    task.tsm.flush()  # idle: settled
    stores["counts"].put("a", 1)
    assert read_offset_file(task.store_dir()) is not None
    task.close()


@pytest.mark.parametrize("engine", PERSISTENT)
def test_a_store_that_keeps_changing_is_settled_when_it_goes_idle_or_every_settle_interval(
        make_task, engine):
    now = [1_000_000]
    task = make_task(store_config(engine, cache=0), clock=lambda: now[0])
    stores = task.open(None)
    for i in range(3):  # a change before every commit: the file would vouch for nothing
        stores["counts"].put("a", i)
        assert task.tsm.flush() == {"counts": i}
        assert read_offset_file(task.store_dir()) is None and task.tsm.unsettled()
        now[0] += 100
    now[0] += SETTLE_MS
    stores["counts"].put("a", 3)
    task.tsm.flush()  # changed, but the last settle is SETTLE_MS old
    assert read_offset_file(task.store_dir()).offset == 3 and not task.tsm.unsettled()
    stores["counts"].put("a", 4)
    task.tsm.flush()
    assert read_offset_file(task.store_dir()) is None and task.tsm.unsettled()
    assert task.tsm.flush() == {"counts": 4}  # nothing new since: settled
    assert read_offset_file(task.store_dir()).offset == 4 and not task.tsm.unsettled()
    task.close()
    task.open(Checkpoint({}, {"counts": 4}))
    assert task.stats().action is Action.REUSE
    task.close()


def test_flush_returns_offsets_of_logged_stores_only(make_task):
    cfg = {**store_config("rocksdb"), **store_config("lmdb", name="plain", logged=False)}
    task = make_task(cfg)
    stores = task.open(None)
    stores["counts"].put("a", 1)
    stores["plain"].put("x", 9)
    assert task.tsm.flush() == {"counts": 0}
    assert read_offset_file(task.store_dir("plain")) is None
    task.close()


def test_persistent_store_without_changelog_is_kept_as_it_is(make_task):
    task = make_task(store_config("rocksdb", logged=False))
    task.open(None)["counts"].put("a", 1)
    task.close()
    stores = task.open(Checkpoint({}, {}))
    assert task.stats().action is Action.KEEP
    assert contents(stores["counts"]) == {"a": 1}
    task.close()


def test_store_directories_follow_samzas_layout(make_task):
    task = make_task(store_config("lmdb"))
    task.open(None)
    assert task.store_dir() == task.base / "state" / "counts" / "Partition_0"
    assert task.store_dir().is_dir()
    task.close()


def test_logged_store_without_its_changelog_is_a_clear_error(make_task, tmp_path):
    from weir.recovery.storage import TaskStorageManager
    from weir.stores.config import Config
    from weir.stores.spec import StoreSpec
    cfg = Config(store_config("memory"))
    with pytest.raises(RecoveryError, match="store 'counts'.*stores.counts.changelog"):
        TaskStorageManager(TASK, [StoreSpec.from_config(cfg, "counts")], tmp_path, {}, cfg)
    plain = Config(store_config("memory", logged=False))
    with pytest.raises(RecoveryError, match="not a logged store"):
        TaskStorageManager(TASK, [StoreSpec.from_config(plain, "counts")], tmp_path,
                           {"counts": (object(), object())}, plain)


@pytest.mark.parametrize("engine", PERSISTENT)
def test_rebuild_refuses_to_wipe_a_store_another_process_has_open(make_task, engine):
    task = make_task(store_config(engine))
    task.open(None)["counts"].put("a", 1)
    task.tsm.flush()
    task.close()
    (task.store_dir() / "OFFSET").unlink()  # forces a rebuild
    with DirectoryLock.acquire(task.store_dir(), store="counts"):
        with pytest.raises(StoreLockedError):
            task.open(None)
    for log in task.logs.values():
        log.close()


def test_using_the_manager_before_open_or_after_close_is_an_error(make_task):
    task = make_task(store_config("memory"))
    task.open(None)
    task.close()
    with pytest.raises(RecoveryError, match="closed"):
        task.tsm.stores()
    task.tsm.close()  # a second close does nothing


def test_restore_logs_one_summary_line_per_store(make_task, caplog):
    from weir.recovery.storage import ProgressMode
    task = make_task(store_config("rocksdb"))
    task.open(None)["counts"].put_all([(f"k{i}", i) for i in range(50)])
    task.tsm.flush()
    task.close()
    shutil.rmtree(task.base / "state")
    with caplog.at_level(logging.INFO, logger="weir.recovery.restore"):
        task.open(None, progress=ProgressMode.LOG)
        task.close()
    summaries = [r.getMessage() for r in caplog.records if "records/s" in r.getMessage()]
    assert len(summaries) == 1
    assert "store 'counts' of task 'Partition 0'" in summaries[0]
    assert "50 records" in summaries[0]
