"""PartitionWriter.append_all and FileLogProducer.send_batch: a batch of raw records in one
call writes exactly what one append/send per record writes."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from weir.engine.errors import SystemError_
from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.systems.filelog import FileLogProducer, StreamEndedError
from weir.engine.systems.filelog._index import load_index
from weir.engine.systems.filelog.segment import list_segments

from tests.engine.systems.filelog.conftest import SYSTEM, Log

RECORDS = [(b"k%03d" % i, None if i % 7 == 3 else b"v" * (i % 50)) for i in range(300)]


def _files(log: Log) -> dict[str, object]:
    """Partition 0's segments (bytes) and their indexes (all but the time sealed), by name."""
    out: dict[str, object] = {}
    for seg in list_segments(log.pdir()):
        with open(seg.path, "rb") as f:
            out[seg.path.rsplit("/", 1)[1]] = f.read()
        index = load_index(seg.index_path, os.path.getsize(seg.path))
        if index is not None:
            out[seg.index_path.rsplit("/", 1)[1]] = dataclasses.replace(index, sealed_ms=0)
    return out


def _two_logs(tmp_path, **config: str) -> tuple[Log, Log]:
    one, many = Log(str(tmp_path / "one"), **config), Log(str(tmp_path / "many"), **config)
    one.create()
    many.create()
    return one, many


@pytest.mark.parametrize("config", [
    {},                                                       # one segment, one buffer
    {"segment_bytes": "2000"},                                # rolls inside the batch
    {"producer_buffer_bytes": "512"},                         # buffer writes inside the batch
    {"segment_bytes": "1500", "producer_buffer_bytes": "300"},
], ids=["plain", "rolls", "small-buffer", "both"])
def test_a_batch_writes_the_same_files_as_one_append_per_record(tmp_path, config):
    one, many = _two_logs(tmp_path, **config)
    with one.writer() as w:
        offsets = [w.append(k, v) for k, v in RECORDS]
        w.flush()
    with many.writer() as w:
        assert w.append_all(RECORDS[:120]) == 120
        assert w.upcoming == 120
        assert w.append_all(iter(RECORDS[120:])) == 180   # any iterable
        w.flush()
    assert offsets == list(range(300))
    assert _files(many) == _files(one)
    assert [(r.offset, r.key, r.value) for r in many.read()] == [
        (i, k, v) for i, (k, v) in enumerate(RECORDS)]
    if "segment_bytes" in config:
        segments = list_segments(many.pdir())
        assert len(segments) > 2
        for seg, nxt in zip(segments, segments[1:]):
            assert load_index(seg.index_path, os.path.getsize(seg.path)).next_offset == nxt.base


def test_a_batch_after_single_appends_continues_the_offsets(log):
    log.create()
    with log.writer() as w:
        w.append(b"a", b"1")
        assert w.append_all([(b"b", b"2"), (None, b"3"), (b"c", None)], 1234) == 3
        assert w.append(b"d", b"4") == 4
        w.flush()
    records = log.read()
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, b"a", b"1"), (1, b"b", b"2"), (2, None, b"3"), (3, b"c", None), (4, b"d", b"4")]
    assert [r.timestamp for r in records][1:4] == [1234] * 3


def test_a_null_key_in_a_batch_that_needs_keys_fails_after_the_records_before_it(log):
    log.create()
    with log.writer() as w:
        with pytest.raises(SystemError_, match="record 2 of the batch has a null key"):
            w.append_all([(b"a", b"1"), (b"b", b"2"), (None, b"3"), (b"c", b"4")],
                         require_keys=True)
        assert w.upcoming == 2
        w.append_all([(b"d", b"5")])
        w.flush()
    assert [(r.offset, r.key) for r in log.read()] == [(0, b"a"), (1, b"b"), (2, b"d")]


def test_a_batch_to_an_ended_stream_is_refused(log):
    log.create(bounded=True)
    with log.writer() as w:
        w.end_stream()
        with pytest.raises(StreamEndedError):
            w.append_all([(b"a", b"1")])


def test_send_batch_sends_what_one_send_per_record_sends(tmp_path):
    one, many = _two_logs(tmp_path)
    stream = SystemStream(SYSTEM, "s")
    for log, batched in ((one, False), (many, True)):
        producer = FileLogProducer(log.settings)
        producer.register("src")
        producer.start()
        if batched:
            assert producer.send_batch("src", stream, 0, RECORDS) == len(RECORDS)
        else:
            for key, value in RECORDS:
                producer.send("src", OutgoingMessageEnvelope(stream, value, key=key, partition=0))
        producer.stop()
    assert _files(many) == _files(one)


def test_send_batch_names_the_stream_for_a_bad_partition_or_non_bytes_records(log):
    log.create()
    producer = FileLogProducer(log.settings)
    producer.register("src")
    stream = SystemStream(SYSTEM, "s")
    with pytest.raises(SystemError_, match="partitions 0..0, not 3"):
        producer.send_batch("src", stream, 3, [(b"a", b"1")])
    with pytest.raises(SystemError_, match="bytes keys and messages"):
        producer.send_batch("src", stream, 0, [("text", b"1")])
    producer.stop()
    shutil.rmtree(log.root)
