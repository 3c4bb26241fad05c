"""An idle file-log consumer that polls on a schedule (where inotify cannot be used): the wait
between looks grows across polls that find nothing and starts over on data; an empty
partition is listed again only when its directory changes. Time is virtual (the consumer's
clock and sleep are replaced), so nothing here is timed. test_wakeup.py covers consumers
woken by inotify."""

from __future__ import annotations

import os

import pytest

from weir.engine.model import SystemStreamPartition
from weir.engine.systems.filelog import FileLogSystemFactory
from weir.engine.systems.filelog import consumer as consumer_module
from weir.engine.systems.filelog import reader as reader_module

from tests.engine.systems.filelog.conftest import SYSTEM


class VirtualTime:
    """Stands in for the ``time`` module of the consumer: ``sleep`` advances ``monotonic``."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    virtual = VirtualTime()
    monkeypatch.setattr(consumer_module, "time", virtual)
    monkeypatch.setattr(consumer_module.DirectoryWatch, "open", classmethod(lambda cls: None))
    return virtual


def _consumer(log, stream="s"):
    consumer = FileLogSystemFactory().get_consumer(SYSTEM, log.config)
    ssp = SystemStreamPartition(SYSTEM, stream, 0)
    consumer.register(ssp, 0)
    consumer.start()
    return consumer, ssp


def _count_looks(monkeypatch) -> list[int]:
    looks = [0]
    real = reader_module.PartitionReader.read

    def counting(self, *args):
        looks[0] += 1
        return real(self, *args)

    monkeypatch.setattr(reader_module.PartitionReader, "read", counting)
    return looks


def test_the_wait_keeps_growing_across_empty_polls_up_to_the_max_sleep(log, clock):
    log.create()
    consumer, ssp = _consumer(log)       # poll.max.sleep.ms: 10
    for _ in range(6):
        assert consumer.poll([ssp], 0.004) == {}
    # 0.5, 1, 2 ms in the first poll; its next look (4 ms later) is past its deadline, so
    # the next poll waits for it first; the steps go on doubling up to 10 ms.
    assert clock.sleeps[:3] == [0.0005, 0.001, 0.002]
    assert max(clock.sleeps) <= 0.01
    steps = [s for s in clock.sleeps if s > 0.002]
    assert steps and steps == sorted(steps)
    consumer.stop()


def test_an_idle_consumer_polled_often_looks_once_per_max_sleep(log, clock, monkeypatch):
    log.create()
    consumer, ssp = _consumer(log)
    looks = _count_looks(monkeypatch)
    consumer.poll([ssp], 0.1)            # settle at the 10 ms step
    looks[0] = 0
    start = clock.now
    while clock.now - start < 1.0:       # one virtual second of 10 ms polls
        consumer.poll([ssp], 0.01)
    assert 95 <= looks[0] <= 105
    consumer.stop()


def test_records_start_the_wait_over(log, clock):
    log.create()
    consumer, ssp = _consumer(log)
    consumer.poll([ssp], 0.1)
    log.write([(b"k", b"v")])
    got = consumer.poll([ssp], 0.1)
    assert [e.message for e in got[ssp]] == [b"v"]
    clock.sleeps.clear()
    assert consumer.poll([ssp], 0.002) == {}
    assert clock.sleeps[0] == 0.0005      # looks right away, then waits 0.5 ms again
    consumer.stop()


def test_a_poll_without_timeout_looks_at_once_and_never_sleeps(log, clock, monkeypatch):
    log.create()
    consumer, ssp = _consumer(log)
    consumer.poll([ssp], 0.1)
    looks = _count_looks(monkeypatch)
    clock.sleeps.clear()
    for _ in range(3):
        assert consumer.poll([ssp], 0) == {}
    assert looks[0] == 3 and clock.sleeps == []
    log.write([(b"k", b"v")])
    assert consumer.poll([ssp], 0)[ssp][0].message == b"v"
    consumer.stop()


def test_an_empty_partition_is_listed_again_only_when_its_directory_changes(log, monkeypatch):
    log.create()
    old = 1_000_000_000                  # an old directory mtime: no racy-mtime re-listing
    os.utime(log.pdir(), (old, old))
    consumer, ssp = _consumer(log)
    listings = [0]
    real = reader_module.list_segments
    monkeypatch.setattr(reader_module, "list_segments",
                        lambda d: (listings.__setitem__(0, listings[0] + 1), real(d))[1])
    for _ in range(10):
        assert consumer.poll([ssp], 0) == {}
    assert listings[0] <= 2              # the first look, and the one that notes the mtime
    log.write([(b"k", b"v")])            # creates the first segment: the directory changes
    assert consumer.poll([ssp], 0)[ssp][0].message == b"v"
    consumer.stop()
