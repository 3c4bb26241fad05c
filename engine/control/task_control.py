"""One task's control bookkeeping: reconcile control messages, generate watermarks, drain.

A :class:`TaskControl` belongs to one task instance. The run loop hands it

* every in-band control envelope of the task's intermediate partitions, in order with the
  user messages (:meth:`TaskControl.on_envelope`), and the end-of-stream envelope of every
  source partition;
* a tick of the control timer (:meth:`TaskControl.tick`), every
  ``task.watermark.interval.ms``, and when the run loop goes idle after source messages were
  processed (:attr:`TaskControl.tick_wanted`; at most every 20 ms): source watermarks are
  generated, idle source partitions re-checked and the drain request looked at
  (what the task sends reaches the next stage through the producers' linger,
  ``systems.<s>.producer.linger.ms``, or at once when the loop goes idle);

and applies what comes back (:class:`ControlOutcome`): partitions that have ended or drained
for the task, partitions to stop reading. Each call needs nothing of the task in flight (the
run loop makes it a barrier, like ``window``).

Reconciliation (Samza's rules, with the departures listed in docs/CONTROL.md):

* an intermediate partition **ends** when every upstream task has sent end-of-stream (their
  number comes from ``streams.<id>.intermediate.upstream.tasks`` or the messages'
  ``taskCount``; a disagreement stops the task with :class:`BadTaskCountError`);
* a stream's **watermark** for the task is the minimum over the task's partitions of it: for
  an intermediate partition the minimum over its upstream tasks (:class:`WatermarkStates`),
  for a source partition the generated one (:class:`SourceWatermarks`); a partition that
  ended counts as :data:`WATERMARK_MAX`. It is announced only when it advances;
* the **task's watermark** is the minimum over its input streams;
* **idleness** is declared by the upstream task, in-band (a watermark-status message, as
  Flink's ``WatermarkStatus``): an intermediate partition leaves out the upstream tasks that
  said ``IDLE`` until they say ``ACTIVE`` or send a watermark, never one that is merely quiet;
  a partition all of whose upstream tasks are idle is left out of its stream's minimum.
  :meth:`TaskControl.stream_idle` tells a sender whether its inputs are idle, and
  :meth:`TaskControl.set_declared_idle` records (and checkpoints) what it declared.

What the task hears, through methods it may define (looked up on the innermost task; called
through its wrappers):

* ``on_watermark(watermark, collector, coordinator)``: the task's watermark advanced (a
  low-level task that defines it has the event times of its source messages observed from
  ``envelope.timestamp``);
* ``on_stream_watermark(stream, watermark, collector, coordinator)``,
  ``on_stream_end(stream, collector, coordinator)``,
  ``on_stream_drain(stream, run_id, collector, coordinator)``: per input stream, for a task
  that drives its own operators (the application task); such a task reports event times
  itself through :meth:`TaskControl.clock`;
* ``on_drain(collector, coordinator)``: every input drained; called instead of
  ``on_end_of_stream`` before the task's final commit;
* ``on_control_tick(collector, coordinator)``: every watermark timer tick (the application
  task sends the watermarks that waited for it).

The state a checkpoint needs is :meth:`checkpoint` (JSON) and comes back through
:meth:`restore` before ``init``; :meth:`start` then tells the task the restored watermarks and
ended streams, before its first message.

Example::

    >>> from weir.engine.control.messages import EndOfStreamMessage
    >>> from weir.engine.model import IncomingMessageEnvelope, EnvelopeKind, SystemStreamPartition as SSP
    >>> p0 = SSP("filelog", "by-user", 0)
    >>> control = TaskControl("Partition 0", [p0], intermediate={p0: 2})
    >>> env = IncomingMessageEnvelope(p0, 7, None, EndOfStreamMessage("Partition 0", 2),
    ...                               kind=EnvelopeKind.CONTROL)
    >>> control.on_envelope(env, None, None).ended
    ()
    >>> env.offset, env.message = 8, EndOfStreamMessage("Partition 1", 2)
    >>> control.on_envelope(env, None, None).ended
    (SystemStreamPartition(system='filelog', stream='by-user', partition=0),)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from weir.engine.control.drain import DrainMonitor
from weir.engine.control.errors import BadTaskCountError, ControlMessageError
from weir.engine.control.messages import (WATERMARK_MAX, WATERMARK_NOT_EXIST, ControlDecodeFailure,
                                          DrainMessage, EndOfStreamMessage, WatermarkMessage,
                                          WatermarkStatusMessage)
from weir.engine.control.settings import ControlSettings
from weir.engine.control.sources import PartitionClock, SourceWatermarks
from weir.engine.control.states import (EndOfStreamCheckpoint, EndOfStreamStates,
                                        WatermarkCheckpoint, WatermarkStates, parse_ssp_key,
                                        ssp_key)
from weir.engine.model import EnvelopeKind, IncomingMessageEnvelope, SystemStream, SystemStreamPartition

__all__ = ["ControlOutcome", "ControlHooks", "TaskControl", "CHECKPOINT_KEY", "wallclock_ms"]

log = logging.getLogger("weir.control")

CHECKPOINT_KEY = "control"
"""The section of a checkpoint's ``extras`` that holds the control bookkeeping."""

_FORMAT = 1
_EOS_KIND = EnvelopeKind.END_OF_STREAM
_ENDED, _DRAINED = "ended", "drained"


def wallclock_ms() -> int:
    return time.time_ns() // 1_000_000


class ControlOutcome(NamedTuple):
    """What the run loop applies after a control call: partitions that ended or drained for
    the task (``ended``) and partitions to stop reading (``released``)."""

    ended: tuple[SystemStreamPartition, ...] = ()
    released: tuple[SystemStreamPartition, ...] = ()


_NOTHING = ControlOutcome()


def _innermost(task: Any) -> Any:
    from weir.engine.task import TaskWrapper
    seen = 0
    while isinstance(task, TaskWrapper) and seen < 100:
        task, seen = task.wrapped, seen + 1
    return task


class ControlHooks:
    """The control methods a task defines (bound on the outer task, so wrappers see them)."""

    __slots__ = ("watermark", "drain", "stream_watermark", "stream_end", "stream_drain", "tick")

    def __init__(self, task: Any):
        inner = _innermost(task)

        def bound(name: str) -> Callable | None:
            return getattr(task, name) if callable(getattr(inner, name, None)) else None

        self.watermark = bound("on_watermark")
        self.drain = bound("on_drain")
        self.stream_watermark = bound("on_stream_watermark")
        self.stream_end = bound("on_stream_end")
        self.stream_drain = bound("on_stream_drain")
        self.tick = bound("on_control_tick")

    @property
    def any(self) -> bool:
        return any(getattr(self, name) is not None for name in self.__slots__)

    @property
    def reports_event_time(self) -> bool:
        """The task drives its own operators and reports event times itself."""
        return self.stream_watermark is not None


class TaskControl:
    """The control bookkeeping of one task; see the module docstring."""

    def __init__(self, task_name: str, ssps: Iterable[SystemStreamPartition], *,
                 intermediate: Mapping[SystemStreamPartition, int | None] | None = None,
                 settings: ControlSettings | None = None, monitor: DrainMonitor | None = None,
                 task: Any = None, clock_ms: Callable[[], int] = wallclock_ms):
        self.task_name = str(task_name)
        self.settings = settings or ControlSettings()
        self._clock_ms = clock_ms
        now = clock_ms()
        self.ssps = frozenset(SystemStreamPartition(*s) for s in ssps)
        inter = {SystemStreamPartition(*s): n for s, n in (intermediate or {}).items()
                 if SystemStreamPartition(*s) in self.ssps}
        self._intermediate = inter
        self._source_ssps = frozenset(s for s in self.ssps if s not in inter)
        self.eos = EndOfStreamStates(inter)
        self.watermarks = WatermarkStates(inter, quorum_pct=self.settings.quorum_pct)
        self.sources = SourceWatermarks(self._source_ssps,
                                        out_of_orderness_ms=self.settings.out_of_orderness_ms,
                                        idle_timeout_ms=self.settings.idle_timeout_ms, now_ms=now)
        self._senders: dict[SystemStreamPartition, set[str]] = {s: set() for s in inter}
        self._drain_tasks: dict[SystemStreamPartition, set[str]] = {s: set() for s in inter}
        self._done: dict[SystemStreamPartition, str] = {}
        self._streams: dict[SystemStream, list[SystemStreamPartition]] = {}
        for ssp in sorted(self.ssps):
            self._streams.setdefault(ssp.system_stream, []).append(ssp)
        self._published: dict[SystemStream, int] = {ss: WATERMARK_NOT_EXIST for ss in self._streams}
        self._announced: dict[SystemStream, str] = {}
        self._task_watermark = WATERMARK_NOT_EXIST
        self._idle_outputs: set[SystemStream] = set()   # streams this task declared idle on
        self._monitor = monitor
        self.drain_id: str | None = None
        self.completed_drain: str | None = None
        self._call: Callable[[Any], Any] = lambda result: result
        self.hooks = ControlHooks(task) if task is not None else ControlHooks(object())
        self._tick_requested = False
        self.messages = 0          # control envelopes handled
        self.discarded = 0         # drain messages of another drain request

    # -- wiring ---------------------------------------------------------------------------
    def bind(self, task: Any, call: Callable[[Any], Any] | None = None) -> None:
        """Use ``task``'s control methods; ``call`` runs a hook's result (waits for an
        awaitable: the task instance's ``_call``)."""
        self.hooks = ControlHooks(task)
        if call is not None:
            self._call = call

    @property
    def observes_envelopes(self) -> bool:
        """A low-level watermark listener: event times come from ``envelope.timestamp``."""
        return self.hooks.watermark is not None and not self.hooks.reports_event_time

    @property
    def tick_wanted(self) -> bool:
        """Whether a tick now has work: a source message was processed since the last tick
        (its watermark may advance), or the task asked for one (:meth:`request_tick`). The run
        loop ticks such a task when it goes idle, so event time moves on at once instead of at
        the next ``task.watermark.interval.ms``."""
        return self._tick_requested or self.sources.observed

    def request_tick(self) -> None:
        """Ask for a tick as soon as the run loop goes idle: the task holds something back
        for the next tick (a ``partition_by`` that received a watermark from an intermediate
        stream within ``task.watermark.interval.ms`` of its last send)."""
        self._tick_requested = True

    def clock(self, ssp: SystemStreamPartition) -> PartitionClock | None:
        """The event-time clock of a source partition (None for an intermediate one): call
        ``observe(ts)`` for each message processed."""
        return self.sources.clock(ssp) if ssp in self.sources else None

    def clocks(self) -> dict[SystemStreamPartition, PartitionClock]:
        return {s: self.sources.clock(s) for s in self._source_ssps}

    def observer(self) -> Callable[[IncomingMessageEnvelope], None]:
        """``observe(envelope)``: record a source envelope's timestamp (>= 0)."""
        clocks = self.clocks()

        def observe(envelope: IncomingMessageEnvelope) -> None:
            clock = clocks.get(envelope.ssp)
            ts = envelope.timestamp
            if clock is not None and ts is not None and ts >= 0:
                if ts > clock.max_ts:
                    clock.max_ts = ts
                clock.active = True
        return observe

    def ended_ssps(self) -> frozenset[SystemStreamPartition]:
        """Partitions that have ended or drained for this task."""
        return frozenset(self._done)

    @property
    def draining(self) -> bool:
        return self.drain_id is not None

    def watermark(self, ss: SystemStream | None = None) -> int:
        """The last announced watermark of stream ``ss`` (or of the task)."""
        return self._task_watermark if ss is None else self._published.get(ss, WATERMARK_NOT_EXIST)

    # -- idleness (docs/CONTROL.md, "Idle upstream tasks") ------------------------------------
    def stream_idle(self, ss: SystemStream) -> bool:
        """Whether input stream ``ss`` has nothing coming for this task: every partition of it
        has ended or is idle, and one at least is idle. A source partition is idle after
        ``task.watermark.idle.timeout.ms`` without a message; an intermediate partition when
        every upstream task that has not ended declared itself idle. Never true for a stream
        that is merely slow."""
        ssps = self._streams.get(ss)
        if not ssps:
            return False
        done, idle = self._done, False
        if ssps[0] in self._intermediate:
            for ssp in ssps:
                if ssp in done:
                    continue
                if not self.watermarks.is_idle(ssp):
                    return False
                idle = True
            return idle
        if self.settings.idle_timeout_ms <= 0:
            return False
        now = self._clock_ms()
        for ssp in ssps:
            if ssp in done:
                continue
            if not self.sources.idle(ssp, now_ms=now):
                return False
            idle = True
        return idle

    def declared_idle(self, ss: SystemStream) -> bool:
        """Whether this task's last watermark status on output stream ``ss`` was ``IDLE``."""
        return ss in self._idle_outputs

    def set_declared_idle(self, ss: SystemStream, idle: bool) -> None:
        """Record the watermark status this task sent on ``ss`` (checkpointed: after a restart
        the task still says ``ACTIVE`` before writing anything else there)."""
        if idle:
            self._idle_outputs.add(ss)
        else:
            self._idle_outputs.discard(ss)

    # -- the run loop's calls -------------------------------------------------------------
    def start(self, collector: Any, coordinator: Any) -> ControlOutcome:
        """After ``init``: continue a drain the last run did not finish, and tell the task
        the restored watermarks and ended streams."""
        if self.drain_id is not None:   # a drain restored from the checkpoint: continue it
            self._drain_sources()
        else:
            self._check_drain(force=True)
        for ssp in self._intermediate:
            self._update_done(ssp)
        self._publish(collector, coordinator)
        done = tuple(sorted(self._done))
        return ControlOutcome(done, done)

    def on_envelope(self, env: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> ControlOutcome:
        """A control envelope of an intermediate partition or a source's end-of-stream."""
        ssp = env.ssp
        before = len(self._done)
        if env.kind is _EOS_KIND:
            if ssp in self._intermediate:   # a bounded system ended an intermediate stream
                self.eos.update(ssp, None)
            else:
                self.sources.end(ssp)
            self._mark(ssp, _ENDED)
            self._publish(collector, coordinator)
            return ControlOutcome((ssp,), ())
        self.messages += 1
        message = env.message
        if isinstance(message, ControlDecodeFailure):
            raise message.error
        if ssp not in self._intermediate:
            raise ControlMessageError(
                f"a control message ({type(message).__name__}) on a stream that is not "
                f"intermediate", ssp=ssp, offset=env.offset,
                fix=f"set streams.<id>.samza.intermediate=true for {ssp.system}.{ssp.stream}, "
                    f"or stop writing control messages to it")
        self._check_sender(ssp, message, env.offset)
        if isinstance(message, WatermarkMessage):
            self.watermarks.update(ssp, message.timestamp, message.task_name)
        elif isinstance(message, WatermarkStatusMessage):
            if message.task_name is not None:
                self.watermarks.set_idle(ssp, message.task_name, message.idle)
        elif isinstance(message, EndOfStreamMessage):
            self.eos.update(ssp, message.task_name, offset=env.offset)
            self.watermarks.end_of_stream(ssp, message.task_name)
            self._update_done(ssp)
        elif isinstance(message, DrainMessage):
            if not self._accept_drain(message, env):
                return _NOTHING
            if message.task_name is None:
                self._mark(ssp, _DRAINED)
            else:
                self._drain_tasks[ssp].add(message.task_name)
                self._update_done(ssp)
        self._publish(collector, coordinator)
        if len(self._done) == before:
            return _NOTHING
        new = tuple(s for s in list(self._done)[before:])
        return ControlOutcome(new, new)

    def tick(self, collector: Any, coordinator: Any) -> ControlOutcome:
        """The control timer (every ``task.watermark.interval.ms``, or sooner when the run
        loop goes idle): the drain request, source watermarks and idle source partitions."""
        before = len(self._done)
        released = self._check_drain(force=False)
        self._publish(collector, coordinator)
        if self.hooks.tick is not None:
            self._call(self.hooks.tick(collector, coordinator))
        self._tick_requested = False   # what the tick's watermarks held back went out with it
        new = tuple(list(self._done)[before:])
        if not new and not released:
            return _NOTHING
        return ControlOutcome(new, tuple(dict.fromkeys((*released, *new))))

    def finish_drain(self, collector: Any, coordinator: Any) -> None:
        """Every input drained: ``on_drain`` (if the task has it); the next commit records
        the drain as completed."""
        if self.hooks.drain is not None:
            self._call(self.hooks.drain(collector, coordinator))
        self.completed_drain = self.drain_id

    # -- reconciliation ---------------------------------------------------------------------
    def _check_sender(self, ssp: SystemStreamPartition, message: Any, offset: int) -> None:
        name = message.task_name
        if name is None:
            return
        if message.task_count is not None:
            self.eos.expect(ssp, message.task_count, offset=offset)
            self.watermarks.expect(ssp, message.task_count)
        expected = self.eos.expected(ssp)
        if expected is None:
            raise BadTaskCountError(
                f"a control message from upstream task '{name}' carries no taskCount and the "
                f"number of upstream tasks of {ssp.system}.{ssp.stream} is not configured "
                f"(streams.<id>.intermediate.upstream.tasks)", ssp=ssp, offset=offset)
        senders = self._senders[ssp]
        if name not in senders:
            senders.add(name)
            if len(senders) > expected:
                raise BadTaskCountError(
                    f"control messages from {len(senders)} distinct upstream tasks "
                    f"({', '.join(sorted(senders))}) but {expected} are expected",
                    ssp=ssp, offset=offset, expected=expected, got=len(senders))

    def _update_done(self, ssp: SystemStreamPartition) -> None:
        if ssp in self._done:
            return
        if self.eos.is_end_of_stream(ssp):
            self._mark(ssp, _ENDED)
            return
        drained = self._drain_tasks[ssp]
        expected = self.eos.expected(ssp)
        if drained and expected is not None and len(drained | self.eos.tasks(ssp)) >= expected:
            self._mark(ssp, _DRAINED)

    def _mark(self, ssp: SystemStreamPartition, how: str) -> None:
        if ssp not in self._done:
            self._done[ssp] = how

    def _accept_drain(self, message: DrainMessage, env: IncomingMessageEnvelope) -> bool:
        if self.drain_id is None:
            request = self._monitor.current(force=True) if self._monitor is not None else None
            if (request is not None and request.run_id == message.run_id
                    and request.run_id != self.completed_drain):
                self._begin_drain(request.run_id)
        if message.run_id == self.drain_id:
            return True
        self.discarded += 1
        log.warning("task '%s': discarding a drain message of drain '%s' at %s offset %d (the "
                    "current drain is %s)", self.task_name, message.run_id, env.ssp, env.offset,
                    repr(self.drain_id) if self.drain_id else "none")
        return False

    def _check_drain(self, *, force: bool) -> tuple[SystemStreamPartition, ...]:
        if self.drain_id is not None or self._monitor is None:
            return ()
        request = self._monitor.current(force=force)
        if request is None or request.run_id == self.completed_drain:
            return ()
        return self._begin_drain(request.run_id)

    def _begin_drain(self, run_id: str) -> tuple[SystemStreamPartition, ...]:
        self.drain_id = run_id
        log.info("task '%s': draining for request %s: source partitions stop where they are",
                 self.task_name, run_id)
        return self._drain_sources()

    def _drain_sources(self) -> tuple[SystemStreamPartition, ...]:
        drained = []
        for ssp in sorted(self._source_ssps):
            if ssp not in self._done:
                self._mark(ssp, _DRAINED)
                drained.append(ssp)
        return tuple(drained)

    # -- announcing -------------------------------------------------------------------------
    def _stream_watermark(self, ss: SystemStream, ssps: list[SystemStreamPartition], now: int) -> int:
        done = self._done
        if all(s in done for s in ssps):
            return WATERMARK_MAX
        if ssps[0] in self._intermediate:
            states = self.watermarks
            values = [WATERMARK_MAX if s in done else states.watermark(s) for s in ssps
                      if s in done or not states.is_idle(s)]
            if values:   # partitions whose upstream tasks all declared idle are left out
                return min(values)
            # every partition idle (or ended): the largest watermark they reached
            return max(states.watermark(s) for s in ssps if s not in done)
        return self.sources.stream_watermark(ss, now_ms=now)

    def _publish(self, collector: Any, coordinator: Any) -> None:
        hooks, call = self.hooks, self._call
        now = self._clock_ms()
        for ss, ssps in self._streams.items():
            wm = self._stream_watermark(ss, ssps, now)
            if wm > self._published[ss]:
                self._published[ss] = wm
                if hooks.stream_watermark is not None:
                    call(hooks.stream_watermark(ss, wm, collector, coordinator))
            if ss not in self._announced and all(s in self._done for s in ssps):
                how = _DRAINED if any(self._done[s] == _DRAINED for s in ssps) else _ENDED
                self._announced[ss] = how
                if how == _ENDED and hooks.stream_end is not None:
                    call(hooks.stream_end(ss, collector, coordinator))
                elif how == _DRAINED and hooks.stream_drain is not None:
                    call(hooks.stream_drain(ss, self.drain_id, collector, coordinator))
        if self._published:
            task_wm = min(self._published.values())
            if task_wm > self._task_watermark:
                self._task_watermark = task_wm
                if hooks.watermark is not None:
                    call(hooks.watermark(task_wm, collector, coordinator))

    # -- checkpoint -------------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        """The bookkeeping for the checkpoint's ``extras["control"]`` (JSON types only).
        Drain-induced watermarks are never stored: after a drain, event time continues where
        the data left it."""
        drain = None
        if self.drain_id is not None:
            drain = {"runId": self.drain_id,
                     "tasks": {ssp_key(s): sorted(t) for s, t in self._drain_tasks.items() if t}}
        return {
            "format": _FORMAT,
            "endOfStream": {ssp_key(s): cp.to_json() for s, cp in self.eos.checkpoint().items()},
            "watermarks": {ssp_key(s): cp.to_json()
                           for s, cp in self.watermarks.checkpoint().items()},
            "sources": self.sources.checkpoint(),
            "idleOutputs": sorted(f"{ss.system}.{ss.stream}" for ss in self._idle_outputs),
            "drain": drain,
            "completedDrain": self.completed_drain,
        }

    def restore(self, saved: Mapping[str, Any] | None) -> None:
        """Bring back :meth:`checkpoint`'s bookkeeping (before ``start``)."""
        if not saved:
            return
        fmt = saved.get("format", _FORMAT)
        if fmt != _FORMAT:
            raise ControlMessageError(
                f"the checkpoint's control bookkeeping has format {fmt!r}, this Weir reads "
                f"format {_FORMAT}", fix="run the Weir version that wrote the checkpoint")
        eos = {parse_ssp_key(k): EndOfStreamCheckpoint.from_json(v)
               for k, v in (saved.get("endOfStream") or {}).items()}
        self.eos.restore(eos)
        for ssp, cp in eos.items():
            if ssp in self._senders:
                self._senders[ssp].update(cp.tasks)
                if cp.expected is not None:
                    self.watermarks.expect(ssp, cp.expected)
        wms = {parse_ssp_key(k): WatermarkCheckpoint.from_json(v)
               for k, v in (saved.get("watermarks") or {}).items()}
        self.watermarks.restore(wms)
        for ssp, cp in wms.items():
            if ssp in self._senders:
                self._senders[ssp].update(cp.timestamps)
        self.sources.restore(saved.get("sources") or {})
        self._idle_outputs = {SystemStream.parse(k) for k in saved.get("idleOutputs") or ()}
        self.completed_drain = saved.get("completedDrain")
        drain = saved.get("drain")
        request = self._monitor.current(force=True) if self._monitor is not None else None
        if (drain and request is not None and drain.get("runId") == request.run_id
                and request.run_id != self.completed_drain):
            self.drain_id = request.run_id
            for key, tasks in (drain.get("tasks") or {}).items():
                ssp = parse_ssp_key(key)
                if ssp in self._drain_tasks:
                    self._drain_tasks[ssp].update(tasks)
                    self._senders[ssp].update(tasks)
