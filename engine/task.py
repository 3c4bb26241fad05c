"""The task API: what user code implements and what the engine hands to it.

A task is a plain class. It processes messages in one of three shapes:

* **sync** -- ``process(envelope, collector, coordinator)`` (:class:`StreamTask`);
* **callback** -- ``process_async(envelope, collector, coordinator, callback)`` that calls
  ``callback.complete()`` or ``callback.fail(exc)`` later, from any thread
  (:class:`AsyncStreamTask`);
* **coroutine** -- ``async def process(envelope, collector, coordinator)``, run on the
  container's asyncio loop (:class:`AsyncStreamTask` as well).

Mix-ins add hooks: :class:`InitableTask` (``init(context)``, first call), :class:`WindowableTask`
(``window(collector, coordinator)`` every ``task.window.ms``), :class:`EndOfStreamListenerTask`
(``on_end_of_stream(collector, coordinator)`` once every input partition has ended),
:class:`WatermarkListenerTask` (``on_watermark(watermark, collector, coordinator)`` when event
time advances), :class:`DrainListenerTask` (``on_drain(collector, coordinator)`` after
``weir drain``) and :class:`ClosableTask` (``close()``, last call). Hooks other than
``process`` may also be ``async def``; the engine runs them on the asyncio loop and waits for
them.

Subclassing the base classes is optional (shapes are detected by method names), but it
documents intent. ``task.class=module:Class`` names the task (a zero-argument callable that
returns a task object); ``task.wrapper.class`` lists :class:`TaskWrapper` classes that wrap
it, first listed outermost (docs/TASKS.md, "Wrapping tasks").

Example::

    >>> from weir.engine import OutgoingMessageEnvelope, StreamTask, SystemStream
    >>> class Upper(StreamTask):
    ...     def process(self, envelope, collector, coordinator):
    ...         collector.send(OutgoingMessageEnvelope(SystemStream("memory", "out"),
    ...                                                envelope.message.upper()))
    >>> describe_task(Upper()).kind
    <TaskKind.SYNC: 'sync'>
"""

from __future__ import annotations

import importlib
import inspect
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from weir.stores.config import Config, ConfigError, declare

from weir.engine.model import (IncomingMessageEnvelope, OutgoingMessageEnvelope, SystemStreamPartition, TaskName)

__all__ = [
    "TASK_CLASS",
    "TASK_WRAPPER_CLASS",
    "RequestScope",
    "ShutdownScope",
    "TaskCallback",
    "MessageCollector",
    "TaskCoordinator",
    "TaskContext",
    "ProcessingClock",
    "SystemClock",
    "SYSTEM_CLOCK",
    "StreamTask",
    "AsyncStreamTask",
    "WindowableTask",
    "InitableTask",
    "ClosableTask",
    "EndOfStreamListenerTask",
    "WatermarkListenerTask",
    "DrainListenerTask",
    "TaskWrapper",
    "TaskKind",
    "TaskShape",
    "describe_task",
    "load_object",
    "load_task_factory",
]

_C = "task API"
TASK_CLASS = declare(
    "task.class", str, None,
    "The task: `module:Class` (or `module.Class`), a zero-argument callable returning a task "
    "object; one object is made per task instance.", component=_C)
TASK_WRAPPER_CLASS = declare(
    "task.wrapper.class", list, [],
    "Task wrappers, comma-separated `module:Class`; each is called with the task it wraps and "
    "must delegate every call. The first listed is the outermost.", component=_C)


class RequestScope(Enum):
    """Whom a coordinator request is for."""

    CURRENT_TASK = "current-task"
    ALL_TASKS_IN_CONTAINER = "all-tasks-in-container"


ShutdownScope = RequestScope
"""The scope of ``TaskCoordinator.shutdown`` (the same enum as for ``commit``)."""


# ----------------------------------------------------------------------------------------
# what the engine gives to tasks
# ----------------------------------------------------------------------------------------

@runtime_checkable
class TaskCallback(Protocol):
    """Handed to ``process_async``; call exactly one of its methods exactly once."""

    def complete(self) -> None:
        """The message is fully processed; its offset may be checkpointed."""
        ...

    def fail(self, exc: BaseException) -> None:
        """Processing failed: the task stops with a TaskError carrying ``exc`` (unless its
        class is listed in ``task.ignored.exceptions``)."""
        ...


@runtime_checkable
class MessageCollector(Protocol):
    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        """Send a message. It is serialized with the stream's serdes and handed to the
        system's producer at once; it is durable after the task's next commit."""
        ...


@runtime_checkable
class TaskCoordinator(Protocol):
    def commit(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None:
        """Request a commit as soon as the task (or every task) has nothing in flight."""
        ...

    def shutdown(self, scope: RequestScope) -> None:
        """``CURRENT_TASK``: this task votes to stop; the container stops when every task has
        voted (or finished). ``ALL_TASKS_IN_CONTAINER``: stop the container now. Either way
        the container commits every task before it stops."""
        ...


@runtime_checkable
class ProcessingClock(Protocol):
    """Processing time as a task sees it (``context.clock``): wall-clock milliseconds since
    the epoch. ``weir.testing`` gives tasks a clock it advances itself, so code that reads
    ``context.clock.now_ms()`` instead of ``time.time()`` can be tested deterministically."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The wall clock (``time.time_ns() // 1_000_000``)."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()
"""The processing-time clock of every task outside ``weir.testing``."""


@runtime_checkable
class TaskContext(Protocol):
    """What ``init(context)`` receives."""

    @property
    def task_name(self) -> TaskName: ...

    @property
    def ssps(self) -> frozenset[SystemStreamPartition]: ...

    @property
    def config(self) -> Config: ...

    @property
    def metrics(self) -> Any:
        """The task's metrics (:class:`weir.engine.metrics.TaskMetrics`): make its own with
        ``counter(name, group=...)``, ``gauge``, ``timer``, ``histogram`` (docs/TASKS.md,
        "Metrics"); every configured reporter exports them."""
        ...

    @property
    def clock(self) -> ProcessingClock:
        """Processing time (:class:`ProcessingClock`): the wall clock, or the one
        ``weir.testing`` advances."""
        ...

    def store(self, name: str) -> Any:
        """The task's store ``name`` (configured with ``stores.<name>.*``)."""
        ...


# ----------------------------------------------------------------------------------------
# what tasks implement
# ----------------------------------------------------------------------------------------

class StreamTask(ABC):
    """A task whose ``process`` returns when the message is processed."""

    @abstractmethod
    def process(self, envelope: IncomingMessageEnvelope, collector: MessageCollector,
                coordinator: TaskCoordinator) -> None: ...


class AsyncStreamTask(ABC):
    """A task that finishes messages later. Implement **either** ``process_async`` (callback
    form) **or** ``async def process`` (coroutine form, run on the container's asyncio
    loop). With ``task.max.concurrency`` > 1 several messages may be in flight at once and
    may finish in any order; checkpoints never pass an unfinished message."""

    def process_async(self, envelope: IncomingMessageEnvelope, collector: MessageCollector,
                      coordinator: TaskCoordinator, callback: TaskCallback) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement process_async(...) "
                                  f"or async def process(...)")


class WindowableTask(ABC):
    @abstractmethod
    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Called every ``task.window.ms``, only when no ``process`` of this task is in
        flight; no ``process`` starts until it returns."""


class InitableTask(ABC):
    @abstractmethod
    def init(self, context: TaskContext) -> None:
        """Called once, before anything else."""


class ClosableTask(ABC):
    @abstractmethod
    def close(self) -> None:
        """Called once, after everything else (also after a failure)."""


class EndOfStreamListenerTask(ABC):
    @abstractmethod
    def on_end_of_stream(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Called once when every input partition of the task has ended, after all its
        messages were processed; the engine commits right after it and the task is done."""


class WatermarkListenerTask(ABC):
    @abstractmethod
    def on_watermark(self, watermark: int, collector: MessageCollector,
                     coordinator: TaskCoordinator) -> None:
        """Called when the task's input watermark advances: the minimum over its input
        streams of their watermarks (milliseconds of event time; no message with an event
        time at or below it is expected any more). Source partitions get watermarks from
        ``envelope.timestamp`` with ``task.watermark.max.out.of.orderness.ms``; intermediate
        streams carry them in-band. Called only when nothing of the task is in flight; a
        value never repeats or goes backwards (see docs/CONTROL.md)."""


class DrainListenerTask(ABC):
    @abstractmethod
    def on_drain(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Called once when every input drained after ``weir drain``, instead of
        ``on_end_of_stream``; the engine commits right after it and the task is done."""


class TaskWrapper:
    """A task that wraps another and delegates every call to it (``self.wrapped``).

    Subclass it and override the calls to intercept, calling the wrapped task inside. A
    wrapper has the shape and capabilities of the task it wraps: override the ``process``
    form the wrapped task uses (``async def process`` for a coroutine task). A wrapper that
    needs a hook the wrapped task may lack (``init``, ``window``, ``on_end_of_stream``,
    ``close``) names it in :attr:`adds_hooks`; the engine then calls the wrapper's hook
    whatever the wrapped task defines (the default hooks delegate only to what exists).
    Example::

        class Timing(TaskWrapper):
            def process(self, envelope, collector, coordinator):
                started = time.perf_counter()
                try:
                    return self.wrapped.process(envelope, collector, coordinator)
                finally:
                    log.debug("took %.6f s", time.perf_counter() - started)
    """

    adds_hooks: frozenset[str] = frozenset()
    """Hooks (``init``, ``window``, ``on_end_of_stream``, ``close``) this wrapper implements
    itself, so the engine calls them even when the wrapped task lacks them."""

    def __init__(self, wrapped: Any):
        self.wrapped = wrapped

    def process(self, envelope, collector, coordinator):
        return self.wrapped.process(envelope, collector, coordinator)

    def process_async(self, envelope, collector, coordinator, callback):
        return self.wrapped.process_async(envelope, collector, coordinator, callback)

    def init(self, context):
        hook = getattr(self.wrapped, "init", None)
        return hook(context) if hook is not None else None

    def window(self, collector, coordinator):
        hook = getattr(self.wrapped, "window", None)
        return hook(collector, coordinator) if hook is not None else None

    def on_end_of_stream(self, collector, coordinator):
        hook = getattr(self.wrapped, "on_end_of_stream", None)
        return hook(collector, coordinator) if hook is not None else None

    def close(self):
        hook = getattr(self.wrapped, "close", None)
        return hook() if hook is not None else None

    # control methods (weir.engine.control): used only when the wrapped task defines them
    def on_watermark(self, watermark, collector, coordinator):
        return self.wrapped.on_watermark(watermark, collector, coordinator)

    def on_drain(self, collector, coordinator):
        return self.wrapped.on_drain(collector, coordinator)

    def on_stream_watermark(self, stream, watermark, collector, coordinator):
        return self.wrapped.on_stream_watermark(stream, watermark, collector, coordinator)

    def on_stream_end(self, stream, collector, coordinator):
        return self.wrapped.on_stream_end(stream, collector, coordinator)

    def on_stream_drain(self, stream, run_id, collector, coordinator):
        return self.wrapped.on_stream_drain(stream, run_id, collector, coordinator)

    def on_control_tick(self, collector, coordinator):
        return self.wrapped.on_control_tick(collector, coordinator)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"


# ----------------------------------------------------------------------------------------
# shape detection
# ----------------------------------------------------------------------------------------

class TaskKind(Enum):
    SYNC = "sync"
    CALLBACK = "callback"
    COROUTINE = "coroutine"


@dataclass(frozen=True, slots=True)
class TaskShape:
    """How the engine drives a task object, decided once when the instance is built."""

    kind: TaskKind
    initable: bool
    windowable: bool
    end_of_stream_listener: bool
    closable: bool


def _unwrap(task: Any) -> tuple[Any, frozenset[str]]:
    """The innermost task, and the hooks the wrappers around it add."""
    seen = 0
    added: frozenset[str] = frozenset()
    while isinstance(task, TaskWrapper):
        added |= task.adds_hooks
        task = task.wrapped
        seen += 1
        if seen > 100:
            raise TypeError("task wrappers nest more than 100 deep (a wrapper wraps itself?)")
    return task, added


def _has(task: Any, name: str) -> bool:
    return callable(getattr(task, name, None))


def describe_task(task: Any) -> TaskShape:
    """The :class:`TaskShape` of a task object; a :class:`TaskWrapper` has the shape of the
    task it wraps, plus the hooks its :attr:`~TaskWrapper.adds_hooks` names. Raises
    TypeError when the object cannot process messages."""
    inner, added = _unwrap(task)
    process_async = getattr(type(inner), "process_async", None)
    if process_async is not None and process_async is not AsyncStreamTask.process_async:
        kind = TaskKind.CALLBACK
    elif _has(inner, "process"):
        kind = (TaskKind.COROUTINE if inspect.iscoroutinefunction(inner.process)
                else TaskKind.SYNC)
    else:
        raise TypeError(f"{type(inner).__name__} is not a task: it has neither "
                        f"process(envelope, collector, coordinator) nor process_async(...)")
    hooks = [name in added or _has(inner, name)
             for name in ("init", "window", "on_end_of_stream", "close")]
    return TaskShape(kind, *hooks)


# ----------------------------------------------------------------------------------------
# loading from config
# ----------------------------------------------------------------------------------------

def load_object(spec: str, *, key: str | None = None, origin: str | None = None) -> Any:
    """Import ``module:attr`` (or ``module.attr``); a ConfigError names ``key`` on failure."""
    text = spec.strip()
    if ":" in text:
        module_name, _, attr = text.partition(":")
    else:
        module_name, _, attr = text.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"bad value {spec!r}: expected `module:Class`", key=key, origin=origin)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module '{module_name}' ({type(exc).__name__}: {exc}); "
                          f"check the name and that the module is on PYTHONPATH",
                          key=key, origin=origin) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"module '{module_name}' has no attribute '{attr}'",
                              key=key, origin=origin) from None
    return obj


def load_task_factory(config: Config | Mapping[str, str]) -> Callable[[], Any]:
    """A zero-argument factory of task objects from ``task.class`` and ``task.wrapper.class``.

    Each call returns a new task (wrapped by the configured wrappers, the first listed
    outermost), so every task instance owns its own object. Example::

        >>> make = load_task_factory({"task.class": "weir.engine.task:TaskWrapper"})
        Traceback (most recent call last):
        ...
        weir.stores.errors.ConfigError: config key 'task.class': TaskWrapper is a task wrapper, not a task; name the wrapped task in task.class and the wrapper in task.wrapper.class
    """
    cfg = config if isinstance(config, Config) else Config(config)
    key = TASK_CLASS.name
    spec = cfg.require(key)
    target = load_object(spec, key=key, origin=cfg.origin(key))
    if isinstance(target, type) and issubclass(target, TaskWrapper):
        raise ConfigError(f"{target.__name__} is a task wrapper, not a task; name the wrapped "
                          f"task in task.class and the wrapper in task.wrapper.class", key=key,
                          origin=cfg.origin(key))
    if not callable(target):
        raise ConfigError(f"{spec!r} is not a class or callable", key=key, origin=cfg.origin(key))
    wkey = TASK_WRAPPER_CLASS.name
    wrappers = [load_object(w, key=wkey, origin=cfg.origin(wkey)) for w in TASK_WRAPPER_CLASS.get(cfg)]
    for w in wrappers:
        if not callable(w):
            raise ConfigError(f"{w!r} is not a class or callable", key=wkey, origin=cfg.origin(wkey))

    def make_task() -> Any:
        task = target()
        for wrapper in reversed(wrappers):
            task = wrapper(task)
        describe_task(task)  # fail at build time, not on the first message
        return task

    make_task.__qualname__ = f"task factory for {spec}"
    return make_task

