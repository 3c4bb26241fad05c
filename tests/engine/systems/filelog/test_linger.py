"""A producer's linger (``systems.<s>.producer.linger.ms``): what it sent reaches readers in any
process without a flush -- after the linger, at once with linger 0, when the run loop goes
idle (``LINGER.write_out``) -- never as half a record, never fsynced before the flush; the
key, its alias ``task.intermediate.linger.ms`` and bad values. Handshakes, no timing: a long
linger (an hour) stands for "not yet"."""

from __future__ import annotations

import os
import threading

import pytest

from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.filelog import FileLogConsumer, FileLogProducer, FileLogSettings
from weir.engine.systems.linger import LINGER
from weir.stores.config import Config, ConfigError

from tests.engine.systems.filelog.conftest import SYSTEM

OUT = SystemStream(SYSTEM, "s")
HOUR = "3600000"


def _producer(log) -> FileLogProducer:
    producer = FileLogProducer(log.settings)
    producer.register("t")
    return producer


def _send(producer, *values, partition=0):
    for value in values:
        producer.send("t", OutgoingMessageEnvelope(OUT, value, key=b"k", partition=partition))


def _values(log, partition=0):
    return [r.value for r in log.read(partition=partition)]


@pytest.fixture(autouse=True)
def _nothing_left_armed():
    yield
    LINGER.write_out()


def test_sent_records_reach_a_reader_after_the_linger_without_a_flush(make_log):
    log = make_log(producer_linger_ms="1")
    log.create()
    producer = _producer(log)
    _send(producer, b"a", b"b")
    consumer = FileLogConsumer(log.settings)
    ssp = SystemStreamPartition(SYSTEM, "s", 0)
    consumer.register(ssp, 0)
    consumer.start()
    got: list[bytes] = []
    while len(got) < 2:                          # the Linger's thread writes them out
        got += [e.message for e in consumer.poll([ssp], 1.0).get(ssp, [])]
    assert got == [b"a", b"b"]
    consumer.stop()
    producer.stop()


def test_linger_0_writes_every_send_out_at_once(make_log):
    log = make_log(producer_linger_ms="0")
    log.create(partitions=2)
    producer = _producer(log)
    _send(producer, b"a")
    assert _values(log) == [b"a"]
    _send(producer, b"b", partition=1)
    assert _values(log, 1) == [b"b"]
    producer.send_batch("t", OUT, 0, [(b"k1", b"c"), (b"k2", b"d")])
    assert _values(log) == [b"a", b"c", b"d"]
    assert not LINGER.armed
    producer.stop()


def test_what_waits_for_its_linger_is_written_out_when_the_run_loop_goes_idle(make_log):
    log = make_log(producer_linger_ms=HOUR)
    log.create()
    producer = _producer(log)
    _send(producer, b"a", b"b")
    producer.send_batch("t", OUT, 0, [(b"k", b"c")])
    assert _values(log) == [] and LINGER.armed
    LINGER.write_out()                           # what the run loop calls when it has nothing
    assert _values(log) == [b"a", b"b", b"c"]
    _send(producer, b"d")                        # the next record arms again
    assert LINGER.armed
    LINGER.write_out()
    assert _values(log) == [b"a", b"b", b"c", b"d"]
    producer.stop()


def test_a_linger_write_out_does_not_fsync_and_the_flush_still_does(make_log, monkeypatch):
    syncs = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), real(fd)))
    log = make_log(producer_linger_ms=HOUR)
    log.create()
    producer = _producer(log)
    _send(producer, b"a")
    LINGER.write_out()
    assert _values(log) == [b"a"] and syncs == []
    producer.flush("t")                          # the commit: the written-out record is fsynced
    assert len(syncs) == 1
    producer.stop()


def test_write_outs_racing_sends_and_flushes_never_split_or_lose_a_record(make_log):
    log = make_log(producer_linger_ms=HOUR, producer_buffer_bytes="4096", segment_bytes="65536")
    log.create()
    producer = _producer(log)
    values = [b"%06d" % i + b"." * (i % 300) for i in range(6000)]
    done = threading.Event()

    def writing_out():
        while not done.is_set():
            LINGER.write_out()

    racer = threading.Thread(target=writing_out)
    racer.start()
    try:
        for i, value in enumerate(values):
            _send(producer, value)
            if i % 997 == 0:
                producer.flush("t")
    finally:
        done.set()
        racer.join()
    producer.stop()
    assert _values(log) == values                # every record whole, in order, once


def test_the_producer_key_sets_the_linger_and_the_old_task_key_is_its_alias(tmp_path):
    root = str(tmp_path)
    assert FileLogSettings.from_config("fl", Config({})).producer_linger_ms == 5
    assert FileLogSettings.from_config("fl", Config({
        "systems.fl.producer.linger.ms": "0"})).producer_linger_ms == 0
    assert FileLogSettings.from_config("fl", Config({
        "task.intermediate.linger.ms": "50"})).producer_linger_ms == 50
    assert FileLogSettings.from_config("fl", Config({
        "task.intermediate.linger.ms": "50", "systems.fl.producer.linger.ms": "7",
        "systems.fl.root": root})).producer_linger_ms == 7


@pytest.mark.parametrize("key", ["systems.fl.producer.linger.ms", "task.intermediate.linger.ms"])
def test_a_negative_linger_is_refused_naming_the_key_and_where_it_was_set(key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as err:
        FileLogSettings.from_config("fl", Config({key: "-1"}, origins={key: "job.properties:4"}))
    assert "job.properties:4" in str(err.value)


def test_a_misspelt_linger_key_is_reported_with_the_right_one(tmp_path):
    from weir.engine.config.job import validate_config
    config = Config({"systems.fl.factory": "filelog", "systems.fl.producer.lingr.ms": "1"},
                    origins={"systems.fl.producer.lingr.ms": "job.properties:7"})
    warnings = validate_config(config)
    assert any("systems.fl.producer.lingr.ms" in str(w)
               and "systems.fl.producer.linger.ms" in str(w) for w in warnings)
