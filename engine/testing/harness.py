"""The task wrapper a ``weir.testing`` run puts around the task under test.

It is the outermost ``task.wrapper.class`` of the run and does four things, all decided by the
runner's :class:`TestPlan` before the run starts:

* **crashes**: before the message at a planned (partition, offset) is processed it raises
  :class:`InjectedCrash`, once; the container fails there as after ``kill -9``: no final
  commit, so the next run restores the stores to the last checkpoint and reprocesses what
  came after it;
* **processing time**: every input message has a time (the advances before it in its input
  list); the task's clock (``context.clock``) follows the messages it processes, and when
  that time crosses a ``task.window.ms`` boundary the task's ``window`` runs first (several
  boundaries at once: one call, as a late timer collapses its periods). The run loop's own
  wall-clock window timer is ignored, so windows fire at the same messages in every run;
  at end-of-stream the clock advances to the end of the input lists;
* **commits**: with ``commit_every=N`` the task asks for a commit after every N messages,
  so checkpoints (and what a crash reverts) do not depend on timing;
* **what the run left**: at ``close`` it reads every store of the task and the task's
  metrics snapshot for the runner's result.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from weir.engine.errors import EngineError
from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
from weir.engine.task import RequestScope, TaskWrapper, describe_task

__all__ = ["InjectedCrash", "TestPlan", "TestHarness", "VirtualClock"]


class InjectedCrash(EngineError):
    """The crash a ``weir.testing`` run was asked to inject (``crash_at``)."""

    def __init__(self, ssp: SystemStreamPartition, offset: int):
        super().__init__(f"injected crash before processing {ssp} offset {offset} "
                         f"(weir.testing crash_at)")
        self.ssp = ssp
        self.offset = offset


@dataclass
class TestPlan:
    """What the harnesses of one run do (shared by every task of the run)."""

    __test__ = False  # not a pytest test class

    crashes: set[tuple[SystemStreamPartition, int]] = field(default_factory=set)
    crashed: list[tuple[SystemStreamPartition, int]] = field(default_factory=list)
    times: dict[SystemStreamPartition, dict[int, int]] = field(default_factory=dict)
    end_time: int = 0
    start_ms: int = 0
    window_ms: int = -1
    commit_every: int | None = None
    store_names: tuple[str, ...] = ()
    stores: dict[str, dict[str, list[tuple[Any, Any]]]] = field(default_factory=dict)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)


class VirtualClock:
    """A task's processing time in a test run: ``start_ms`` plus the time of the messages it
    processed (see the module docstring)."""

    __slots__ = ("start_ms", "elapsed_ms")

    def __init__(self, start_ms: int):
        self.start_ms = start_ms
        self.elapsed_ms: int | None = None

    def now_ms(self) -> int:
        return self.start_ms + (self.elapsed_ms or 0)

    def __repr__(self) -> str:
        return f"VirtualClock(now_ms={self.now_ms()})"


class TestHarness(TaskWrapper):
    """See the module docstring; made by the runner with its plan."""

    __test__ = False
    adds_hooks = frozenset({"init", "window", "on_end_of_stream", "close"})

    def __init__(self, wrapped: Any, plan: TestPlan):
        super().__init__(wrapped)
        self.plan = plan
        self.clock = VirtualClock(plan.start_ms)
        self._epoch: int | None = None
        self._context: Any = None
        self._since_commit = 0
        inner = wrapped
        while isinstance(inner, TaskWrapper):
            inner = inner.wrapped
        self._inner = inner
        shape = describe_task(wrapped)
        self._windowable = shape.windowable and plan.window_ms > 0
        if self._windowable and plan.times and (
                inspect.iscoroutinefunction(getattr(inner, "window", None))
                or shape.kind.value != "sync"):
            raise EngineError(
                f"{type(inner).__name__}: weir.testing advances processing time for sync "
                f"tasks with a sync window(); this task is {shape.kind.value}")

    # -- hooks the harness adds -------------------------------------------------------------
    def init(self, context):
        self._context = context
        context.clock = self.clock
        hook = getattr(self.wrapped, "init", None)
        return hook(context) if hook is not None else None

    def window(self, collector, coordinator):
        return None  # the wall-clock timer: windows follow the messages' time instead

    def on_end_of_stream(self, collector, coordinator):
        self._advance(self.plan.end_time, collector, coordinator)
        if callable(getattr(self._inner, "on_end_of_stream", None)):
            return self.wrapped.on_end_of_stream(collector, coordinator)
        return None

    def close(self):
        try:
            self._capture()
        finally:
            if callable(getattr(self._inner, "close", None)):
                self.wrapped.close()

    # -- processing -------------------------------------------------------------------------
    def process(self, envelope, collector, coordinator):
        self._before(envelope, collector, coordinator)
        result = self.wrapped.process(envelope, collector, coordinator)
        self._after(coordinator)
        return result

    def process_async(self, envelope, collector, coordinator, callback):
        self._before(envelope, collector, coordinator)
        result = self.wrapped.process_async(envelope, collector, coordinator, callback)
        self._after(coordinator)
        return result

    def _before(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        point = (envelope.ssp, envelope.offset)
        if point in self.plan.crashes:
            self.plan.crashes.discard(point)
            self.plan.crashed.append(point)
            raise InjectedCrash(envelope.ssp, envelope.offset)
        at = self.plan.times.get(envelope.ssp, {}).get(envelope.offset)
        if at is not None:
            self._advance(at, collector, coordinator)

    def _after(self, coordinator: Any) -> None:
        every = self.plan.commit_every
        if every:
            self._since_commit += 1
            if self._since_commit >= every:
                self._since_commit = 0
                coordinator.commit(RequestScope.CURRENT_TASK)

    def _advance(self, at: int, collector: Any, coordinator: Any) -> None:
        clock = self.clock
        if clock.elapsed_ms is None or at > clock.elapsed_ms:
            clock.elapsed_ms = at
        if not self._windowable:
            return
        epoch = clock.elapsed_ms // self.plan.window_ms
        if self._epoch is None:
            self._epoch = epoch  # the task's first message: its timer starts here
        elif epoch > self._epoch:
            self._epoch = epoch
            self.wrapped.window(collector, coordinator)

    def _capture(self) -> None:
        context = self._context
        if context is None:
            return
        task = str(context.task_name)
        stores: dict[str, list[tuple[Any, Any]]] = {}
        for name in self.plan.store_names:
            try:
                store = context.store(name)
            except Exception:  # noqa: BLE001 - not one of this task's stores
                continue
            with store.all() as items:
                stores[name] = [(k, v) for k, v in items]
        self.plan.stores[task] = stores
        self.plan.metrics[task] = context.metrics.snapshot()
