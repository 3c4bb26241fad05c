"""The partition writer: offsets, lock, torn-tail repair, fsync policy, roll and end marker."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from weir.engine.errors import CorruptRecordError, PartitionLockedError
from weir.engine.systems.filelog import StreamEndedError
from weir.engine.systems.filelog._format import encode_record
from weir.engine.systems.filelog._index import load_index
from weir.engine.systems.filelog.segment import list_segments


def _flip_byte(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0x5A]))


def _ssp(log):
    from weir.engine.model import SystemStreamPartition
    return SystemStreamPartition(log.settings.system, "s", 0)


def _active(log, stream="s", partition=0) -> str:
    return list_segments(log.pdir(stream, partition))[-1].path


def test_offsets_are_record_numbers_from_zero_and_continue_after_reopen(log):
    log.create()
    assert log.write([(b"k", b"v")] * 3) == [0, 1, 2]
    assert log.write([(None, b"w")] * 2) == [3, 4]
    assert [r.offset for r in log.read()] == [0, 1, 2, 3, 4]


def test_a_second_writer_is_locked_out_and_told_who_holds_the_partition(log):
    log.create()
    with log.writer():
        with pytest.raises(PartitionLockedError) as err:
            log.writer()
    assert err.value.holder["pid"] == os.getpid()
    assert f"pid {os.getpid()}" in str(err.value) and "stop that producer" in str(err.value)
    assert (err.value.stream, err.value.partition) == ("s", 0)
    log.writer().close()  # released on close


def test_a_writer_in_another_process_is_locked_out(log):
    log.create()
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from tests.engine.systems.filelog.conftest import Log
        w = Log({log.root!r}).writer()
        print("locked", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(PartitionLockedError) as err:
            log.writer()
        assert err.value.holder["pid"] == child.pid
    finally:
        child.kill()
        child.wait()
    log.writer().close()  # the OS released the dead holder's lock


def test_a_torn_final_record_is_cut_off_and_appending_continues_at_its_offset(log):
    log.create()
    log.write([(b"k%d" % i, b"v%d" % i) for i in range(5)])
    path = _active(log)
    whole = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(encode_record(b"torn", b"x" * 100)[:37])
    assert log.write([(b"new", b"n")]) == [5]
    assert [(r.offset, r.key) for r in log.read()][-2:] == [(4, b"k4"), (5, b"new")]
    assert os.path.getsize(path) == whole + len(encode_record(b"new", b"n"))


def test_a_whole_final_record_with_a_bad_crc_is_cut_off(log):
    log.create()
    log.write([(b"a", b"1")])
    bad = bytearray(encode_record(b"b", b"2"))
    bad[-1] ^= 0xFF
    with open(_active(log), "ab") as f:
        f.write(bytes(bad))
    assert log.write([(b"c", b"3")]) == [1]
    assert [r.key for r in log.read()] == [b"a", b"c"]


def test_damage_followed_by_valid_records_is_not_truncated(log):
    log.create()
    log.write([(b"k%d" % i, b"v") for i in range(4)])
    path = _active(log)
    size = os.path.getsize(path)
    _flip_byte(path, len(encode_record(b"k0", b"v")) + 12)  # inside record 1
    os.unlink(path + ".tail")  # without the tail hint the writer walks the whole segment
    with pytest.raises(CorruptRecordError) as err:
        log.writer()
    assert (err.value.offset, err.value.partition) == (1, 0)
    assert err.value.position == len(encode_record(b"k0", b"v"))
    assert os.path.getsize(path) == size


def test_flush_fsyncs_according_to_the_record_count_policy(make_log, monkeypatch):
    log = make_log(fsync_every_records="3")
    log.create()
    syncs = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), real(fd)))
    with log.writer() as w:
        w.append(None, b"1")
        w.append(None, b"2")
        w.flush()
        assert syncs == []          # 2 unsynced records < 3
        w.append(None, b"3")
        w.flush()
        assert len(syncs) == 1
        w.flush()
        assert len(syncs) == 1      # nothing new
        w.append(None, b"4")
    assert len(syncs) == 2          # close always syncs


def test_flush_fsyncs_every_time_by_default_and_never_when_both_triggers_are_off(make_log,
                                                                                  monkeypatch):
    syncs = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), real(fd)))
    log = make_log()
    log.create()
    with log.writer() as w:
        for i in range(3):
            w.append(None, b"x")
            w.flush()
        assert len(syncs) == 3
    off = make_log(fsync_every_records="0")
    off.create("lazy")
    syncs.clear()
    w = off.writer("lazy")
    w.append(None, b"x")
    w.flush()
    assert syncs == []
    w.close()


def test_roll_seals_the_segment_with_an_index_and_starts_the_next_at_the_next_offset(make_log):
    log = make_log(segment_bytes="1000")
    log.create()
    log.write([(b"k", b"v" * 90)] * 30)
    segments = list_segments(log.pdir())
    assert len(segments) > 2
    for seg, nxt in zip(segments, segments[1:]):
        index = load_index(seg.index_path, os.path.getsize(seg.path))
        assert index is not None and index.next_offset == nxt.base
        assert os.path.getsize(seg.path) <= 1000
    assert [r.offset for r in log.read()] == list(range(30))


def test_a_record_larger_than_a_segment_gets_a_segment_of_its_own(make_log):
    log = make_log(segment_bytes="100")
    log.create()
    log.write([(b"a", b"1"), (b"big", b"x" * 500), (b"b", b"2")])
    assert [r.key for r in log.read()] == [b"a", b"big", b"b"]


def test_end_stream_writes_the_marker_and_refuses_more_records(log):
    log.create(bounded=True)
    with log.writer() as w:
        w.append(None, b"a")
        assert w.end_stream() == 1
        with pytest.raises(StreamEndedError, match="has ended at offset 1"):
            w.append(None, b"b")
    with pytest.raises(StreamEndedError):
        log.write([(None, b"c")])
    assert [r.value for r in log.read()] == [b"a"]


def test_a_failure_while_recording_the_holder_releases_the_writer_lock(log, monkeypatch):
    import weir.stores.locking as locking

    log.create()
    real = locking.os.write

    def full_disk(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(locking.os, "write", full_disk)
    with pytest.raises(OSError, match="No space"):
        log.writer()
    monkeypatch.setattr(locking.os, "write", real)
    with log.writer() as w:           # not locked out by a leaked descriptor of this process
        assert w.append(None, b"x") == 0


def test_a_writer_refuses_a_partition_whose_directory_was_deleted(log):
    # rm -rf of one partition directory: a writer that made it again would start the
    # partition over at offset 0, reusing offsets that checkpoints already count.
    import shutil

    from weir.engine.systems.filelog import PartitionMissingError

    log.create(partitions=2)
    log.write([(None, b"a")] * 3, partition=1)
    shutil.rmtree(log.pdir("s", 1))
    with pytest.raises(PartitionMissingError) as err:
        log.writer(partition=1)
    assert (err.value.stream, err.value.partition) == ("s", 1)
    assert log.pdir("s", 1) in str(err.value) and "backup" in str(err.value)
    assert not os.path.exists(log.pdir("s", 1))  # nothing made in its place
    assert log.write([(None, b"b")], partition=0) == [0]  # the other partition is fine


def test_a_closed_writer_leaves_a_tail_hint_that_a_reopened_writer_resumes_from(log):
    log.create()
    log.write([(b"k%d" % i, b"v" * 100, 1000 + i) for i in range(3000)])
    path = _active(log)
    assert os.path.exists(path + ".tail")
    with log.writer() as w:
        assert w.upcoming == 3000
        w.append(b"more", b"v", 5)
    assert [r.offset for r in log.read(offset=2999)] == [2999, 3000]
    assert log.admin.metadata([_ssp(log)])[_ssp(log)].upcoming == 3001


def test_a_tail_hint_of_another_file_is_ignored(log):
    log.create()
    log.write([(b"k%d" % i, b"v") for i in range(10)])
    path = _active(log)
    hint = open(path + ".tail", "rb").read()
    log.write([(b"x%d" % i, b"v") for i in range(5)])
    data = open(path, "rb").read()
    os.unlink(path)
    with open(path, "wb") as f:  # the same name, another file (new inode)
        f.write(data)
    with open(path + ".tail", "wb") as f:
        f.write(hint)
    assert log.admin.metadata([_ssp(log)])[_ssp(log)].upcoming == 15
    with log.writer() as w:
        assert w.upcoming == 15


def test_a_damaged_tail_hint_is_ignored(log):
    log.create()
    log.write([(b"k%d" % i, b"v") for i in range(10)])
    path = _active(log)
    with open(path + ".tail", "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xff")
    assert log.admin.metadata([_ssp(log)])[_ssp(log)].upcoming == 10
    with log.writer() as w:
        assert w.upcoming == 10


def test_a_tail_hint_pointing_inside_a_record_is_walked_from_the_start(log):
    from weir.engine.systems.filelog._tail import TailHint
    log.create()
    log.write([(b"k%d" % i, b"value") for i in range(10)])
    path = _active(log)
    TailHint(os.stat(path).st_ino, 3, len(encode_record(b"k0", b"value")) * 3 + 5, -1,
             ()).write(path)
    assert log.admin.metadata([_ssp(log)])[_ssp(log)].upcoming == 10
    with log.writer() as w:
        assert w.upcoming == 10
    assert os.path.getsize(path) == 10 * len(encode_record(b"k0", b"value"))


def test_rolling_a_segment_removes_its_tail_hint(make_log):
    log = make_log(segment_bytes="4096")
    log.create()
    log.write([(b"k%d" % i, b"v" * 100) for i in range(200)])
    segments = list_segments(log.pdir())
    assert len(segments) > 1
    assert not any(os.path.exists(s.path + ".tail") for s in segments[:-1])
