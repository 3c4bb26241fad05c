"""Stopping means stopping: once the run loop has decided to stop, it starts nothing new.

A shutdown request -- a task's last ``shutdown(CURRENT_TASK)`` vote or a container-wide
``shutdown(ALL_TASKS_IN_CONTAINER)`` -- made in ``process`` or in ``window`` is taken when the
call is done; from then on no message is dispatched and no window runs, on every dispatch
path: inline on the loop thread, on the thread pool, through a callback completed from another
thread, and as an ``async def`` coroutine. Each test records every call the task got, in order,
and checks that the call that asked to stop is the last one.

The calls that ask to stop first wait until the source has handed out more messages (so a
message is queued for the task when the request is taken) and sleep past a due window
(``task.window.ms=1``): both would run after the request before the fix.

Helpers and the scripted source are in ``_helpers``.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from weir.engine.runloop.loop import RunLoop, StopReason
from weir.engine.task import RequestScope
from weir.recovery.checkpoint import MemoryCheckpointManager

from tests.engine.runloop._helpers import (
    A, B, Gate, ScriptedSource, instance, msgs)

pytestmark = pytest.mark.timeout(30)

STOP_AT = 3          # the message (offset) whose process asks to stop
MESSAGES = 40
_QUEUED = STOP_AT + 3  # chosen before the stopping call ends: some wait in the task's queue
PATHS = ["inline", "pool", "callback", "callback-pool", "coroutine"]
SCOPES = [RequestScope.CURRENT_TASK, RequestScope.ALL_TASKS_IN_CONTAINER]


def _wait_for(condition, what: str, limit: float = 10.0) -> None:
    """Synchronize with the loop (never a timed assertion: the limit only ends a hung test)."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.001)


class _Script:
    """What every task shape shares: the record of calls and the moment it asks to stop."""

    def __init__(self, source: ScriptedSource, scope: RequestScope, *, queued: bool,
                 stop_in_window: bool, pooled: bool = False):
        self.source = source
        self.scope = scope
        self.queued = queued          # process runs off the loop thread: wait for more chosen
        self.pooled = pooled          # window runs off the loop thread too
        self.stop_in_window = stop_in_window
        self.calls: list[tuple] = []
        self.lock = threading.Lock()

    def record(self, *call) -> None:
        with self.lock:
            self.calls.append(call)

    def before_stopping(self, offset: int | None) -> None:
        if self.queued if offset is not None else self.pooled:
            _wait_for(lambda: len(self.source.chosen) >= _QUEUED, "the next messages to be chosen")
        time.sleep(0.02)  # task.window.ms=1: a window is due when the request is taken

    def stops_at(self, offset: int) -> bool:
        return not self.stop_in_window and offset == STOP_AT

    def holds_first(self, offset: int) -> bool:
        """With a window to stop in: message 0 ends only once more messages were chosen, so
        they wait in the task's queue when the window runs (a window on the loop thread
        cannot wait for them itself)."""
        return self.stop_in_window and offset == 0 and self.queued

    def window(self, collector, coordinator):
        self.record("window")
        if self.stop_in_window and not any(c[0] == "window" for c in self.calls[:-1]):
            self.before_stopping(None)
            coordinator.shutdown(self.scope)


class SyncTask(_Script):
    def process(self, envelope, collector, coordinator):
        self.record("process", envelope.offset)
        if self.holds_first(envelope.offset):
            _wait_for(lambda: len(self.source.chosen) >= _QUEUED, "more messages to be chosen")
        if self.stops_at(envelope.offset):
            self.before_stopping(envelope.offset)
            coordinator.shutdown(self.scope)


class CallbackTask(_Script):
    def process_async(self, envelope, collector, coordinator, callback):
        self.record("process", envelope.offset)

        def finish():
            if self.holds_first(envelope.offset):
                _wait_for(lambda: len(self.source.chosen) >= _QUEUED, "more messages chosen")
            if self.stops_at(envelope.offset):
                self.before_stopping(envelope.offset)
                coordinator.shutdown(self.scope)
            callback.complete()

        threading.Thread(target=finish, daemon=True).start()


class CoroutineTask(_Script):
    async def process(self, envelope, collector, coordinator):
        self.record("process", envelope.offset)
        await asyncio.sleep(0)
        if self.holds_first(envelope.offset):
            while len(self.source.chosen) < _QUEUED:
                await asyncio.sleep(0.001)
        if self.stops_at(envelope.offset):
            if self.queued:
                while len(self.source.chosen) < _QUEUED:
                    await asyncio.sleep(0.001)
            await asyncio.sleep(0.02)
            coordinator.shutdown(self.scope)


def _setup(path: str, scope: RequestScope, stop_in_window: bool, runner):
    source = ScriptedSource(*msgs(A, *range(MESSAGES)), Gate(lambda: False))
    kind = {"inline": SyncTask, "pool": SyncTask, "callback": CallbackTask,
            "callback-pool": CallbackTask, "coroutine": CoroutineTask}[path]
    task = kind(source, scope, queued=path != "inline", stop_in_window=stop_in_window,
                pooled=path in ("pool", "callback-pool"))
    config = {"task.window.ms": "1", "task.commit.ms": "-1",
              "job.container.thread.pool.size": "2" if path in ("pool", "callback-pool") else "0"}
    checkpoints = MemoryCheckpointManager()
    inst = instance(task, [A], config=config, checkpoints=checkpoints, async_runner=runner)
    return source, task, inst, config, checkpoints


def _run(inst, source, config):
    loop = RunLoop([inst], source, config)
    inst.init()
    try:
        return loop.run()
    finally:
        inst.close()


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name.lower())
@pytest.mark.parametrize("path", PATHS)
def test_a_shutdown_request_from_process_is_the_last_thing_the_task_runs(
        path, scope, asyncio_thread):
    source, task, inst, config, checkpoints = _setup(path, scope, False, asyncio_thread)
    summary = _run(inst, source, config)
    assert summary.reason is StopReason.SHUTDOWN_REQUESTED
    processed = [c[1] for c in task.calls if c[0] == "process"]
    assert processed == list(range(STOP_AT + 1))      # nothing after the message that asked
    assert task.calls[-1] == ("process", STOP_AT)     # and no window after it either
    assert len(source.chosen) > STOP_AT + 1 or path == "inline"  # more was there to start
    cp = checkpoints.read_last(inst.task_name)
    assert dict(cp.input_offsets) == {A: STOP_AT}


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name.lower())
@pytest.mark.parametrize("path", PATHS)
def test_a_shutdown_request_from_window_is_the_last_thing_the_task_runs(
        path, scope, asyncio_thread):
    source, task, inst, config, checkpoints = _setup(path, scope, True, asyncio_thread)
    summary = _run(inst, source, config)
    assert summary.reason is StopReason.SHUTDOWN_REQUESTED
    assert [c for c in task.calls if c[0] == "window"] == [("window",)]
    assert task.calls[-1] == ("window",)
    processed = [c[1] for c in task.calls if c[0] == "process"]
    cp = checkpoints.read_last(inst.task_name)
    assert dict(cp.input_offsets) == ({A: processed[-1]} if processed else {})


@pytest.mark.parametrize("path", ["pool", "callback", "coroutine"])
def test_the_last_vote_of_two_tasks_stops_both_at_once(path, asyncio_thread):
    """Task B voted on its first message; A's vote, made off the loop thread with messages
    queued, is the last one: A's stopping message is the last thing A runs."""
    source = ScriptedSource(*msgs(B, 0, 1), *msgs(A, *range(MESSAGES)), Gate(lambda: False))
    kind = {"pool": SyncTask, "callback": CallbackTask, "coroutine": CoroutineTask}[path]
    ta = kind(source, RequestScope.CURRENT_TASK, queued=True, stop_in_window=False)

    class Voter:
        def __init__(self):
            self.offsets = []

        def process(self, envelope, collector, coordinator):
            self.offsets.append(envelope.offset)
            if envelope.offset == 0:
                coordinator.shutdown(RequestScope.CURRENT_TASK)

    tb = Voter()
    config = {"task.commit.ms": "-1",
              "job.container.thread.pool.size": "2" if path == "pool" else "0"}
    ia = instance(ta, [A], "Partition 0", config=config, async_runner=asyncio_thread)
    ib = instance(tb, [B], "Partition 1", config=config)
    loop = RunLoop([ia, ib], source, config)
    ia.init()
    ib.init()
    try:
        summary = loop.run()
    finally:
        ia.close()
        ib.close()
    assert summary.reason is StopReason.SHUTDOWN_REQUESTED
    assert [c[1] for c in ta.calls if c[0] == "process"] == list(range(STOP_AT + 1))
    assert tb.offsets == [0, 1]
