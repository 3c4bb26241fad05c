"""The partition reader: seeking, tailing (also from another process), torn tails,
corruption, compressed segments and offsets outside the retained range."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from weir.engine.errors import CorruptRecordError
from weir.engine.systems.filelog import OffsetOutOfRangeError
from weir.engine.systems.filelog._format import encode_record
from weir.engine.systems.filelog.segment import list_segments

from tests.engine.systems.filelog.test_writer import _flip_byte


def _fill(log, n, stream="s", size=40):
    return log.write([(b"k%d" % i, b"%d" % i + b"." * size, 1000 + i) for i in range(n)], stream)


def test_reads_every_record_across_segments_in_order(make_log):
    log = make_log(segment_bytes="2000")
    log.create()
    _fill(log, 300)
    assert len(list_segments(log.pdir())) > 5
    records = log.read()
    assert [r.offset for r in records] == list(range(300))
    assert [r.timestamp for r in records] == [1000 + i for i in range(300)]
    assert records[7].key == b"k7" and records[7].value.startswith(b"7.")


@pytest.mark.parametrize("start", [0, 37, 38, 149, 300])
def test_starts_at_any_offset_including_inside_sealed_segments(make_log, start):
    log = make_log(segment_bytes="2000")
    log.create()
    _fill(log, 300)
    assert [r.offset for r in log.read(offset=start)] == list(range(start, 300))


def test_reads_in_batches_of_the_requested_size(log):
    log.create()
    _fill(log, 25)
    reader = log.admin.reader("s", 0, 0)
    sizes = [len(reader.read_records(10)) for _ in range(4)]
    assert sizes == [10, 10, 5, 0] and reader.position == 25


def test_a_tailing_reader_sees_new_records_and_follows_rolls(make_log):
    log = make_log(segment_bytes="1500")
    log.create()
    reader = log.admin.reader("s", 0, 0)
    assert reader.read_records(100) == []
    seen = []
    with log.writer() as w:
        for i in range(200):
            w.append(None, b"%d" % i + b"-" * 30)
            if i % 17 == 0:
                w.flush()
                got = reader.read_records(1000)
                assert got and got[-1].offset == i
                seen.extend(got)
    seen.extend(reader.read_records(1000))
    assert len(list_segments(log.pdir())) > 4
    assert [r.offset for r in seen] == list(range(200)) and reader.position == 200


def test_a_partial_last_record_is_not_there_yet_until_it_is_complete(log):
    log.create()
    log.write([(b"a", b"1")])
    path = list_segments(log.pdir())[-1].path
    frame = encode_record(b"b", b"2" * 50)
    reader = log.admin.reader("s", 0, 0)
    with open(path, "ab") as f:
        f.write(frame[:30])
        f.flush()
        assert [r.key for r in reader.read_records(10)] == [b"a"]
        assert reader.read_records(10) == []
        f.write(frame[30:])
        f.flush()
    assert [(r.offset, r.key) for r in reader.read_records(10)] == [(1, b"b")]


def test_a_torn_tail_left_by_a_crash_is_skipped_by_readers_and_replaced(log):
    log.create()
    log.write([(b"a", b"1")])
    path = list_segments(log.pdir())[-1].path
    torn = bytearray(encode_record(b"torn", b"x" * 40))
    torn[-3] ^= 0xFF
    with open(path, "ab") as f:
        f.write(bytes(torn))
    reader = log.admin.reader("s", 0, 0)
    assert [r.key for r in reader.read_records(10)] == [b"a"]
    assert reader.read_records(10) == []          # waits, no error
    log.write([(b"b", b"2")])                      # the next writer cuts the tail off
    assert [(r.offset, r.key) for r in reader.read_records(10)] == [(1, b"b")]


def test_a_flipped_byte_in_a_sealed_segment_names_the_offset(make_log):
    log = make_log(segment_bytes="2000")
    log.create()
    _fill(log, 200)
    first = list_segments(log.pdir())[0]
    frame = len(encode_record(b"k0", b"0" + b"." * 40, 1000))
    _flip_byte(first.path, 3 * frame + 20)          # record 3
    with pytest.raises(CorruptRecordError) as err:
        log.read()
    assert (err.value.stream, err.value.partition, err.value.offset) == ("s", 0, 3)
    assert err.value.position == 3 * frame and err.value.path == first.path
    assert "offset 3" in str(err.value) and "byte position" in str(err.value)
    assert [r.offset for r in log.read(offset=4)][:2] == [4, 5]  # later offsets still readable


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("start", [0, "inside"])
def test_a_missing_sealed_segment_in_the_middle_is_damage_not_a_gap(make_log, compression,
                                                                    start):
    # A segment file deleted or lost between two others: the reader used to jump over its
    # offsets as if compaction had left a gap, so a job skipped those records (exit 0).
    log = make_log(segment_bytes="2000", compression=compression)
    log.create()
    _fill(log, 300)
    log.admin.apply_retention("s")  # seal and compress per the settings
    segments = list_segments(log.pdir())
    gone, before, after = segments[2], segments[1], segments[3]
    for path in (gone.path, gone.index_path):
        if os.path.exists(path):
            os.remove(path)
    first = 0 if start == 0 else gone.base + 3
    with pytest.raises(CorruptRecordError) as err:
        log.read(offset=first)
    assert (err.value.stream, err.value.partition, err.value.offset) == ("s", 0, gone.base)
    assert err.value.path == os.path.join(log.pdir(), f"{gone.base:020d}.log")  # the lost file
    assert before.path in str(err.value)
    assert f"{gone.base}..{after.base - 1}" in str(err.value) and "missing" in str(err.value)
    assert [r.offset for r in log.read(offset=after.base)][:1] == [after.base]  # later: fine


def test_a_stream_deleted_while_read_is_a_typed_error_naming_it(log):
    # `weir log delete` of a running job's input: the job used to stop with a bare
    # FileNotFoundError of the partition directory.
    from weir.engine.errors import StreamNotFoundError

    log.create(partitions=2)
    log.write([(None, b"a")] * 3, partition=1)
    reader = log.admin.reader("s", 1, 0)
    try:
        assert len(reader.read_records(10)) == 3
        log.admin.delete_stream("s")
        with pytest.raises(StreamNotFoundError) as err:
            for _ in range(3):
                reader.read_records(10)
    finally:
        reader.close()
    assert (err.value.system, err.value.stream) == ("fl", "s")
    assert "partition 1" in str(err.value) and "while it was read" in str(err.value)


def test_a_corrupt_record_followed_by_valid_ones_in_the_active_segment_raises(log):
    log.create()
    _fill(log, 10)
    frame = len(encode_record(b"k0", b"0" + b"." * 40, 1000))
    _flip_byte(list_segments(log.pdir())[-1].path, 6 * frame + 9)
    reader = log.admin.reader("s", 0, 0)
    with pytest.raises(CorruptRecordError) as err:
        reader.read_records(100)
    assert err.value.offset == 6


def test_a_tailing_reader_in_another_process_sees_appends(log):
    log.create()
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from tests.engine.systems.filelog.conftest import Log
        reader = Log({log.root!r}).admin.reader("s", 0, 0)
        print("ready", flush=True)
        seen = 0
        while seen < 60:
            time.sleep(0.001)
            for r in reader.read_records(100):
                print(r.offset, r.value.decode(), flush=True)
                seen += 1
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        with log.writer() as w:
            for burst in range(3):
                for i in range(20):
                    w.append(None, b"v%d" % (burst * 20 + i))
                w.flush()
                lines = [child.stdout.readline().split() for _ in range(20)]
                assert lines == [[str(o), f"v{o}"] for o in range(burst * 20, burst * 20 + 20)]
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()


def test_zstd_sealed_segments_are_readable_and_seekable(make_log):
    log = make_log(segment_bytes="4000", compression="zstd")
    log.create()
    _fill(log, 500)
    segments = list_segments(log.pdir())
    assert all(s.compressed for s in segments[:-1]) and not segments[-1].compressed
    assert not any(n.endswith(".log") and n != os.path.basename(segments[-1].path)
                   for n in os.listdir(log.pdir()))
    assert [r.offset for r in log.read()] == list(range(500))
    assert [r.offset for r in log.read(offset=123)][:3] == [123, 124, 125]
    assert log.read(offset=123)[0].value.startswith(b"123.")


def test_zstd_segments_with_many_frames_seek_to_the_right_frame(make_log):
    log = make_log(segment_bytes=str(3 << 20), compression="zstd")
    log.create()
    log.write([(None, b"%08d" % i * 16) for i in range(30000)])   # ~4 MiB: 1 sealed segment
    assert list_segments(log.pdir())[0].compressed
    for start in (0, 9999, 20001):
        got = log.read(offset=start, max_records=2)
        assert [(r.offset, r.value[:8]) for r in got] == \
            [(start, b"%08d" % start), (start + 1, b"%08d" % (start + 1))]


def test_a_flipped_byte_in_a_compressed_segment_raises_corrupt_record(make_log):
    log = make_log(segment_bytes="4000", compression="zstd")
    log.create()
    _fill(log, 300)
    first = list_segments(log.pdir())[0]
    _flip_byte(first.path, os.path.getsize(first.path) // 2)
    with pytest.raises(CorruptRecordError) as err:
        log.read()
    assert err.value.path == first.path


def _with_retention(make_log, reset: str):
    log = make_log(segment_bytes="1000", retention_bytes="2500", consumer_auto_offset_reset=reset)
    log.create()
    _fill(log, 200)
    log.admin.apply_retention("s")
    return log


def test_an_offset_before_the_oldest_jumps_to_the_oldest_by_default(make_log):
    log = _with_retention(make_log, "oldest")
    oldest = list_segments(log.pdir())[0].base
    assert oldest > 0
    assert log.read(offset=0)[0].offset == oldest


def test_an_offset_before_the_oldest_can_jump_to_upcoming(make_log):
    log = _with_retention(make_log, "largest")
    assert log.read(offset=0) == []
    reader = log.admin.reader("s", 0, 0)
    reader.read_records(1)
    assert reader.position == 200


def test_an_offset_before_the_oldest_can_raise(make_log):
    log = _with_retention(make_log, "error")
    with pytest.raises(OffsetOutOfRangeError, match="auto.offset.reset") as err:
        log.read(offset=3)
    assert err.value.offset == 3 and err.value.upcoming == 200


def test_an_offset_beyond_the_end_is_out_of_range(make_log):
    log = make_log(consumer_auto_offset_reset="error")
    log.create()
    _fill(log, 5)
    assert log.read(offset=5) == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(offset=6)


def test_a_roll_in_the_same_mtime_tick_as_the_last_look_is_not_missed(make_log, monkeypatch):
    """Directory mtimes are coarse: a roll can leave the mtime equal to the one the reader saw
    while it was still young. The reader must not later trust that value as "unchanged"."""
    import weir.engine.systems.filelog.reader as reader_module

    log = make_log(segment_bytes="300")
    log.create()
    reader = log.admin.reader("s", 0, 0)
    with log.writer() as w:
        w.append(b"a", b"1")
        w.flush()
        assert [r.offset for r in reader.read_records(10)] == [0]   # at the tail, looked
        seen = os.stat(log.pdir()).st_mtime_ns                     # (a young mtime)
        for i in range(12):                                         # rolls
            w.append(b"b", b"x" * 40)
        w.flush()
    assert len(list_segments(log.pdir())) > 1
    os.utime(log.pdir(), ns=(seen, seen))            # the roll fell in the same tick
    real = reader_module.time.time_ns
    monkeypatch.setattr(reader_module.time, "time_ns", lambda: real() + 10**9)
    assert [r.offset for r in reader.read_records(100)] == list(range(1, 13))
    reader.close()


def test_a_compacted_segment_replaced_while_the_reader_opens_it_is_read_from_its_replacement(
        make_log, monkeypatch):
    import weir.engine.systems.filelog.reader as reader_module

    log = make_log(segment_bytes="400", compaction_min_lag_ms="0")
    log.create(compact=True)
    log.write([(b"k%d" % (i % 4), b"v%d" % i) for i in range(60)])
    log.admin.compact("s")
    assert list_segments(log.pdir())[0].generation == 1
    log.write([(b"k%d" % (i % 4), b"w%d" % i) for i in range(60)])   # supersedes all of it
    real = reader_module.index_for
    calls = []

    def compaction_in_between(segment, size):
        if not calls:  # the reader has the generation-1 file open: compaction replaces it now
            calls.append(segment)
            log.admin.compact("s")
            assert not os.path.exists(segment.path)
        return real(segment, size)

    monkeypatch.setattr(reader_module, "index_for", compaction_in_between)
    records = log.read()
    assert calls and calls[0].generation == 1
    assert {r.key: r.value for r in records} == {b"k%d" % k: b"w%d" % (56 + k) for k in range(4)}
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
