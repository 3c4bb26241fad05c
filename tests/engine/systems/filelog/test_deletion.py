"""Deleting a file-log stream: refused while any process writes to or maintains it, atomic for
readers, and leaves nothing behind (weir.engine.systems.filelog.deletion)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from weir.engine.errors import PartitionLockedError, StreamNotFoundError
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.filelog._files import MAINTENANCE_LOCK, FileLock
from weir.engine.systems.filelog.deletion import DELETED_PREFIX

REPO = Path(__file__).resolve().parents[4]


def test_delete_removes_the_stream_its_files_and_reports_what_it_removed(log):
    log.create("s", 2)
    log.write([(b"k", b"v" * 100)] * 10, "s", 1)

    deleted = log.admin.delete_stream("s")

    assert (deleted.stream, deleted.partitions) == ("s", 2)
    assert deleted.files >= 2 and deleted.bytes > 1000
    assert not log.admin.stream_exists("s")
    assert os.listdir(log.root) == []


def test_a_deleted_stream_can_be_created_again_empty_with_another_partition_count(log):
    log.create("s", 2)
    log.write([(b"k", b"v")], "s", 0)
    log.admin.delete_stream("s")

    log.create("s", 3)

    assert log.admin.partition_count("s") == 3
    assert log.read("s", 0) == []


def test_deleting_a_missing_stream_names_it(log):
    with pytest.raises(StreamNotFoundError, match="s"):
        log.admin.delete_stream("s")


def test_delete_is_refused_while_this_process_has_a_writer_open(log):
    log.create("s", 2)
    with log.writer("s", 1):
        with pytest.raises(PartitionLockedError, match="partition 1 has a writer"):
            log.admin.delete_stream("s")
    assert log.admin.stream_exists("s")
    log.admin.delete_stream("s")  # the writer is closed now


def test_delete_is_refused_during_maintenance(log):
    log.create("s")
    lock = FileLock(os.path.join(log.pdir("s", 0), MAINTENANCE_LOCK))
    lock.acquire("compaction")
    try:
        with pytest.raises(PartitionLockedError, match="partition 0 has a maintenance"):
            log.admin.delete_stream("s")
    finally:
        lock.release()
    assert log.admin.stream_exists("s")


def test_delete_is_refused_while_another_process_writes_and_names_that_process(log):
    log.create("s", 1)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from tests.engine.systems.filelog.conftest import Log
        writer = Log({log.root!r}).writer("s", 0)
        print("ready", flush=True)
        sys.stdin.read()
        writer.close()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(PartitionLockedError) as err:
            log.admin.delete_stream("s")
        assert f"pid {holder.pid}" in str(err.value) and "stop the job or producer" in str(err.value)
        assert log.admin.stream_exists("s")
    finally:
        holder.communicate("", timeout=30)
    log.admin.delete_stream("s")
    assert not log.admin.stream_exists("s")


def test_leftovers_of_a_deletion_whose_process_died_are_removed_by_the_next_one(log):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    leftover = Path(log.root) / f"{DELETED_PREFIX}old-{dead.stdout.strip()}-1"
    (leftover / "0").mkdir(parents=True)
    (leftover / "0" / "00000000000000000000.log").write_bytes(b"x" * 10)
    log.admin.create_stream(StreamSpec("s", 1))

    log.admin.delete_stream("s")

    assert os.listdir(log.root) == []
