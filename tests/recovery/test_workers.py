"""Restore worker processes: large replays of file-log changelogs run in other processes
(RocksDB: SST files ingested in order; LMDB: run files loaded in order) and give exactly the
state of an in-thread replay; damage read by a worker is reported like any damage; a dead
worker fails its restore and the old files come back; a restore SIGKILLed while it loads is
redone at the next start; workers die with their parent."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import CleanupPolicy, StreamSpec
from weir.engine.systems.changelog import SystemChangelogSink, SystemChangelogSource
from weir.engine.systems.filelog.segment import list_segments
from weir.engine.systems.registry import SystemRegistry
from weir.recovery._workers import RestoreWorkerError, RestoreWorkers
from weir.recovery.checkpoint import Checkpoint
from weir.recovery.container_storage import ContainerStorageManager, RestoreSettings
from weir.recovery.errors import ChangelogDamagedError, RecoveryError
from weir.recovery.restore import Action
from weir.recovery.storage import ProgressMode, TaskStorageManager
from weir.recovery.store_restore import RestoreOptions
from weir.stores.config import Config
from weir.stores.spec import StoreSpec

from tests.engine.systems.filelog.test_writer import _flip_byte

ROOT = Path(__file__).resolve().parents[2]
SSP = SystemStreamPartition("filelog", "cl", 0)
WORKERS = RestoreSettings(threads=2, options=RestoreOptions(worker_min_records=1,
                                                             budget_bytes=4096))


class Changelog:
    """A file-log changelog of one partition, small segments, written directly."""

    def __init__(self, tmp_path: Path, engine: str, *, create: bool = True):
        self.base = tmp_path
        self.config = Config({"systems.filelog.factory": "filelog",
                              "systems.filelog.root": str(tmp_path / "log"),
                              "systems.filelog.segment.bytes": "4096",
                              "stores.s.factory": engine, "stores.s.key.serde": "bytes",
                              "stores.s.msg.serde": "bytes", "stores.s.changelog": "filelog.cl",
                              "stores.s.object.cache.size": "0"})
        self.registry = SystemRegistry(self.config)
        if create:
            self.registry.admin("filelog").create_stream(StreamSpec("cl", 1,
                                                                    CleanupPolicy.COMPACT))
        self.spec = StoreSpec.from_config(self.config, "s")
        self.model: dict = {}
        self.records = 0

    def write(self, n: int, seed: int) -> None:
        rng = random.Random(seed)
        pairs = []
        for _ in range(n):
            key = b"k%05d" % rng.randrange(400)
            value = None if rng.random() < 0.1 else b"v" * rng.randrange(1, 40)
            pairs.append((key, value))
            self.model[key] = value
        with self.registry.admin("filelog").writer("cl", 0) as writer:
            writer.append_all(pairs)
            writer.flush()
        self.records += n

    def write_fixed(self, n: int, seed: int) -> list[tuple[bytes, bytes | None]]:
        """``n`` records of one shape (12-byte keys, 20-byte values: the restore reads them a
        chunk at a time), a key written many times, with a tombstone every 97 records; the
        pairs written, in order."""
        rng = random.Random(seed)
        pairs = [(b"key-%08d" % rng.randrange(700),
                  None if i % 97 == 0 else b"value-%014d" % i) for i in range(n)]
        self.model.update(pairs)
        with self.registry.admin("filelog").writer("cl", 0) as writer:
            writer.append_all(pairs)
            writer.flush()
        self.records += n
        return pairs

    def expected(self) -> dict:
        return {k: v for k, v in self.model.items() if v is not None}

    def manager(self, options: RestoreOptions = WORKERS.options) -> tuple:
        producer = self.registry.producer("filelog")
        producer.register("t")
        producer.start()
        sink = SystemChangelogSink(producer, SSP, "t")
        source = SystemChangelogSource(self.registry, SSP)
        manager = TaskStorageManager("Partition 0", [self.spec], self.base / "state",
                                     {"s": (sink, source)}, self.config,
                                     progress=ProgressMode.QUIET, options=options)
        return manager, producer

    def restore(self, checkpoint=None, settings: RestoreSettings = WORKERS):
        manager, producer = self.manager(settings.options)
        csm = ContainerStorageManager([manager], settings, progress=ProgressMode.QUIET)
        try:
            stores = csm.restore({"Partition 0": checkpoint})
        except BaseException:
            producer.stop()
            raise
        return csm, stores["Partition 0"]["s"], producer

    @property
    def store_dir(self) -> Path:
        return self.base / "state" / "s" / "Partition_0"


def _contents(store) -> dict:
    with store.all() as items:
        return dict(items)


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_a_rebuild_in_worker_processes_holds_exactly_the_changelogs_state(tmp_path, engine):
    log = Changelog(tmp_path, engine)
    log.write(3000, seed=1)
    assert len(list_segments(str(tmp_path / "log" / "cl" / "0"))) > 5
    csm, store, producer = log.restore()
    try:
        assert csm.worker_processes == 2  # the range is split over both workers
        (stats,) = csm.stats
        assert (stats.action, stats.records) == (Action.REBUILD, 3000)
        assert _contents(store) == log.expected()
        assert sorted(p.name for p in log.store_dir.parent.iterdir()) == ["Partition_0"]
    finally:
        csm.close()
        producer.stop()


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_a_catch_up_in_workers_loads_over_the_local_copy(tmp_path, engine):
    """Later parts override earlier ones and the local copy, deletes included."""
    log = Changelog(tmp_path, engine)
    log.write(1500, seed=2)
    csm, _, producer = log.restore()
    csm.close()
    producer.stop()
    log.write(1500, seed=3)  # the local copy is now 1500 records behind
    csm, store, producer = log.restore()
    try:
        (stats,) = csm.stats
        assert (stats.action, stats.start, stats.records) == (Action.CATCH_UP, 1500, 1500)
        assert _contents(store) == log.expected()
    finally:
        csm.close()
        producer.stop()


def test_a_restore_to_a_checkpoint_replays_in_workers_and_trims_later_records(tmp_path):
    log = Changelog(tmp_path, "lmdb")
    log.write(2000, seed=4)
    committed = dict(log.model)
    log.write(300, seed=5)  # written after the checkpoint by a run that crashed
    checkpoint = Checkpoint({("filelog", "in", 0): 9}, {"s": 1999})
    csm, store, producer = log.restore(checkpoint)
    try:
        (stats,) = csm.stats
        assert stats.trimmed_records == 300
        assert _contents(store) == {k: v for k, v in committed.items() if v is not None}
    finally:
        csm.close()
        producer.stop()


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_damage_read_by_a_worker_is_reported_at_its_offset_and_the_old_files_come_back(
        tmp_path, engine):
    log = Changelog(tmp_path, engine)
    log.write(3000, seed=6)
    csm, _, producer = log.restore()
    csm.close()
    producer.stop()
    (log.store_dir / "OFFSET").unlink()  # as a crash leaves it: rebuilt
    before = sorted(p.name for p in log.store_dir.iterdir())
    segment = list_segments(str(tmp_path / "log" / "cl" / "0"))[2]
    _flip_byte(segment.path, 30)
    with pytest.raises(ChangelogDamagedError) as err:
        log.restore()
    assert err.value.offset == segment.base and err.value.path == segment.path
    assert sorted(p.name for p in log.store_dir.iterdir()) == before
    assert sorted(p.name for p in log.store_dir.parent.iterdir()) == ["Partition_0"]


@pytest.mark.parametrize("settings", [WORKERS, RestoreSettings(threads=1)],
                         ids=["workers", "in-thread"])
@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_a_changelog_of_fixed_width_records_restores_exactly_its_state(tmp_path, engine,
                                                                       settings):
    """Records of one shape are parsed a chunk at a time: the last write of a key wins, a
    tombstone deletes, in workers (several parts) and in the restore thread alike."""
    log = Changelog(tmp_path, engine)
    log.write_fixed(4000, seed=11)
    log.write(200, seed=12)        # records of other shapes between the stretches
    log.write_fixed(3000, seed=13)
    csm, store, producer = log.restore(settings=settings)
    try:
        (stats,) = csm.stats
        assert (stats.action, stats.records) == (Action.REBUILD, 7200)
        assert _contents(store) == log.expected()
    finally:
        csm.close()
        producer.stop()


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_damage_inside_a_stretch_of_fixed_width_records_is_reported_at_its_offset(tmp_path,
                                                                                  engine):
    log = Changelog(tmp_path, engine)
    log.write_fixed(4000, seed=14)
    segment = list_segments(str(tmp_path / "log" / "cl" / "0"))[2]
    record = 8 + 8 + 4 + 12 + 4 + 20        # one framed record of this shape
    _flip_byte(segment.path, 5 * record + 30)  # a key byte of the segment's sixth record
    with pytest.raises(ChangelogDamagedError) as err:
        log.restore()
    assert (err.value.changelog, err.value.partition) == ("filelog.cl", 0)
    assert err.value.offset == segment.base + 5 and err.value.path == segment.path
    assert err.value.position == 5 * record
    assert not log.store_dir.exists() or not (log.store_dir / "OFFSET").exists()


def _die(report) -> None:  # a job that kills its worker process
    os._exit(9)


def _echo(value, report) -> int:
    report(value, 1, 2)
    return value * 2


def test_a_worker_that_dies_fails_its_job_and_the_pool():
    seen = []
    with RestoreWorkers(1) as workers:
        assert workers.submit(_echo, 21, progress=lambda *a: seen.append(a)).result(30) == 42
        future = workers.submit(_die)
        with pytest.raises(RestoreWorkerError, match="died"):
            future.result(30)
        with pytest.raises(RestoreWorkerError):
            workers.submit(_echo, 1)
    assert seen == [(21, 1, 2)]


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_a_restore_whose_worker_dies_raises_and_puts_the_old_files_back(tmp_path, monkeypatch,
                                                                        engine):
    log = Changelog(tmp_path, engine)
    log.write(2000, seed=7)
    csm, _, producer = log.restore()
    csm.close()
    producer.stop()
    (log.store_dir / "OFFSET").unlink()
    before = sorted(p.name for p in log.store_dir.iterdir())
    import weir.recovery.store_restore as store_restore
    monkeypatch.setattr(store_restore, "sorted_files_job", _die)
    with pytest.raises(RecoveryError, match="restore worker process"):
        log.restore()
    assert sorted(p.name for p in log.store_dir.iterdir()) == before


_KILLED_WHILE_LOADING = """
import sys, time
from pathlib import Path
import weir.recovery.store_restore as store_restore
from tests.recovery.test_workers import Changelog

real = store_restore.load_run_files

def load_then_hang(engine, paths):
    real(engine, paths)
    print("loaded", engine.count_estimate(), flush=True)
    time.sleep(600)

store_restore.load_run_files = load_then_hang
if __name__ == "__main__":
    Changelog(Path(sys.argv[1]), "lmdb", create=False).restore()
"""


def test_an_lmdb_restore_killed_while_it_loads_run_files_is_redone_at_the_next_start(tmp_path):
    """The first part's run files are in the store, the second part's are not: the store
    has no OFFSET file, so the next start rebuilds it from the changelog (the half-loaded
    files are never trusted) and removes the staging directory."""
    log = Changelog(tmp_path, "lmdb")
    log.write(3000, seed=8)
    script = tmp_path / "killed.py"
    script.write_text(_KILLED_WHILE_LOADING)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        line = proc.stdout.readline()  # the handshake: the first part is loaded
        assert line.startswith("loaded") and int(line.split()[1]) > 0, line  # half-filled
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    staging = log.store_dir.with_name(log.store_dir.name + ".restore-sst")
    assert staging.exists() and not (log.store_dir / "OFFSET").exists()
    csm, store, producer = log.restore()
    try:
        (stats,) = csm.stats
        assert (stats.action, stats.records) == (Action.REBUILD, 3000)
        assert _contents(store) == log.expected()
        assert not staging.exists()
        assert (log.store_dir / "OFFSET").exists()
    finally:
        csm.close()
        producer.stop()


_PARENT = """
import sys, time
from weir.recovery._workers import RestoreWorkers
if __name__ == "__main__":
    workers = RestoreWorkers(2)
    print(" ".join(str(p.pid) for p in workers._procs), flush=True)
    time.sleep(60)
"""


def test_workers_die_with_their_parent_process(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.05)
    assert alive == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
