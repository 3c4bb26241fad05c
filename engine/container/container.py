"""The container: everything one process needs to run a set of tasks (Samza's SamzaContainer).

A :class:`Container` runs the tasks the job model gives to one container id. ``run()`` goes
through Samza's start order (docs/ARCHITECTURE.md, "The life of a store"), runs the loop, and stops in order:

1. load the task class (a bad ``task.class`` fails before anything is opened) and build
   every settings object from config and check the directories to write
   (:func:`~weir.engine.container.preflight.check_job`): a bad setting is refused before
   anything is created;
2. create the stores' changelog streams if missing (compacted, one partition per task);
3. make one producer per system (configured systems, inputs, changelogs, the default
   system), register every task and every changelog source, start them;
4. read each task's last checkpoint (:class:`~weir.recovery.checkpoint.FileCheckpointManager` in
   ``task.checkpoint.path``, or :class:`~weir.recovery.checkpoint_stream.StreamCheckpointManager`
   on ``task.checkpoint.system``: :mod:`weir.engine.container.checkpoints`) and check, before anything is restored, that it was written
   against the same incarnations of the input and changelog streams and that a task without
   a checkpoint has no state (:mod:`weir.engine.container.safety`);
5. restore every store of every task from its changelog to exactly that checkpoint: all
   are decided first, then restored in parallel restore threads (and worker processes for
   large replays) by the :class:`~weir.recovery.container_storage.ContainerStorageManager`
   (one combined progress bar on a terminal, log lines otherwise, a summary line per store);
   then open the adjunct stores (:mod:`weir.engine.adjunct`): decided by their recovery
   table, bootstrap streams read to their heads, before any task is initialized;
6. compute starting offsets (checkpoint + 1, or ``samza.offset.default``, or from the start
   with ``samza.reset.offset``), build the task instances and call ``init``; a task without
   a checkpoint commits once here, so a crash before its first periodic commit restores the
   state it started from, not what the crashed run wrote;
7. register the starting offsets with :class:`~weir.engine.consumers.consumers.SystemConsumers` (bootstrap
   gating, the configured chooser) and start the consumers;
8. run the :class:`~weir.engine.runloop.loop.RunLoop` until every input ended, a task asked to stop,
   :meth:`Container.shutdown` was called (signal handlers do) or a task failed;
9. stop: the loop's final commit (not after a failure), close tasks and their stores,
   stop consumers, checkpoint manager and producers -- in that order, every step attempted.

The container keeps the order and the task instances; it delegates to collaborators, one
responsibility each: what the tasks write through (producers, exactly-once transactions, output
counts) to :class:`~weir.engine.container.outputs.ContainerOutputs` (steps 3 and 5), restoring
the stores with the checks before it to
:class:`~weir.engine.container.restoring.ContainerRestore` (steps 4 and 5), the stop order to
:class:`~weir.engine.container.stop_steps.StopSteps` (step 9), and the resume line to
:func:`~weir.engine.container.progress.resume_line`.

Example (``weir.engine.container.runner`` does this, plus signals, status line and several processes)::

    config = load_config("job.properties")
    registry = SystemRegistry(config)
    model = build_job_model(config, registry.partition_counts(all_input_streams(config)))
    result = Container(config, model, "0", registry=registry).run()
    print(result.summary())   # container 0 stopped (end-of-stream): 1,000 messages in, ...
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.storage import ProgressMode
from weir.stores.layers.cached import CachedLayer
from weir.stores.layers.stack import layers_of
from weir.stores.config import Config
from weir.stores.spec import StoreSpec, stores_in

from weir.engine.container.outputs import ContainerOutputs
from weir.engine.container.progress import (ContainerProgress, ContainerResult, SspPosition,
                                           describe_starts, resume_line)
from weir.engine.container.preflight import check_job
from weir.engine.container.checkpoints import open_checkpoint_manager, task_partitions
from weir.engine.container.settings import JobSettings, changelog_admin
from weir.engine.container.exactly_once import ProcessingGuarantee
from weir.engine.container.restoring import ContainerRestore
from weir.engine.container.safety import config_file_of, reset_ssps
from weir.engine.container.stop_steps import StopSteps
from weir.engine.container.task_storage import TaskStorage
from weir.engine.runloop.asyncio_thread import AsyncioThread
from weir.engine.chooser import DefaultChooser
from weir.engine.config.job import JobConfig
from weir.engine.consumers.consumers import SystemConsumers
from weir.engine.control.plane import ControlPlane
from weir.engine.errors import EngineError
from weir.engine.runloop.instance import ProducerCollector, StoreDisposal, TaskInstance
from weir.engine.jobmodel.model import ContainerModel, JobModel
from weir.engine.model import SystemStream, SystemStreamPartition, TaskName
from weir.engine.consumers.offsets import starting_offsets
from weir.engine.runloop.loop import RunLoop, RunSummary
from weir.engine.systems.changelog import ensure_changelog_stream
from weir.engine.systems.registry import SystemRegistry
from weir.engine.task import load_task_factory

if TYPE_CHECKING:  # the adjunct manager and storage are imported for jobs with adjunct stores
    from weir.engine.adjunct.storage import AdjunctStorage

__all__ = [
    "Container",
    "ContainerState",
    "ContainerProgress",
    "ContainerResult",
    "SspPosition",
    "ProgressMode",
]

log = logging.getLogger("weir.container")


class ContainerState(Enum):
    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


class Container:
    """Runs the tasks of container ``container_id`` of ``job_model``; see the module docstring.

    ``registry`` defaults to a new :class:`SystemRegistry` over ``config``; ``job`` to
    ``JobConfig.from_config(config)``; ``progress`` is how restores report. ``run()`` runs
    once and returns a :class:`ContainerResult`, or raises the error that stopped it (a
    :class:`~weir.engine.errors.TaskError` names task, SSP and offset).
    """

    def __init__(self, config: Config, job_model: JobModel, container_id: str = "0", *,
                 registry: SystemRegistry | None = None, job: JobConfig | None = None,
                 settings: JobSettings | None = None,
                 progress: ProgressMode = ProgressMode.AUTO):
        self.config = config if isinstance(config, Config) else Config(config)
        self.container_id = str(container_id)
        if self.container_id not in job_model.containers:
            raise EngineError(f"the job model has no container '{self.container_id}' (it has "
                              f"{', '.join(job_model.containers) or 'none'})")
        self.job_model = job_model
        self.model: ContainerModel = job_model.containers[self.container_id]
        self.registry = registry if registry is not None else SystemRegistry(self.config)
        self.job = job if job is not None else (
            settings.job if settings is not None else JobConfig.from_config(self.config))
        self.settings: JobSettings | None = settings
        self.progress = progress
        self.state = ContainerState.NEW
        self.instances: list[TaskInstance] = []
        self.loop: RunLoop | None = None
        self._disposal: StoreDisposal | None = None
        self.adjunct: AdjunctStorage | None = None
        self._sized_stores: dict[str, StoreSpec] = {}  # by name, sized by the budget
        self.consumers: SystemConsumers | None = None
        self.positions: dict[TaskName, dict[SystemStreamPartition, SspPosition]] = {}
        self._closers = StopSteps(self.container_id)
        self.outputs = ContainerOutputs(self.registry, self.job, self.model.tasks, self._closers)
        self._stop_requested = threading.Event()
        self._started_at = 0.0

    def __repr__(self) -> str:
        return (f"<Container {self.container_id} of job '{self.job.name}' "
                f"{self.state.value} tasks={list(self.model.tasks)}>")

    # -- public ---------------------------------------------------------------------------
    def run(self) -> ContainerResult:
        """Start, run until done or stopped, stop. Raises what stopped the container."""
        if self.state is not ContainerState.NEW:
            raise EngineError(f"container {self.container_id} is {self.state.value}; a "
                              f"container runs once, build a new one")
        self._started_at = time.perf_counter()
        self.state = ContainerState.STARTING
        try:
            self._start()
            self.state = ContainerState.RUNNING
            if self._stop_requested.is_set():
                self.loop.shutdown()
            summary = self.loop.run()
        except BaseException:
            self.state = ContainerState.FAILED
            self._closers.close_all(failed=True)
            raise
        self.state = ContainerState.STOPPING
        self._closers.close_all(failed=False)
        self.state = ContainerState.STOPPED
        return self._result(summary)

    def shutdown(self) -> None:
        """Stop soon with a final commit; safe from any thread and from signal handlers.
        Before the loop runs (during restore) the container stops right after starting."""
        self._stop_requested.set()
        loop = self.loop
        if loop is not None:
            loop.shutdown()

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested.is_set()

    def progress_snapshot(self) -> ContainerProgress:
        """What the status line shows; safe to call from another thread."""
        processed = sent = last_commit = 0
        positions: dict[SystemStreamPartition, int] = {}
        for inst in list(self.instances):
            processed += inst.metrics.processed.count
            sent += inst.collector.sent
            last_commit = max(last_commit, inst.metrics.last_commit_ms)
            done = dict(inst.last_processed)
            for ssp in inst.ssps:
                nxt = done.get(ssp, -1) + 1
                if ssp not in positions or nxt < positions[ssp]:
                    positions[ssp] = nxt
        consumers = self.consumers
        ended = frozenset(s for s in positions if consumers is not None
                          and consumers.is_end_of_stream(s))
        return ContainerProgress(self.container_id, self.state.value, processed, positions,
                                 ended, last_commit, sent)

    def result_so_far(self) -> ContainerResult:
        """Messages processed and sent until now (or until the container stopped or failed);
        ``reason`` is the container's state."""
        return self._result(None, self.state.value)

    def metrics_snapshot(self) -> dict[str, Any]:
        """The run loop's metrics (tasks, run loop, consumers) as plain data."""
        return self.loop.metrics_snapshot() if self.loop is not None else {}

    # -- start ----------------------------------------------------------------------------
    def _start(self) -> None:
        config, job, closers = self.config, self.job, self._closers
        make_task = load_task_factory(config)
        if self.settings is None:
            # Every setting parsed once and every directory checked: nothing made yet.
            self.settings = check_job(config, job, self.registry)
        settings = self.settings
        tasks = self.model.tasks
        # Sizes the user left unset come from the container's memory budget (per task count).
        sized = settings.memory.size(settings.stores, len(tasks))
        if sized:
            log.info("container %s: %s", self.container_id,
                     settings.memory.describe(settings.stores, len(tasks)))
        self._sized_stores = {s.name: s for s in sized}
        # Adjunct stores are filled from their input streams, not restored from changelogs.
        specs = [s for s in sized if s.name not in settings.adjuncts.names]
        self._create_changelogs(specs)
        self._start_producers(specs)
        checkpoints = open_checkpoint_manager(
            settings.checkpoint_settings, job, self.registry, task_partitions(tasks.values()),
            job_config=config_file_of(config), create=True,
            stream_partitions=self.job_model.max_change_log_stream_partitions)
        for name in tasks:
            checkpoints.register(name)
        checkpoints.start()
        closers.callback(checkpoints.stop)
        if settings.guarantee is ProcessingGuarantee.EXACTLY_ONCE:
            self.outputs.make_transactions(checkpoints)
        last = {name: checkpoints.read_last(name) for name in tasks}
        storages = self._restore(specs, last, checkpoints)
        adjunct = self._open_adjuncts(last, checkpoints)
        decided = set() if adjunct is None else {s for name in tasks for s in adjunct.starts(name)}
        metadata = self.registry.metadata([s for s in self._ssps_without_position(last)
                                           if s not in decided])
        runner = AsyncioThread(f"weir-asyncio-{self.container_id}")
        closers.callback(runner.stop)
        control = ControlPlane(config, settings=settings.control)
        for name, task in tasks.items():
            task_producers = self.outputs.task_producers(name)
            cp = last[name]
            done = {s: o for s, o in (cp.input_offsets.items() if cp else ()) if s in task.ssps}
            manager = adjunct.manager(name) if adjunct is not None else None
            starts = starting_offsets(config, task.ssps, done, metadata,
                                      policies=settings.offsets,
                                      startpoints=adjunct.starts(name) if manager else None)
            self.positions[name] = {s: SspPosition(o, o) for s, o in starts.items()}
            task_object = make_task()
            inst = TaskInstance(
                name, task_object, task.ssps, config,
                storage=(_adjunct_task_storage(storages[name], manager) if manager is not None
                         else storages[name]),
                checkpoints=checkpoints, adjunct=manager,
                checkpoint_extras=manager.checkpoint_extras if manager is not None else None,
                collector=ProducerCollector(name, task_producers, self.registry.serdes,
                                            self._partition_count),
                last_processed={s: o - 1 for s, o in starts.items() if o > 0},
                starting_offsets=starts, async_runner=runner,
                run_loop=settings.run_loop, ignored=settings.ignored,
                transaction=self.outputs.transaction(name),
                control=control.task_control(name, task.ssps, task=task_object,
                                             extras=cp.extras if cp else None))
            self.instances.append(inst)
            closers.callback(lambda inst=inst: inst.close(self._store_disposal()))
        for name in tasks:
            if last[name] is not None:
                log.info("%s", resume_line(name, self.positions[name],
                                           storages[name].restore_stats(),
                                           reset_ssps(settings.offsets, tasks[name].ssps)))
        for inst in self.instances:
            inst.init()
        for inst in self.instances:
            if last[inst.task_name] is None:
                # Pin the state a first run starts from. Without it, a crash before the first
                # commit would restore every changelog record the crashed run wrote, while
                # the input starts over from its default offsets: counted twice.
                inst.commit()
                log.info("task '%s' had no checkpoint; wrote its first one (input from %s)",
                         inst.task_name, describe_starts(self.positions[inst.task_name]))
        self._start_consumers()
        self.loop = RunLoop(self.instances, self.consumers, settings.run_loop,
                            name=f"container-{self.container_id}", metrics=settings.metrics,
                            extra_metrics={"stores": lambda: store_metrics(storages)})

    def _open_adjuncts(self, last: dict[TaskName, Checkpoint | None],
                       checkpoints: Any) -> AdjunctStorage | None:
        """Decide, open and bootstrap the container's adjunct stores (before any task is
        initialized); None when the job has none. An adjunct partition whose store restarts
        below a task's checkpointed offset (a broadcast reader that skipped further than the
        writer's store recorded, a store rebuilt from its stream) is rewound on purpose: the
        store's position is the truth for its input."""
        settings = self.settings
        if not settings.adjuncts.bindings:
            return None
        run_loop = settings.run_loop
        from weir.engine.adjunct.storage import AdjunctStorage
        adjunct = AdjunctStorage(settings.adjuncts, self._sized_stores,
                                 self.model.tasks, self.container_id, self.job, self.registry,
                                 self.config, budget_bytes=settings.restore.options.budget_bytes,
                                 concurrent=run_loop.thread_pool_size > 0
                                 or run_loop.max_concurrency > 1)
        self._closers.callback(adjunct.close)  # after the task instances (closed in reverse)
        adjunct.open(last)
        self.adjunct = adjunct
        for name, cp in last.items():
            if cp is None:
                continue
            back = [s for s, start in adjunct.starts(name).items()
                    if s in cp.input_offsets and start <= cp.input_offsets[s]]
            if back:
                checkpoints.allow_rewind(name, back)
                log.info("task '%s': adjunct input %s goes back to where its store is",
                         name, ", ".join(f"{s} from {cp.input_offsets[s]} to "
                                         f"{adjunct.starts(name)[s] - 1}" for s in sorted(back)))
        return adjunct

    def _close_storage(self, storage: TaskStorage) -> None:
        if self._store_disposal() is StoreDisposal.CLOSE:
            storage.close()

    def _store_disposal(self) -> StoreDisposal:
        """Close the stores, unless user calls abandoned after a callback timeout still run
        (closing a store under them could crash the process); the next start restores."""
        if self._disposal is not None:  # decided once, when the first store is closed
            return self._disposal
        abandoned = self.loop.abandoned_calls if self.loop is not None else 0
        self._disposal = StoreDisposal.LEAVE_OPEN if abandoned else StoreDisposal.CLOSE
        if abandoned:
            log.warning("container %s: %d task call(s) still running after a callback timeout; "
                        "leaving the stores open until the process exits (the next start "
                        "restores them from the changelog and the last checkpoint)",
                        self.container_id, abandoned)
        return self._disposal

    def _ssps_without_position(self, last: dict[TaskName, Checkpoint | None]
                               ) -> list[SystemStreamPartition]:
        """Input SSPs whose starting offset comes from partition metadata: no checkpointed
        offset, or ``samza.reset.offset``. (Metadata can be costly: the file log counts the
        records of a partition's active segment.)"""
        need = set()
        for name, task in self.model.tasks.items():
            done = last[name].input_offsets if last[name] is not None else {}
            for ssp in task.ssps:
                if ssp not in done or self.settings.offset_policy(ssp.system_stream,
                                                                  self.config).reset:
                    need.add(ssp)
        return sorted(need)

    def _create_changelogs(self, specs: list[StoreSpec]) -> None:
        create_changelog_streams(specs, self.registry, self.job_model)

    def _start_producers(self, specs: list[StoreSpec]) -> None:
        # The job's systems (configured, inputs, changelogs, the default system), parsed once.
        systems = set(self.settings.systems)
        systems.update(ssp.system for t in self.model.tasks.values() for ssp in t.ssps)
        self.outputs.start(systems, specs)

    def _restore(self, specs: list[StoreSpec], last: dict[TaskName, Checkpoint | None],
                 checkpoints: Any) -> dict[TaskName, TaskStorage]:
        restore = ContainerRestore(self.container_id, self.model, self.job, self.registry,
                                   self.config, self.settings, self.outputs, self._closers,
                                   close_storage=self._close_storage, progress=self.progress)
        return restore.restore(specs, last, checkpoints)

    def _start_consumers(self) -> None:
        systems = sorted({ssp.system for t in self.model.tasks.values() for ssp in t.ssps})
        consumers = {s: self.registry.consumer(s) for s in systems}
        admins = {s: self.registry.admin(s) for s in systems}
        chooser = DefaultChooser(self.settings.chooser, config=self.config)
        sc = SystemConsumers(chooser, consumers, admins, self.registry.serdes,
                             self.settings.consumers)
        for positions in self.positions.values():
            for ssp, pos in positions.items():
                sc.register(ssp, pos.start)
        sc.start()
        self.consumers = sc
        self._closers.callback(sc.stop)

    def _partition_count(self, ss: SystemStream) -> int:
        return self.registry.partition_counts([ss])[ss]

    # -- results --------------------------------------------------------------------------
    def _result(self, summary: RunSummary | None, reason: str = "stopped") -> ContainerResult:
        inputs: dict[SystemStream, int] = {}
        for inst in list(self.instances):
            done = inst.last_processed
            for ssp, pos in self.positions.get(inst.task_name, {}).items():
                n = done.get(ssp, -1) + 1 - pos.start
                if n > 0:
                    ss = ssp.system_stream
                    inputs[ss] = inputs.get(ss, 0) + n
        outputs = self.outputs.counts()
        processed = summary.processed if summary is not None else {
            inst.task_name: inst.metrics.processed.count for inst in list(self.instances)}
        reason = summary.reason.value if summary is not None else reason
        return ContainerResult(self.container_id, reason, time.perf_counter() - self._started_at,
                               dict(processed), inputs, outputs, os.getpid(),
                               summary.seconds if summary is not None else 0.0)


def store_metrics(storages: Mapping[TaskName, TaskStorage]) -> dict[str, dict[str, Any]]:
    """Per task and store, the object cache's metrics (``CachedLayer.stats``: entries,
    misses, evictions, hit rate); stores without a cache are left out."""
    out: dict[str, dict[str, Any]] = {}
    for task, storage in storages.items():
        try:
            stores = storage.stores()
        except Exception:  # not open (yet, or any more): nothing to report
            continue
        for name, store in stores.items():
            for layer in layers_of(store):
                if isinstance(layer, CachedLayer):
                    out.setdefault(str(task), {})[name] = layer.stats()
                    break
    return out


def store_specs(config: Config, job: JobConfig) -> list[StoreSpec]:
    """Every configured store (``stores.<name>.factory``), parsed; bare changelog stream
    names go to the job's changelog system."""
    return [StoreSpec.from_config(config, name, changelog_system=job.changelog_system)
            for name in stores_in(config)]


def create_changelog_streams(specs: list[StoreSpec], registry: SystemRegistry,
                             job_model: JobModel) -> list[SystemStream]:
    """Create the changelog stream of every logged store that lacks one: compacted, with
    one partition per changelog partition of the job model. Returns the streams created; an
    existing stream with another partition count raises (see ensure_changelog_stream)."""
    partitions = job_model.max_change_log_stream_partitions
    created = []
    for spec in specs:
        if spec.logged:
            system, stream = spec.changelog
            admin = changelog_admin(registry, spec)
            if ensure_changelog_stream(admin, stream, partitions, store=spec.name,
                                       min_compaction_lag_ms=spec.min_compaction_lag_ms):
                log.info("created changelog stream %s.%s with %d partitions for store '%s'",
                         system, stream, partitions, spec.name)
                created.append(SystemStream(system, stream))
    return created


def run_container(config: Config, job_model: JobModel, container_id: str = "0",
                  **kwargs: Any) -> ContainerResult:
    """Build and run one container (see :class:`Container`)."""
    return Container(config, job_model, container_id, **kwargs).run()


__all__ += ["run_container", "store_metrics", "store_specs", "create_changelog_streams"]


def _adjunct_task_storage(storage: Any, manager: Any) -> Any:
    """A task's storage with its adjunct stores (a job with adjunct stores only)."""
    from weir.engine.adjunct.storage import AdjunctTaskStorage
    return AdjunctTaskStorage(storage, manager)
