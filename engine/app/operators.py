"""Runtime operators: what one task runs for each operator spec of its stages.

Every operator receives elements with their event time (``on_message(value, ts)``) and hands
its results to the operators downstream. Event time and the end of input move through the
graph as in Samza's OperatorImpl (docs/CONTROL.md, "Reconciliation in the receiving task"):

* an operator's **input watermark** is the minimum of the output watermarks of its upstream
  operators that this task uses (an upstream operator none of whose input streams the task
  reads never holds it back); when it advances the operator handles it (a window fires, a
  join prunes, ``partition_by`` sends it downstream) and passes it on;
* an operator **ends** once every used upstream operator has ended or drained; it drains
  (instead of ending) when any of them drained. ``partition_by`` then sends end-of-stream or
  a drain message down its intermediate stream.

Stateful operators (windows, joins, tables) live in :mod:`weir.engine.app.window_operator` and
:mod:`weir.engine.app.join_operators`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from zlib import crc32 as _crc32

from weir.stores.errors import SerdeError
from weir.stores.serdes import SerdeBase

from weir.engine.app.api import KV
from weir.engine.app.graph import OpSpec
from weir.engine.app.windows import WindowPane
from weir.engine.config.serdes import WireFormat
from weir.engine.control.messages import WATERMARK_MAX, WATERMARK_NOT_EXIST, WatermarkStatus
from weir.engine.control.task_control import wallclock_ms
from weir.engine.model import make_outgoing

if TYPE_CHECKING:
    from weir.engine.control.task_control import TaskControl
    from weir.engine.runloop.instance import ProducerCollector

__all__ = ["OperatorContext", "Operator", "InputOperator", "MapOperator", "FlatMapOperator",
           "FilterOperator", "MergeOperator", "PartitionByOperator", "SendToOperator",
           "SinkOperator", "LateElementsOperator", "ENDED"]

ENDED = "<ended>"
"""``Operator.finished`` of an operator whose inputs ended (a drained one holds the run id)."""


class OperatorContext:
    """What operators of one task share: its name, collector, the coordinator of the current
    call, its stores, control bookkeeping, metrics, control message sender, the processing-time
    clock (milliseconds; wall clock by default, a test may pass its own) and whether the
    watermark being handled is a drain's (the task drains: the end of time it announces is
    not the data's, so windows emit early panes and keep their state). ``collector`` is the
    task's :class:`~weir.engine.runloop.instance.ProducerCollector` and ``control`` its
    :class:`~weir.engine.control.task_control.TaskControl`, what
    :class:`~weir.engine.app.task.ApplicationTask` takes from the engine's task context; an
    operator test may give None for what it does not use."""

    __slots__ = ("task_name", "collector", "coordinator", "store", "control", "metrics",
                 "sender", "config", "clock_ms", "draining")

    def __init__(self, task_name: str, collector: ProducerCollector | None,
                 store: Callable[[str], Any], control: TaskControl | None,
                 metrics: Any, sender: Any, config: Any, *,
                 clock_ms: Callable[[], int] = wallclock_ms):
        self.task_name, self.collector, self.store = task_name, collector, store
        self.control, self.metrics, self.sender, self.config = control, metrics, sender, config
        self.coordinator = None
        self.clock_ms = clock_ms
        self.draining = False

    def counter(self, name: str) -> Any:
        return self.metrics.registry.counter(name)


class Operator:
    """Base of runtime operators; subclasses implement ``on_message`` and may override
    ``handle_watermark`` and ``handle_end``."""

    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        self.spec, self.ctx, self.id = spec, ctx, spec.id
        self.downstream: list[Operator] = []
        self.upstreams: list[Operator] = []
        self.links: list[tuple[Operator, int]] = []
        self.emit: list[Callable[[Any, int], None]] = []
        self.used = False
        self.input_wm = WATERMARK_NOT_EXIST
        self.output_wm = WATERMARK_NOT_EXIST
        self.finished: str | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"

    # -- wiring -----------------------------------------------------------------------------
    def entry(self, port: int) -> Callable[[Any, int], None]:
        """The callable upstream port ``port`` sends elements to."""
        return self.on_message

    def connect(self, downstream: "Operator", port: int) -> None:
        self.downstream.append(downstream)
        self.links.append((downstream, port))
        self.emit.append(downstream.entry(port))
        downstream.upstreams.append(self)

    def rewire(self) -> None:
        """Take the downstream entries again (after ``open`` may have chosen faster ones),
        in place: holders of ``emit`` see the change."""
        self.emit[:] = [d.entry(port) for d, port in self.links]

    def open(self) -> None:
        """Called once after wiring, for used operators only (stores are taken here)."""

    # -- elements ---------------------------------------------------------------------------
    def on_message(self, value: Any, ts: int) -> None:
        raise NotImplementedError

    # -- watermarks ---------------------------------------------------------------------------
    def upstream_advanced(self) -> None:
        wm = min((u.output_wm for u in self.upstreams if u.used), default=WATERMARK_NOT_EXIST)
        if wm > self.input_wm:
            self.input_wm = wm
            self.handle_watermark(wm)
            self._advance(wm)

    def _advance(self, wm: int) -> None:
        if wm > self.output_wm:
            self.output_wm = wm
            for d in self.downstream:
                d.upstream_advanced()

    def handle_watermark(self, wm: int) -> None:
        """The input watermark advanced to ``wm`` (before it is passed downstream)."""

    # -- end of input -------------------------------------------------------------------------
    def upstream_finished(self) -> None:
        if self.finished is not None:
            return
        states = [u.finished for u in self.upstreams if u.used]
        if any(s is None for s in states):
            return
        drains = [s for s in states if s != ENDED]
        self._finish(drains[0] if drains else ENDED)

    def _finish(self, how: str) -> None:
        self.finished = how
        self.handle_end(None if how == ENDED else how)
        for d in self.downstream:
            d.upstream_finished()

    def handle_end(self, drain_id: str | None) -> None:
        """Every used input ended (``drain_id`` None) or drained for ``drain_id``."""


class InputOperator(Operator):
    """An input stream (source or intermediate) of the task: elements come from
    :meth:`on_envelope`, watermarks and the end from the task's control bookkeeping."""

    def on_message(self, value: Any, ts: int) -> None:
        for fn in self.emit:
            fn(value, ts)

    def set_watermark(self, wm: int) -> None:
        self.input_wm = max(self.input_wm, wm)
        self._advance(wm)

    def set_finished(self, drain_id: str | None) -> None:
        if self.finished is None:
            self._finish(ENDED if drain_id is None else drain_id)


class MapOperator(Operator):
    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        self.fn = spec.fn

    def on_message(self, value: Any, ts: int) -> None:
        out = self.fn(value)
        for fn in self.emit:
            fn(out, ts)


class FlatMapOperator(Operator):
    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        self.fn = spec.fn

    def on_message(self, value: Any, ts: int) -> None:
        emit = self.emit
        for out in self.fn(value):
            for fn in emit:
                fn(out, ts)


class FilterOperator(Operator):
    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        self.fn = spec.fn

    def on_message(self, value: Any, ts: int) -> None:
        if self.fn(value):
            for fn in self.emit:
                fn(value, ts)


class MergeOperator(Operator):
    def on_message(self, value: Any, ts: int) -> None:
        for fn in self.emit:
            fn(value, ts)


class PartitionByOperator(Operator):
    """Writes ``KV(key, value)`` to its intermediate stream (partitioned by the key's bytes),
    and the control messages: its input watermark as it advances, at most once per
    ``task.watermark.interval.ms`` while the task is busy (an advance within the interval
    waits for the next tick: the timer's, or the one the run loop gives as soon as it has
    nothing to process, :meth:`TaskControl.request_tick`; never the end of time: that is what
    end-of-stream and drain messages say), then end-of-stream or drain."""

    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        if ctx.control is None:
            raise TypeError(f"partition_by '{spec.name or spec.stream}' sends watermarks and "
                            f"end-of-stream in-band: its OperatorContext needs the task's "
                            f"control bookkeeping (control=TaskControl), got None")
        self.stream = spec.stream
        self.task_count = spec.params.get("upstream_tasks")
        self._send = ctx.collector.send
        self._key, self._value = spec.key_fn, spec.value_fn
        self.sent_wm = WATERMARK_NOT_EXIST
        self._pending = WATERMARK_NOT_EXIST
        self._last_send = float("-inf")   # the first advance goes out at once
        self.input_streams: frozenset = frozenset()   # set by the task: streams feeding it
        self._idle = False
        self._interval = ctx.control.settings.interval_ms / 1000.0

    def open(self) -> None:
        if self.task_count is None:
            count = self.ctx.config.get_int(
                f"streams.{self.stream.stream}.intermediate.upstream.tasks")
            self.task_count = count
        collector = self.ctx.collector
        serdes = collector.serdes_for(self.stream)
        if serdes.wire_format is WireFormat.INTERMEDIATE and serdes.key_serde is not None:
            # The fast path: serialize here (the key once: its bytes also pick the partition).
            self.on_message = self._on_message_serialized
            self._key_bytes = _fast_to_bytes(serdes.key_serde)
            self._msg_bytes = (_fast_to_bytes(serdes.msg_serde) if serdes.msg_serde is not None
                               else None)
            self._partitions = collector.partition_count(self.stream)
            self._send_raw = collector.send_serialized
        self._idle = self.ctx.control.declared_idle(self.stream)   # as of the checkpoint

    def on_message(self, value: Any, ts: int) -> None:
        if self._idle:
            self._set_idle(False)
        key = self._key(value)
        if self._value is not None:
            value = self._value(value)
        self._send(make_outgoing(self.stream, value, key, None, None, ts))

    def _on_message_serialized(self, value: Any, ts: int) -> None:
        if self._idle:
            self._set_idle(False)
        key = self._key(value)
        if self._value is not None:
            value = self._value(value)
        try:
            kb = self._key_bytes(key)
            vb = None if value is None else (
                b"\x00" + (self._msg_bytes(value) if self._msg_bytes is not None else value))
        except Exception as exc:
            raise SerdeError(f"stream '{self.stream}': cannot serialize the key {key!r} or the "
                             f"value of partition_by {self.spec.name!r} ({type(exc).__name__}: "
                             f"{exc}); give partition_by a key_serde/msg_serde that can") from exc
        self._send_raw(self.stream, kb, vb, _crc32(kb) % self._partitions, ts)

    def handle_watermark(self, wm: int) -> None:
        if wm >= WATERMARK_MAX:
            return
        self._pending = wm
        now = time.monotonic()
        if now - self._last_send >= self._interval:
            self._send_pending(now)
        else:   # sent by the next tick: the timer's, or the run loop's as soon as it is idle
            self.ctx.control.request_tick()

    def on_tick(self) -> None:
        """The watermark timer: send an advance that waited for the interval, then the
        watermark status when the inputs went idle or became active again."""
        if self.finished is not None:
            return
        if self._pending > self.sent_wm:
            self._send_pending(time.monotonic())
        streams = self.input_streams
        if streams:
            control = self.ctx.control
            idle = all(control.stream_idle(ss) for ss in streams)
            if idle != self._idle:
                self._set_idle(idle)

    def _set_idle(self, idle: bool) -> None:
        self._idle = idle
        self.ctx.control.set_declared_idle(self.stream, idle)
        self.ctx.sender.watermark_status(
            self.stream, WatermarkStatus.IDLE if idle else WatermarkStatus.ACTIVE,
            task_count=self.task_count)

    def _send_pending(self, now: float) -> None:
        if self._idle:
            self._set_idle(False)
        self._last_send = now
        self.sent_wm = self._pending
        self.ctx.sender.watermark(self.stream, self._pending, task_count=self.task_count)

    def handle_end(self, drain_id: str | None) -> None:
        if drain_id is None:
            self.ctx.sender.end_of_stream(self.stream, task_count=self.task_count)
        else:
            self.ctx.sender.drain(self.stream, drain_id, task_count=self.task_count)


def _fast_to_bytes(serde: SerdeBase) -> Callable[[Any], bytes]:
    """The serde's ``private_to_bytes``: one per operator, and operators of one task never run
    concurrently (MessagePack, Weir's key serde and the msgpack serde, gives a Packer of this
    operator's own: ``msgpack.packb`` builds one per call)."""
    return serde.private_to_bytes()


def output_pair(value: Any, key_fn: Callable | None, value_fn: Callable | None) -> tuple[Any, Any]:
    """The (key, message) ``send_to`` writes for an element (see ``MessageStream.send_to``)."""
    if key_fn is not None:
        return key_fn(value), (value_fn(value) if value_fn is not None else value)
    if isinstance(value, KV):
        return value.key, (value_fn(value) if value_fn is not None else value.value)
    if isinstance(value, WindowPane):
        return value.key, (value_fn(value) if value_fn is not None else value.to_dict())
    return None, (value_fn(value) if value_fn is not None else value)


class SendToOperator(Operator):
    """Writes elements to an output stream, with their event time as the record timestamp."""

    def __init__(self, spec: OpSpec, ctx: OperatorContext):
        super().__init__(spec, ctx)
        self._send = ctx.collector.send
        self.stream = spec.stream

    def on_message(self, value: Any, ts: int) -> None:
        key, message = output_pair(value, self.spec.key, self.spec.value)
        self._send(make_outgoing(self.stream, message, key, None, None,
                                           ts if ts >= 0 else -1))


class LateElementsOperator(Operator):
    """A window's late side output (``stream.window(...).late_elements()``): the elements the
    window dropped as too late, each with its event time. Its watermark is the window's, so
    these elements are behind it: send them to an output or a sink (an event-time window
    downstream would drop them again)."""

    def on_message(self, value: Any, ts: int) -> None:
        for fn in self.emit:
            fn(value, ts)


class SinkOperator(Operator):
    def on_message(self, value: Any, ts: int) -> None:
        self.spec.fn(value, self.ctx.collector, self.ctx.coordinator)
