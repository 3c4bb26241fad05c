"""The task that runs an application's operators: an ordinary low-level task.

The planner names :class:`ApplicationTask` as ``task.class``; one object per task instance.
At ``init`` it runs the application's ``describe`` again (each task gets its own operator
functions), keeps the operators of its stages (``app.stage``, or all), marks the ones this
task uses (an input operator is used when the task reads a partition of its stream), wires
them and opens their stores. Then:

* ``process(envelope)`` hands the message to the input operator of its stream, which
  computes the element's event time (the input's ``timestamp`` function, else the record
  timestamp), records it on the partition's clock (source streams: that makes their
  watermarks) and passes the element on;
* ``on_stream_watermark`` / ``on_stream_end`` / ``on_stream_drain`` (called by the task's
  control bookkeeping, :mod:`weir.engine.control.task_control`) move event time and the end
  of input through the operators; the end of time a drain announces is flagged
  (``OperatorContext.draining``), so windows emit early panes and keep their state instead
  of closing;
* ``window`` (every ``task.window.ms``, which the planner sets when a window runs on
  processing time or has a time-based trigger, as Samza's planner does) closes
  processing-time windows and fires the time-based triggers that are due. Processing time is
  the task context's clock (``context.clock``): the wall clock, or the one ``weir.testing``
  advances, so processing-time windows are tested deterministically.

Everything runs on the run loop like any task: the same chooser, stores, commits,
checkpoints and thread modes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.engine.app.api import KV
from weir.engine.app.graph import OpCode, OpSpec
from weir.engine.app.join_operators import SendToTableOperator, StreamJoinOperator, TableJoinOperator
from weir.engine.app.loader import describe_application
from weir.engine.app.operators import (FilterOperator, FlatMapOperator, InputOperator, MapOperator,
                                       LateElementsOperator, MergeOperator, Operator,
                                       OperatorContext, PartitionByOperator, SendToOperator,
                                       SinkOperator)
from weir.engine.app.settings import APP_STAGE
from weir.engine.app.stages import stage_operators
from weir.engine.app.window_operator import WindowOperator
from weir.engine.control.messages import WATERMARK_MAX
from weir.engine.control.sender import ControlMessageSender
from weir.engine.errors import EngineError
from weir.engine.model import SystemStream
from weir.engine.runloop.instance import InstanceContext
from weir.engine.task import TaskContext

__all__ = ["ApplicationTask", "OPERATORS"]

OPERATORS: dict[OpCode, type[Operator]] = {
    OpCode.INPUT: InputOperator,
    OpCode.MAP: MapOperator,
    OpCode.FLAT_MAP: FlatMapOperator,
    OpCode.FILTER: FilterOperator,
    OpCode.MERGE: MergeOperator,
    OpCode.PARTITION_BY: PartitionByOperator,
    OpCode.WINDOW: WindowOperator,
    OpCode.LATE_ELEMENTS: LateElementsOperator,
    OpCode.JOIN: StreamJoinOperator,
    OpCode.JOIN_TABLE: TableJoinOperator,
    OpCode.SEND_TO: SendToOperator,
    OpCode.SEND_TO_TABLE: SendToTableOperator,
    OpCode.SINK: SinkOperator,
}


def _route(op: InputOperator, clock: Any):
    """The per-message function of one input partition: the element (``KV`` or message), its
    event time (the input's function or the record's), the partition's clock, the operators
    downstream; specialized once so the per-message path has no decisions left."""
    emit = op.emit
    timestamp = op.spec.params.get("timestamp")
    kv = op.spec.params.get("kv", False)
    if len(emit) == 1:
        (first,) = emit

        def deliver(value, ts):
            first(value, ts)
    else:
        def deliver(value, ts):
            for fn in emit:
                fn(value, ts)

    if clock is None:   # an intermediate stream: event time is the record's
        if kv:
            return lambda env: deliver(KV(env.key, env.message), env.timestamp)
        return lambda env: deliver(env.message, env.timestamp)

    def from_source(env):
        value = KV(env.key, env.message) if kv else env.message
        ts = timestamp(value) if timestamp is not None else env.timestamp
        if ts > clock.max_ts:
            clock.max_ts = ts
        clock.active = True
        deliver(value, ts)
    return from_source


def _input_streams(op: Operator) -> frozenset[SystemStream]:
    """The input streams of this task whose elements can reach ``op`` (through used
    operators): the streams whose idleness makes ``op``'s inputs idle."""
    out, stack, seen = set(), [op], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, InputOperator):
            out.add(current.spec.stream)
        stack.extend(u for u in current.upstreams if u.used)
    return frozenset(out)


class ApplicationTask:
    """Runs the operators of an application's stages for one task (see the module docs)."""

    def __init__(self, *, clock_ms: Callable[[], int] | None = None) -> None:
        self.operators: dict[str, Operator] = {}
        self.inputs: dict[SystemStream, InputOperator] = {}
        self._routes: dict[Any, Any] = {}
        self._ticking: list[PartitionByOperator] = []
        self._timed: list[WindowOperator] = []
        self._ctx: OperatorContext | None = None
        self._control: Any = None
        self._clock_ms = clock_ms  # None: the task context's processing clock

    def init(self, context: TaskContext) -> None:
        if not isinstance(context, InstanceContext) or context.control is None:
            raise EngineError(f"task '{context.task_name}': ApplicationTask needs the engine's "
                              f"task context with control bookkeeping (a TaskInstance built "
                              f"with control=...); run applications with `weir run` (app.class)")
        control, collector = context.control, context.collector
        config = context.config
        app = describe_application(config)
        graph = app.graph
        stages = stage_operators(graph)
        selected = APP_STAGE.get(config)
        if selected >= len(stages):
            raise EngineError(f"app.stage={selected} but the application has {len(stages)} "
                              f"stages (0..{len(stages) - 1}); see `weir plan`")
        keep = [op for i, ops in enumerate(stages) if selected < 0 or i == selected for op in ops]
        sender = ControlMessageSender(collector, context.task_name, collector.partition_count)
        self._control = control
        ctx = self._ctx = OperatorContext(context.task_name, collector, context.store, control,
                                          context.metrics, sender, config,
                                          clock_ms=self._clock_ms or context.clock.now_ms)
        read = {ssp.system_stream for ssp in context.ssps}
        kept = {id(op) for op in keep}
        ops: list[tuple[OpSpec, Operator]] = []
        for spec in sorted(keep, key=lambda o: o.index):
            op = OPERATORS[spec.opcode](spec, ctx)
            self.operators[spec.id] = op
            ops.append((spec, op))
        by_spec = {id(spec): op for spec, op in ops}
        for spec, op in ops:
            for port, upstream in enumerate(spec.inputs):
                if id(upstream) in kept:
                    by_spec[id(upstream)].connect(op, port)
        for spec, op in ops:  # declaration order is data-flow order within a stage
            if spec.opcode is OpCode.INPUT:
                op.used = spec.stream in read
                if op.used:
                    self.inputs[spec.stream] = op
            else:
                op.used = any(u.used for u in op.upstreams)
            if op.used:
                op.open()
        for _, op in ops:
            op.rewire()
        self._ticking = [op for _, op in ops if op.used and isinstance(op, PartitionByOperator)]
        for op in self._ticking:
            op.input_streams = _input_streams(op)
        self._timed = [op for _, op in ops if op.used and isinstance(op, WindowOperator)
                       and op.timed]
        for ssp in context.ssps:
            op = self.inputs.get(ssp.system_stream)
            if op is not None:
                self._routes[ssp] = _route(op, control.clock(ssp))

    # -- messages -----------------------------------------------------------------------------
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self._ctx.coordinator = coordinator
        self._routes[envelope.ssp](envelope)

    # -- control (called by the task's TaskControl) -------------------------------------------
    def on_stream_watermark(self, stream: SystemStream, watermark: int, collector: Any,
                            coordinator: Any) -> None:
        op = self.inputs.get(stream)
        if op is not None:
            ctx = self._ctx
            ctx.coordinator = coordinator
            # The end of time of a drain is not the data's (TaskControl never checkpoints it)
            ctx.draining = watermark >= WATERMARK_MAX and self._control.draining
            try:
                op.set_watermark(watermark)
            finally:
                ctx.draining = False

    def on_stream_end(self, stream: SystemStream, collector: Any, coordinator: Any) -> None:
        op = self.inputs.get(stream)
        if op is not None:
            self._ctx.coordinator = coordinator
            op.set_finished(None)

    def on_stream_drain(self, stream: SystemStream, run_id: str, collector: Any,
                        coordinator: Any) -> None:
        op = self.inputs.get(stream)
        if op is not None:
            self._ctx.coordinator = coordinator
            op.set_finished(run_id)

    def on_control_tick(self, collector: Any, coordinator: Any) -> None:
        """The watermark timer: operators send what waited for it (partition_by's
        watermarks)."""
        self._ctx.coordinator = coordinator
        for op in self._ticking:
            op.on_tick()

    def window(self, collector: Any, coordinator: Any) -> None:
        """The window timer (``task.window.ms``): processing-time windows whose end the clock
        passed emit their panes, time-based triggers that are due fire."""
        if not self._timed:
            return
        self._ctx.coordinator = coordinator
        for op in self._timed:
            op.on_timer()

    def watermark(self, op_id: str) -> int:
        """The input watermark an operator has reached (tests, tools)."""
        return self.operators[op_id].input_wm
