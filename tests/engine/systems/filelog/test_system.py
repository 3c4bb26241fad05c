"""Admin, consumer and producer behaviour specific to the file log (the shared contract
suite in tests/engine/systems/test_contract.py covers the protocol itself)."""

from __future__ import annotations

import json
import os

import pytest

from weir.engine.errors import StreamNotFoundError, SystemError_
from weir.engine.model import (OutgoingMessageEnvelope, SystemStream, SystemStreamPartition,
                          partition_for)
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.filelog import FileLogSystemFactory
from weir.engine.systems.filelog.segment import list_segments

from tests.engine.systems.filelog.conftest import SYSTEM


def _ssp(stream="s", partition=0):
    return SystemStreamPartition(SYSTEM, stream, partition)


def _producer(log):
    producer = FileLogSystemFactory().get_producer(SYSTEM, log.config)
    producer.register("t")
    producer.start()
    return producer


def _send(producer, stream, value, key=None, **kw):
    producer.send("t", OutgoingMessageEnvelope(SystemStream(SYSTEM, stream), value, key=key, **kw))


def test_create_stream_writes_stream_json_and_partition_directories(log):
    assert log.admin.create_stream(StreamSpec("clicks", 3, bounded=True,
                                              config={"segment.bytes": "4096"}))
    with open(os.path.join(log.root, "clicks", "stream.json")) as f:
        meta = json.load(f)
    assert (meta["partitions"], meta["cleanup_policy"], meta["bounded"], meta["format"]) == \
        (3, "delete", True, 1)
    assert meta["config"] == {"segment.bytes": "4096"} and meta["compression"] == "none"
    assert sorted(os.listdir(os.path.join(log.root, "clicks"))) == ["0", "1", "2", "stream.json"]
    assert log.admin.stream_settings("clicks").segment_bytes == 4096
    assert log.admin.list_streams() == ["clicks"]


def test_stream_level_settings_override_system_settings(make_log):
    log = make_log(segment_bytes="100000")
    log.create("a", segment_bytes="5000")
    log.create("b")
    assert log.admin.stream_settings("a").segment_bytes == 5000
    assert log.admin.stream_settings("b").segment_bytes == 100000
    from weir.engine.systems.filelog.settings import FileLogSettings
    job = FileLogSettings.from_config(SYSTEM, log.config.merged(
        {f"systems.{SYSTEM}.streams.a.segment.bytes": "7000"}))
    assert job.for_stream("a", log.admin.stream_meta("a").config).segment_bytes == 7000


def test_metadata_lists_each_partition_once_per_call(log, monkeypatch):
    log.create(partitions=3)
    log.write([(None, b"x")] * 4, partition=2)
    calls = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p: (calls.append(p), real(p))[1])
    ssps = [_ssp(partition=p) for p in (0, 1, 2, 2, 1)]
    md = log.admin.metadata(ssps)
    assert len(calls) == 3
    assert (md[_ssp(partition=2)].oldest, md[_ssp(partition=2)].newest,
            md[_ssp(partition=2)].upcoming) == (0, 3, 4)


def test_metadata_follows_appends_incrementally(log):
    log.create()
    with log.writer() as w:
        for n in range(1, 4):
            w.append(None, b"x" * n)
            w.flush()
            assert log.admin.metadata([_ssp()])[_ssp()].upcoming == n


def test_metadata_of_a_partition_that_does_not_exist_raises(log):
    log.create(partitions=2)
    with pytest.raises(SystemError_, match="partitions 0..1, not 5"):
        log.admin.metadata([_ssp(partition=5)])
    with pytest.raises(StreamNotFoundError, match="weir log create"):
        log.admin.partition_count("nope")


def test_invalid_stream_names_are_refused(log):
    for name in ("", "..", ".hidden", "a/b"):
        with pytest.raises(SystemError_, match="not a valid file log stream name"):
            log.admin.create_stream(StreamSpec(name, 1))


def test_fetch_max_records_can_be_set_per_stream(make_log):
    log = make_log()
    log.config = log.config.merged({f"systems.{SYSTEM}.streams.s.fetch.max.records": "3"})
    log.create()
    log.write([(None, b"x")] * 10)
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    consumer.register(_ssp(), 0)
    consumer.start()
    assert [len(consumer.poll([_ssp()], 0)[_ssp()]) for _ in range(4)] == [3, 3, 3, 1]
    consumer.stop()


def test_envelopes_carry_offset_key_message_timestamp_and_size(log):
    log.create()
    log.write([(b"key", b"value", 1234)])
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    consumer.register(_ssp(), 0)
    consumer.start()
    (env,) = consumer.poll([_ssp()], 0)[_ssp()]
    assert (env.ssp, env.offset, env.key, env.message, env.timestamp, env.size) == \
        (_ssp(), 0, b"key", b"value", 1234, 3 + 5)
    assert consumer.position(_ssp()) == 1


def test_a_consumer_registered_twice_starts_from_the_lower_offset(log):
    log.create()
    log.write([(None, b"%d" % i) for i in range(5)])
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    consumer.register(_ssp(), 3)
    consumer.register(_ssp(), 1)
    consumer.register(_ssp(), 4)
    consumer.start()
    assert [e.offset for e in consumer.poll([_ssp()], 0)[_ssp()]] == [1, 2, 3, 4]


def test_polling_an_unregistered_partition_is_an_error(log):
    log.create()
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    consumer.start()
    with pytest.raises(SystemError_, match="not registered"):
        consumer.poll([_ssp()], 0)


def test_producer_partitions_by_key_and_round_robins_without_one(log):
    log.create(partitions=4)
    producer = _producer(log)
    for i in range(8):
        _send(producer, "s", b"v", key=b"user-%d" % i)
    for _ in range(4):
        _send(producer, "s", b"nokey")
    _send(producer, "s", b"pk", key=b"k", partition_key=b"user-1")
    producer.flush("t")
    seen = {p: [(r.key, r.value) for r in log.read(partition=p)] for p in range(4)}
    for i in range(8):
        assert (b"user-%d" % i, b"v") in seen[partition_for(b"user-%d" % i, 4)]
    assert sorted(sum(v == b"nokey" for _, v in seen[p]) for p in range(4)) == [1, 1, 1, 1]
    assert (b"k", b"pk") in seen[partition_for(b"user-1", 4)]
    producer.stop()


def test_producer_refuses_unserialized_messages_with_a_hint(log):
    log.create()
    producer = _producer(log)
    with pytest.raises(SystemError_, match="bytes keys and messages.*serde"):
        _send(producer, "s", "not bytes", partition=0)
    with pytest.raises(SystemError_, match="partitions 0..0, not 3"):
        _send(producer, "s", b"x", partition=3)
    producer.stop()


def test_producers_of_one_process_share_the_partition_writer(log):
    log.create()
    a, b = _producer(log), _producer(log)
    _send(a, "s", b"from a", partition=0)
    _send(b, "s", b"from b", partition=0)
    b.flush("t")
    assert [r.value for r in log.read()] == [b"from a", b"from b"]
    a.stop()
    _send(b, "s", b"still b", partition=0)
    b.stop()
    assert [r.value for r in log.read()][-1] == b"still b"
    log.writer().close()   # everything released


def test_stopping_a_producer_writes_its_records_even_while_another_shares_the_writer(log):
    log.create()
    a, b = _producer(log), _producer(log)
    _send(b, "s", b"from b", partition=0)
    _send(a, "s", b"from a", partition=0)
    a.stop()                       # b keeps the shared writer open and never flushes
    assert [r.value for r in log.read()] == [b"from b", b"from a"]
    b.stop()


def test_ending_an_unbounded_stream_is_refused(log):
    log.create()
    with pytest.raises(SystemError_, match="not bounded"):
        log.admin.end_stream("s")


def test_producer_ends_a_bounded_stream_after_its_last_record(log):
    log.create(partitions=2, bounded=True)
    producer = _producer(log)
    _send(producer, "s", b"a", partition=1)
    assert producer.end_stream("s") == {0: 0, 1: 1}
    producer.stop()
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    consumer.register(_ssp(partition=1), 0)
    consumer.start()
    envs = consumer.poll([_ssp(partition=1)], 0)[_ssp(partition=1)]
    assert [(e.offset, e.is_end_of_stream) for e in envs] == [(0, False), (1, True)]
    assert consumer.poll([_ssp(partition=1)], 0) == {}


def test_segments_roll_under_the_producer(make_log):
    log = make_log(segment_bytes="2000")
    log.create()
    producer = _producer(log)
    for i in range(500):
        _send(producer, "s", b"%05d" % i, partition=0)
    producer.flush("t")
    producer.stop()
    assert len(list_segments(log.pdir())) > 3
    assert [r.value for r in log.read()] == [b"%05d" % i for i in range(500)]


def test_a_lost_stream_json_is_never_recreated_over_the_records_it_described(log):
    # stream.json deleted, partitions still there. `weir log create` (what the "does not
    # exist" error advised) used to write a new stream.json over the old records: another
    # partition count, unbounded, a new identity.
    from weir.engine.systems.filelog import StreamMetaMissingError

    log.create(partitions=4, bounded=True)
    log.write([(None, b"a")] * 3, partition=2)
    meta = os.path.join(log.root, "s", "stream.json")
    os.remove(meta)

    with pytest.raises(StreamNotFoundError) as missing:
        log.admin.stream_meta("s")
    assert "backup" in str(missing.value) and "weir log create" not in str(missing.value)
    with pytest.raises(StreamMetaMissingError) as err:
        log.admin.create_stream(StreamSpec("s", 1))
    assert meta in str(err.value) and "backup" in str(err.value)
    assert not os.path.exists(meta)
    assert [p.name for p in list_segments(log.pdir("s", 2))]  # records untouched
    log.create("fresh", partitions=2)  # a new stream still can be created


def test_a_consumer_builds_each_record_with_the_factory_it_was_given(log):
    log.create()
    log.write([(b"key", b"value", 1234), (None, None, 5)])
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    assert consumer.takes_envelope_factory
    consumer.register(_ssp(), 0)
    built = []

    def make(ssp, offset, key, message, timestamp, size):
        built.append((ssp, offset, key, message, timestamp, size))
        return ("typed", offset)

    consumer.set_envelope_factory(_ssp(), make)
    consumer.start()
    assert consumer.poll([_ssp()], 0)[_ssp()] == [("typed", 0), ("typed", 1)]
    assert built == [(_ssp(), 0, b"key", b"value", 1234, 8), (_ssp(), 1, None, None, 5, 0)]
    consumer.stop()


def test_an_envelope_factory_for_an_unregistered_partition_is_an_error(log):
    log.create()
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    with pytest.raises(SystemError_, match="register"):
        consumer.set_envelope_factory(_ssp(), lambda *record: record)
