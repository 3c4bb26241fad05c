"""Shared partition writers: several writers (in this process or others) append to one
partition in turn; exclusive writers and deletions are refused while they do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.errors import PartitionLockedError
from weir.engine.systems.filelog import (PartitionWriter, StreamEndedError, StreamReplacedError,
                                         WriterSharing)
from weir.engine.systems.filelog._files import APPEND_LOCK
from weir.engine.systems.filelog._index import load_index
from weir.engine.systems.filelog.segment import build_index, list_segments

from tests.engine.systems.filelog.conftest import Log


def _shared(log: Log, stream: str = "s", partition: int = 0, **kw) -> PartitionWriter:
    meta = log.admin.stream_meta(stream)
    return PartitionWriter(log.root, meta, partition, log.settings.for_stream(stream, meta.config),
                           system=log.settings.system, sharing=WriterSharing.SHARED, **kw)


def _hold_lock(path: str) -> subprocess.Popen:
    """Another process that holds ``path``'s flock until it is killed (a hung producer)."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({path!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE)
    if holder.stdout.readline() != b"held\n":
        holder.kill()
        holder.wait()
        raise AssertionError(f"the process meant to hold {path} did not take it")
    return holder


def _values(log: Log, offset: int = 0) -> list[bytes]:
    return [r.value for r in log.read(offset=offset)]


def test_two_shared_writers_append_in_turn_with_contiguous_offsets(log):
    log.create()
    a, b = _shared(log), _shared(log)
    try:
        a.append(None, b"a0"), b.append(None, b"b0"), a.append(None, b"a1")
        b.flush()
        a.flush()
        b.append(None, b"b1")
        b.flush()
        assert b.upcoming == 4
    finally:
        a.close(), b.close()
    records = log.read()
    assert [r.value for r in records] == [b"b0", b"a0", b"a1", b"b1"]
    assert [r.offset for r in records] == [0, 1, 2, 3]


def test_a_shared_writer_reopened_continues_after_every_writers_records(log):
    log.create()
    with _shared(log) as a, _shared(log) as b:
        a.append(b"k", b"a"), a.flush()
        b.append(b"k", b"b"), b.flush()
    with _shared(log) as c:
        assert c.upcoming == 2
        c.append(b"k", b"c")
    assert _values(log) == [b"a", b"b", b"c"]


def test_an_exclusive_writer_is_refused_while_a_shared_writer_is_open(log):
    log.create()
    with _shared(log):
        with pytest.raises(PartitionLockedError, match="producers of a running job") as refused:
            log.writer()
        assert f"pid {os.getpid()}" in str(refused.value)
    log.writer().close()  # free again


def test_a_shared_writer_is_refused_while_an_exclusive_writer_holds_the_partition(log):
    log.create()
    with log.writer():
        with pytest.raises(PartitionLockedError, match="exclusive writer") as refused:
            _shared(log)
        assert str(os.getpid()) in str(refused.value)
    _shared(log).close()


def test_deleting_a_stream_is_refused_while_a_shared_writer_is_open(log):
    log.create()
    with _shared(log):
        with pytest.raises(PartitionLockedError, match="producer of a running job"):
            log.admin.delete_stream("s")
    log.admin.delete_stream("s")


@pytest.mark.parametrize("new_has_records", [False, True])
def test_a_shared_writer_never_writes_into_a_stream_recreated_under_it(log, new_has_records):
    # Deleted by hand (or with its lock files gone, so `weir log delete` did not see the
    # writer) and created again while a shared writer of the old stream sits idle: the old
    # writer's offsets belong to the old stream, so its next write-out is refused.
    log.create()
    old = _shared(log)
    try:
        old.append(None, b"old-0"), old.flush()
        os.rename(os.path.join(log.root, "s"), os.path.join(log.root, ".gone"))
        log.create()
        if new_has_records:
            with _shared(log) as new:
                new.append(None, b"new-0")
        old.append(None, b"old-1")
        with pytest.raises(StreamReplacedError, match="incarnation") as refused:
            old.flush()
        assert "not written" in str(refused.value)
        with pytest.raises(StreamReplacedError):  # nor later: the buffer stays unwritten
            old.flush()
    finally:
        old._pending.clear()
        old.close()
    assert _values(log) == ([b"new-0"] if new_has_records else [])


def test_a_writer_opened_with_the_description_of_a_deleted_stream_is_refused(log):
    log.create()
    stale = log.admin.stream_meta("s")
    os.rename(os.path.join(log.root, "s"), os.path.join(log.root, ".gone"))
    log.create()
    with pytest.raises(StreamReplacedError):
        PartitionWriter(log.root, stale, 0, sharing=WriterSharing.SHARED)
    _shared(log).close()  # the current description opens


def test_segments_roll_under_shared_writers_and_every_index_is_whole(make_log):
    log = make_log(segment_bytes="600")
    log.create()
    writers = [_shared(log) for _ in range(3)]
    try:
        for i in range(300):
            w = writers[i % 3]
            w.append(b"%d" % (i % 3), b"%05d" % i)
            if i % 7 == 0:
                w.flush()
    finally:
        for w in writers:
            w.close()
    segments = list_segments(log.pdir())
    assert len(segments) > 10
    expected_next = 0
    for segment in segments[:-1]:  # sealed ones: their index describes the file whole
        index = load_index(segment.index_path, os.path.getsize(segment.path))
        assert index is not None and index.base == expected_next
        expected_next = index.next_offset
    values = _values(log)
    assert sorted(values) == [b"%05d" % i for i in range(300)]
    for k in range(3):  # each writer's records in the order it appended them
        mine = [v for v in values if int(v) % 3 == k]
        assert mine == sorted(mine)
    assert _values(log, offset=150) == values[150:]  # seeking through the indexes


def test_a_segment_another_shared_writer_just_started_is_not_sealed_again(make_log):
    # Writers taking turns each see the segment fill up; the first to need room rolls, the
    # others find the new segment and append to it (they used to seal it again, leaving a
    # segment of two records at every roll: half the segments of this run).
    log = make_log(segment_bytes="600")
    log.create()
    writers = [_shared(log) for _ in range(3)]
    try:
        for i in range(300):
            w = writers[i % 3]
            w.append(b"k", b"v" * 40)
            w.flush()
    finally:
        for w in writers:
            w.close()
    frame = 8 + 16 + 1 + 40  # length/CRC, timestamp/key length, key, value length, value
    sealed = list_segments(log.pdir())[:-1]
    assert sealed and all(os.path.getsize(s.path) + frame > 600 for s in sealed), \
        sorted(os.path.getsize(s.path) for s in sealed)[:5]
    assert len(_values(log)) == 300


def test_a_torn_record_left_by_a_crashed_shared_writer_is_cut_off_by_the_next_write(log, caplog):
    log.create()
    with _shared(log) as a:
        a.append(None, b"first"), a.flush()
        active = list_segments(log.pdir())[-1].path
        with open(active, "ab") as f:  # half of a record, as a writer killed mid-write leaves
            f.write(b"\x20\x00\x00\x00\x11\x22")
        a.append(None, b"second")
        a.flush()
        assert a.upcoming == 2
    assert "torn final record" in caplog.text
    assert _values(log) == [b"first", b"second"]


def test_a_hung_holder_of_the_append_lock_fails_the_writer_after_the_timeout(log):
    log.create()
    w = _shared(log, append_lock_timeout_ms=200)
    path = os.path.join(log.pdir(), APPEND_LOCK)
    holder = _hold_lock(path)
    try:
        w.append(None, b"v")
        with pytest.raises(PartitionLockedError, match="append lock") as waited:
            w.flush()
        assert "producer.append.lock.timeout.ms" in str(waited.value)
        assert f"pid {holder.pid}" in str(waited.value)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    w.flush()  # the holder is gone: the buffered record is written now
    w.close()
    assert _values(log) == [b"v"]


def test_a_stream_ended_by_one_shared_writer_refuses_the_others_records(log):
    log.create(bounded=True)
    a, b = _shared(log), _shared(log)
    try:
        a.append(None, b"a"), a.flush()
        b.append(None, b"b")
        b.flush()
        assert a.end_stream() == 2
        assert b.end_stream() == 2  # idempotent across writers
        c = _shared(log)
        with pytest.raises(StreamEndedError):
            c.append(None, b"late")
        c.close()
    finally:
        a.close(), b.close()
    assert _values(log) == [b"a", b"b"]


def test_a_shared_writer_with_records_buffered_when_another_ends_the_stream_is_refused(log):
    log.create(bounded=True)
    a, b = _shared(log), _shared(log)
    try:
        b.append(None, b"late")
        a.end_stream()
        with pytest.raises(StreamEndedError):
            b.flush()
    finally:
        a.close()
        with pytest.raises(StreamEndedError):
            b.close()
    assert _values(log) == []


_WRITER = """
import sys, time
sys.path[:0] = {path!r}
from tests.engine.systems.filelog.conftest import Log
from weir.engine.systems.filelog import PartitionWriter, WriterSharing
log = Log({root!r}, segment_bytes="4096")
meta = log.admin.stream_meta("s")
w = PartitionWriter(log.root, meta, 0, log.settings.for_stream("s", meta.config),
                    system=log.settings.system, sharing=WriterSharing.SHARED)
ANNOUNCE = {announce!r}
announced = False
for i in range({n}):
    w.append(b"{name}", b"{name}-%06d" % i)
    if i % 13 == 0:
        w.flush()
        if ANNOUNCE is not None and i + 1 >= ANNOUNCE and not announced:
            print("flushed", i + 1, flush=True)  # the handshake: this many records are in
            announced = True
w.close()
"""


def _writer(log: Log, n: int, name: str, announce: int | None = None,
            **popen) -> subprocess.Popen:
    """A process appending ``n`` records ``<name>-<i>`` through a shared writer, flushing every
    13; with ``announce``, it prints ``flushed <count>`` once at least that many are flushed."""
    return subprocess.Popen([sys.executable, "-c", _WRITER.format(
        path=sys.path, root=log.root, n=n, name=name, announce=announce)], **popen)


def test_processes_writing_one_partition_at_once_lose_and_repeat_nothing(make_log):
    log = make_log(segment_bytes="4096")
    log.create()
    n = 3000
    procs = [_writer(log, n, name) for name in ("x", "y", "z")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    records = log.read()
    assert [r.offset for r in records] == list(range(3 * n))
    values = [r.value for r in records]
    for name in (b"x", b"y", b"z"):
        assert [v for v in values if v.startswith(name)] == [b"%s-%06d" % (name, i)
                                                             for i in range(n)]
    assert len(list_segments(log.pdir())) > 5


def test_a_shared_writer_killed_mid_run_leaves_the_others_whole(make_log):
    log = make_log(segment_bytes="4096")
    log.create()
    victim = _writer(log, 10**7, "v", announce=500, stdout=subprocess.PIPE)
    other = _writer(log, 2000, "o")
    try:
        # Killed once it has surely written (it says so), long before its 10**7 records end.
        line = victim.stdout.readline()
        assert line.startswith(b"flushed "), line
        flushed = int(line.split()[1])
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        victim.stdout.close()
    assert victim.returncode == -signal.SIGKILL
    assert other.wait(timeout=120) == 0
    with _shared(log) as last:
        last.append(b"l", b"last")
    values = _values(log)
    assert [v for v in values if v.startswith(b"o")] == [b"o-%06d" % i for i in range(2000)]
    mine = [v for v in values if v.startswith(b"v")]
    assert len(mine) >= flushed >= 500  # what it flushed before the kill is all there
    assert mine == [b"v-%06d" % i for i in range(len(mine))]  # a prefix, nothing torn
    assert values[-1] == b"last"


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["append", "append_all", "flush", "reopen"]),
                              st.integers(0, 2), st.integers(1, 40)), max_size=60),
       segment_bytes=st.sampled_from([300, 2000, 1 << 20]))
def test_shared_writers_keep_an_append_only_log_of_each_writers_records_in_order(
        tmp_path_factory, ops, segment_bytes):
    # The model: what is on disk only grows; each writer's records on disk are a prefix of
    # what it appended, in order; after its flush (or close) all of them are there.
    log = Log(str(tmp_path_factory.mktemp("log")), segment_bytes=str(segment_bytes))
    log.create()
    writers = [_shared(log) for _ in range(3)]
    appended: list[list[bytes]] = [[], [], []]
    before: list[bytes] = []
    counter = 0
    try:
        for op, who, n in ops:
            w = writers[who]
            if op in ("append", "append_all"):
                values = [b"%d:%d" % (who, counter + i) for i in range(n)]
                counter += n
                if op == "append":
                    for value in values:
                        w.append(None, value)
                else:
                    w.append_all((b"k", v) for v in values)
                appended[who].extend(values)
            elif op == "flush":
                w.flush()
            else:
                w.close()
                writers[who] = _shared(log)
            now = _values(log)
            assert now[:len(before)] == before
            for k in range(3):
                mine = [v for v in now if v.startswith(b"%d:" % k)]
                assert mine == appended[k][:len(mine)]
                if op in ("flush", "reopen") and k == who:
                    assert mine == appended[k]
            before = now
        for w in writers:
            w.close()
        records = log.read()
        assert sorted(r.value for r in records) == sorted(v for a in appended for v in a)
        assert [r.offset for r in records] == list(range(len(records)))
    finally:
        for w in writers:
            w.close()


_SLOW_MAINTENANCE = """
import sys, time
sys.path[:0] = {path!r}
from tests.engine.systems.filelog.conftest import Log
from weir.engine.systems.filelog import PartitionWriter, WriterSharing
from weir.engine.systems.filelog import writer as writer_mod
plain = writer_mod.maintain
def slow(*args, **kwargs):  # a long compaction or compression at a roll
    report = plain(*args, **kwargs)
    print("maintaining", flush=True)
    time.sleep(3)
    return report
log = Log({root!r}, segment_bytes="300")
meta = log.admin.stream_meta("s")
w = PartitionWriter(log.root, meta, 0, log.settings.for_stream("s", meta.config),
                    system=log.settings.system, sharing=WriterSharing.SHARED)
writer_mod.maintain = slow
for i in range(30):
    w.append(None, b"m-%03d" % i)
w.close()
"""


def test_maintenance_at_a_roll_does_not_hold_the_other_writers_up(make_log):
    # Compaction and compression at a roll can take long on a big partition: the roller runs
    # them after it let go of the append lock, so the other processes' writers carry on
    # (instead of failing after append.lock.timeout.ms).
    log = make_log(segment_bytes="300")
    log.create()
    roller = subprocess.Popen([sys.executable, "-c", _SLOW_MAINTENANCE.format(
        path=sys.path, root=log.root)], stdout=subprocess.PIPE)
    try:
        assert roller.stdout.readline() == b"maintaining\n"
        with _shared(log, append_lock_timeout_ms=1000) as other:
            other.append(None, b"other")
            other.flush()
        assert roller.wait(timeout=60) == 0
    finally:
        roller.kill()
        roller.wait()
        roller.stdout.close()
    values = _values(log)
    assert sorted(values) == sorted([b"m-%03d" % i for i in range(30)] + [b"other"])


def test_a_write_out_that_timed_out_on_the_append_lock_keeps_its_index_entries(make_log):
    # The buffer's sparse index entries must survive a failed turn at the append lock: the
    # retry writes the same records and the sealed segment's index must say where they are.
    log = make_log(segment_bytes=str(1 << 20))
    log.create()
    w = _shared(log, append_lock_timeout_ms=100, buffer_bytes=1 << 20)
    path = os.path.join(log.pdir(), APPEND_LOCK)
    holder = _hold_lock(path)
    try:
        for i in range(3000):  # ~300 KiB: several sparse entries (one per 64 KiB)
            w.append(None, b"%05d" % i + b"x" * 95)
        with pytest.raises(PartitionLockedError):
            w.flush()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    w.flush()
    w.append(None, b"y" * (800 << 10))  # does not fit: seals the segment, whose index is
    w.close()                           # written from the writer's entries
    sealed = list_segments(log.pdir())[0]
    index = load_index(sealed.index_path, os.path.getsize(sealed.path))
    fd = os.open(sealed.path, os.O_RDONLY)
    try:
        rebuilt = build_index(sealed, fd, os.path.getsize(sealed.path))
    finally:
        os.close(fd)
    assert len(rebuilt.sparse) >= 4
    assert index.sparse == rebuilt.sparse


def test_the_admin_ends_a_stream_that_another_processes_producer_writes(log):
    log.create(bounded=True)
    producer = _shared(log)  # another object: takes its turns like another process
    producer.append(None, b"a")
    producer.flush()
    assert log.admin.end_stream("s") == {0: 1}
    producer.append(None, b"late")
    with pytest.raises(StreamEndedError):
        producer.flush()
    with pytest.raises(StreamEndedError):  # the refused record is still buffered at close
        producer.close()
    assert _values(log) == [b"a"]
