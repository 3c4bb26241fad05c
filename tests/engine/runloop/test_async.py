"""The run loop with async def tasks, callback tasks and the thread pool: threads,
out-of-order completion, callback timeouts, and a stuck pool thread not keeping the
process alive.

Helpers and the scripted source are in ``_runloop_helpers``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from weir.engine.errors import CallbackTimeoutError, TaskError
from weir.recovery.checkpoint import MemoryCheckpointManager

from tests.engine.runloop._helpers import (
    A,
    ScriptedSource,
    eos,
    instance,
    msgs,
    offsets_of,
    run,
)

pytestmark = pytest.mark.timeout(30)


# ----------------------------------------------------------------------------------------
# async def tasks, callbacks and timeouts
# ----------------------------------------------------------------------------------------

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
# the process exits after a timed-out or abandoned thread-pool call
# ----------------------------------------------------------------------------------------

_STUCK_SCRIPT = """
import sys, threading
from weir.engine.errors import CallbackTimeoutError
from weir.engine.runloop.instance import TaskInstance
from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
from weir.engine.runloop.loop import RunLoop
from weir.engine.runloop.source import EnvelopeSource

A = SystemStreamPartition("test", "clicks", 0)

class Stuck:
    def process(self, envelope, collector, coordinator):
        threading.Event().wait()          # never returns

class OneMessage(EnvelopeSource):
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
    root = Path(__file__).resolve().parents[3]
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
