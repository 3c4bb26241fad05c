"""The store directory lock (``WEIR.LOCK``), with real second processes holding it."""

from __future__ import annotations

import json
import os
import signal
import socket

import pytest

from weir.stores.locking import LOCK_FILE_NAME, DirectoryLock, acquire_lock, read_holder, read_lock_holder
from weir.stores.errors import StoreLockedError

from tests.stores.engines._proc import Child

HOLD_LOCK = """
    import sys
    from weir.stores.locking import DirectoryLock
    lock = DirectoryLock.acquire(sys.argv[1], store="counts")
    print("ready", flush=True)
    sys.stdin.read()
    lock.release()
"""

HOLD_ENGINE = """
    import sys
    from weir.stores.engines.rocksdb import RocksDBEngine
    from weir.stores.engines.lmdb import LMDBEngine
    if sys.argv[2] == "rocksdb":
        engine = RocksDBEngine("counts", sys.argv[1], logged=True)
    else:
        engine = LMDBEngine("counts", sys.argv[1])
    print("ready", flush=True)
    sys.stdin.read()
    engine.close()
"""


def test_lock_file_names_the_holder_while_held(tmp_path):
    with DirectoryLock.acquire(tmp_path, store="counts") as lock:
        record = json.loads((tmp_path / LOCK_FILE_NAME).read_text())
        assert record["pid"] == os.getpid()
        assert record["host"] == socket.gethostname()
        assert record["store"] == "counts"
        assert record["since"].endswith("+00:00")
        assert read_lock_holder(tmp_path) == lock.holder


def test_release_removes_the_record_and_lets_the_directory_be_locked_again(tmp_path):
    lock = DirectoryLock.acquire(tmp_path, store="counts")
    lock.release()
    lock.release()  # twice is harmless
    assert not lock.held
    assert not (tmp_path / LOCK_FILE_NAME).exists()
    DirectoryLock.acquire(tmp_path, store="counts").release()


def test_second_lock_in_the_same_process_says_it_is_already_open_here(tmp_path):
    with DirectoryLock.acquire(tmp_path, store="counts"):
        with pytest.raises(StoreLockedError) as info:
            DirectoryLock.acquire(tmp_path, store="counts")
    assert "already open in this process" in str(info.value)
    assert info.value.holder["pid"] == os.getpid()


def test_lock_held_by_another_process_names_its_pid_host_and_what_to_do(tmp_path):
    with Child(HOLD_LOCK, tmp_path) as child:
        with pytest.raises(StoreLockedError) as info:
            DirectoryLock.acquire(tmp_path, store="counts")
        child.finish()
    err = info.value
    assert err.store == "counts"
    assert err.path == str(tmp_path)
    assert err.holder["pid"] == child.pid
    assert err.holder["host"] == socket.gethostname()
    message = str(err)
    assert f"stop process {child.pid} on {socket.gethostname()}" in message
    assert "released automatically" in message
    assert "store 'counts'" in message


def test_lock_of_a_killed_process_is_released_by_the_kernel(tmp_path):
    child = Child(HOLD_LOCK, tmp_path)
    child.kill()
    # The dead holder's record is still there, but nobody holds the flock any more.
    assert read_lock_holder(tmp_path).pid == child.pid
    with DirectoryLock.acquire(tmp_path, store="counts") as lock:
        assert lock.holder.pid == os.getpid()
        assert read_lock_holder(tmp_path).pid == os.getpid()


HOLD_LOCK_AND_FORK = """
    import os, sys, time
    from weir.stores.locking import DirectoryLock
    lock = DirectoryLock.acquire(sys.argv[1], store="counts")
    pid = os.fork()  # a forked helper (multiprocessing, a forking server) outlives the holder
    if pid == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        time.sleep(60)
        os._exit(0)
    with open(sys.argv[2], "w") as f:
        f.write(str(pid))
    print("ready", flush=True)
    sys.stdin.read()
"""


def test_lock_of_a_killed_process_is_released_even_while_a_child_it_forked_lives(tmp_path):
    store_dir, pid_file = tmp_path / "store", tmp_path / "helper.pid"
    store_dir.mkdir()
    child = Child(HOLD_LOCK_AND_FORK, store_dir, pid_file)
    helper = int(pid_file.read_text())
    try:
        child.kill()
        os.kill(helper, 0)  # the forked helper is still alive
        with DirectoryLock.acquire(store_dir, store="counts") as lock:
            assert lock.holder.pid == os.getpid()
    finally:
        os.kill(helper, signal.SIGKILL)


def test_opener_whose_lock_file_was_replaced_before_it_locked_it_checks_again(tmp_path,
                                                                            monkeypatch):
    """Between opening the lock file and locking it, another locker may install its record
    (a rename: a new inode). Locking the old, replaced inode must not count as holding the
    lock."""
    import weir.stores.locking as locking

    opened = locking._open_lock_file
    others: list[DirectoryLock] = []

    def open_then_lose_the_race(path, details):
        fd = opened(path, details)
        if details.get("store") == "counts" and not others:
            others.append(DirectoryLock.acquire(tmp_path, store="other"))
        return fd

    monkeypatch.setattr(locking, "_open_lock_file", open_then_lose_the_race)
    with pytest.raises(StoreLockedError, match="already open in this process"):
        DirectoryLock.acquire(tmp_path, store="counts")
    assert read_lock_holder(tmp_path).store == "other"
    others[0].release()


def test_leftover_temp_record_of_a_crashed_opener_is_reused(tmp_path):
    (tmp_path / (LOCK_FILE_NAME + ".tmp")).write_text("half a rec")
    with DirectoryLock.acquire(tmp_path, store="counts"):
        assert read_lock_holder(tmp_path).pid == os.getpid()
        assert not (tmp_path / (LOCK_FILE_NAME + ".tmp")).exists()


def test_unreadable_record_of_a_live_holder_still_reports_locked(tmp_path):
    with Child(HOLD_LOCK, tmp_path) as child:
        # Simulate a record that cannot be parsed (e.g. written by a foreign tool) in place.
        (tmp_path / LOCK_FILE_NAME).write_text("not json")
        with pytest.raises(StoreLockedError) as info:
            DirectoryLock.acquire(tmp_path, store="counts")
        child.finish()
    assert "could not be read" in str(info.value)


def test_lock_held_under_the_record_of_an_exited_process_says_how_to_find_the_holder(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    exited = Child(HOLD_LOCK, tmp_path / "elsewhere")
    exited.kill()
    with Child(HOLD_LOCK, tmp_path) as child:
        record = json.loads((tmp_path / LOCK_FILE_NAME).read_text())
        (tmp_path / LOCK_FILE_NAME).write_text(json.dumps({**record, "pid": exited.pid}))
        with pytest.raises(StoreLockedError) as info:
            DirectoryLock.acquire(tmp_path, store="counts")
        child.finish()
    message = str(info.value)
    assert f"process {exited.pid}" in message and "has exited" in message
    assert f"lsof {tmp_path / LOCK_FILE_NAME}" in message


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_engine_refuses_a_directory_open_in_another_process(tmp_path, engine):
    from weir.stores.engines.lmdb import LMDBEngine
    from weir.stores.engines.rocksdb import RocksDBEngine

    with Child(HOLD_ENGINE, tmp_path, engine) as child:
        with pytest.raises(StoreLockedError) as info:
            if engine == "rocksdb":
                RocksDBEngine("counts", tmp_path, logged=True)
            else:
                LMDBEngine("counts", tmp_path)
        child.finish()
    assert info.value.holder["pid"] == child.pid
    # Once the other process closed it, the directory opens normally.
    opened = RocksDBEngine("counts", tmp_path, logged=True) if engine == "rocksdb" \
        else LMDBEngine("counts", tmp_path)
    opened.close()


class _Busy(Exception):
    def __init__(self, path, holder):
        super().__init__(str(path))
        self.path, self.holder = path, holder


def test_any_lock_file_records_the_details_and_raises_the_callers_error_when_busy(tmp_path):
    path = tmp_path / ".writer.lock"
    with acquire_lock(path, error=_Busy, details={"role": "writer"}) as lock:
        assert read_holder(path) == lock.holder
        assert lock.holder.as_dict()["role"] == "writer"
        with pytest.raises(_Busy) as info:
            acquire_lock(path, error=_Busy)
    assert info.value.path == path
    assert info.value.holder.pid == os.getpid() and info.value.holder.details == {"role": "writer"}
    assert not path.exists()
