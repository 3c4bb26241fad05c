"""Operations, coordinator requests and stopping (a mixin of :class:`engine.runloop.RunLoop`).

Both dispatch paths call :meth:`Operations._service` when the attention flag is set: it
turns due timers into per-task flags, takes coordinator requests, and starts what each
task is ready for (COMMIT > WINDOW > END_OF_STREAM > PROCESS, SAMZA-REFERENCE 6.3).
Operations run on the thread pool when there is one, else inline.
"""

from __future__ import annotations

import logging
from enum import Enum

from ._runloop_worker import Op, Worker, op_outcome, run_op
from .instance import Coordinator, task_error
from .task import RequestScope

__all__ = ["StopReason", "Operations"]

log = logging.getLogger("weir.runloop")


class StopReason(Enum):
    END_OF_STREAM = "end-of-stream"
    SHUTDOWN_REQUESTED = "shutdown-requested"
    EXTERNAL_SHUTDOWN = "external-shutdown"


class Operations:
    """Timers, requests, operations, votes; mixed into RunLoop."""

    # -- operations, requests, timers (both loops) ---------------------------------------
    def _service(self) -> bool:
        """Timers, coordinator requests and operations; True when the loop must stop."""
        self._attention = False
        if self._window_due:
            self._window_due = False
            for w in self._workers:
                if w.inst.shape.windowable and not w.complete:
                    w.need_window = True
        if self._commit_due:
            self._commit_due = False
            for w in self._workers:
                w.need_commit = not w.complete
        if self._timeout_due:
            self._timeout_due = False
            self._expire_callbacks()
        if self._report_due:
            self._report_due = False
            self._report()
        for w in self._workers:
            if w.coordinator.requested:
                self._merge(w, w.coordinator)
            self._mark(w)
        self._pump_dirty()
        return self._error is not None or self._shutdown_now

    def _start_op(self, w: Worker, op: Op) -> None:
        if op is Op.COMMIT:
            w.need_commit = False
        elif op is Op.WINDOW:
            w.need_window = False
        else:
            w.complete = True
        w.op = op
        coord = Coordinator()
        if self._pool is not None:
            self._busy += 1
            self._pool.submit(run_op, self._post, w, op, coord)
        else:
            self._op_done(w, op, coord, op_outcome(w, op, coord))

    def _op_done(self, w: Worker, op: Op, coord: Coordinator, failure) -> None:
        w.op = None
        if failure is not None:
            self._fail_task(w, *failure)
            return
        self._merge(w, coord)
        if op is Op.WINDOW:
            self._check_window_time(w)
        elif op is Op.COMMIT and w.hold:
            w.hold = False
            for released in w.releasable():
                self._apply(w, released)
        elif op is Op.END_OF_STREAM:
            self._vote(w)
        self._mark(w)

    def _check_window_time(self, w: Worker) -> None:
        timer, period = w.inst.metrics.window_ns, self.settings.window_ms
        if (period > 0 and timer.count >= 10 and timer.total_ns >= timer.count * period * 1_000_000
                and ("window", w.inst.task_name) not in self._warned):
            self._warned.add(("window", w.inst.task_name))
            log.warning("task '%s': window() takes %.1f ms on average, not less than "
                        "task.window.ms=%d; windows now starve processing -- raise "
                        "task.window.ms or make window() cheaper", w.inst.task_name,
                        timer.total_ns / timer.count / 1e6, period)

    def _merge(self, w: Worker, coord: Coordinator) -> None:
        commit, shutdown = coord.take()
        if commit is RequestScope.CURRENT_TASK:
            w.need_commit = True
        elif commit is RequestScope.ALL_TASKS_IN_CONTAINER:
            for x in self._workers:
                if not x.complete:
                    x.need_commit = True
                    self._mark(x)
        if shutdown is RequestScope.CURRENT_TASK:
            self._vote(w)
        elif shutdown is RequestScope.ALL_TASKS_IN_CONTAINER:
            self._stop(StopReason.SHUTDOWN_REQUESTED)
        self._mark(w)

    def _vote(self, w: Worker) -> None:
        if not w.voted:
            w.voted = True
            self._votes += 1
        if self._votes == len(self._workers):
            done = all(x.complete for x in self._workers)
            self._stop(StopReason.END_OF_STREAM if done else StopReason.SHUTDOWN_REQUESTED)

    def _stop(self, reason: StopReason) -> None:
        if self._reason is None:
            self._reason = reason
        self._shutdown_now = True
        self._attention = True

    def _fail_task(self, w: Worker, exc: BaseException, during: str, env=None) -> None:
        """Stop the loop for ``exc`` raised by ``w``'s task ``during`` an operation or a
        message: a TaskError naming task, SSP and offset -- except an interrupt (a second
        Ctrl-C landing in user code), which stops the loop as it is."""
        if isinstance(exc, KeyboardInterrupt):
            self._fail(exc)
            return
        self._fail(task_error(w.inst.task_name, exc, during=during,
                              ssp=env.ssp if env is not None else None,
                              offset=env.offset if env is not None else None))

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._attention = True
