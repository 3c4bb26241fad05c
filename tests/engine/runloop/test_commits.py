"""Periodic commits: a task with nothing new since its last commit skips them (for up to a
minute), a commit the task asks for always runs, and the tasks of a container that are due
together commit at once (each on a thread of its own), including their final commits."""

from __future__ import annotations

import threading

from weir.engine.runloop.instance import IDLE_COMMIT_MS
from weir.engine.task import RequestScope

from tests.engine.runloop._helpers import (A, B, Gate, RecordingCheckpoints, ScriptedSource,
                                           eos, instance, msgs, run)


class Noop:
    def process(self, envelope, collector, coordinator):
        pass


class Windowed(Noop):
    def window(self, collector, coordinator):
        pass


def test_a_task_needs_a_commit_only_after_something_happened_or_an_idle_minute():
    checkpoints = RecordingCheckpoints()
    inst = instance(Windowed(), [A], checkpoints=checkpoints)
    inst.init()
    assert inst.needs_commit(0)                       # never committed
    inst.commit()
    now = inst.metrics.last_commit_ms
    assert not inst.needs_commit(now)
    inst.mark_processed(A, 7)                          # a message processed
    assert inst.needs_commit(now)
    inst.commit()
    assert not inst.needs_commit(now)
    inst.window(inst.coordinator)                      # an operation ran
    assert inst.needs_commit(now)
    inst.commit()
    inst.collector.sent += 1                           # a message sent (a timer's output)
    assert inst.needs_commit(now)
    inst.commit()
    assert not inst.needs_commit(now + IDLE_COMMIT_MS - 1)
    assert inst.needs_commit(inst.metrics.last_commit_ms + IDLE_COMMIT_MS)
    inst.close()


def test_a_task_with_nothing_new_skips_the_periodic_commits_while_a_busy_one_commits():
    checkpoints = RecordingCheckpoints()
    busy = instance(Noop(), [A], name="busy", checkpoints=checkpoints)
    idle = instance(Noop(), [B], name="idle", checkpoints=checkpoints)

    def committed(n):  # the busy task's n-th commit happened
        return Gate(lambda: busy.metrics.commits.count >= n)
    script = [*msgs(A, 0)]
    for i in range(1, 5):  # a message for the busy task after each of its commits
        script += [committed(i), *msgs(A, i)]
    script += [committed(5), eos(A, 5), eos(B, 0)]
    run([busy, idle], ScriptedSource(*script), {"task.commit.ms": "5"})
    tasks = [task for event, task, _ in checkpoints.events if event == "checkpoint"]
    # idle: its first periodic commit and its final one (end of stream), none in between
    assert tasks.count("idle") == 2
    assert tasks.count("busy") >= 6


def test_a_commit_the_task_asks_for_runs_even_with_nothing_new():
    class AskTwice(Noop):
        def process(self, envelope, collector, coordinator):
            coordinator.commit(RequestScope.CURRENT_TASK)

    checkpoints = RecordingCheckpoints()
    inst = instance(AskTwice(), [A], checkpoints=checkpoints)
    run([inst], ScriptedSource(*msgs(A, 0, 1), eos(A, 2)))
    assert [e[2] for e in checkpoints.events] == [{A: 0}, {A: 1}, {A: 1}]


def _meeting_of_the_first_two_writes():
    """``on_write`` of a checkpoint manager: the first two writes wait for each other (one
    commit after the other would break the barrier at its timeout and fail the run)."""
    meeting = threading.Barrier(2, timeout=60)
    writes = [0]

    def on_write(task, checkpoint):
        writes[0] += 1
        if writes[0] <= 2:
            meeting.wait()
    return on_write


def test_tasks_due_together_commit_at_once_on_threads_of_their_own():
    checkpoints = RecordingCheckpoints(on_write=_meeting_of_the_first_two_writes())
    first = instance(Noop(), [A], name="first", checkpoints=checkpoints)
    second = instance(Noop(), [B], name="second", checkpoints=checkpoints)
    run([first, second], ScriptedSource(*msgs(A, 0), *msgs(B, 0),
                                        Gate(lambda: first.metrics.commits.count >= 1),
                                        eos(A, 1), eos(B, 1)),
        {"task.commit.ms": "5"})
    assert first.metrics.commits.count >= 2 and second.metrics.commits.count >= 2


def test_final_commits_at_shutdown_run_at_once():
    checkpoints = RecordingCheckpoints(on_write=_meeting_of_the_first_two_writes())
    first = instance(Noop(), [A], name="first", checkpoints=checkpoints)

    class StopAll(Noop):
        def process(self, envelope, collector, coordinator):
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)
    second = instance(StopAll(), [B], name="second", checkpoints=checkpoints)
    run([first, second], ScriptedSource(*msgs(A, 0), *msgs(B, 0)), {"task.commit.ms": "-1"})
    assert sorted((e[1], e[2]) for e in checkpoints.events) == [("first", {A: 0}),
                                                              ("second", {B: 0})]
