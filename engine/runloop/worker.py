"""Per-task run-loop state: the worker state machine, callbacks and the offset high-watermark.

Everything here except :class:`TaskCallback` methods and the ``run_*`` functions is touched
by the loop thread only, so none of it needs a lock. Callbacks and pool functions report
back by putting a tuple into the loop's completion queue.

Worker state (as Samza's run loop keeps it; docs/TASKS.md, "Guarantees"): ``pending`` envelopes, ``in_flight`` messages, one
operation at a time (``op``: commit, window or end-of-stream), the flags ``need_commit``
and ``need_window`` (set by timers and coordinator requests), ``end_of_stream`` once every
input SSP has delivered its end-of-stream envelope, ``complete`` once the end-of-stream
operation ran. Priority when ready: COMMIT > WINDOW > END_OF_STREAM > PROCESS.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections import deque
from enum import Enum
from typing import Any

from weir.engine.errors import TaskError
from weir.engine.runloop.coordinator import Coordinator
from weir.engine.runloop.instance import TaskInstance, log
from weir.engine.model import EnvelopeKind, IncomingMessageEnvelope
from weir.engine.task import TaskKind

__all__ = ["Op", "Worker", "TaskCallback", "COMPLETED", "FAILED", "DUPLICATE", "OP_DONE",
           "WAKE", "run_sync", "run_callback", "run_op", "op_outcome", "log_ignored",
           "duplicate_completion_error"]

# Completion-queue record codes: (code, subject, payload).
COMPLETED, FAILED, DUPLICATE, OP_DONE = range(4)
WAKE = (None, None, None)
"""Put into the completion queue to wake the loop (timer, external shutdown)."""

_perf = time.perf_counter_ns
_MESSAGE = EnvelopeKind.MESSAGE
_EOS = EnvelopeKind.END_OF_STREAM
_CONTROL = EnvelopeKind.CONTROL


class Op(Enum):
    COMMIT = "commit"
    WINDOW = "window"
    END_OF_STREAM = "end-of-stream"
    CONTROL = "control"
    """A control envelope (or a source's end-of-stream) for the task's control bookkeeping."""
    CONTROL_TICK = "control-tick"
    """The watermark timer: source watermarks, idle partitions, drain requests."""


class TaskCallback:
    """The callback of one dispatched message (``complete()`` / ``fail(exc)``, any thread).

    The first of complete, fail or the loop's timeout wins (an atomic ``itertools.count``
    claims it); a later complete or fail after a timeout is ignored, any other second call
    is reported as a task error, as Samza does.
    """

    __slots__ = ("_post", "worker", "seq", "envelope", "coordinator", "started_ns",
                 "elapsed_ns", "future", "timed_out", "skipped", "_claim")

    def __init__(self, post, worker: "Worker", seq: int, envelope: IncomingMessageEnvelope,
                 coordinator: Coordinator):
        self._post = post
        self.worker = worker
        self.seq = seq
        self.envelope = envelope
        self.coordinator = coordinator
        self.started_ns = _perf()
        self.elapsed_ns = -1
        self.future = None
        self.timed_out = False
        self.skipped = False  # failed with an ignored exception: offset advances, not counted
        self._claim = itertools.count().__next__

    def claim(self) -> bool:
        """True for the first caller only."""
        return self._claim() == 0

    def complete(self) -> None:
        if self._claim() == 0:
            if self.elapsed_ns < 0:
                self.elapsed_ns = _perf() - self.started_ns
            self._post((COMPLETED, self, None))
        elif not self.timed_out:
            self._post((DUPLICATE, self, None))

    def fail(self, exc: BaseException) -> None:
        if self._claim() == 0:
            self._post((FAILED, self, exc))
        elif not self.timed_out:
            self._post((DUPLICATE, self, exc))

    def done_from_future(self, future: Any) -> None:
        """``add_done_callback`` target for a coroutine's concurrent future."""
        if future.cancelled():
            if not self.timed_out:
                self.fail(TaskError("the process coroutine was cancelled"))
            return
        exc = future.exception()
        if exc is None:
            self.complete()
        else:
            self.fail(exc)

    def __repr__(self) -> str:
        return (f"TaskCallback(task={self.worker.inst.task_name!r}, ssp={self.envelope.ssp}, "
                f"offset={self.envelope.offset}, seq={self.seq})")


def duplicate_completion_error(cb: TaskCallback) -> TaskError:
    err = TaskError(f"task '{cb.worker.inst.task_name}': the callback of {cb.envelope.ssp} "
                    f"offset {cb.envelope.offset} was completed or failed more than once; call "
                    f"exactly one of callback.complete() / callback.fail(exc), exactly once")
    err.task_name, err.ssp, err.offset = cb.worker.inst.task_name, cb.envelope.ssp, cb.envelope.offset
    return err


class Worker:
    """The run loop's view of one task instance."""

    __slots__ = ("inst", "kind", "process_fn", "collector", "coordinator", "processed",
                 "offsets", "pending", "in_flight", "op", "need_commit", "need_window",
                 "remaining", "end_of_stream", "complete", "voted", "next_seq",
                 "release_next", "done", "hold", "callbacks", "dirty", "backlogged",
                 "control", "control_env", "control_outcome", "need_tick", "observe")

    def __init__(self, inst: TaskInstance, notify) -> None:
        self.inst = inst
        self.kind: TaskKind = inst.shape.kind
        self.process_fn = inst.process_fn
        self.collector = inst.collector
        # The shared coordinator of the inline path; it wakes the loop on every request.
        self.coordinator = inst.coordinator
        self.coordinator._notify = notify
        self.processed = inst.metrics.processed
        self.offsets = inst.last_processed
        self.pending: deque[IncomingMessageEnvelope] = deque()
        self.in_flight = 0
        self.op: Op | None = None
        self.need_commit = False
        self.need_window = False
        self.remaining = set(inst.ssps)
        # Control bookkeeping (weir.engine.control), None for most tasks.
        self.control = inst.control
        self.control_env: IncomingMessageEnvelope | None = None
        self.control_outcome = None
        self.need_tick = False
        self.observe = inst.observe if self.kind is not TaskKind.SYNC else None
        if self.control is not None:
            self.remaining -= self.control.ended_ssps()
        self.end_of_stream = not self.remaining
        self.complete = False
        self.voted = False
        self.next_seq = 0
        self.release_next = 0
        self.done: list[tuple[int, TaskCallback]] = []
        self.hold = False
        self.callbacks: dict[int, TaskCallback] = {}
        self.dirty = False
        self.backlogged = False

    @property
    def busy(self) -> bool:
        return self.in_flight > 0 or self.op is not None

    def ssp_ended(self, ssp) -> None:
        self.remaining.discard(ssp)
        if not self.remaining:
            self.end_of_stream = True

    def next_op(self, max_concurrency: int) -> Op | IncomingMessageEnvelope | None:
        """What to start now (an Op, an envelope to process) or None."""
        if self.complete or self.op is not None:
            return None
        pending = self.pending
        control = self.control
        while pending and pending[0].kind is not _MESSAGE:
            if control is not None and (pending[0].kind is _EOS or pending[0].kind is _CONTROL):
                break  # for the control bookkeeping, in order: a barrier (below)
            env = pending.popleft()
            if env.kind is _EOS:
                self.ssp_ended(env.ssp)
        if self.need_commit:
            return Op.COMMIT if self.in_flight == 0 else None
        if self.need_window:
            return Op.WINDOW if self.in_flight == 0 else None
        if control is not None:
            if pending and pending[0].kind is not _MESSAGE:
                if self.in_flight:
                    return None
                self.control_env = pending.popleft()
                return Op.CONTROL
            if self.need_tick:
                return Op.CONTROL_TICK if self.in_flight == 0 else None
        if self.end_of_stream and not pending:
            return Op.END_OF_STREAM if self.in_flight == 0 else None
        if pending and self.in_flight < max_concurrency:
            return pending.popleft()
        return None

    def add_done(self, cb: TaskCallback) -> list[TaskCallback]:
        """Record a finished callback; return the callbacks now releasable in sequence order
        (the contiguous run from the oldest unreleased one; stops while ``hold`` is set)."""
        heapq.heappush(self.done, (cb.seq, cb))
        return self.releasable()

    def releasable(self, *, ignore_hold: bool = False) -> list[TaskCallback]:
        out = []
        done = self.done
        while done and done[0][0] == self.release_next and (ignore_hold or not self.hold):
            out.append(heapq.heappop(done)[1])
            self.release_next += 1
            if out[-1].coordinator.commit_scope is not None and not ignore_hold:
                self.hold = True  # later offsets wait until the requested commit ran
        return out


# ----------------------------------------------------------------------------------------
# functions run on the thread pool (or inline) -- they report through the callback / queue
# ----------------------------------------------------------------------------------------

def run_sync(inst: TaskInstance, env: IncomingMessageEnvelope, coord: Coordinator,
             cb: TaskCallback) -> None:
    started = _perf()
    try:
        inst.process_fn(env, inst.collector, coord)
    except BaseException as exc:  # noqa: BLE001 - reported to the loop, which decides
        cb.fail(exc)
    else:
        cb.elapsed_ns = _perf() - started
        cb.complete()


def run_callback(inst: TaskInstance, env: IncomingMessageEnvelope, coord: Coordinator,
                 cb: TaskCallback) -> None:
    try:
        adjunct = inst.adjunct
        if adjunct is not None and adjunct.consumes(env.ssp):
            adjunct.apply(env)  # an adjunct store's message: never delivered to the task
            cb.complete()
            return
        inst.task.process_async(env, inst.collector, coord, cb)
    except BaseException as exc:  # noqa: BLE001
        cb.fail(exc)


def run_op(post, worker: Worker, op: Op, coord: Coordinator) -> None:
    """Run ``op`` of ``worker`` and post ``(OP_DONE, (worker, op, coord), failure)`` where
    failure is None or ``(exc, during)``. Ignorable exceptions of user hooks are counted
    and logged here (the task's operations never overlap, so its metrics are ours). Always
    posts: the loop counts the operation in flight until it does."""
    try:
        failure = op_outcome(worker, op, coord)
    except BaseException as exc:  # noqa: BLE001 - e.g. an interrupt the hook raised itself
        failure = (exc, op.value)
    post((OP_DONE, (worker, op, coord), failure))


def op_outcome(worker: Worker, op: Op, coord: Coordinator) -> tuple[BaseException, str] | None:
    inst = worker.inst
    if op is Op.CONTROL or op is Op.CONTROL_TICK:
        try:
            if op is Op.CONTROL:
                worker.control_outcome = inst.on_control(worker.control_env, coord)
            else:
                worker.control_outcome = inst.control_tick(coord)
        except BaseException as exc:  # noqa: BLE001 - reported to the loop
            return exc, "control"
        return None
    if op is not Op.COMMIT:
        during = "window" if op is Op.WINDOW else "on_end_of_stream"
        try:
            if op is Op.WINDOW:
                inst.window(coord)
            else:
                inst.end_of_stream(coord)
        except BaseException as exc:  # noqa: BLE001
            if not (isinstance(exc, Exception) and inst.ignores(exc)):
                return exc, during
            log_ignored(inst, exc, during)
        if op is Op.WINDOW:
            return None
    try:
        inst.commit()  # the commit op, or the commit that follows on_end_of_stream
    except BaseException as exc:  # noqa: BLE001
        return exc, "commit"
    return None


def log_ignored(inst: TaskInstance, exc: BaseException, during: str,
                env: IncomingMessageEnvelope | None = None) -> None:
    """Log an exception skipped per ``task.ignored.exceptions`` (traceback at DEBUG)."""
    where = f" of {env.ssp} offset {env.offset}" if env is not None else ""
    log.warning("task '%s': ignored %s in %s%s: %s (listed in task.ignored.exceptions)",
                inst.task_name, type(exc).__name__, during, where, exc,
                exc_info=exc if log.isEnabledFor(logging.DEBUG) else None)
