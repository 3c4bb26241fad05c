"""The run loop's guarantees, each as a named scenario.

The input is a scripted source: envelopes, gates (deliver nothing until a condition holds)
and failures, in order. Tests synchronize with events and gates, never with timing
assertions; short sleeps inside tasks only widen the window in which a broken guarantee
would show.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import random
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from engine._runloop_async import AsyncioThread
from engine.errors import CallbackTimeoutError, EngineError, TaskError
from engine.instance import TaskInstance
from engine.metrics import MetricsReporter
from engine.model import IncomingMessageEnvelope, SystemStreamPartition
from engine.runloop import RunLoop, RunLoopConfig, StopReason
from engine.task import RequestScope, TaskWrapper, load_task_factory
from recovery.checkpoint import MemoryCheckpointManager
from stores.errors import ConfigError

pytestmark = pytest.mark.timeout(30)


# ----------------------------------------------------------------------------------------
# the scripted source and helpers
# ----------------------------------------------------------------------------------------

class Gate:
    """Script item: deliver nothing until ``ready()`` is true."""

    def __init__(self, ready: Callable[[], bool]):
        self.ready = ready


class Fail:
    """Script item: ``choose`` raises ``exc``."""

    def __init__(self, exc: BaseException):
        self.exc = exc


class _Counters:
    def __init__(self):
        self.chosen = 0

    def snapshot(self):
        return {"chosen": self.chosen}


class ScriptedSource:
    """``choose(timeout)`` over a script; waits (without spinning) when nothing is ready."""

    def __init__(self, *items):
        self._items = deque(items)
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self.chosen: list[IncomingMessageEnvelope] = []
        self.metrics = _Counters()

    def choose(self, timeout: float):
        with self._lock:
            while self._items:
                item = self._items[0]
                if isinstance(item, Gate):
                    if not item.ready():
                        break
                    self._items.popleft()
                    continue
                self._items.popleft()
                if isinstance(item, Fail):
                    raise item.exc
                self.chosen.append(item)
                self.metrics.chosen += 1
                return item
        self._idle.wait(min(timeout, 0.002))
        return None


A = SystemStreamPartition("test", "clicks", 0)
B = SystemStreamPartition("test", "clicks", 1)
SHARED = SystemStreamPartition("test", "rates", 0)


def msgs(ssp, *offsets):
    return [IncomingMessageEnvelope(ssp, o, f"k{o}", f"{ssp.partition}:{o}") for o in offsets]


def eos(ssp, offset):
    return IncomingMessageEnvelope.end_of_stream(ssp, offset)


def instance(task, ssps, name="Partition 0", config=None, checkpoints=None, **kw):
    return TaskInstance(name, task, ssps, config or {}, checkpoints=checkpoints, **kw)


def run(instances, source, config=None, **kw):
    loop = RunLoop(instances, source, config, **kw)
    for inst in instances:
        inst.init()
    try:
        return loop.run()
    finally:
        for inst in instances:
            inst.close()


def offsets_of(checkpoints, task_name):
    cp = checkpoints.read_last(task_name)
    return None if cp is None else dict(cp.input_offsets)


class RecordingCheckpoints(MemoryCheckpointManager):
    def __init__(self, events=None, on_write=None):
        super().__init__()
        self.events = events if events is not None else []
        self.on_write = on_write

    def write(self, task_name, checkpoint):
        self.events.append(("checkpoint", str(task_name), dict(checkpoint.input_offsets)))
        if self.on_write is not None:
            self.on_write(task_name, checkpoint)
        super().write(task_name, checkpoint)


@pytest.fixture
def asyncio_thread():
    runner = AsyncioThread("weir-asyncio-test")
    yield runner
    runner.stop()


class Recording:
    """A sync task recording (offset, thread) per message; optional per-offset actions."""

    def __init__(self, actions=None, events=None):
        self.seen: list[tuple[int, str]] = []
        self.actions = actions or {}
        self.events = events if events is not None else []

    def process(self, envelope, collector, coordinator):
        self.seen.append((envelope.offset, threading.current_thread().name))
        self.events.append(("process", envelope.ssp.partition, envelope.offset))
        action = self.actions.get((envelope.ssp, envelope.offset))
        if action is not None:
            action(coordinator)

    @property
    def offsets(self):
        return [o for o, _ in self.seen]


# ----------------------------------------------------------------------------------------
# processing and ordering
# ----------------------------------------------------------------------------------------

def test_inline_tasks_process_in_order_on_the_loop_thread_and_stop_at_end_of_stream():
    checkpoints = MemoryCheckpointManager()
    ta, tb = Recording(), Recording()
    source = ScriptedSource(*msgs(A, 0, 1), *msgs(B, 0), *msgs(A, 2), *msgs(B, 1, 2),
                            eos(A, 3), eos(B, 3))
    summary = run([instance(ta, [A], "Partition 0", checkpoints=checkpoints),
                   instance(tb, [B], "Partition 1", checkpoints=checkpoints)], source)
    assert summary.reason is StopReason.END_OF_STREAM
    assert dict(summary.processed) == {"Partition 0": 3, "Partition 1": 3}
    assert ta.offsets == [0, 1, 2] and tb.offsets == [0, 1, 2]
    assert {thread for _, thread in ta.seen + tb.seen} == {threading.current_thread().name}
    assert offsets_of(checkpoints, "Partition 0") == {("test", "clicks", 0): 2}
    assert offsets_of(checkpoints, "Partition 1") == {("test", "clicks", 1): 2}


def test_concurrency_one_on_a_thread_pool_runs_one_process_at_a_time_in_order():
    class Exclusive:
        def __init__(self):
            self.active = self.max_active = 0
            self.seen: list[tuple[int, str]] = []
            self.lock = threading.Lock()

        def process(self, envelope, collector, coordinator):
            with self.lock:
                self.active += 1
                self.max_active = max(self.max_active, self.active)
            self.seen.append((envelope.offset, threading.current_thread().name))
            time.sleep(0.0005)
            with self.lock:
                self.active -= 1

    tasks = [Exclusive(), Exclusive()]
    source = ScriptedSource(*[e for o in range(25) for e in (*msgs(A, o), *msgs(B, o))],
                            eos(A, 25), eos(B, 25))
    cfg = {"job.container.thread.pool.size": "4", "task.max.concurrency": "1"}
    run([instance(tasks[0], [A], "Partition 0", cfg), instance(tasks[1], [B], "Partition 1", cfg)],
        source, cfg, name="pool")
    for task in tasks:
        assert task.max_active == 1
        assert [o for o, _ in task.seen] == list(range(25))
        assert all(thread.startswith("weir-task-pool") for _, thread in task.seen)


def test_window_never_overlaps_process_and_nothing_starts_until_it_ends():
    class Windowed:
        def __init__(self):
            self.in_flight = 0
            self.in_window = False
            self.windows = 0
            self.violations: list[str] = []
            self.lock = threading.Lock()
            self.done = 0

        def process_async(self, envelope, collector, coordinator, callback):
            with self.lock:
                if self.in_window:
                    self.violations.append(f"process {envelope.offset} during window")
                self.in_flight += 1

            def finish():
                time.sleep(0.0003)
                with self.lock:
                    self.in_flight -= 1
                    self.done += 1
                callback.complete()
            threading.Thread(target=finish).start()

        def window(self, collector, coordinator):
            with self.lock:
                if self.in_flight:
                    self.violations.append(f"window with {self.in_flight} in flight")
                self.in_window = True
            time.sleep(0.0002)
            with self.lock:
                self.in_window = False
                self.windows += 1

    task = Windowed()
    cfg = {"task.max.concurrency": "4", "job.container.thread.pool.size": "2",
           "task.window.ms": "2"}
    source = ScriptedSource(*msgs(A, *range(150)), Gate(lambda: task.windows >= 3), eos(A, 150))
    inst = instance(task, [A], config=cfg)
    run([inst], source, cfg)
    assert task.violations == []
    assert task.done == 150 and task.windows >= 3
    assert inst.metrics.windows.count == task.windows


def test_window_runs_between_messages_of_an_inline_task():
    class Windowed(Recording):
        windows = 0

        def window(self, collector, coordinator):
            self.events.append(("window",))
            self.windows += 1

    task = Windowed()
    source = ScriptedSource(*msgs(A, 0, 1), Gate(lambda: task.windows >= 2), *msgs(A, 2), eos(A, 3))
    inst = instance(task, [A], config={"task.window.ms": "1"})
    run([inst], source, {"task.window.ms": "1"})
    kinds = [e[0] for e in task.events]
    assert [e[2] for e in task.events if e[0] == "process"] == [0, 1, 2]
    last_process = max(i for i, kind in enumerate(kinds) if kind == "process")
    assert kinds[:last_process].count("window") >= 2   # the gate held message 2 back
    assert inst.metrics.snapshot()["window-calls"] == task.windows


# ----------------------------------------------------------------------------------------
# checkpoints and concurrency > 1
# ----------------------------------------------------------------------------------------

class HeldCallbacks:
    """A callback task that hands every callback to the test."""

    def __init__(self, expected: int):
        self.calls: dict[int, tuple] = {}
        self.all_started = threading.Event()
        self.expected = expected

    def process_async(self, envelope, collector, coordinator, callback):
        self.calls[envelope.offset] = (callback, coordinator)
        if len(self.calls) >= self.expected:
            self.all_started.set()


def _controller(target):
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_checkpoint_never_passes_an_unfinished_message_when_completions_come_out_of_order():
    task = HeldCallbacks(3)
    first_done = threading.Event()
    writes_before_first_done: list = []
    checkpoints = RecordingCheckpoints(on_write=lambda name, cp: writes_before_first_done.append(
        dict(cp.input_offsets)) if not first_done.is_set() else None)
    inst = instance(task, [A], config={"task.max.concurrency": "3"}, checkpoints=checkpoints)
    processed_while_held = []

    def control():
        assert task.all_started.wait(10)
        callback2, coordinator2 = task.calls[2]
        coordinator2.commit()           # message 2 asks for a commit ...
        callback2.complete()            # ... and finishes before 0 and 1
        task.calls[1][0].complete()
        time.sleep(0.05)                # give a broken loop every chance to commit now
        processed_while_held.append(dict(inst.last_processed))
        first_done.set()
        task.calls[0][0].complete()

    controller = _controller(control)
    source = ScriptedSource(*msgs(A, 0, 1, 2), Gate(first_done.is_set), eos(A, 3))
    run([inst], source, {"task.max.concurrency": "3"})
    controller.join(5)
    assert writes_before_first_done == []
    assert processed_while_held == [{}]
    assert checkpoints.events[0] == ("checkpoint", "Partition 0", {("test", "clicks", 0): 2})
    assert inst.metrics.processed.count == 3


def test_commit_requested_by_a_message_covers_it_but_not_messages_finished_after_it():
    task = HeldCallbacks(2)
    checkpoints = RecordingCheckpoints()
    inst = instance(task, [A], config={"task.max.concurrency": "2"}, checkpoints=checkpoints)
    released = threading.Event()

    def control():
        assert task.all_started.wait(10)
        task.calls[1][0].complete()         # 1 finishes first but must wait for 0
        callback0, coordinator0 = task.calls[0]
        coordinator0.commit()
        callback0.complete()
        released.set()

    controller = _controller(control)
    run([inst], ScriptedSource(*msgs(A, 0, 1), Gate(released.is_set), eos(A, 2)),
        {"task.max.concurrency": "2"})
    controller.join(5)
    assert [e[2] for e in checkpoints.events] == [{("test", "clicks", 0): 0},
                                                   {("test", "clicks", 0): 1}]


def test_async_def_tasks_run_on_the_asyncio_thread_and_may_finish_out_of_order(asyncio_thread):
    class Coroutines:
        def __init__(self):
            self.finished: list[int] = []
            self.threads: set[str] = set()
            self.release_zero: asyncio.Event | None = None

        async def process(self, envelope, collector, coordinator):
            self.threads.add(threading.current_thread().name)
            if self.release_zero is None:
                self.release_zero = asyncio.Event()
            if envelope.offset == 0:
                await self.release_zero.wait()
            elif envelope.offset == 3:
                self.release_zero.set()
            await asyncio.sleep(0)
            self.finished.append(envelope.offset)

    task = Coroutines()
    checkpoints = MemoryCheckpointManager()
    cfg = {"task.max.concurrency": "4"}
    inst = instance(task, [A], config=cfg, checkpoints=checkpoints, async_runner=asyncio_thread)
    run([inst], ScriptedSource(*msgs(A, *range(8)), eos(A, 8)), cfg)
    assert task.threads == {"weir-asyncio-test"}
    assert sorted(task.finished) == list(range(8))
    assert task.finished.index(3) < task.finished.index(0)
    assert offsets_of(checkpoints, "Partition 0") == {("test", "clicks", 0): 7}


def test_callbacks_completed_on_other_threads_keep_concurrency_one_in_order():
    class Threaded:
        def __init__(self):
            self.started: list[int] = []
            self.active = 0
            self.max_active = 0

        def process_async(self, envelope, collector, coordinator, callback):
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.started.append(envelope.offset)

            def finish():
                time.sleep(0.0005)
                self.active -= 1
                callback.complete()
            threading.Thread(target=finish).start()

    task = Threaded()
    cfg = {"job.container.thread.pool.size": "2"}
    checkpoints = MemoryCheckpointManager()
    run([instance(task, [A], config=cfg, checkpoints=checkpoints)],
        ScriptedSource(*msgs(A, *range(20)), eos(A, 20)), cfg)
    assert task.started == list(range(20)) and task.max_active == 1
    assert offsets_of(checkpoints, "Partition 0") == {("test", "clicks", 0): 19}


def test_a_callback_that_never_fires_fails_the_task_with_callback_timeout_error():
    class Forgetful:
        def process_async(self, envelope, collector, coordinator, callback):
            if envelope.offset != 1:
                callback.complete()

    cfg = {"task.callback.timeout.ms": "50"}
    checkpoints = MemoryCheckpointManager()
    with pytest.raises(CallbackTimeoutError) as info:
        run([instance(Forgetful(), [A], config=cfg, checkpoints=checkpoints)],
            ScriptedSource(*msgs(A, 0, 1, 2), eos(A, 3)), cfg)
    err = info.value
    assert (err.task_name, err.ssp, err.offset) == ("Partition 0", A, 1)
    assert "task.callback.timeout.ms=50" in str(err) and "offset 1" in str(err)
    assert checkpoints.writes == 0


@pytest.mark.parametrize("seed", range(3))
def test_every_checkpoint_covers_only_finished_messages_on_a_pool_with_concurrency(seed):
    # Sync tasks on a 4-thread pool, 4 in flight, random durations, a commit every
    # millisecond: each checkpoint is written while no process() of the task runs and
    # covers finished messages only.
    rng = random.Random(seed)
    delays = [rng.choice([0, 0, 0.0002, 0.001]) for _ in range(300)]
    finished: set[int] = set()
    running = [0]
    lock = threading.Lock()
    uncovered: list = []

    class Sleepy:
        def process(self, envelope, collector, coordinator):
            with lock:
                running[0] += 1
            time.sleep(delays[envelope.offset])
            with lock:
                running[0] -= 1
                finished.add(envelope.offset)

    def check(name, checkpoint):
        committed = checkpoint.input_offsets.get(A, -1)
        with lock:
            missing = [o for o in range(committed + 1) if o not in finished]
            if missing or running[0]:
                uncovered.append((committed, missing[:5], running[0]))

    checkpoints = RecordingCheckpoints(on_write=check)
    cfg = {"job.container.thread.pool.size": "4", "task.max.concurrency": "4",
           "task.commit.ms": "1"}
    inst = instance(Sleepy(), [A], config=cfg, checkpoints=checkpoints)
    run([inst], ScriptedSource(*msgs(A, *range(300)), eos(A, 300)), cfg)
    assert uncovered == []
    assert offsets_of(checkpoints, "Partition 0") == {A: 299}


def test_a_coroutine_that_never_finishes_times_out_and_is_cancelled(asyncio_thread):
    cancelled = threading.Event()

    class Hangs:
        async def process(self, envelope, collector, coordinator):
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

    cfg = {"task.callback.timeout.ms": "50"}
    checkpoints = MemoryCheckpointManager()
    with pytest.raises(CallbackTimeoutError) as info:
        run([instance(Hangs(), [A], config=cfg, checkpoints=checkpoints,
                      async_runner=asyncio_thread)],
            ScriptedSource(*msgs(A, 0), eos(A, 1)), cfg)
    assert (info.value.ssp, info.value.offset) == (A, 0)
    assert cancelled.wait(10)
    assert checkpoints.writes == 0


def test_a_callback_completed_twice_fails_the_task():
    class Twice:
        def process_async(self, envelope, collector, coordinator, callback):
            callback.complete()
            callback.complete()

    with pytest.raises(TaskError, match="completed or failed more than once"):
        run([instance(Twice(), [A])], ScriptedSource(*msgs(A, 0), eos(A, 1)))


# ----------------------------------------------------------------------------------------
# coordinator requests and shutdown
# ----------------------------------------------------------------------------------------

def test_shutdown_of_the_current_task_waits_until_every_task_voted():
    checkpoints = MemoryCheckpointManager()
    ta = Recording({(A, 1): lambda c: c.shutdown(RequestScope.CURRENT_TASK)})
    tb = Recording({(B, 2): lambda c: c.shutdown(RequestScope.CURRENT_TASK)})
    source = ScriptedSource(*msgs(A, 0, 1), *msgs(B, 0, 1), *msgs(A, 2), *msgs(B, 2),
                            *msgs(A, 3), eos(A, 4), eos(B, 3))
    summary = run([instance(ta, [A], "Partition 0", checkpoints=checkpoints),
                   instance(tb, [B], "Partition 1", checkpoints=checkpoints)], source)
    assert summary.reason is StopReason.SHUTDOWN_REQUESTED
    assert ta.offsets == [0, 1, 2]          # A went on after voting; 3 came after B's vote
    assert tb.offsets == [0, 1, 2]
    assert offsets_of(checkpoints, "Partition 0") == {("test", "clicks", 0): 2}
    assert offsets_of(checkpoints, "Partition 1") == {("test", "clicks", 1): 2}


@pytest.mark.parametrize("pool", ["0", "2"])
def test_shutdown_of_all_tasks_stops_the_loop_and_commits_every_task(pool):
    checkpoints = MemoryCheckpointManager()
    ta = Recording({(A, 1): lambda c: c.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)})
    tb = Recording()
    cfg = {"job.container.thread.pool.size": pool}
    source = ScriptedSource(*msgs(A, 0), *msgs(B, 0), *msgs(A, 1),
                            Gate(lambda: False), *msgs(B, 1), eos(A, 2), eos(B, 2))
    summary = run([instance(ta, [A], "Partition 0", cfg, checkpoints),
                   instance(tb, [B], "Partition 1", cfg, checkpoints)], source, cfg)
    assert summary.reason is StopReason.SHUTDOWN_REQUESTED
    assert offsets_of(checkpoints, "Partition 0") == {("test", "clicks", 0): 1}
    assert offsets_of(checkpoints, "Partition 1") == {("test", "clicks", 1): 0}


def test_coordinator_commit_of_the_current_task_and_of_all_tasks():
    events: list = []
    checkpoints = RecordingCheckpoints(events)
    ta = Recording({(A, 1): lambda c: c.commit()}, events)
    tb = Recording({(B, 1): lambda c: c.commit(RequestScope.ALL_TASKS_IN_CONTAINER)}, events)
    source = ScriptedSource(*msgs(A, 0, 1), *msgs(B, 0, 1), *msgs(A, 2), eos(A, 3), eos(B, 2))
    run([instance(ta, [A], "Partition 0", checkpoints=checkpoints),
         instance(tb, [B], "Partition 1", checkpoints=checkpoints)], source)
    assert events[:7] == [
        ("process", 0, 0), ("process", 0, 1),
        ("checkpoint", "Partition 0", {("test", "clicks", 0): 1}),
        ("process", 1, 0), ("process", 1, 1),
        ("checkpoint", "Partition 0", {("test", "clicks", 0): 1}),
        ("checkpoint", "Partition 1", {("test", "clicks", 1): 1}),
    ]


def test_external_shutdown_finishes_and_commits_what_was_processed():
    checkpoints = MemoryCheckpointManager()
    task = Recording()
    inst = instance(task, [A], checkpoints=checkpoints)
    loop = RunLoop([inst], ScriptedSource(*msgs(A, *range(5)), Gate(lambda: False)))
    inst.init()

    def stop_when_done():
        while len(task.seen) < 5:
            time.sleep(0.001)
        loop.shutdown()

    stopper = _controller(stop_when_done)
    summary = loop.run()
    stopper.join(5)
    inst.close()
    assert summary.reason is StopReason.EXTERNAL_SHUTDOWN
    assert offsets_of(checkpoints, "Partition 0") == {("test", "clicks", 0): 4}


def test_messages_still_in_flight_after_the_shutdown_wait_are_not_committed(caplog):
    task = HeldCallbacks(1)
    checkpoints = MemoryCheckpointManager()
    cfg = {"task.shutdown.ms": "20"}
    inst = instance(task, [A], config=cfg, checkpoints=checkpoints)
    loop = RunLoop([inst], ScriptedSource(*msgs(A, 0), Gate(lambda: False)), cfg)
    inst.init()
    stopper = _controller(lambda: (task.all_started.wait(10), loop.shutdown()))
    with caplog.at_level(logging.WARNING, logger="weir.runloop"):
        loop.run()
    stopper.join(5)
    inst.close()
    assert checkpoints.writes == 0
    assert "still in flight" in caplog.text


# ----------------------------------------------------------------------------------------
# failures
# ----------------------------------------------------------------------------------------

def explode(envelope):
    raise ValueError(f"cannot handle {envelope.message}")


class Exploding:
    def process(self, envelope, collector, coordinator):
        if envelope.offset == 2:
            explode(envelope)


class ExplodingCallback:
    def process_async(self, envelope, collector, coordinator, callback):
        if envelope.offset == 2:
            try:
                explode(envelope)
            except ValueError as exc:
                callback.fail(exc)
                return
        callback.complete()


class ExplodingCoroutine:
    async def process(self, envelope, collector, coordinator):
        if envelope.offset == 2:
            explode(envelope)


FAILING_TASKS = [(Exploding, "0"), (Exploding, "2"), (ExplodingCallback, "0"),
                 (ExplodingCoroutine, "0")]


@pytest.mark.parametrize("task_class, pool", FAILING_TASKS)
def test_user_exception_stops_the_loop_naming_task_ssp_offset_with_the_traceback(
        task_class, pool, asyncio_thread):
    cfg = {"job.container.thread.pool.size": pool}
    checkpoints = MemoryCheckpointManager()
    inst = instance(task_class(), [A], "Partition 7", cfg, checkpoints,
                    async_runner=asyncio_thread)
    with pytest.raises(TaskError) as info:
        run([inst], ScriptedSource(*msgs(A, 0, 1, 2, 3), eos(A, 4)), cfg)
    err = info.value
    assert (err.task_name, err.ssp, err.offset) == ("Partition 7", A, 2)
    text = str(err)
    assert "task 'Partition 7'" in text and "test.clicks#0 offset 2" in text
    assert "ValueError: cannot handle 0:2" in text and "in explode" in text
    assert isinstance(err.__cause__, ValueError)
    assert checkpoints.writes == 0        # a failed loop never commits
    assert inst.last_processed.get(A, -1) <= 1


@pytest.mark.parametrize("task_class, pool", FAILING_TASKS)
def test_ignored_exceptions_are_logged_counted_and_skipped(task_class, pool, asyncio_thread,
                                                          caplog):
    cfg = {"job.container.thread.pool.size": pool, "task.ignored.exceptions": "ValueError"}
    checkpoints = MemoryCheckpointManager()
    inst = instance(task_class(), [A], config=cfg, checkpoints=checkpoints,
                    async_runner=asyncio_thread)
    with caplog.at_level(logging.WARNING, logger="weir.task"):
        run([inst], ScriptedSource(*msgs(A, 0, 1, 2, 3), eos(A, 4)), cfg)
    assert offsets_of(checkpoints, "Partition 0") == {("test", "clicks", 0): 3}
    snap = inst.metrics.snapshot()
    assert snap["exception-ignored-builtins.ValueError"] == 1
    assert snap["messages-processed"] == 3
    assert "ignored ValueError in process of test.clicks#0 offset 2" in caplog.text


def test_a_failing_source_stops_the_loop_without_committing():
    checkpoints = MemoryCheckpointManager()
    boom = EngineError("stream 'clicks' partition 0 offset 2: corrupt record")
    with pytest.raises(EngineError, match="corrupt record"):
        run([instance(Recording(), [A], checkpoints=checkpoints)],
            ScriptedSource(*msgs(A, 0, 1), Fail(boom)))
    assert checkpoints.writes == 0


def test_window_failure_stops_the_loop_unless_ignored():
    class BadWindow(Recording):
        def window(self, collector, coordinator):
            raise KeyError("missing total")

    cfg = {"task.window.ms": "1"}
    with pytest.raises(TaskError, match="failed in window: KeyError"):
        run([instance(BadWindow(), [A], config=cfg)],
            ScriptedSource(*msgs(A, 0), Gate(lambda: False)), cfg)
    cfg_ignored = {**cfg, "task.ignored.exceptions": "KeyError"}
    inst = instance(BadWindow(), [A], config=cfg_ignored)
    run([inst], ScriptedSource(*msgs(A, 0),
                               Gate(lambda: inst.metrics.ignored.count >= 2), eos(A, 1)), cfg_ignored)


@pytest.mark.parametrize("pool", ["0", "2"])
def test_an_interrupt_during_window_stops_the_loop_as_an_interrupt_not_a_task_error(pool):
    # A second Ctrl-C lands wherever the loop thread is, here in a window: `weir run` must
    # stop at once with exit code 130, not report a failed task.
    class Interrupted(Recording):
        def window(self, collector, coordinator):
            raise KeyboardInterrupt

    cfg = {"task.window.ms": "1", "job.container.thread.pool.size": pool}
    checkpoints = MemoryCheckpointManager()
    with pytest.raises(KeyboardInterrupt):
        run([instance(Interrupted(), [A], config=cfg, checkpoints=checkpoints)],
            ScriptedSource(*msgs(A, 0), Gate(lambda: False)), cfg)
    assert checkpoints.writes == 0


# ----------------------------------------------------------------------------------------
# end of stream, broadcast inputs, wrappers, metrics
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("pool", ["0", "2"])
def test_end_of_stream_listener_runs_after_the_last_message_then_commit_then_the_loop_ends(pool):
    events: list = []

    class Listener(Recording):
        def on_end_of_stream(self, collector, coordinator):
            self.events.append(("end-of-stream", len(self.seen)))

    checkpoints = RecordingCheckpoints(events)
    cfg = {"job.container.thread.pool.size": pool}
    task = Listener(events=events)
    summary = run([instance(task, [A, B], config=cfg, checkpoints=checkpoints)],
                  ScriptedSource(*msgs(A, 0), eos(A, 1), *msgs(B, 0, 1), eos(B, 2)), cfg)
    assert summary.reason is StopReason.END_OF_STREAM
    assert events[-2:] == [("end-of-stream", 3),
                           ("checkpoint", "Partition 0",
                            {("test", "clicks", 0): 0, ("test", "clicks", 1): 1})]
    assert events.count(("end-of-stream", 3)) == 1


@pytest.mark.parametrize("pool", ["0", "2"])
def test_a_shared_ssp_reaches_every_owner_from_its_own_starting_offset(pool):
    cfg = {"job.container.thread.pool.size": pool}
    ta, tb = Recording(), Recording()
    ia = instance(ta, [A, SHARED], "Partition 0", cfg, starting_offsets={SHARED: 0})
    ib = instance(tb, [B, SHARED], "Partition 1", cfg, starting_offsets={SHARED: 2})
    run([ia, ib], ScriptedSource(*msgs(SHARED, 0, 1, 2, 3), eos(SHARED, 4), eos(A, 0), eos(B, 0)),
        cfg)
    assert ta.offsets == [0, 1, 2, 3] and tb.offsets == [2, 3]
    assert ib.metrics.skipped.count == 2


class CountingWrapper(TaskWrapper):
    calls = {"process": 0, "window": 0}

    def process(self, envelope, collector, coordinator):
        CountingWrapper.calls["process"] += 1
        return self.wrapped.process(envelope, collector, coordinator)

    def window(self, collector, coordinator):
        CountingWrapper.calls["window"] += 1
        return self.wrapped.window(collector, coordinator)


class WindowedRecording(Recording):
    def window(self, collector, coordinator):
        self.events.append(("window",))


def test_a_configured_task_wrapper_sees_every_process_and_window_call():
    CountingWrapper.calls.update(process=0, window=0)
    cfg = {"task.class": "tests.engine.test_runloop:WindowedRecording",
           "task.wrapper.class": "tests.engine.test_runloop:CountingWrapper",
           "task.window.ms": "1"}
    task = load_task_factory(cfg)()
    run([instance(task, [A], config=cfg)],
        ScriptedSource(*msgs(A, 0, 1, 2), Gate(lambda: CountingWrapper.calls["window"] >= 2),
                       eos(A, 3)), cfg)
    inner = task.wrapped
    assert CountingWrapper.calls["process"] == 3 == len(inner.seen)
    assert CountingWrapper.calls["window"] == inner.events.count(("window",)) >= 2


def test_metrics_snapshot_and_the_json_lines_reporter(tmp_path):
    task = Recording({(A, 1): lambda c: c.commit()})
    cfg = {"metrics.reporter.interval.ms": "1", "metrics.reporter.file": str(tmp_path / "m.jsonl")}
    inst = instance(task, [A], config=cfg, checkpoints=MemoryCheckpointManager())
    source = ScriptedSource(*msgs(A, *range(130)), eos(A, 130))
    loop = RunLoop([inst], source, cfg, name="c0")
    inst.init()
    loop.run()
    snap = loop.metrics_snapshot()
    task_metrics = snap["tasks"]["Partition 0"]
    assert task_metrics["messages-processed"] == 130
    assert task_metrics["commit-calls"] == 2          # requested at offset 1, end of stream
    assert task_metrics["process-ns"]["count"] == 2   # inline path: every 64th message timed
    assert snap["consumers"] == {"chosen": 131}
    assert "null-choices" in snap["run-loop"]
    lines = (tmp_path / "m.jsonl").read_bytes().splitlines()
    last = orjson.loads(lines[-1])
    assert last["source"] == "c0"
    assert last["metrics"]["tasks"]["Partition 0"]["messages-processed"] == 130


def test_the_reporter_file_opened_from_config_is_closed_when_the_loop_stops(tmp_path):
    path = tmp_path / "m.jsonl"
    cfg = {"metrics.reporter.interval.ms": "60000", "metrics.reporter.file": str(path)}
    run([instance(Recording(), [A], config=cfg)], ScriptedSource(*msgs(A, 0), eos(A, 1)), cfg)
    assert len(path.read_bytes().splitlines()) == 1          # the final report
    open_files = [os.readlink(fd) for fd in Path("/proc/self/fd").iterdir()
                  if fd.is_symlink() and os.path.exists(fd)]
    assert str(path) not in open_files


def test_reporter_given_directly_gets_a_final_report():
    out = io.BytesIO()
    reporter = MetricsReporter("c1", interval_ms=60_000, stream=out)
    run([instance(Recording(), [A])], ScriptedSource(*msgs(A, 0), eos(A, 1)), reporter=reporter)
    assert reporter.reports == 1 and b'"c1"' in out.getvalue()


# ----------------------------------------------------------------------------------------
# construction
# ----------------------------------------------------------------------------------------

def test_run_requires_initialized_instances():
    loop = RunLoop([instance(Recording(), [A])], ScriptedSource())
    with pytest.raises(EngineError, match="call TaskInstance.init"):
        loop.run()


def test_a_task_without_inputs_ends_at_once():
    checkpoints = MemoryCheckpointManager()
    summary = run([instance(Recording(), [], checkpoints=checkpoints)], ScriptedSource())
    assert summary.reason is StopReason.END_OF_STREAM and checkpoints.writes == 1


def test_bad_concurrency_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match="task.max.concurrency"):
        RunLoopConfig.from_config({"task.max.concurrency": "0"})
    assert RunLoopConfig.from_config({}) == RunLoopConfig()


# ----------------------------------------------------------------------------------------
# the process exits after a timed-out or abandoned thread-pool call
# ----------------------------------------------------------------------------------------

_STUCK_SCRIPT = """
import sys, threading
from engine.errors import CallbackTimeoutError
from engine.instance import TaskInstance
from engine.model import IncomingMessageEnvelope, SystemStreamPartition
from engine.runloop import RunLoop

A = SystemStreamPartition("test", "clicks", 0)

class Stuck:
    def process(self, envelope, collector, coordinator):
        threading.Event().wait()          # never returns

class OneMessage:
    def __init__(self):
        self.items = [IncomingMessageEnvelope(A, 0, None, b"x")]
    def choose(self, timeout):
        if self.items:
            return self.items.pop()
        threading.Event().wait(timeout)
        return None

cfg = {"job.container.thread.pool.size": "1", "task.callback.timeout.ms": "50"}
inst = TaskInstance("Partition 0", Stuck(), [A], cfg)
loop = RunLoop([inst], OneMessage(), cfg)
inst.init()
try:
    loop.run()
except CallbackTimeoutError:
    print("timed out")
inst.close()
"""


def test_a_process_call_stuck_on_the_thread_pool_does_not_keep_the_process_alive():
    # A timed-out call still runs on its pool thread; the process must still exit once the
    # loop has reported the timeout (a non-daemon pool thread would block interpreter exit).
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", _STUCK_SCRIPT], cwd=root,
                            env=dict(os.environ, PYTHONPATH=str(root)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the process did not exit: a pool thread stuck in process() blocks exit")
    assert proc.returncode == 0, err
    assert out.strip() == "timed out"
