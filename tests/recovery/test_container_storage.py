"""ContainerStorageManager: every store of every task restored in parallel restore threads;
every store decided before any is changed; one failure closes the others and leaves the failed
store's directory as it was; its settings come from Samza's keys."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.container_storage import ContainerStorageManager, RestoreSettings
from weir.recovery.errors import ChangelogDamagedError, ChangelogMismatchError
from weir.recovery.restore import Action
from weir.recovery.storage import ProgressMode, TaskStorageManager
from weir.recovery.store_restore import RestoreOptions
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.testing import FileChangelog
from weir.stores.spec import StoreSpec

from tests.recovery.conftest import store_config
from tests.recovery.test_storage_safety import cut_file_changelog, damage_batch, tree

TASKS = ["Partition 0", "Partition 1", "Partition 2"]


class Job:
    """Three tasks, each with a logged RocksDB store and a logged LMDB store over real file
    changelogs, under ``base``; ``life()`` is one process life."""

    def __init__(self, base: Path, **extra: str):
        self.base = base
        self.config = Config({**store_config("rocksdb", name="r", cache=0),
                              **store_config("lmdb", name="l", cache=0), **extra})
        self.specs = [StoreSpec.from_config(self.config, n) for n in ("l", "r")]
        self.logs: dict = {}

    def log_path(self, task: str, store: str) -> Path:
        return self.base / "changelogs" / f"{task}-{store}.log"

    def managers(self, **kwargs) -> list[TaskStorageManager]:
        self.close_logs()
        out = []
        for task in TASKS:
            logs = {s.name: FileChangelog(self.log_path(task, s.name)) for s in self.specs}
            self.logs[task] = logs
            out.append(TaskStorageManager(task, self.specs, self.base / "state",
                                          {n: (log, log) for n, log in logs.items()},
                                          self.config, progress=ProgressMode.QUIET, **kwargs))
        return out

    def close_logs(self) -> None:
        for logs in self.logs.values():
            for log in logs.values():
                log.close()
        self.logs = {}

    def fill(self, n: int = 30) -> dict[str, Checkpoint]:
        """A first life: every store gets ``n`` keys (five per changelog batch); committed."""
        managers = self.managers()
        csm = ContainerStorageManager(managers, progress=ProgressMode.QUIET)
        stores = csm.restore({})
        checkpoints = {}
        for manager in managers:
            task = manager.task_name
            for i in range(0, n, 5):
                for store in ("l", "r"):
                    stores[task][store].put_all([(f"{task}/{store}/{k:02d}", k)
                                                 for k in range(i, i + 5)])
                manager.flush()
            checkpoints[task] = Checkpoint({("filelog", "in", 0): 0}, manager.flush())
        csm.close()
        return checkpoints

    def expected(self, task: str, store: str, n: int = 30) -> dict:
        return {f"{task}/{store}/{k:02d}": k for k in range(n)}


def _contents(store) -> dict:
    with store.all() as items:
        return dict(items)


def test_every_store_of_every_task_is_restored_exactly_in_parallel_threads(tmp_path):
    job = Job(tmp_path)
    checkpoints = job.fill()
    for task in TASKS:
        for store in ("l", "r"):
            (job.base / "state" / store / task.replace(" ", "_") / "OFFSET").unlink()
    threads = set()
    managers = job.managers()
    csm = ContainerStorageManager(managers, RestoreSettings(threads=4),
                                  progress=ProgressMode.QUIET)
    original = managers[0].restores

    def spy(checkpoint):  # record which threads run the restores
        jobs = original(checkpoint)
        for restore in jobs:
            run = restore.run
            restore.run = lambda *a, run=run, **k: (threads.add(threading.get_ident()),
                                                    run(*a, **k))[1]
        return jobs

    managers[0].restores = spy
    stores = csm.restore(checkpoints)
    assert csm.threads == 4 and len(threads) >= 1
    assert threading.get_ident() not in threads  # not the caller's thread
    for task in TASKS:
        for store in ("l", "r"):
            assert _contents(stores[task][store]) == job.expected(task, store)
    assert {(s.task, s.store) for s in csm.stats} == {(t, s) for t in TASKS for s in "lr"}
    assert all(s.action is Action.REBUILD and s.records == 30 for s in csm.stats)
    csm.close()
    job.close_logs()


def test_a_changelog_that_cannot_back_its_checkpoint_stops_before_any_store_changes(tmp_path):
    job = Job(tmp_path)
    checkpoints = job.fill()
    for task in TASKS:  # every store must be rebuilt ...
        for store in ("l", "r"):
            (job.base / "state" / store / task.replace(" ", "_") / "OFFSET").unlink()
    before = tree(job.base / "state")
    cut_file_changelog(job.log_path("Partition 2", "r"), 10)  # ... and the last one cannot be
    csm = ContainerStorageManager(job.managers(), progress=ProgressMode.QUIET)
    with pytest.raises(ChangelogMismatchError) as err:
        csm.restore(checkpoints)
    assert (err.value.task, err.value.store) == ("Partition 2", "r")
    assert tree(job.base / "state") == before  # not one store was set aside or rebuilt
    job.close_logs()


def test_a_store_failing_midway_closes_the_others_and_puts_its_old_files_back(tmp_path):
    job = Job(tmp_path)
    checkpoints = job.fill()
    for task in TASKS:
        for store in ("l", "r"):
            (job.base / "state" / store / task.replace(" ", "_") / "OFFSET").unlink()
    failing = job.base / "state" / "r" / "Partition_1"
    before = tree(failing)
    managers = job.managers()
    pristine = job.log_path("Partition 1", "r").read_bytes()
    damage_batch(job.log_path("Partition 1", "r"), 15)  # after the changelog files are open
    csm = ContainerStorageManager(managers, RestoreSettings(threads=3),
                                  progress=ProgressMode.QUIET)
    with pytest.raises(ChangelogDamagedError) as err:
        csm.restore(checkpoints)
    assert (err.value.task, err.value.store, err.value.offset) == ("Partition 1", "r", 15)
    assert tree(failing) == before
    assert sorted(p.name for p in failing.parent.iterdir()) == [
        "Partition_0", "Partition_1", "Partition_2"]  # nothing set aside is left behind
    job.close_logs()
    # Every other store was closed: a new life opens them (their locks are free).
    job.log_path("Partition 1", "r").write_bytes(pristine)  # the segment from a backup
    csm = ContainerStorageManager(job.managers(), progress=ProgressMode.QUIET)
    stores = csm.restore(checkpoints)
    assert _contents(stores["Partition 1"]["r"]) == job.expected("Partition 1", "r")
    csm.close()
    job.close_logs()


def test_clean_on_container_start_rebuilds_a_valid_store_and_keeps_nothing_aside(tmp_path):
    job = Job(tmp_path, **{"stores.r.clean.on.container.start": "true"})
    checkpoints = job.fill()
    csm = ContainerStorageManager(job.managers(), progress=ProgressMode.QUIET)
    stores = csm.restore(checkpoints)
    actions = {(s.task, s.store): s.action for s in csm.stats}
    assert all(actions[(t, "r")] is Action.REBUILD for t in TASKS)
    assert all(actions[(t, "l")] is Action.REUSE for t in TASKS)
    assert _contents(stores["Partition 0"]["r"]) == job.expected("Partition 0", "r")
    assert sorted(p.name for p in (job.base / "state" / "r").iterdir()) == [
        "Partition_0", "Partition_1", "Partition_2"]
    csm.close()
    job.close_logs()


def test_a_store_without_changelog_is_kept_or_emptied_per_retain_existing_state(tmp_path):
    config = Config(store_config("rocksdb", name="plain", logged=False, cache=0))
    spec = StoreSpec.from_config(config, "plain")

    def life(retain: bool) -> dict:
        manager = TaskStorageManager("Partition 0", [spec], tmp_path, {}, config,
                                     progress=ProgressMode.QUIET,
                                     options=RestoreOptions(retain_existing_state=retain))
        csm = ContainerStorageManager([manager], progress=ProgressMode.QUIET)
        store = csm.restore({})["Partition 0"]["plain"]
        seen = _contents(store)
        store.put("k", len(seen) + 1)
        csm.close()
        return seen

    assert life(True) == {}
    assert life(True) == {"k": 1}
    assert life(False) == {}  # Samza's default for a store without changelog
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["Partition_0"]


def test_settings_use_samzas_keys_and_default_to_one_thread_per_core_and_store():
    settings = RestoreSettings.from_config(Config({
        "job.container.restore.thread.pool.size": "3",
        "job.container.restore.thread.pool.max.size": "2",
        "job.container.restore.batch.bytes": "1000",
        "task.transactional.state.retain.existing.state": "false"}))
    assert settings.pool_size(10) == 2 and settings.pool_size(1) == 1
    assert settings.options.budget_bytes == 1000
    assert settings.options.retain_existing_state is False
    default = RestoreSettings.from_config(Config({}))
    assert default.threads is None and default.worker_processes is True
    assert 1 <= default.pool_size(100) <= 64 and default.pool_size(1) == 1


@pytest.mark.parametrize("key", ["job.container.restore.thread.pool.size",
                                 "job.container.restore.batch.bytes"])
def test_bad_settings_name_their_key(key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        RestoreSettings.from_config(Config({key: "0"}))
