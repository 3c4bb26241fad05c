"""The memory system's own behaviour (the shared contract is in test_contract.py)."""

from __future__ import annotations

import threading
import uuid

import pytest

from weir.engine.errors import StreamNotFoundError, SystemError_
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition, partition_for
from weir.engine.systems.api import CleanupPolicy, StreamSpec
from weir.engine.systems.memory import (
    MemorySystemAdmin,
    MemorySystemConsumer,
    MemorySystemFactory,
    reset_memory_systems,
)


@pytest.fixture
def system():
    name = f"mem-{uuid.uuid4().hex[:8]}"
    yield name
    reset_memory_systems(name)


def _send(producer, system, stream, message, key=None, partition=0, **kw):
    producer.send("test", OutgoingMessageEnvelope(
        SystemStream(system, stream), message, key=key, partition=partition, **kw))


def _drain(consumer, ssp):
    out = []
    while True:
        batch = consumer.poll([ssp], 0).get(ssp)
        if not batch:
            return out
        out.extend(batch)


def test_streams_are_shared_by_every_factory_of_the_same_system_name(system):
    MemorySystemFactory().get_admin(system, {}).create_stream(StreamSpec("s", 1))
    _send(MemorySystemFactory().get_producer(system, {}), system, "s", b"x")
    admin = MemorySystemFactory().get_admin(system, {})
    assert admin.metadata([SystemStreamPartition(system, "s", 0)])[
        SystemStreamPartition(system, "s", 0)].upcoming == 1


def test_systems_with_different_names_do_not_share_streams(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 1))
    other = system + "-other"
    assert not MemorySystemAdmin(other).stream_exists("s")
    reset_memory_systems(other)


def test_reset_forgets_the_streams_of_a_system(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 1))
    reset_memory_systems(system)
    assert not MemorySystemAdmin(system).stream_exists("s")


def _started_consumer(system):
    """A started consumer of the new stream ``s`` (one partition), from offset 0."""
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 1))
    ssp = SystemStreamPartition(system, "s", 0)
    consumer = MemorySystemConsumer(system)
    consumer.register(ssp, 0)
    consumer.start()
    return consumer, ssp


def _poll_in_thread(consumer, ssp):
    """Start a 30 s poll of ``ssp`` in a thread; returns the thread and the list its result
    is appended to, once the thread is about to poll."""
    got, polling = [], threading.Event()

    def poll():
        polling.set()
        got.append(consumer.poll([ssp], 30.0))

    t = threading.Thread(target=poll)
    t.start()
    polling.wait()
    return t, got


def test_waiting_consumer_wakes_when_a_record_is_sent(system):
    consumer, ssp = _started_consumer(system)
    t, got = _poll_in_thread(consumer, ssp)
    _send(MemorySystemFactory().get_producer(system, {}), system, "s", b"late")
    t.join(30)
    assert not t.is_alive()
    assert [e.message for e in got[0][ssp]] == [b"late"]


def test_stop_wakes_a_waiting_poll_with_nothing(system):
    consumer, ssp = _started_consumer(system)
    t, got = _poll_in_thread(consumer, ssp)
    consumer.stop()
    t.join(30)
    assert got == [{}]


def test_a_consumer_started_again_after_stop_waits_for_records_again(system):
    consumer, ssp = _started_consumer(system)
    consumer.stop()
    assert consumer.poll([ssp], 30.0) == {}  # stopped: returns at once
    consumer.start()
    t, got = _poll_in_thread(consumer, ssp)
    _send(MemorySystemFactory().get_producer(system, {}), system, "s", b"after restart")
    t.join(30)
    assert not t.is_alive()
    # Still stopped, the poll would have returned {} at once (and a loop over it would spin).
    assert [e.message for e in got[0][ssp]] == [b"after restart"]


def test_registering_an_ssp_twice_keeps_the_lower_offset(system):
    admin = MemorySystemAdmin(system)
    admin.create_stream(StreamSpec("s", 1))
    producer = MemorySystemFactory().get_producer(system, {})
    for i in range(5):
        _send(producer, system, "s", bytes([i]))
    ssp = SystemStreamPartition(system, "s", 0)
    consumer = MemorySystemConsumer(system)
    consumer.register(ssp, 3)
    consumer.register(ssp, 1)
    consumer.register(ssp, 4)
    consumer.start()
    assert [e.offset for e in _drain(consumer, ssp)] == [1, 2, 3, 4]


def test_poll_before_start_and_unregistered_ssps_are_errors(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 2))
    consumer = MemorySystemConsumer(system)
    ssp0, ssp1 = (SystemStreamPartition(system, "s", p) for p in (0, 1))
    consumer.register(ssp0, 0)
    with pytest.raises(SystemError_, match="start"):
        consumer.poll([ssp0], 0)
    consumer.start()
    with pytest.raises(SystemError_, match="not registered"):
        consumer.poll([ssp1], 0)


def test_starting_a_consumer_on_a_missing_stream_names_it(system):
    consumer = MemorySystemConsumer(system)
    consumer.register(SystemStreamPartition(system, "nope", 0), 0)
    with pytest.raises(StreamNotFoundError, match=f"{system}.nope"):
        consumer.start()


def test_a_partition_out_of_range_is_an_error_naming_the_valid_ones(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 2))
    with pytest.raises(SystemError_, match="partitions 0..1"):
        MemorySystemAdmin(system).metadata([SystemStreamPartition(system, "s", 2)])
    with pytest.raises(SystemError_, match="partition 5"):
        _send(MemorySystemFactory().get_producer(system, {}), system, "s", b"x", partition=5)


def test_sending_objects_that_are_not_bytes_points_at_the_serde_config(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 1))
    with pytest.raises(SystemError_, match="samza.msg.serde"):
        _send(MemorySystemFactory().get_producer(system, {}), system, "s", {"a": 1})


def test_records_without_partition_go_by_key_or_round_robin(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 4))
    producer = MemorySystemFactory().get_producer(system, {})
    _send(producer, system, "s", b"v", key=b"user-7", partition=None)
    _send(producer, system, "s", b"v", key=b"k", partition_key="user-7", partition=None)
    for _ in range(4):
        _send(producer, system, "s", b"keyless", partition=None)
    info = MemorySystemAdmin(system).describe("s")
    expected = partition_for(b"user-7", 4)
    counts = [i.metadata.upcoming for i in info]
    assert counts[expected] == 3  # two keyed + one round-robin
    assert sum(counts) == 6 and all(c >= 1 for c in counts)


def test_ending_an_unbounded_stream_is_refused(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 1))
    with pytest.raises(SystemError_, match="not bounded"):
        MemorySystemAdmin(system).end_stream("s")


def test_a_bounded_stream_takes_no_records_after_its_end(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 1, bounded=True))
    producer = MemorySystemFactory().get_producer(system, {})
    producer.end_stream("s")
    with pytest.raises(SystemError_, match="has ended"):
        _send(producer, system, "s", b"x")


def test_describe_reports_bytes_and_end(system):
    admin = MemorySystemAdmin(system)
    admin.create_stream(StreamSpec("s", 2, CleanupPolicy.COMPACT, bounded=True))
    _send(MemorySystemFactory().get_producer(system, {}), system, "s", b"abc", key=b"k", partition=1)
    admin.end_stream("s")
    info = admin.describe("s")
    assert [(i.partition, i.bytes, i.ended) for i in info] == [(0, 0, True), (1, 4, True)]
    assert info[1].metadata.newest == 0
    assert admin.cleanup_policy("s") is CleanupPolicy.COMPACT


def test_fetch_max_records_comes_from_config(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 1))
    producer = MemorySystemFactory().get_producer(system, {})
    for i in range(10):
        _send(producer, system, "s", bytes([i]))
    consumer = MemorySystemFactory().get_consumer(
        system, {f"systems.{system}.memory.fetch.max.records": "3"})
    ssp = SystemStreamPartition(system, "s", 0)
    consumer.register(ssp, 0)
    consumer.start()
    assert [len(consumer.poll([ssp], 0)[ssp]) for _ in range(4)] == [3, 3, 3, 1]


def test_eos_waits_for_the_next_poll_when_the_batch_is_full(system):
    MemorySystemAdmin(system).create_stream(StreamSpec("s", 1, bounded=True))
    producer = MemorySystemFactory().get_producer(system, {})
    for i in range(3):
        _send(producer, system, "s", bytes([i]))
    producer.end_stream("s")
    consumer = MemorySystemConsumer(system, fetch_max=3)
    ssp = SystemStreamPartition(system, "s", 0)
    consumer.register(ssp, 0)
    consumer.start()
    first = consumer.poll([ssp], 0)[ssp]
    second = consumer.poll([ssp], 0)[ssp]
    assert [e.offset for e in first] == [0, 1, 2] and not any(e.is_end_of_stream for e in first)
    assert [(e.offset, e.is_end_of_stream) for e in second] == [(3, True)]
