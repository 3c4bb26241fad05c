"""The run loop: choose a message, run it on its task, window, commit, stop.

One :class:`RunLoop` drives the task instances of a container (SAMZA-REFERENCE section 6,
seed design "Event Loop"). Guarantees, per task:

* ``init`` happens before everything else and ``close`` after (the container calls them);
* with ``task.max.concurrency=1`` each message's processing completes before the next
  ``process`` of that task starts, in the order the chooser gave them;
* ``window`` runs only when no ``process`` of the task is in flight, and nothing of the task
  starts until it returns; the same holds for commit and the end-of-stream hook;
* a checkpoint covers only fully processed messages and is taken only when nothing of the
  task is in flight; with concurrency > 1 messages may finish out of order, but the
  recorded offset only advances over the contiguous finished prefix (the high-watermark);
* when every input SSP of a task has delivered end-of-stream, ``on_end_of_stream`` runs,
  the task commits and is done; the loop ends when every task is done, when every task
  voted ``shutdown(CURRENT_TASK)``, on ``shutdown(ALL_TASKS_IN_CONTAINER)`` or on
  :meth:`RunLoop.shutdown` -- then it waits up to ``task.shutdown.ms`` for work in flight
  and commits every task that is not done;
* an exception in user code stops the loop with a :class:`~engine.errors.TaskError` naming
  the task, SSP and offset and carrying the user traceback (no final commit), unless its
  class is listed in ``task.ignored.exceptions`` (then it is logged, counted and skipped).

Execution: sync tasks run inline on the loop thread by default (the lean path: no locks,
no futures, no clock read per message); with ``job.container.thread.pool.size`` > 0 they
run on a thread pool. ``process_async`` tasks are called on the pool (or inline) and finish
through their callback; ``async def process`` tasks run on one asyncio thread. Timers only
flip flags (window, commit, metrics, callback timeouts); the loop blocks on the source or
on its completion queue, never spins.

Example (the container does this with its SystemConsumers and storage)::

    loop = RunLoop(instances, consumers, config)
    for inst in instances:
        inst.init()
    try:
        summary = loop.run()        # returns at end-of-stream or shutdown; raises TaskError
    finally:
        for inst in instances:
            inst.close()
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from stores.config import Config, ConfigError, declare

from ._runloop_ops import Operations, StopReason
from ._runloop_paths import DispatchPaths
from ._runloop_pool import TaskPool
from ._runloop_timers import Ticker
from ._runloop_worker import WAKE, Op, Worker, op_outcome
from .errors import CallbackTimeoutError, EngineError
from .instance import Coordinator, InstanceState, TaskInstance
from .metrics import MetricsRegistry, MetricsReporter
from .model import IncomingMessageEnvelope
from .task import TaskKind

__all__ = [
    "TASK_MAX_CONCURRENCY", "JOB_CONTAINER_THREAD_POOL_SIZE", "TASK_WINDOW_MS", "TASK_COMMIT_MS",
    "TASK_CALLBACK_TIMEOUT_MS", "TASK_SHUTDOWN_MS", "TASK_MAX_IDLE_MS",
    "EnvelopeSource", "RunLoopConfig", "StopReason", "RunSummary", "RunLoop",
]

log = logging.getLogger("weir.runloop")

_C = "run loop"
TASK_MAX_CONCURRENCY = declare("task.max.concurrency", int, 1, "Messages in flight per task; "
                               "> 1 lets async and thread-pool tasks finish out of order.", component=_C)
JOB_CONTAINER_THREAD_POOL_SIZE = declare(
    "job.container.thread.pool.size", int, 0, "Threads running sync process/window/commit; "
    "0 runs them inline on the loop thread.", component=_C)
TASK_WINDOW_MS = declare("task.window.ms", int, -1, "Call window() of windowable tasks this "
                         "often (milliseconds); -1: never.", component=_C)
TASK_COMMIT_MS = declare("task.commit.ms", int, 60_000, "Commit every task this often "
                         "(milliseconds); -1: only on request, end-of-stream and shutdown.", component=_C)
TASK_CALLBACK_TIMEOUT_MS = declare(
    "task.callback.timeout.ms", int, -1, "Fail the task with CallbackTimeoutError when a "
    "message is not finished within this time (milliseconds); -1: no limit. Applies to async "
    "tasks (callback and coroutine) and to sync tasks run on the thread pool "
    "(job.container.thread.pool.size > 0), not to sync tasks run inline on the loop thread.",
    component=_C)
TASK_SHUTDOWN_MS = declare("task.shutdown.ms", int, 30_000, "On shutdown, wait this long "
                           "(milliseconds) for messages in flight before the final commit.", component=_C)
TASK_MAX_IDLE_MS = declare("task.max.idle.ms", int, 10, "Longest wait (milliseconds) for new "
                           "messages before the loop re-checks timers and requests.", component=_C)

_perf = time.perf_counter_ns


class EnvelopeSource(Protocol):
    """What the loop reads from (``engine.consumers.SystemConsumers``): the next envelope,
    deserialized, waiting up to ``timeout`` seconds; None when there is none."""

    def choose(self, timeout: float) -> IncomingMessageEnvelope | None: ...


@dataclass(frozen=True)
class RunSummary:
    reason: StopReason
    processed: Mapping[str, int]
    seconds: float

    def __str__(self) -> str:
        total = sum(self.processed.values())
        rate = total / self.seconds if self.seconds > 0 else 0.0
        return (f"run loop stopped ({self.reason.value}): {total} messages in "
                f"{self.seconds:.2f} s ({rate:,.0f} msg/s) over {len(self.processed)} tasks")


def _at_least(config: Config, key, value: int, minimum: int) -> int:
    if value < minimum:
        raise ConfigError(f"must be >= {minimum}, got {value}", key=key.name,
                          origin=config.origin(key.name))
    return value


@dataclass(frozen=True, slots=True)
class RunLoopConfig:
    max_concurrency: int = 1
    thread_pool_size: int = 0
    window_ms: int = -1
    commit_ms: int = 60_000
    callback_timeout_ms: int = -1
    shutdown_ms: int = 30_000
    max_idle_ms: int = 10

    @classmethod
    def from_config(cls, config: Config | Mapping[str, str]) -> "RunLoopConfig":
        cfg = config if isinstance(config, Config) else Config(config)
        return cls(_at_least(cfg, TASK_MAX_CONCURRENCY, TASK_MAX_CONCURRENCY.get(cfg), 1),
                   _at_least(cfg, JOB_CONTAINER_THREAD_POOL_SIZE,
                             JOB_CONTAINER_THREAD_POOL_SIZE.get(cfg), 0),
                   TASK_WINDOW_MS.get(cfg), TASK_COMMIT_MS.get(cfg),
                   TASK_CALLBACK_TIMEOUT_MS.get(cfg),
                   _at_least(cfg, TASK_SHUTDOWN_MS, TASK_SHUTDOWN_MS.get(cfg), 0),
                   _at_least(cfg, TASK_MAX_IDLE_MS, TASK_MAX_IDLE_MS.get(cfg), 1))


class RunLoop(DispatchPaths, Operations):
    """Runs the task instances of one container over one envelope source. Runs once."""

    def __init__(self, instances: Iterable[TaskInstance], source: EnvelopeSource,
                 config: Config | Mapping[str, str] | RunLoopConfig | None = None, *,
                 name: str = "container", reporter: MetricsReporter | None = None,
                 extra_metrics: Mapping[str, Callable[[], Any]] | None = None):
        job_config = Config({}) if isinstance(config, RunLoopConfig) else (
            config if isinstance(config, Config) else Config(config or {}))
        self.settings = config if isinstance(config, RunLoopConfig) else RunLoopConfig.from_config(job_config)
        self.name = name
        self._source = source
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._post = self._q.put
        self._workers = [Worker(inst, self._notify) for inst in instances]
        names = [w.inst.task_name for w in self._workers]
        if len(set(names)) != len(names):
            raise EngineError(f"run loop '{name}': duplicate task names in {names}")
        owners: dict[Any, list[Worker]] = {}
        for w in self._workers:
            for ssp in w.inst.ssps:
                owners.setdefault(ssp, []).append(w)
        self._single = {s: ws[0] for s, ws in owners.items() if len(ws) == 1}
        self._shared = {s: tuple(ws) for s, ws in owners.items() if len(ws) > 1}
        self._inline = (self.settings.thread_pool_size == 0
                        and all(w.kind is TaskKind.SYNC for w in self._workers))
        self._max_conc = self.settings.max_concurrency
        self._timeouts = self.settings.callback_timeout_ms > 0 and not self._inline
        self._attention = True  # the first service ends tasks without inputs at once
        self._shutdown_now = False
        self._reason: StopReason | None = None
        self._error: BaseException | None = None
        self._votes = 0
        self._window_due = self._commit_due = self._report_due = self._timeout_due = False
        self._dirty: list[Worker] = []
        self._busy = 0          # messages and operations in flight, all tasks
        self._backlogged = 0    # workers whose pending queue is full
        self._pool: TaskPool | None = None
        self._ran = False
        self._warned: set = set()
        self.metrics = MetricsRegistry("run-loop")
        self._m_null = self.metrics.counter("null-choices")
        self._m_waits = self.metrics.counter("blocked-waits")
        self._m_skipped = self.metrics.counter("skipped-envelopes")
        self.metrics.gauge("in-flight", lambda: self._busy)
        self._reporter = reporter if reporter is not None else MetricsReporter.from_config(job_config, name)
        self._owns_reporter = reporter is None  # made here from config: closed by run()
        self._extra = dict(extra_metrics or {})
        for attr in ("metrics", "counters"):  # SystemConsumers keeps ``counters``
            source_metrics = getattr(getattr(source, attr, None), "snapshot", None)
            if callable(source_metrics):
                self._extra.setdefault("consumers", source_metrics)
                break

    # -- public ---------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop soon, from any thread or a signal handler: finish what is in flight (up to
        ``task.shutdown.ms``), commit every task that is not done, and return from run()."""
        self._stop(StopReason.EXTERNAL_SHUTDOWN)
        self._post(WAKE)

    @property
    def abandoned_calls(self) -> int:
        """How many user calls still run on pool threads after the loop failed on a callback
        timeout (they cannot be killed). Their tasks' stores must stay open: closing a store
        under a running call could crash the process (LMDB). 0 after any other ending."""
        if self._pool is None or not isinstance(self._error, CallbackTimeoutError):
            return 0
        return self._pool.busy

    def metrics_snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = {"run-loop": self.metrics.snapshot(), "tasks": {
            w.inst.task_name: w.inst.metrics.snapshot() for w in self._workers}}
        for key, read in self._extra.items():
            snap[key] = read()
        return snap

    def run(self) -> RunSummary:
        """Run until every task is done or shutdown; raise the first fatal error."""
        if self._ran:
            raise EngineError(f"run loop '{self.name}' already ran; build a new RunLoop")
        self._ran = True
        for w in self._workers:
            if w.inst.state is not InstanceState.INITIALIZED:
                raise EngineError(f"task '{w.inst.task_name}' is {w.inst.state.value}; call "
                                  f"TaskInstance.init() before RunLoop.run()")
        started = _perf()
        ticker = self._start_timers()
        try:
            try:
                if not self._workers:
                    self._stop(StopReason.END_OF_STREAM)
                elif self._inline:
                    self._run_inline()
                else:
                    self._run_general()
            except BaseException as exc:  # source failure, interrupt: stop without commit
                self._fail(exc)
            self._finish()
        finally:
            ticker.stop()
            if self._pool is not None:
                self._pool.shutdown()
            if self._reporter is not None:
                self._report()
                if self._owns_reporter:
                    self._reporter.close()
        if self._error is not None:
            raise self._error
        summary = RunSummary(self._reason or StopReason.EXTERNAL_SHUTDOWN,
                             {w.inst.task_name: w.processed.count for w in self._workers},
                             (_perf() - started) / 1e9)
        log.info("%s", summary)
        return summary

    # -- timers ---------------------------------------------------------------------------
    def _start_timers(self) -> Ticker:
        s, ticker = self.settings, Ticker(f"weir-timers-{self.name}")
        if s.window_ms > 0 and any(w.inst.shape.windowable for w in self._workers):
            ticker.every(s.window_ms, lambda: self._tick("_window_due"))
        if s.commit_ms > 0:
            ticker.every(s.commit_ms, lambda: self._tick("_commit_due"))
        if self._reporter is not None:
            ticker.every(self._reporter.interval_ms, lambda: self._tick("_report_due"))
        if self._timeouts:
            ticker.every(max(1, min(1000, s.callback_timeout_ms // 10)),
                         lambda: self._tick("_timeout_due"))
        if s.thread_pool_size > 0:
            self._pool = TaskPool(s.thread_pool_size, f"weir-task-{self.name}")
        ticker.start()
        return ticker

    def _tick(self, flag: str) -> None:
        setattr(self, flag, True)
        self._attention = True
        if not self._inline:
            self._post(WAKE)

    def _notify(self) -> None:
        self._attention = True

    def _report(self) -> None:
        try:
            self._reporter.report(self.metrics_snapshot())
        except Exception:  # metrics must never stop processing
            log.exception("metrics reporter '%s' failed", self.name)

    # -- stopping -------------------------------------------------------------------------
    def _finish(self) -> None:
        """Let work in flight finish (up to task.shutdown.ms, starting nothing new), then
        commit every task that is not done -- unless the loop failed."""
        deadline = _perf() + self.settings.shutdown_ms * 1_000_000
        while self._busy > 0:
            left = deadline - _perf()
            if left <= 0:
                break
            try:
                item = self._q.get(True, left / 1e9)
            except queue.Empty:
                break
            self._complete(item)
        if self._error is not None:
            return
        for w in self._workers:
            if w.complete:
                continue
            if w.busy:
                log.warning("task '%s': %d messages still in flight after task.shutdown.ms=%d; "
                            "not committing it (they will be processed again on restart)",
                            w.inst.task_name, w.in_flight, self.settings.shutdown_ms)
                continue
            for released in w.releasable(ignore_hold=True):
                self._apply(w, released)
            failure = op_outcome(w, Op.COMMIT, Coordinator())
            if failure is not None:
                self._fail_task(w, *failure)
                return
