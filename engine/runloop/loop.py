"""The run loop: choose a message, run it on its task, window, commit, stop.

One :class:`RunLoop` drives the task instances of a container (Samza's RunLoop;
docs/TASKS.md, "Guarantees"). Guarantees, per task:

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
  :meth:`RunLoop.shutdown` -- from the moment it decides to stop it starts nothing new (no
  message, no window, on any dispatch path), waits up to ``task.shutdown.ms`` for work in
  flight and commits every task that is not done;
* with ``task.max.concurrency`` > 1 off the loop thread, a task's calls may use its stores
  at the same time: the task instance gives it locked stores (each operation atomic, no
  write lost; :mod:`weir.engine.runloop.settings`), and the loop refuses an instance whose
  stores were opened for one call at a time;
* an exception in user code stops the loop with a :class:`~weir.engine.errors.TaskError` naming
  the task, SSP and offset and carrying the user traceback (no final commit), unless its
  class is listed in ``task.ignored.exceptions`` (then it is logged, counted and skipped).

Execution has two dispatch paths, both in this class:

* the **inline** path runs sync tasks on the loop thread: choose, call ``process``, record
  the offset -- no locks, no futures, no clock read per message (every 64th call is timed
  for the ``process-ns`` metric); everything else happens in ``_service`` when a timer, a
  coordinator request or an end-of-stream sets the loop's attention flag;
* the **general** path (``job.container.thread.pool.size`` > 0, ``process_async`` tasks,
  ``async def process`` tasks on one asyncio thread) queues envelopes per task and
  dispatches them up to ``task.max.concurrency`` in flight; completions come back through
  the loop's queue and are released in sequence order.

Both call ``_service`` when the attention flag is set: it turns due timers into per-task
flags, takes coordinator requests, and starts what each task is ready for (COMMIT > WINDOW >
END_OF_STREAM > PROCESS, as in Samza). Timers only flip flags; the loop blocks on
the source or on its completion queue, never spins. Per-task state lives in
:class:`~weir.engine.runloop.worker.Worker`, which tasks read each input partition in
:class:`~weir.engine.runloop.routing.SspRoutes`; only the loop thread touches them.

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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Any

from weir.stores.config import Config

from weir.engine.runloop.pool import TaskPool
from weir.engine.runloop.settings import (JOB_CONTAINER_THREAD_POOL_SIZE, TASK_CALLBACK_TIMEOUT_MS,
                                          TASK_COMMIT_MS, TASK_MAX_CONCURRENCY, TASK_MAX_IDLE_MS,
                                          TASK_SHUTDOWN_MS, TASK_WINDOW_MS, RunLoopConfig,
                                          StoreAccess, store_access)
from weir.engine.runloop.routing import SspRoutes
from weir.engine.runloop.source import NO_METRICS, EnvelopeSource, require_source
from weir.engine.runloop.timers import Ticker
from weir.engine.runloop.worker import (DUPLICATE, FAILED, OP_DONE, WAKE, Op, TaskCallback, Worker,
                                        duplicate_completion_error, log_ignored, op_outcome,
                                        run_callback, run_op, run_sync)
from weir.engine.control.errors import ControlMessageError
from weir.engine.errors import CallbackTimeoutError, EngineError
from weir.engine.runloop.coordinator import Coordinator
from weir.engine.runloop.instance import InstanceState, TaskInstance, task_error
from weir.engine.metrics import MetricsRegistry, MetricsReporter, MetricsSettings
from weir.engine.model import EnvelopeKind, IncomingMessageEnvelope
from weir.engine.systems.linger import LINGER
from weir.engine.task import RequestScope, TaskKind

__all__ = [
    "TASK_MAX_CONCURRENCY", "JOB_CONTAINER_THREAD_POOL_SIZE", "TASK_WINDOW_MS", "TASK_COMMIT_MS",
    "TASK_CALLBACK_TIMEOUT_MS", "TASK_SHUTDOWN_MS", "TASK_MAX_IDLE_MS",
    "RunLoopConfig", "StopReason", "RunSummary", "RunLoop",
]

log = logging.getLogger("weir.runloop")

_perf = time.perf_counter_ns
_MAX_PENDING = 64   # envelopes queued per busy task before the loop stops choosing
_RUN_LIMIT = 64     # envelopes taken from the source at once on the inline path (choose_run)
_MAX_COMMIT_THREADS = 16   # tasks committed at once (_commit_together)
_IDLE_TICK_S = 0.02        # control ticks of an idle loop, at most this often (_tick_idle)
_MESSAGE, _EOS = EnvelopeKind.MESSAGE, EnvelopeKind.END_OF_STREAM
_CONTROL = EnvelopeKind.CONTROL


class StopReason(Enum):
    END_OF_STREAM = "end-of-stream"
    SHUTDOWN_REQUESTED = "shutdown-requested"
    EXTERNAL_SHUTDOWN = "external-shutdown"
    SOURCE_EXHAUSTED = "source-exhausted"
    """A bounded source (one Spark micro-batch of a job on Spark) handed out everything and
    all of it was processed; every task that is not done commits."""


@dataclass(frozen=True)
class RunSummary:
    reason: StopReason
    processed: Mapping[str, int]
    seconds: float

    def __str__(self) -> str:
        total = sum(self.processed.values())
        rate = total / self.seconds if self.seconds > 0 else 0.0
        return (f"run loop stopped ({self.reason.value}): {total:,} messages in "
                f"{self.seconds:.2f} s ({rate:,.0f} msg/s) over {len(self.processed)} tasks")


class RunLoop:
    """Runs the task instances of one container over one envelope source. Runs once."""

    def __init__(self, instances: Iterable[TaskInstance], source: EnvelopeSource,
                 config: Config | Mapping[str, str] | RunLoopConfig | None = None, *,
                 name: str = "container", reporter: MetricsReporter | None = None,
                 metrics: MetricsSettings | None = None,
                 extra_metrics: Mapping[str, Callable[[], Any]] | None = None,
                 window_due: bool = False, stop_on_votes: bool = True):
        job_config = Config({}) if isinstance(config, RunLoopConfig) else (
            config if isinstance(config, Config) else Config(config or {}))
        self.settings = config if isinstance(config, RunLoopConfig) else RunLoopConfig.from_config(job_config)
        self.name = name
        self._source = require_source(source, f"run loop '{name}'")
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._post = self._q.put
        self._workers = [Worker(inst, self._notify) for inst in instances]
        names = [w.inst.task_name for w in self._workers]
        if len(set(names)) != len(names):
            raise EngineError(f"run loop '{name}': duplicate task names in {names}")
        self.metrics = MetricsRegistry("run-loop")
        self._m_null = self.metrics.counter("null-choices")
        self._m_waits = self.metrics.counter("blocked-waits")
        skipped = self.metrics.counter("skipped-envelopes")
        self.metrics.gauge("in-flight", lambda: self._busy)
        self._routes = SspRoutes(self._workers, source, skipped, name)
        self._inline = (self.settings.thread_pool_size == 0
                        and all(w.kind is TaskKind.SYNC for w in self._workers))
        for w in self._workers:
            self._check_store_access(w)
        self._max_conc = self.settings.max_concurrency
        self._timeouts = self.settings.callback_timeout_ms > 0 and not self._inline
        self._attention = True  # the first service ends tasks without inputs at once
        self._shutdown_now = False
        self._reason: StopReason | None = None
        self._error: BaseException | None = None
        self._votes = 0
        self._window_due = self._commit_due = self._report_due = self._timeout_due = False
        # ``window_due``: a window is due before anything else (a job on Spark keeps the time
        # of its last window across micro-batches, each of which runs a new loop).
        self._window_due = bool(window_due)
        # ``stop_on_votes=False``: every task voting shutdown(CURRENT_TASK) does not stop the
        # loop; the votes are only recorded (:attr:`voted_tasks`). A job on Spark runs one
        # task per loop and stops the whole query once every task of the job voted.
        self._stop_on_votes = stop_on_votes
        self._exhausted: Callable[[], bool] = source.exhausted
        self._dirty: list[Worker] = []
        self._busy = 0          # messages and operations in flight, all tasks
        self._backlogged = 0    # workers whose pending queue is full
        self._pool: TaskPool | None = None
        self._commit_pool: ThreadPoolExecutor | None = None  # _commit_together's threads
        self._ran = False
        self._warned: set = set()  # (warning, task) pairs logged once
        # Control bookkeeping (weir.engine.control): the watermark timer's flag, and the
        # partitions no task reads any more (drained sources, ended intermediate streams)
        # leave the routes.
        self._control_due = False
        self._tick_controls = [w for w in self._workers if w.control is not None]
        self._next_idle_tick = 0.0
        for w in self._workers:
            started = w.inst.control_started
            if started is not None and started.released:
                self._routes.release(w, started.released)
        if reporter is None:  # made here (from ``metrics``, else from config): closed by run()
            reporter = (MetricsReporter.from_settings(metrics, name) if metrics is not None
                        else MetricsReporter.from_config(job_config, name))
            self._owns_reporter = True
        else:
            self._owns_reporter = False
        self._reporter = reporter
        self._extra = dict(extra_metrics or {})
        source_metrics = source.metrics()
        if source_metrics is not NO_METRICS:
            self._extra.setdefault("consumers", source_metrics)

    def _check_store_access(self, w: Worker) -> None:
        """Refuse to overlap calls of a task whose stores were opened for one call at a time
        (an instance built with other settings than this loop's): they would lose writes."""
        inst = w.inst
        if (inst.has_stores and store_access(self.settings, w.kind) is StoreAccess.CONCURRENT
                and inst.store_access is not StoreAccess.CONCURRENT):
            raise EngineError(
                f"run loop '{self.name}': task '{inst.task_name}' may run up to "
                f"{self.settings.max_concurrency} messages at once on other threads "
                f"(task.max.concurrency={self.settings.max_concurrency}, "
                f"job.container.thread.pool.size={self.settings.thread_pool_size}, "
                f"{w.kind.value} task), but its stores were opened for one call at a time; "
                f"build its TaskInstance with the run loop's config (or "
                f"store_access=StoreAccess.CONCURRENT)")

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
            if self._commit_pool is not None:
                self._commit_pool.shutdown()
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
        controls = [w.control for w in self._workers if w.control is not None]
        if controls:
            ticker.every(controls[0].settings.interval_ms, lambda: self._tick("_control_due"))
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
        final = []
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
            final.append(w)
        if len(final) > 1:  # every final commit at once, as _commit_together does
            with ThreadPoolExecutor(max_workers=min(_MAX_COMMIT_THREADS, len(final)),
                                    thread_name_prefix=f"weir-commit-{self.name}") as pool:
                futures = [pool.submit(op_outcome, w, Op.COMMIT, Coordinator()) for w in final]
                outcomes = [f.result() for f in futures]
        else:
            outcomes = [op_outcome(w, Op.COMMIT, Coordinator()) for w in final]
        for w, failure in zip(final, outcomes):
            if failure is not None:
                self._fail_task(w, *failure)
                return


    # -- the inline loop: sync tasks on the loop thread -------------------------------------
    def _run_inline(self) -> None:
        """Sync tasks on the loop thread. The source's ``choose_run`` hands out up to
        ``_RUN_LIMIT`` envelopes at once: exactly what successive ``choose()`` calls would have
        returned, handled one by one in that order (a request made while handling one is
        served before the next)."""
        choose, single = self._source.choose, self._routes.single
        idle = self.settings.max_idle_ms / 1000
        run = self._source.choose_run
        exhausted = self._exhausted
        null = self._m_null
        linger = LINGER
        controls = bool(self._tick_controls)
        n = 0
        if self._service():
            return
        while True:
            envs = run(_RUN_LIMIT)
            if not envs:
                ticks = controls and self._idle_ticks_due()
                if linger.armed or ticks:
                    # Going idle: watermarks that processed messages moved first (their
                    # control messages are sent), then what the tasks sent is written out.
                    env = choose(0.0)
                    if env is None:
                        if ticks:
                            self._tick_idle()
                        linger.write_out()
                        env = choose(idle)
                else:
                    env = choose(idle)
                if env is None:
                    null.count += 1
                    if exhausted():
                        self._stop(StopReason.SOURCE_EXHAUSTED)
                    if self._attention and self._service():
                        return
                    continue
                envs = (env,)
            for env in envs:
                ssp = env.ssp
                w = single.get(ssp)
                if w is None or env.kind is not _MESSAGE:
                    if self._route_inline(env):
                        return
                else:
                    n += 1
                    if n & 63:
                        try:
                            w.process_fn(env, w.collector, w.coordinator)
                        except Exception as exc:
                            self._inline_failure(w, env, exc)
                        else:
                            w.offsets[ssp] = env.offset
                            w.processed.count += 1
                    else:  # every 64th message is timed for the process-ns metric
                        self._process_inline(w, env)
                if self._attention and self._service():
                    return

    def _process_inline(self, w: Worker, env: IncomingMessageEnvelope) -> None:
        started = _perf()
        try:
            w.process_fn(env, w.collector, w.coordinator)
        except Exception as exc:
            self._inline_failure(w, env, exc)
            return
        w.inst.metrics.process_ns.update(_perf() - started)
        w.offsets[env.ssp] = env.offset
        w.processed.count += 1

    def _inline_failure(self, w: Worker, env: IncomingMessageEnvelope, exc: Exception) -> None:
        if w.inst.ignores(exc):
            log_ignored(w.inst, exc, "process", env)
            w.offsets[env.ssp] = env.offset
        else:
            self._fail_task(w, exc, "process", env)

    def _route_inline(self, env: IncomingMessageEnvelope) -> bool:
        """An envelope of a shared SSP (or not a message) to each of its owners in turn; a
        request made by one owner's ``process`` is taken before the next owner's starts. True
        when the loop must stop."""
        for w in self._routes.owners(env):
            if w.control is not None and (env.kind is _EOS or env.kind is _CONTROL):
                if not w.complete:
                    w.control_env = env
                    self._start_op(w, Op.CONTROL)
            elif env.kind is _EOS:
                w.ssp_ended(env.ssp)
                self._attention = self._attention or w.end_of_stream
            elif env.kind is _MESSAGE and not w.complete:
                self._process_inline(w, env)
                if self._attention and self._service():
                    return True
        return False

    # -- the general loop: thread pool, callbacks, coroutines --------------------------------
    def _run_general(self) -> None:
        get, choose = self._q.get, self._source.choose
        linger = LINGER
        controls = bool(self._tick_controls)
        idle = self.settings.max_idle_ms / 1000
        for w in self._workers:
            self._mark(w)
        while True:
            while True:
                try:
                    item = get(False)
                except queue.Empty:
                    break
                self._complete(item)
            if self._attention:
                if self._service():
                    return
            elif self._dirty:
                self._pump_dirty()
            if self._error is not None or self._shutdown_now:
                return
            if not self._backlogged:
                ticks = controls and not self._busy and self._idle_ticks_due()
                env = choose(0.0 if self._busy or linger.armed or ticks else idle)
                if env is None and not self._busy and (linger.armed or ticks):
                    if ticks:  # idle: watermarks first, then what the tasks sent
                        self._tick_idle()
                    linger.write_out()
                    env = choose(idle)
                if env is not None:
                    self._route(env)
                    continue
                self._m_null.count += 1
                if not self._busy:
                    if self._exhausted() and not any(w.pending for w in self._workers):
                        self._stop(StopReason.SOURCE_EXHAUSTED)
                    continue
            self._m_waits.count += 1
            try:
                item = get(True, idle)
            except queue.Empty:
                continue
            self._complete(item)

    def _route(self, env: IncomingMessageEnvelope) -> None:
        for w in self._routes.owners(env):
            if w.complete or env.kind is EnvelopeKind.WATERMARK:
                continue
            w.pending.append(env)
            if not w.backlogged and len(w.pending) >= _MAX_PENDING:
                w.backlogged = True
                self._backlogged += 1
            self._mark(w)

    def _mark(self, w: Worker) -> None:
        if not w.dirty:
            w.dirty = True
            self._dirty.append(w)

    def _pump_dirty(self) -> None:
        while self._dirty and self._error is None and not self._shutdown_now:
            batch, self._dirty = self._dirty, []
            for w in batch:
                w.dirty = False
                self._pump(w)

    def _pump(self, w: Worker) -> None:
        # Once the loop has decided to stop (a last vote, a container-wide request, an
        # external shutdown, a failure) nothing new starts: no message, no window.
        while self._error is None and not self._shutdown_now:
            nxt = w.next_op(self._max_conc)
            if nxt is None:
                break
            if nxt.__class__ is Op:
                self._start_op(w, nxt)
            elif self._dispatch(w, nxt):
                break  # ran here and asked to stop: take the request before starting more
        if w.backlogged and len(w.pending) < _MAX_PENDING:
            w.backlogged = False
            self._backlogged -= 1

    def _dispatch(self, w: Worker, env: IncomingMessageEnvelope) -> bool:
        """Start ``env`` on ``w``'s task. True when the call already ran here, on the loop
        thread, and asked to shut down (its completion is in the queue: the loop takes it
        before it starts anything else)."""
        seq = w.next_seq
        w.next_seq = seq + 1
        w.in_flight += 1
        self._busy += 1
        inst, coord = w.inst, Coordinator()
        cb = TaskCallback(self._post, w, seq, env, coord)
        if self._timeouts:
            w.callbacks[seq] = cb
        if w.observe is not None:  # watermark listener: the message's event time
            w.observe(env)
        if w.kind is TaskKind.COROUTINE:
            try:
                cb.future = inst.asyncio_thread().submit(inst.process_coroutine(env, coord))
            except Exception as exc:
                cb.fail(exc)
                return False
            cb.future.add_done_callback(cb.done_from_future)
            return False
        if self._pool is not None:
            self._pool.submit(run_sync if w.kind is TaskKind.SYNC else run_callback,
                              inst, env, coord, cb)
            return False
        if w.kind is TaskKind.SYNC:
            run_sync(inst, env, coord, cb)
        else:
            run_callback(inst, env, coord, cb)
        return coord.shutdown_scope is not None

    def _complete(self, item: tuple) -> None:
        code, subject, payload = item
        if code is None:
            return
        if code == OP_DONE:
            self._busy -= 1
            self._op_done(*subject, payload)
            return
        cb: TaskCallback = subject
        if code == DUPLICATE:
            self._fail(duplicate_completion_error(cb))
            return
        w = cb.worker
        w.in_flight -= 1
        self._busy -= 1
        if self._timeouts:
            w.callbacks.pop(cb.seq, None)
        if code == FAILED:
            inst = w.inst
            if not (isinstance(payload, Exception) and inst.ignores(payload)):
                self._fail_task(w, payload, "process", cb.envelope)
                return
            log_ignored(inst, payload, "process", cb.envelope)
            cb.skipped = True
        if self._max_conc == 1:
            self._apply(w, cb)
        else:
            for released in w.add_done(cb):
                self._apply(w, released)
        self._mark(w)

    def _apply(self, w: Worker, cb: TaskCallback) -> None:
        """A released message: record its offset and take its coordinator requests."""
        env = cb.envelope
        w.offsets[env.ssp] = env.offset
        if not cb.skipped:
            w.processed.count += 1
            if cb.elapsed_ns >= 0:
                w.inst.metrics.process_ns.update(cb.elapsed_ns)
        if cb.coordinator.requested:
            self._merge(w, cb.coordinator)

    def _expire_callbacks(self) -> None:
        limit = _perf() - self.settings.callback_timeout_ms * 1_000_000
        for w in self._workers:
            for cb in w.callbacks.values():  # in dispatch order: the oldest first
                if cb.started_ns > limit:
                    break
                if cb.claim():
                    cb.timed_out = True
                    if cb.future is not None:
                        cb.future.cancel()
                    w.in_flight -= 1
                    self._busy -= 1
                    del w.callbacks[cb.seq]
                    env, name = cb.envelope, w.inst.task_name
                    err = CallbackTimeoutError(
                        f"task '{name}': processing of {env.ssp} offset {env.offset} did not "
                        f"finish within task.callback.timeout.ms="
                        f"{self.settings.callback_timeout_ms}; make sure every path calls "
                        f"callback.complete() or callback.fail(exc), or raise the timeout")
                    err.task_name, err.ssp, err.offset = name, env.ssp, env.offset
                    self._fail(err)
                    return


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
            now_ms = time.time_ns() // 1_000_000
            for w in self._workers:  # a task with nothing new skips it (needs_commit)
                w.need_commit = not w.complete and (w.need_commit
                                                    or w.inst.needs_commit(now_ms))
        if self._timeout_due:
            self._timeout_due = False
            self._expire_callbacks()
        if self._control_due:
            self._control_due = False
            for w in self._workers:
                if w.control is not None and not w.complete:
                    w.need_tick = True
        if self._report_due:
            self._report_due = False
            self._report()
        for w in self._workers:
            if w.coordinator.requested:
                self._merge(w, w.coordinator)
            self._mark(w)
        if self._pool is None and self._error is None and not self._shutdown_now:
            ready = [w for w in self._workers if w.need_commit and not w.busy and not w.complete]
            if len(ready) > 1:
                self._commit_together(ready)
        if self._error is None and not self._shutdown_now:
            self._pump_dirty()
        return self._error is not None or self._shutdown_now

    def _idle_ticks_due(self) -> bool:
        """Whether the loop, going idle, should tick the control of tasks whose source
        messages may have moved a watermark or that hold a watermark back for the next tick
        (:attr:`TaskControl.tick_wanted`; at most every :data:`_IDLE_TICK_S`)."""
        if time.monotonic() < self._next_idle_tick:
            return False
        return any(w.control.tick_wanted for w in self._tick_controls if not w.complete)

    def _tick_idle(self) -> None:
        """Tick now the control of every task that processed source messages since its last
        tick or holds a watermark back for it: their watermarks, and the windows and control
        messages that wait for them, go out now instead of at the next
        ``task.watermark.interval.ms`` (which stays the interval under load, when the loop is
        never idle)."""
        self._next_idle_tick = time.monotonic() + _IDLE_TICK_S
        for w in self._tick_controls:
            if (not w.complete and w.op is None and not w.need_tick
                    and w.control.tick_wanted):
                w.need_tick = True
                self._mark(w)
        self._pump_dirty()

    def _commit_together(self, workers: list[Worker]) -> None:
        """Commit several tasks at once, each on a thread of its own, and wait for all: their
        fsyncs overlap (a journal commits concurrent fsyncs together), so a commit of every
        task costs about what one task's does. Without a thread pool the loop would commit
        them one after the other (with a pool, each commit is a pool operation already). The
        tasks' commits touch nothing in common but thread-safe producers."""
        pool = self._commit_pool
        if pool is None:
            pool = self._commit_pool = ThreadPoolExecutor(
                max_workers=min(_MAX_COMMIT_THREADS, len(self._workers)),
                thread_name_prefix=f"weir-commit-{self.name}")
        started = []
        for w in workers:
            w.need_commit = False
            w.op = Op.COMMIT
            coord = Coordinator()
            started.append((w, coord, pool.submit(op_outcome, w, Op.COMMIT, coord)))
        for w, coord, future in started:
            try:
                failure = future.result()
            except BaseException as exc:  # noqa: BLE001 - e.g. an interrupt in the hook
                failure = (exc, Op.COMMIT.value)
            self._op_done(w, Op.COMMIT, coord, failure)

    def _start_op(self, w: Worker, op: Op) -> None:
        if op is Op.COMMIT:
            w.need_commit = False
        elif op is Op.WINDOW:
            w.need_window = False
        elif op is Op.END_OF_STREAM:
            w.complete = True
        elif op is Op.CONTROL_TICK:
            w.need_tick = False
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
            if isinstance(failure[0], ControlMessageError):  # names stream, partition, offset
                self._fail(failure[0])
            else:
                self._fail_task(w, *failure, w.control_env if op is Op.CONTROL else None)
            return
        self._merge(w, coord)
        if op is Op.CONTROL or op is Op.CONTROL_TICK:
            self._apply_control(w, op)
        elif op is Op.WINDOW:
            self._check_window_time(w)
        elif op is Op.COMMIT and w.hold:
            w.hold = False
            for released in w.releasable():
                self._apply(w, released)
        elif op is Op.END_OF_STREAM:
            self._vote(w)
        self._mark(w)

    def _apply_control(self, w: Worker, op: Op) -> None:
        """Apply what the task's control bookkeeping decided (on the loop thread)."""
        env, outcome = w.control_env, w.control_outcome
        w.control_env = w.control_outcome = None
        if op is Op.CONTROL and env.kind is _CONTROL:
            w.offsets[env.ssp] = env.offset
        if outcome is None:
            return
        for ssp in outcome.ended:
            w.ssp_ended(ssp)
        if outcome.released:
            self._routes.release(w, outcome.released)
        if w.end_of_stream:
            self._attention = True

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
            if all(x.complete for x in self._workers):
                self._stop(StopReason.END_OF_STREAM)
            elif self._stop_on_votes:
                self._stop(StopReason.SHUTDOWN_REQUESTED)

    @property
    def voted_tasks(self) -> list[str]:
        """The tasks that voted to stop (``shutdown(CURRENT_TASK)``) and did not finish."""
        return [w.inst.task_name for w in self._workers if w.voted and not w.complete]

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
