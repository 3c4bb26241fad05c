"""A waiting file-log consumer is woken by a change in its partitions' directories (Linux
inotify): a record another process writes ends a long poll at once; an idle consumer still
looks every 100 ms (virtual time, a stand-in watch); where no watch can be made it polls on a
schedule. Nothing here is timed: a poll that inotify failed to wake would
run to its (long) timeout and return nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from weir.engine.model import SystemStreamPartition
from weir.engine.systems.filelog import FileLogSystemFactory
from weir.engine.systems.filelog import consumer as consumer_module
from weir.engine.systems.filelog import reader as reader_module
from weir.engine.systems.filelog._watch import EVERYTHING, DirectoryWatch

from tests.engine.systems.filelog.conftest import SYSTEM

needs_inotify = pytest.mark.skipif(DirectoryWatch.open() is None,
                                   reason="inotify is not available here")


def _consumer(log, stream="s", partitions=1):
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    ssps = [SystemStreamPartition(SYSTEM, stream, p) for p in range(partitions)]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    return consumer, ssps


def _write_from_another_process(log, stream: str, partition: int, value: bytes) -> None:
    code = textwrap.dedent(f"""
        from weir.engine.model import OutgoingMessageEnvelope, SystemStream
        from weir.engine.systems.filelog import FileLogSystemFactory
        from weir.stores.config import Config
        config = Config({{"systems.{SYSTEM}.root": {log.root!r}}})
        producer = FileLogSystemFactory().get_producer("{SYSTEM}", config)
        producer.register("other")
        producer.send("other", OutgoingMessageEnvelope(SystemStream("{SYSTEM}", {stream!r}),
                                                       {value!r}, key=b"k", partition={partition}))
        producer.stop()
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


@needs_inotify
def test_a_record_written_by_another_process_ends_a_waiting_poll(make_log):
    # Looks are an hour apart: only the wake-up can deliver the record before the timeout.
    log = make_log(consumer_poll_max_sleep_ms="3600000")
    log.create(partitions=2)
    consumer, ssps = _consumer(log, partitions=2)
    assert consumer.poll(ssps, 0.01) == {}        # looked: empty; the next look is an hour off
    got = {}
    waiting = threading.Thread(target=lambda: got.update(consumer.poll(ssps, 120.0)))
    waiting.start()
    _write_from_another_process(log, "s", 1, b"hello")
    waiting.join()
    assert [e.message for e in got[ssps[1]]] == [b"hello"]
    consumer.stop()


@needs_inotify
def test_a_new_segment_and_the_end_marker_wake_a_waiting_poll(make_log):
    log = make_log(consumer_poll_max_sleep_ms="3600000")
    log.create(bounded=True, segment_bytes="64")
    consumer, (ssp,) = _consumer(log)
    consumer.poll([ssp], 0.01)
    with log.writer() as w:
        for i in range(5):                       # rolls: every record gets its own segment
            w.append(b"k", b"value-%d" % i)
        w.flush()
        w.end_stream()
    seen = []
    while not seen or not seen[-1].is_end_of_stream:
        for envelope in consumer.poll([ssp], 120.0).get(ssp, []):
            seen.append(envelope)
    assert [e.message for e in seen[:-1]] == [b"value-%d" % i for i in range(5)]
    consumer.stop()


def _count_reads(monkeypatch) -> list[int]:
    reads = [0]
    real = reader_module.PartitionReader.read

    def counting(self, *args):
        reads[0] += 1
        return real(self, *args)

    monkeypatch.setattr(reader_module.PartitionReader, "read", counting)
    return reads


class FakeWatch:
    """A watch that never sees a change; its waits advance the virtual clock."""

    def __init__(self, clock):
        self.clock, self.closed = clock, False

    def add(self, path, key):
        self.keys = getattr(self, "keys", []) + [key]
        return True

    def drain(self):
        return frozenset()

    def wait(self, timeout):
        self.clock.now += timeout
        return frozenset()

    def close(self):
        self.closed = True


class VirtualTime:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        raise AssertionError("a consumer with a watch waits on it, never sleeps")


@pytest.fixture
def watch(monkeypatch) -> FakeWatch:
    """The stand-in watch every consumer made in the test gets, on virtual time."""
    clock = VirtualTime()
    monkeypatch.setattr(consumer_module, "time", clock)
    fake = FakeWatch(clock)
    monkeypatch.setattr(consumer_module.DirectoryWatch, "open", classmethod(lambda cls: fake))
    return fake


def test_an_idle_consumer_with_a_watch_looks_every_100_ms(log, watch, monkeypatch):
    clock = watch.clock
    log.create()
    consumer, (ssp,) = _consumer(log)            # woken by changes; looks every 100 ms
    looks = _count_reads(monkeypatch)
    start = clock.now
    while clock.now - start < 1.0:               # one virtual second of 3 ms polls
        assert consumer.poll([ssp], 0.003) == {}
    assert 9 <= looks[0] <= 11
    consumer.stop()


def test_a_change_seen_by_the_watch_makes_the_next_poll_look_at_once(log, watch):
    log.create()
    consumer, (ssp,) = _consumer(log)
    assert consumer.poll([ssp], 0.003) == {}     # looked; the next look is 100 ms away
    log.write([(b"k", b"v")])
    watch.drain = lambda: frozenset({ssp})       # the write's event
    assert [e.message for e in consumer.poll([ssp], 0.003)[ssp]] == [b"v"]
    consumer.stop()


def test_a_partition_read_to_its_end_is_read_again_only_after_a_change(log, watch,
                                                                       monkeypatch):
    log.create(partitions=2, fetch_max_records="2")
    log.write([(b"k", b"a"), (b"k", b"b"), (b"k", b"c")], partition=0)
    consumer, ssps = _consumer(log, partitions=2)
    reads = _count_reads(monkeypatch)
    got = consumer.poll(ssps, 0)                 # p0: two (of three), p1: nothing, at its end
    assert [e.message for e in got[ssps[0]]] == [b"a", b"b"] and reads[0] == 2
    got = consumer.poll(ssps, 0)                 # p0 had more: read again (to its end)
    assert [e.message for e in got[ssps[0]]] == [b"c"] and reads[0] == 3
    for _ in range(5):                           # both at their ends, nothing changed
        assert consumer.poll(ssps, 0) == {}
    assert reads[0] == 3
    log.write([(b"k", b"d")], partition=1)
    watch.drain = lambda: frozenset({ssps[1]})   # the write's event, in p1's directory
    assert [e.message for e in consumer.poll(ssps, 0)[ssps[1]]] == [b"d"]
    assert reads[0] == 4                         # p1 only: p0 did not change
    watch.drain = lambda: EVERYTHING             # events were lost: read every partition
    assert consumer.poll(ssps, 0) == {} and reads[0] == 6
    consumer.stop()


def test_without_inotify_the_consumer_polls_and_still_delivers(log, monkeypatch):
    monkeypatch.setattr(consumer_module.DirectoryWatch, "open", classmethod(lambda cls: None))
    log.create()
    consumer, (ssp,) = _consumer(log)
    assert consumer.poll([ssp], 0.005) == {}
    log.write([(b"k", b"v")])
    got = {}
    while not got:
        got = consumer.poll([ssp], 0.05)
    assert [e.message for e in got[ssp]] == [b"v"]
    consumer.stop()


def test_a_partition_that_cannot_be_watched_makes_the_consumer_poll(log, monkeypatch):
    made = []

    class Refusing(FakeWatch):
        def add(self, path, key):
            return False
    monkeypatch.setattr(consumer_module.DirectoryWatch, "open",
                        classmethod(lambda cls: made.append(Refusing(None)) or made[-1]))
    log.create()
    consumer, (ssp,) = _consumer(log)
    assert made[0].closed and consumer._watch is None
    log.write([(b"k", b"v")])
    got = {}
    while not got:
        got = consumer.poll([ssp], 0.05)
    assert [e.message for e in got[ssp]] == [b"v"]
    consumer.stop()


@needs_inotify
def test_stop_closes_the_watch(log):
    log.create()
    consumer, _ = _consumer(log)
    watch = consumer._watch
    consumer.stop()
    assert consumer._watch is None and not watch._finalizer.alive
