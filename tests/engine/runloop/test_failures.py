"""The run loop's shutdown and failure behaviour: coordinator shutdown requests, external
shutdown, user and source exceptions, ignored exceptions, interrupts, and construction.

Helpers and the scripted source are in ``_runloop_helpers``.
"""

from __future__ import annotations

import logging
import time

import pytest

from weir.engine.errors import EngineError, TaskError
from weir.engine.runloop.loop import RunLoop, RunLoopConfig, StopReason
from weir.engine.task import RequestScope
from weir.recovery.checkpoint import MemoryCheckpointManager
from weir.stores.errors import ConfigError

from tests.engine.runloop._helpers import (
    A,
    B,
    Fail,
    Gate,
    HeldCallbacks,
    Recording,
    RecordingCheckpoints,
    ScriptedSource,
    _controller,
    eos,
    instance,
    msgs,
    offsets_of,
    run,
)

pytestmark = pytest.mark.timeout(30)


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


class ReadsUnreadableState:
    """A task whose store read fails at offset 2 the way a store fails when its bytes disagree
    with its serdes (stores.<s>.msg.serde changed under existing state)."""

    def __init__(self):
        self.done: list[int] = []

    def process(self, envelope, collector, coordinator):
        from weir.stores.errors import StoredDataError

        if envelope.offset == 2:
            raise StoredDataError("store 'counts': cannot deserialize the value of key 'w' with "
                                  "serde 'json'", store="counts", key="w")
        self.done.append(envelope.offset)


@pytest.mark.parametrize("listed", ["", "weir.stores.errors.SerdeError", "*"])
def test_a_store_that_cannot_read_its_own_data_stops_the_task_even_when_its_class_is_listed(
        listed):
    # Skipping would drop every message that touches such a key and commit past it (a
    # msg.serde change with SerdeError listed, as the old hint advised: 4,000 of 4,000
    # messages dropped, exit 0).
    cfg = {"task.ignored.exceptions": listed} if listed else {}
    checkpoints = MemoryCheckpointManager()
    task = ReadsUnreadableState()
    with pytest.raises(TaskError) as info:
        run([instance(task, [A], config=cfg, checkpoints=checkpoints)],
            ScriptedSource(*msgs(A, 0, 1, 2, 3), eos(A, 4)), cfg)
    text = str(info.value)
    assert "test.clicks#0 offset 2" in text.splitlines()[0]
    assert "list the exception class in task.ignored.exceptions" not in text
    assert "key.serde/msg.serde" in text and "never skipped" in text
    assert task.done == [0, 1]
    assert offsets_of(checkpoints, "Partition 0") is None
