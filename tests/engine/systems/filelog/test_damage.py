"""Damage in the middle of a file log is never its end: the reader, the admin and the writer
stop with CorruptRecordError at the damaged record's offset, an offset beyond the end is an
error whatever auto.offset.reset says, and a bounded partition that cannot reach its end
marker fails instead of waiting. Also: stream identities (incarnations), renaming a stream
aside, the cleanup policy."""

from __future__ import annotations

import json
import os

import pytest

from weir.engine.errors import CorruptRecordError, PartitionLockedError
from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import CleanupPolicy, StreamSpec, partition_identities
from weir.engine.systems.filelog import OffsetBeyondEndError, OffsetOutOfRangeError
from weir.engine.systems.filelog._format import TailState, classify_tail, encode_record
from weir.engine.systems.filelog.segment import list_segments
from weir.engine.systems.memory import MemorySystemAdmin, reset_memory_systems

from tests.engine.systems.filelog.test_writer import _flip_byte

SSP = SystemStreamPartition("fl", "s", 0)


def _fill(log, n, stream="s"):
    return log.write([(b"k%d" % i, b"value-%d" % i) for i in range(n)], stream)


def _position(log, offset, stream="s"):
    """(path, byte) of the record at ``offset`` in the active segment."""
    path = list_segments(log.pdir(stream))[-1].path
    return path, sum(len(encode_record(b"k%d" % i, b"value-%d" % i)) for i in range(offset))


@pytest.mark.parametrize("reset", ["oldest", "largest", "error"])
def test_damage_below_the_start_offset_raises_at_its_offset_without_rereading(make_log, reset):
    log = make_log(consumer_auto_offset_reset=reset)
    log.create()
    _fill(log, 50)
    path, pos = _position(log, 20)
    _flip_byte(path, pos + 12)
    reader = log.admin.reader("s", 0, 40)
    with pytest.raises(CorruptRecordError) as err:
        reader.read_records(100)  # before: reset to 0 and re-delivered records 0..19 first
    assert err.value.offset == 20 and err.value.path == path and err.value.position == pos
    assert "not a torn tail" in str(err.value)


def test_a_flipped_length_with_valid_records_after_it_is_damage_not_a_tail(log):
    log.create()
    _fill(log, 50)
    path, pos = _position(log, 20)
    with open(path, "r+b") as f:
        f.seek(pos + 2)
        f.write(b"\x7f")  # the length field now points far past the end of the file
    with pytest.raises(CorruptRecordError) as err:
        log.read(offset=30)
    assert err.value.offset == 20
    os.unlink(path + ".tail")  # no tail hint: the writer walks the segment from its start
    with pytest.raises(CorruptRecordError):  # and the writer does not cut records 21..49 off
        log.writer()
    assert len(open(path, "rb").read()) > pos + 100


def test_a_writer_resuming_from_its_tail_hint_leaves_earlier_damage_to_readers(log):
    log.create()
    _fill(log, 50)
    path, pos = _position(log, 20)
    with open(path, "r+b") as f:
        f.seek(pos + 2)
        f.write(b"\x7f")
    size = os.path.getsize(path)
    with log.writer() as w:  # like Kafka past its recovery point: only the tail is walked
        assert w.upcoming == 50
    assert os.path.getsize(path) == size  # nothing cut off
    with pytest.raises(CorruptRecordError) as err:
        log.read(offset=30)
    assert err.value.offset == 20


def test_classify_tail_sees_a_length_pointing_past_the_end_with_records_after_it():
    records = b"".join(encode_record(b"k%d" % i, b"v" * 30) for i in range(20))
    damaged = bytearray(records)
    damaged[2] = 0x7F
    assert classify_tail(bytes(damaged), 0) is TailState.CORRUPT
    cut = encode_record(b"k", b"v" * 300)[:200]  # a real torn write: nothing valid after it
    assert classify_tail(cut, 0) is TailState.TORN


@pytest.mark.parametrize("reset", ["oldest", "largest"])
def test_an_offset_beyond_the_end_is_an_error_whatever_the_reset_policy(make_log, reset):
    log = make_log(consumer_auto_offset_reset=reset)
    log.create()
    _fill(log, 5)
    assert log.read(offset=5) == []  # the upcoming offset itself is fine
    with pytest.raises(OffsetBeyondEndError) as err:
        log.read(offset=9)
    assert isinstance(err.value, OffsetOutOfRangeError)
    assert err.value.upcoming == 5 and "holds records up to offset 4" in str(err.value)
    assert "nothing was reset" in str(err.value)


def test_a_cut_active_segment_below_the_start_offset_is_beyond_the_end(log):
    log.create()
    _fill(log, 50)
    path, pos = _position(log, 20)
    os.truncate(path, pos + 7)  # record 20 torn, 21.. gone
    with pytest.raises(OffsetBeyondEndError) as err:
        log.read(offset=40)
    assert err.value.upcoming == 20 and path in str(err.value)
    assert "7 bytes of a torn or damaged record" in str(err.value)


def test_an_emptied_partition_is_beyond_the_end_not_a_fresh_start(log):
    log.create()
    _fill(log, 5)
    for segment in list_segments(log.pdir()):
        os.unlink(segment.path)
    with pytest.raises(OffsetBeyondEndError, match="has no segment files"):
        log.read(offset=3)


def _ended(log, n):
    log.create(bounded=True)
    with log.writer() as w:
        for i in range(n):
            w.append(b"k%d" % i, b"value-%d" % i)
        w.end_stream()


@pytest.mark.parametrize("damage", ["flip the last record", "cut the last records",
                                    "delete the segment"])
def test_a_bounded_partition_that_cannot_reach_its_end_marker_fails_instead_of_waiting(
        log, damage):
    _ended(log, 30)
    path, pos = _position(log, 25)
    if damage == "flip the last record":
        last_path, last = _position(log, 29)
        _flip_byte(last_path, last + 12)  # reads like a torn tail
        expected = 29
    elif damage == "cut the last records":
        os.truncate(path, pos)
        expected = 25
    else:
        os.unlink(path)
        expected = 0
    reader = log.admin.reader("s", 0, 0)
    got = []
    with pytest.raises(CorruptRecordError) as err:
        for _ in range(5):  # a few polls: the first may only learn about the marker
            got.extend(reader.read_records(1000))
    assert err.value.offset == expected and "end-of-stream marker" in str(err.value)
    assert [r.offset for r in got] == list(range(expected))
    assert not reader.ended


def test_a_bounded_partition_read_to_its_marker_ends_normally(log):
    _ended(log, 30)
    reader = log.admin.reader("s", 0, 0)
    assert len(reader.read_records(1000)) == 30
    reader.read_records(10)
    assert reader.ended


def test_the_admin_does_not_report_a_short_log_for_mid_log_damage(log):
    log.create()
    _fill(log, 50)
    path, pos = _position(log, 20)
    _flip_byte(path, pos + 12)
    os.unlink(path + ".tail")  # no tail hint: the admin walks the segment and meets the damage
    with pytest.raises(CorruptRecordError) as err:
        log.admin.metadata([SSP._replace(system=log.settings.system)])
    assert err.value.offset == 20


def test_the_admin_counts_from_the_tail_hint_past_earlier_damage(log):
    log.create()
    _fill(log, 50)
    path, pos = _position(log, 20)
    _flip_byte(path, pos + 12)
    ssp = SSP._replace(system=log.settings.system)
    assert log.admin.metadata([ssp])[ssp].upcoming == 50  # the true end, never a short log
    with pytest.raises(CorruptRecordError) as err:  # the damage is met by whoever reads it
        log.read(offset=0)
    assert err.value.offset == 20


def test_the_admin_still_counts_up_to_a_torn_tail(log):
    log.create()
    _fill(log, 10)
    path = list_segments(log.pdir())[-1].path
    with open(path, "ab") as f:
        f.write(encode_record(b"x", b"y" * 40)[:20])
    md = log.admin.metadata([SSP._replace(system=log.settings.system)])
    assert md[SSP._replace(system=log.settings.system)].upcoming == 10


def test_a_sealed_segment_without_its_index_names_where_it_breaks(make_log):
    log = make_log(segment_bytes="600")
    log.create()
    _fill(log, 100)
    segments = list_segments(log.pdir())
    first = segments[0]
    second = segments[1]
    os.unlink(second.index_path)
    data = open(second.path, "rb").read()
    os.truncate(second.path, len(data) - 5)
    with pytest.raises(CorruptRecordError) as err:
        log.read(offset=second.base)
    assert err.value.path == second.path and err.value.offset is not None
    assert err.value.offset > second.base and "cut short" in str(err.value)
    assert first.base == 0


def test_a_damaged_record_below_the_start_in_an_indexed_sealed_segment_is_not_read_again(
        make_log):
    log = make_log(segment_bytes="600")
    log.create()
    _fill(log, 100)
    segment = list_segments(log.pdir())[1]
    data = open(segment.path, "rb").read()
    _flip_byte(segment.path, 30)  # inside the segment's first record's body
    assert len(open(segment.path, "rb").read()) == len(data)
    start = segment.base + 3  # already processed: the reader starts after the damage
    assert [r.offset for r in log.read(offset=start)] == list(range(start, 100))
    with pytest.raises(CorruptRecordError) as err:  # re-reading it is an error, not a skip
        log.read(offset=segment.base)
    assert err.value.offset == segment.base


# -- identities -------------------------------------------------------------------------------

def test_a_stream_created_again_gets_another_identity(log):
    system = log.settings.system
    ssp = SystemStreamPartition(system, "s", 0)
    log.create()
    first = log.admin.metadata([ssp])[ssp].identity
    assert first and partition_identities(log.admin, [ssp]) == {ssp: first}
    meta = json.loads(open(os.path.join(log.root, "s", "stream.json")).read())
    assert meta["incarnation"] == first and meta["format"] == 1
    log.admin.rename_stream("s", "s.old")
    log.create()
    second = log.admin.identities([ssp])[ssp]
    assert second and second != first
    assert log.admin.metadata([ssp])[ssp] == log.admin.metadata([ssp])[ssp]


def test_streams_created_before_identities_have_none(log):
    log.create()
    path = os.path.join(log.root, "s", "stream.json")
    meta = json.loads(open(path).read())
    del meta["incarnation"]
    with open(path, "w") as f:
        json.dump(meta, f)
    ssp = SystemStreamPartition(log.settings.system, "s", 0)
    assert log.admin.identities([ssp]) == {ssp: None}
    assert log.admin.metadata([ssp])[ssp].identity is None


def test_memory_streams_have_identities_that_change_when_recreated():
    admin = MemorySystemAdmin("mem-identity")
    admin.create_stream(StreamSpec("s", 2))
    ssp = SystemStreamPartition("mem-identity", "s", 1)
    first = admin.metadata([ssp])[ssp].identity
    assert first and admin.identities([ssp]) == {ssp: first}
    reset_memory_systems("mem-identity")
    admin = MemorySystemAdmin("mem-identity")
    admin.create_stream(StreamSpec("s", 2))
    assert admin.identities([ssp])[ssp] != first
    reset_memory_systems("mem-identity")


def test_rename_stream_moves_everything_aside_and_refuses_a_live_writer(log):
    log.create()
    _fill(log, 5)
    writer = log.writer()
    try:
        with pytest.raises(PartitionLockedError, match="live writer"):
            log.admin.rename_stream("s", "s.aside")
    finally:
        writer.close()
    target = log.admin.rename_stream("s", "s.aside")
    assert target == os.path.join(log.root, "s.aside")
    assert not log.admin.stream_exists("s")
    assert [r.offset for r in log.read("s.aside")] == list(range(5))


def test_cleanup_policy_is_read_from_the_stream_description(log):
    log.create("c", compact=True)
    log.create("d")
    assert log.admin.cleanup_policy("c") is CleanupPolicy.COMPACT
    assert log.admin.cleanup_policy("d") is CleanupPolicy.DELETE
