"""A task instance: one task object with its partitions, stores, output and offsets.

:class:`TaskInstance` is what the run loop drives. It owns

* the task object and its :class:`~weir.engine.task.TaskShape` (sync, callback or coroutine);
* its input SSPs and the **last processed** offset of each (what a checkpoint records);
* its stores, through a storage manager (``stores()``, ``flush() -> changelog offsets``,
  ``close()``; :class:`weir.recovery.storage.TaskStorageManager` in a container);
* its output, through a :class:`ProducerCollector` that serializes outgoing envelopes,
  picks their partition and hands them to the system's producer;
* the commit: flush producers, flush stores (and their changelogs), then write the
  checkpoint (input offsets + changelog offsets) through a ``CheckpointManager``.

The run loop decides *when* things happen (see :mod:`weir.engine.runloop.loop`); this module does them.
Exceptions from user code are turned into :class:`~weir.engine.errors.TaskError` by
:func:`task_error`, naming the task, SSP and offset and carrying the user traceback.

Example::

    >>> from weir.recovery.checkpoint import MemoryCheckpointManager
    >>> from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
    >>> class Count:
    ...     n = 0
    ...     def process(self, envelope, collector, coordinator):
    ...         self.n += 1
    >>> ssp = SystemStreamPartition("memory", "clicks", 0)
    >>> checkpoints = MemoryCheckpointManager()
    >>> inst = TaskInstance("Partition 0", Count(), [ssp], checkpoints=checkpoints)
    >>> inst.init()
    >>> inst.process(IncomingMessageEnvelope(ssp, 41, None, b"x"), inst.coordinator)
    >>> inst.mark_processed(ssp, 41)
    >>> inst.commit().input_offsets
    mappingproxy({('memory', 'clicks', 0): 41})
    >>> inst.close()
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from weir.recovery.checkpoint import Checkpoint, CheckpointManager
from weir.stores.config import Config
from weir.stores.builder import shared_store

from weir.engine.runloop.asyncio_thread import AsyncioThread
from weir.engine.runloop.collector import ProducerCollector
from weir.engine.runloop.context import InstanceContext
from weir.engine.runloop.coordinator import Coordinator
from weir.engine.runloop.failures import TASK_IGNORED_EXCEPTIONS, IgnoredExceptions, class_name, task_error
from weir.engine.runloop.settings import RunLoopConfig, StoreAccess
from weir.engine.runloop.settings import store_access as _access_for
from weir.engine.errors import EngineError
from weir.engine.metrics import TaskMetrics
from weir.engine.model import (IncomingMessageEnvelope, SystemStreamPartition, TaskName)
from weir.engine.task import TaskKind, TaskShape, describe_task

if TYPE_CHECKING:
    from weir.engine.control.task_control import ControlOutcome, TaskControl

__all__ = [
    "IDLE_COMMIT_MS",
    "TASK_IGNORED_EXCEPTIONS",
    "StoreAccess",
    "TaskStorage",
    "TaskTransactionLike",
    "ProducerCollector",
    "InstanceContext",
    "Coordinator",
    "IgnoredExceptions",
    "InstanceState",
    "StoreDisposal",
    "TaskInstance",
    "task_error",
]

log = logging.getLogger("weir.task")

IDLE_COMMIT_MS = 60_000
"""A task with nothing new since its last commit skips the periodic commits for up to this
long (:meth:`TaskInstance.needs_commit`)."""


class TaskStorage(Protocol):
    """What a task instance needs from its storage manager."""

    def stores(self) -> Mapping[str, Any]: ...
    def flush(self) -> Mapping[str, int]: ...
    def unsettled(self) -> bool:
        """A store changed since its files were last made durable (its next commit settles
        it): the task commits once more even with nothing new."""
        ...
    def close(self) -> None: ...


class TaskTransactionLike(Protocol):
    """What a task instance needs from its transaction (exactly-once; see
    :class:`weir.engine.container.exactly_once.TaskTransaction`)."""

    def prepare(self) -> Mapping[str, Any]: ...
    def commit(self) -> None: ...


# ----------------------------------------------------------------------------------------
# the instance
# ----------------------------------------------------------------------------------------

class StoreDisposal(Enum):
    """What closing a task instance does with its stores."""

    CLOSE = "close"
    """Flush and close them (every normal ending)."""
    LEAVE_OPEN = "leave-open"
    """Leave them open for the process exit: a user call abandoned after a callback timeout
    still runs and may use them. Nothing is lost: the changelog and the last checkpoint are
    durable, and the next start restores from them."""


class InstanceState(Enum):
    CREATED = "created"
    INITIALIZED = "initialized"
    CLOSED = "closed"


class TaskInstance:
    """One task object with its SSPs, stores, collector, offsets and metrics.

    ``last_processed`` maps SSP -> last processed offset (seeded from the checkpoint);
    ``starting_offsets`` maps SSP -> first offset to process, used to skip envelopes of a
    shared (broadcast) SSP that the consumer delivers from an earlier offset for another
    task. ``async_runner`` runs ``async def`` hooks; give every instance of a container the
    same one so they share one asyncio thread.

    ``config`` is the job config the task sees (``context.config``); the instance's own
    settings come parsed: ``run_loop`` (:class:`RunLoopConfig`) and ``ignored``
    (``task.ignored.exceptions``), each parsed from ``config`` only when not given.

    ``adjunct`` is the task's :class:`~weir.engine.adjunct.AdjunctDataStoreManager` (or None):
    envelopes of its streams are applied to the adjunct stores instead of delivered.

    ``store_access`` says whether calls of this task may use its stores at the same time; by
    default it follows from ``run_loop`` (``task.max.concurrency`` and
    ``job.container.thread.pool.size``, see :func:`~weir.engine.runloop.settings.store_access`).
    With :attr:`StoreAccess.CONCURRENT` the task gets each store under a
    :class:`~weir.stores.layers.locked.LockedLayer`, and commit and close hold those locks.
    """

    def __init__(self, task_name: str, task: Any, ssps: Iterable[SystemStreamPartition],
                 config: Config | Mapping[str, str] | None = None, *,
                 storage: TaskStorage | None = None,
                 checkpoints: CheckpointManager | None = None,
                 collector: ProducerCollector | None = None,
                 last_processed: Mapping[SystemStreamPartition, int] | None = None,
                 starting_offsets: Mapping[SystemStreamPartition, int] | None = None,
                 async_runner: AsyncioThread | None = None,
                 checkpoint_extras: Callable[[], Mapping[str, Any]] | None = None,
                 store_access: StoreAccess | None = None,
                 run_loop: RunLoopConfig | None = None,
                 ignored: IgnoredExceptions | None = None,
                 transaction: TaskTransactionLike | None = None,
                 control: TaskControl | None = None,
                 adjunct: Any = None):
        self.task_name = TaskName(task_name)
        self.task = task
        self.shape: TaskShape = describe_task(task)
        self.ssps = frozenset(SystemStreamPartition(*s) for s in ssps)
        self.config = config if isinstance(config, Config) else Config(config or {})
        if collector is not None and not isinstance(collector, ProducerCollector):
            raise TypeError(f"task '{task_name}': collector must be a ProducerCollector (or None "
                            f"for one without producers), got {collector!r}")
        self.collector = collector if collector is not None else ProducerCollector(self.task_name)
        self.coordinator = Coordinator()
        self.metrics = TaskMetrics(self.task_name)
        self.last_processed: dict[SystemStreamPartition, int] = {
            SystemStreamPartition(*k): v for k, v in (last_processed or {}).items()}
        self.starting_offsets = dict(starting_offsets or {})
        # Settings parsed once by the container (JobSettings); parsed here only when the
        # instance is built on its own (tests, tools).
        self.ignored = ignored if ignored is not None else IgnoredExceptions.from_config(self.config)
        self.async_runner = async_runner
        self.state = InstanceState.CREATED
        self.context: InstanceContext | None = None
        self._storage = storage
        self._checkpoints = checkpoints
        self._extras = checkpoint_extras
        self._transaction = transaction
        # What the last commit recorded (offsets, collector.sent), None before the first, and
        # whether an operation (window, control, end of stream) ran since: needs_commit().
        self._committed: tuple[dict[SystemStreamPartition, int], int] | None = None
        self._touched = False
        if store_access is None:
            run_loop = run_loop if run_loop is not None else RunLoopConfig.from_config(self.config)
            store_access = _access_for(run_loop, self.shape.kind)
        self.store_access: StoreAccess = store_access
        self._store_locks: list[Any] = []  # the LockedLayers' locks, by store name
        # Bound once: the run loop's inline path calls it directly.
        self.process_fn = task.process if self.shape.kind is not TaskKind.CALLBACK else None
        self.control = control
        # What the control's start told at init (partitions to release), None before it and
        # without control bookkeeping.
        self.control_started: ControlOutcome | None = None
        self.observe = None   # records a source envelope's event time (watermark listeners)
        if control is not None:
            self._bind_control(control, checkpoint_extras)
        # The adjunct data store manager is consulted before delivery (outermost: adjunct
        # messages go into their stores and never reach the task, nor its control's event-time
        # observer; weir.engine.adjunct).
        self.adjunct = adjunct
        if adjunct is not None and self.process_fn is not None:
            self.process_fn = adjunct.wrap(self.process_fn,
                                           coroutine=self.shape.kind is TaskKind.COROUTINE)

    def __repr__(self) -> str:
        return f"TaskInstance({self.task_name!r}, {self.shape.kind.value}, {len(self.ssps)} SSPs)"

    # -- hooks ---------------------------------------------------------------------------
    def asyncio_thread(self) -> AsyncioThread:
        """The asyncio thread running this task's ``async def`` methods (made on first use
        when none was given)."""
        if self.async_runner is None:
            self.async_runner = AsyncioThread(f"weir-asyncio-{self.task_name}")
        return self.async_runner

    def _call(self, result: Any) -> Any:
        """Wait for ``result`` when a hook returned an awaitable (an ``async def`` hook)."""
        if inspect.isawaitable(result):
            return self.asyncio_thread().run(result)
        return result

    def init(self) -> None:
        """Register with the producers, open the context and call ``task.init(context)``."""
        if self.state is not InstanceState.CREATED:
            raise EngineError(f"task '{self.task_name}' is {self.state.value}; init runs once")
        self.collector.register()
        stores = dict(self._storage.stores()) if self._storage is not None else {}
        if self.store_access is StoreAccess.CONCURRENT:
            stores = {name: shared_store(store) for name, store in stores.items()}
            self._store_locks = [stores[name].lock for name in sorted(stores)]
        self.context = InstanceContext(self.task_name, self.ssps, self.config, stores, self.metrics,
                                       self.control, self.collector)
        if self.shape.initable:
            try:
                self._call(self.task.init(self.context))
            except Exception as exc:
                raise task_error(self.task_name, exc, during="init") from exc
        if self.control is not None:
            try:  # restored watermarks and ended streams, before the first message
                self.control_started = self.control.start(self.collector, self.coordinator)
            except Exception as exc:
                raise task_error(self.task_name, exc, during="init") from exc
        self.state = InstanceState.INITIALIZED

    @property
    def has_stores(self) -> bool:
        return self._storage is not None

    @contextmanager
    def _stores_held(self) -> Iterator[None]:
        """Hold every store lock (in name order) when the stores are shared between threads:
        a flush or close then never runs inside another thread's store operation."""
        if not self._store_locks:
            yield
            return
        with ExitStack() as stack:
            for lock in self._store_locks:
                stack.enter_context(lock)
            yield

    def process(self, envelope: IncomingMessageEnvelope, coordinator: Coordinator) -> None:
        """Run a sync task's ``process`` (raises what the task raises)."""
        self.process_fn(envelope, self.collector, coordinator)

    def process_coroutine(self, envelope: IncomingMessageEnvelope, coordinator: Coordinator) -> Any:
        """The coroutine of a coroutine-form task's ``process``."""
        return self.process_fn(envelope, self.collector, coordinator)

    def window(self, coordinator: Coordinator) -> None:
        self._touched = True
        started = time.perf_counter_ns()
        self._call(self.task.window(self.collector, coordinator))
        self.metrics.window_ns.update(time.perf_counter_ns() - started)
        self.metrics.windows.count += 1

    def end_of_stream(self, coordinator: Coordinator) -> None:
        """Call ``on_end_of_stream`` if the task listens for it (``on_drain`` instead when
        its inputs drained)."""
        self._touched = True
        if self.control is not None and self.control.draining:
            self.control.finish_drain(self.collector, coordinator)
        elif self.shape.end_of_stream_listener:
            self._call(self.task.on_end_of_stream(self.collector, coordinator))

    # -- control messages (weir.engine.control) ----------------------------------------------
    def _bind_control(self, control: Any,
                      extras: Callable[[], Mapping[str, Any]] | None) -> None:
        from weir.engine.control.task_control import CHECKPOINT_KEY

        control.bind(self.task, call=self._call)
        self.control_started = None
        if extras is None:
            self._extras = lambda: {CHECKPOINT_KEY: control.checkpoint()}
        else:
            self._extras = lambda: {**extras(), CHECKPOINT_KEY: control.checkpoint()}
        if control.observes_envelopes:
            observe = self.observe = control.observer()
            if self.shape.kind is TaskKind.SYNC:
                process = self.process_fn

                def process_observed(envelope, collector, coordinator):
                    process(envelope, collector, coordinator)
                    observe(envelope)
                self.process_fn = process_observed

    def on_control(self, envelope: IncomingMessageEnvelope, coordinator: Coordinator) -> Any:
        """A control envelope or a source's end-of-stream (task has control); returns the
        :class:`~weir.engine.control.task_control.ControlOutcome`."""
        self._touched = True
        return self.control.on_envelope(envelope, self.collector, coordinator)

    def control_tick(self, coordinator: Coordinator) -> Any:
        """The watermark timer's call (task has control); returns a ControlOutcome."""
        self._touched = True
        return self.control.tick(self.collector, coordinator)

    def is_caught_up(self, envelope: IncomingMessageEnvelope) -> bool:
        start = self.starting_offsets.get(envelope.ssp)
        return start is None or envelope.offset >= start

    def mark_processed(self, ssp: SystemStreamPartition, offset: int) -> None:
        self.last_processed[ssp] = offset
        self.metrics.processed.count += 1

    def ignores(self, exc: BaseException) -> bool:
        """True (and counted) when ``exc`` is listed in ``task.ignored.exceptions``."""
        if self.ignored and self.ignored.matches(exc):
            self.metrics.ignored_exception(class_name(type(exc)))
            return True
        return False

    # -- commit and close ------------------------------------------------------------------
    def needs_commit(self, now_ms: int) -> bool:
        """Whether a periodic commit has anything to record: a message processed (or skipped)
        since the last commit, a message sent, an operation run (window, control, end of
        stream), a store not settled since it changed (the commit after a task goes idle
        settles its stores, so a crash then reuses them) -- or the last commit is
        :data:`IDLE_COMMIT_MS` old (an idle task still commits now and then: its stores'
        ``OFFSET`` files stay fresh and the status line shows it alive). Kafka Streams skips
        the commit of a task with nothing new likewise; a commit requested by the task
        (``coordinator.commit``) always runs."""
        committed = self._committed
        return (committed is None or self._touched or self.collector.sent != committed[1]
                or self.last_processed != committed[0]
                or (self._storage is not None and self._storage.unsettled())
                or now_ms - self.metrics.last_commit_ms >= IDLE_COMMIT_MS)

    def commit(self) -> Checkpoint | None:
        """Flush producers, flush stores (changelog offsets), then write the checkpoint.

        With exactly-once (a ``transaction``): then prepare the task's transaction, write the
        checkpoint naming it (the decision), and write its commit markers
        (docs/EXACTLY-ONCE.md). Returns the checkpoint written (None without a checkpoint
        manager). The caller guarantees no message of this task is in flight."""
        started = time.perf_counter_ns()
        offsets = dict(self.last_processed)
        sent = self.collector.sent
        self._touched = False
        self.collector.flush()
        changelog = {}
        if self._storage is not None:
            with self._stores_held():
                changelog = dict(self._storage.flush())
        checkpoint = None
        transaction = self._transaction
        if self._checkpoints is not None:
            extras = dict(self._extras()) if self._extras is not None else {}
            if transaction is not None:
                extras.update(transaction.prepare())
            checkpoint = Checkpoint(offsets, changelog, extras)
            self._checkpoints.write(self.task_name, checkpoint)
        elif transaction is not None:
            transaction.prepare()
        if transaction is not None:
            transaction.commit()
        self._committed = (offsets, sent)
        self.metrics.commit_ns.update(time.perf_counter_ns() - started)
        self.metrics.commits.count += 1
        self.metrics.last_commit_ms = time.time_ns() // 1_000_000
        return checkpoint

    def close(self, stores: StoreDisposal = StoreDisposal.CLOSE) -> None:
        """Call ``task.close()``, then close the stores (unless ``stores`` is
        :attr:`StoreDisposal.LEAVE_OPEN`). Runs once; later calls do nothing."""
        if self.state is InstanceState.CLOSED:
            return
        self.state = InstanceState.CLOSED
        try:
            if self.shape.closable:
                try:
                    self._call(self.task.close())
                except Exception as exc:
                    raise task_error(self.task_name, exc, during="close") from exc
        finally:
            if self._storage is not None and stores is StoreDisposal.CLOSE:
                with self._stores_held():
                    self._storage.close()

