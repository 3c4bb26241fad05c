"""The container-process supervisor: real processes, real signals, a real queue.

Covers: a container the runner stops while it starts (it dies of the SIGTERM before it installs
its handler) is not reported as failed, only the container that failed is; stopping a
container whose process exited since it was seen alive is not an error. The supervisor under a
whole job (no container outlives a runner that leaves abnormally) is covered through
``run_job`` in test_runner.py.
"""

from __future__ import annotations

import multiprocessing
import signal
import time

from weir.engine.container.process import ChildEvent, EventKind
from weir.engine.container.progress import ContainerFailure
from weir.engine.container.supervisor import _Child, _stop_children, _supervise

from tests.engine.container.test_runner import _exited


def test_a_container_the_runner_stops_while_it_starts_is_not_reported_as_failed():
    # Container 1 fails; the runner SIGTERMs container 0, which has not installed its
    # handler yet (here: a process that never does) and dies of the signal. Only container
    # 1's failure is reported: container 0 did not fail, it was stopped.
    ctx = multiprocessing.get_context("spawn")
    events = ctx.Queue()
    children = {"0": _Child("0", ctx.Process(target=time.sleep, args=(60,))),
                "1": _Child("1", ctx.Process(target=time.sleep, args=(0,)))}
    for child in children.values():
        child.process.start()
    events.put(ChildEvent(EventKind.FAILED, "1", ContainerFailure("1", "TaskError", "boom")))

    _supervise(children, events, lambda: _stop_children(children))
    events.close()

    assert children["0"].process.exitcode == -signal.SIGTERM
    assert children["0"].failure is None
    assert children["1"].failure == ContainerFailure("1", "TaskError", "boom")


def test_stopping_a_container_that_exited_since_it_was_seen_alive_is_not_an_error():
    # The race of the intermittent failure: is_alive() said yes, the process exited (and was
    # reaped by the fork server) before the SIGTERM went out.
    ctx = multiprocessing.get_context("forkserver")
    child = _Child("0", ctx.Process(target=time.sleep, args=(0,)))
    child.process.start()
    deadline = time.monotonic() + 30
    while not _exited(child.process.pid) and time.monotonic() < deadline:
        time.sleep(0.01)

    child.process.is_alive = lambda: True  # what it said a moment before
    _stop_children({"0": child})

    child.process.join(timeout=30)
    assert child.process.exitcode == 0
