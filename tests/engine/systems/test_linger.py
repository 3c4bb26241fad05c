"""The process's Linger: an armed item is written out by the timer thread once its linger has
passed, or at once by ``write_out`` (the run loop going idle); a failing item is reported and
the timer goes on; a forked child starts with a Linger of its own. Handshakes, no timing."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from weir.engine.systems.linger import LINGER, Linger


class Item:
    def __init__(self):
        self.written = threading.Event()
        self.calls = 0

    def write_lingering(self):
        self.calls += 1
        self.written.set()


def test_the_timer_thread_writes_an_armed_item_out():
    linger, item = Linger(), Item()
    linger.arm(item, 1)
    assert item.written.wait(60)
    assert item.calls == 1


def test_write_out_writes_every_armed_item_at_once_on_the_calling_thread():
    linger = Linger()
    items = [Item() for _ in range(3)]
    for item in items:
        linger.arm(item, 3_600_000)               # an hour: only write_out can do it
    assert linger.armed
    linger.write_out()
    assert [i.calls for i in items] == [1, 1, 1] and not linger.armed
    linger.write_out()                            # nothing armed: nothing called
    assert [i.calls for i in items] == [1, 1, 1]


def test_an_item_armed_earlier_than_the_one_waited_for_is_written_first():
    linger, late, early = Linger(), Item(), Item()
    linger.arm(late, 3_600_000)
    linger.arm(early, 1)                          # wakes the waiting timer thread
    assert early.written.wait(60)
    assert late.calls == 0


def test_a_failing_item_is_reported_once_and_the_timer_goes_on(caplog):
    class Failing:
        def write_lingering(self):
            raise OSError("disk full")
    linger, after = Linger(), Item()
    with caplog.at_level(logging.WARNING, logger="weir.engine.systems.linger"):
        linger.arm(Failing(), 1)
        linger.arm(Failing(), 1)
        linger.arm(after, 2)
        assert after.written.wait(60)
    assert sum("disk full" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_has_a_linger_of_its_own():
    LINGER.arm(Item(), 3_600_000)                 # the parent's thread runs, an item waits
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing inherited is armed, and its own timer works
        ok = not LINGER.armed
        item = Item()
        LINGER.arm(item, 1)
        ok = ok and item.written.wait(60)
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    LINGER.write_out()
