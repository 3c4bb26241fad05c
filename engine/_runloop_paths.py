"""The two dispatch paths of the run loop (a mixin of :class:`engine.runloop.RunLoop`).

* the **inline** path runs sync tasks on the loop thread: choose, call ``process``, record
  the offset -- no locks, no futures, no clock read per message (every 64th call is timed
  for the ``process-ns`` metric); everything else happens in ``_service`` when a timer, a
  coordinator request or an end-of-stream sets the loop's attention flag;
* the **general** path queues envelopes per task and dispatches them to the thread pool,
  to ``process_async`` or to the asyncio thread, up to ``task.max.concurrency`` in flight;
  completions come back through the loop's queue and are released in sequence order.

State lives in ``RunLoop.__init__``; only the loop thread runs these methods.
"""

from __future__ import annotations

import logging
import queue
import time

from ._runloop_worker import (DUPLICATE, FAILED, OP_DONE, Op, TaskCallback, Worker,
                              duplicate_completion_error, log_ignored, run_callback, run_sync)
from .errors import CallbackTimeoutError
from .instance import Coordinator
from .model import EnvelopeKind, IncomingMessageEnvelope
from .task import TaskKind

__all__ = ["DispatchPaths"]

log = logging.getLogger("weir.runloop")
_perf = time.perf_counter_ns
_MAX_PENDING = 64   # envelopes queued per busy task before the loop stops choosing
_MESSAGE, _EOS = EnvelopeKind.MESSAGE, EnvelopeKind.END_OF_STREAM


class DispatchPaths:
    """Inline and general dispatch; mixed into RunLoop."""

    # -- the inline loop: sync tasks on the loop thread -------------------------------------
    def _run_inline(self) -> None:
        choose, single, idle = self._source.choose, self._single, self.settings.max_idle_ms / 1000
        null = self._m_null
        n = 0
        if self._service():
            return
        while True:
            env = choose(idle)
            if env is None:
                null.count += 1
            else:
                w = single.get(env.ssp)
                if w is None or env.kind is not _MESSAGE:
                    self._route_inline(env)
                else:
                    n += 1
                    if n & 63:
                        try:
                            w.process_fn(env, w.collector, w.coordinator)
                        except Exception as exc:
                            self._inline_failure(w, env, exc)
                        else:
                            w.offsets[env.ssp] = env.offset
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

    def _route_inline(self, env: IncomingMessageEnvelope) -> None:
        for w in self._owners(env):
            if env.kind is _EOS:
                w.ssp_ended(env.ssp)
                self._attention = self._attention or w.end_of_stream
            elif env.kind is _MESSAGE and not w.complete:
                self._process_inline(w, env)

    # -- the general loop: thread pool, callbacks, coroutines --------------------------------
    def _run_general(self) -> None:
        get, choose = self._q.get, self._source.choose
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
                env = choose(0.0 if self._busy else idle)
                if env is not None:
                    self._route(env)
                    continue
                self._m_null.count += 1
                if not self._busy:
                    continue
            self._m_waits.count += 1
            try:
                item = get(True, idle)
            except queue.Empty:
                continue
            self._complete(item)

    def _route(self, env: IncomingMessageEnvelope) -> None:
        for w in self._owners(env):
            if w.complete or env.kind is EnvelopeKind.WATERMARK:
                continue
            w.pending.append(env)
            if not w.backlogged and len(w.pending) >= _MAX_PENDING:
                w.backlogged = True
                self._backlogged += 1
            self._mark(w)

    def _owners(self, env: IncomingMessageEnvelope) -> tuple[Worker, ...] | list[Worker]:
        """The workers an envelope goes to; envelopes of a shared SSP before a task's
        starting offset are skipped for that task (SAMZA-REFERENCE 1.8)."""
        w = self._single.get(env.ssp)
        if w is not None:
            return (w,)
        ws = self._shared.get(env.ssp)
        if ws is None:
            self._m_skipped.count += 1
            if env.ssp not in self._warned:
                self._warned.add(env.ssp)
                log.warning("run loop '%s': no task consumes %s; skipping its envelopes",
                            self.name, env.ssp)
            return ()
        if env.kind is not _MESSAGE:
            return ws
        out = [w for w in ws if w.inst.is_caught_up(env)]
        for w in ws:
            if w not in out:
                w.inst.metrics.skipped.count += 1
        return out

    def _mark(self, w: Worker) -> None:
        if not w.dirty:
            w.dirty = True
            self._dirty.append(w)

    def _pump_dirty(self) -> None:
        while self._dirty and self._error is None:
            batch, self._dirty = self._dirty, []
            for w in batch:
                w.dirty = False
                self._pump(w)

    def _pump(self, w: Worker) -> None:
        while self._error is None:
            nxt = w.next_op(self._max_conc)
            if nxt is None:
                break
            if nxt.__class__ is Op:
                self._start_op(w, nxt)
            else:
                self._dispatch(w, nxt)
        if w.backlogged and len(w.pending) < _MAX_PENDING:
            w.backlogged = False
            self._backlogged -= 1

    def _dispatch(self, w: Worker, env: IncomingMessageEnvelope) -> None:
        seq = w.next_seq
        w.next_seq = seq + 1
        w.in_flight += 1
        self._busy += 1
        inst, coord = w.inst, Coordinator()
        cb = TaskCallback(self._post, w, seq, env, coord)
        if self._timeouts:
            w.callbacks[seq] = cb
        if w.kind is TaskKind.COROUTINE:
            try:
                cb.future = inst.asyncio_thread().submit(inst.process_coroutine(env, coord))
            except Exception as exc:
                cb.fail(exc)
                return
            cb.future.add_done_callback(cb.done_from_future)
        elif self._pool is not None:
            self._pool.submit(run_sync if w.kind is TaskKind.SYNC else run_callback,
                              inst, env, coord, cb)
        elif w.kind is TaskKind.SYNC:
            run_sync(inst, env, coord, cb)
        else:
            run_callback(inst, env, coord, cb)

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
