"""A bounded source (one micro-batch of a job on Spark): the loop stops once everything the
source handed out was processed, commits, and runs a window first when told it is due."""

from __future__ import annotations

import threading

import pytest

from weir.engine.runloop.loop import StopReason

from tests.engine.runloop._helpers import (A, B, Recording, RecordingCheckpoints, ScriptedSource,
                                           instance, msgs, offsets_of, run)


class BoundedSource(ScriptedSource):
    def exhausted(self) -> bool:
        with self._lock:
            return not self._items


class SlowCallbacks:
    """Completes each callback later, from another thread: messages are in flight when the
    source runs dry."""

    def __init__(self):
        self.done: list[int] = []

    def process_async(self, envelope, collector, coordinator, callback):
        def finish():
            self.done.append(envelope.offset)
            callback.complete()

        threading.Timer(0.01, finish).start()


@pytest.mark.parametrize("pool", [0, 2])
def test_the_loop_stops_when_a_bounded_source_is_exhausted_and_commits(pool):
    task = Recording()
    checkpoints = RecordingCheckpoints()
    inst = instance(task, [A, B], checkpoints=checkpoints,
                    config={"job.container.thread.pool.size": str(pool)})
    source = BoundedSource(*msgs(A, 0, 1, 2), *msgs(B, 0, 1))
    summary = run([inst], source, {"job.container.thread.pool.size": str(pool)})
    assert summary.reason is StopReason.SOURCE_EXHAUSTED
    assert sorted(task.offsets) == [0, 0, 1, 1, 2]
    assert offsets_of(checkpoints, "Partition 0") == {A: 2, B: 1}


def test_messages_in_flight_finish_before_the_loop_stops():
    task = SlowCallbacks()
    checkpoints = RecordingCheckpoints()
    config = {"task.max.concurrency": "4"}
    inst = instance(task, [A], checkpoints=checkpoints, config=config)
    summary = run([inst], BoundedSource(*msgs(A, 0, 1, 2, 3)), config)
    assert summary.reason is StopReason.SOURCE_EXHAUSTED
    assert sorted(task.done) == [0, 1, 2, 3]
    assert offsets_of(checkpoints, "Partition 0") == {A: 3}


def test_a_window_due_at_start_runs_before_the_first_message():
    events = []

    class Windowed(Recording):
        def window(self, collector, coordinator):
            events.append(("window",))

    task = Windowed(events=events)
    inst = instance(task, [A], checkpoints=RecordingCheckpoints())
    run([inst], BoundedSource(*msgs(A, 0, 1)), {"task.window.ms": "60000"}, window_due=True)
    assert events[0] == ("window",)
    assert [e for e in events if e[0] == "process"] == [("process", 0, 0), ("process", 0, 1)]
