"""What a container's tasks write through: its producers and, with exactly-once, its tasks'
transactions (docs/EXACTLY-ONCE.md).

One producer per system of the job (the configured systems, the inputs', the changelogs',
the default system), registered for every task and every changelog source and counted
(:class:`~weir.engine.container.progress.CountingProducer`) so the container's result can say
what its tasks sent. With ``task.processing.guarantee=exactly_once`` each task gets one
transaction over the job's transactional systems: its collector and its changelogs write
through the transaction's producers, and the previous run's transaction is finished before
restore. Everything opened here is stopped through the container's
:class:`~weir.engine.container.stop_steps.StopSteps`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from weir.recovery.checkpoint import Checkpoint, CheckpointManager
from weir.stores.spec import StoreSpec

from weir.engine.config.job import JobConfig
from weir.engine.container.exactly_once import TaskTransaction, transactional_systems
from weir.engine.container.progress import CountingProducer
from weir.engine.container.stop_steps import StopSteps
from weir.engine.container.task_storage import changelog_source_name
from weir.engine.model import SystemStream, TaskName
from weir.engine.systems.registry import SystemRegistry

__all__ = ["ContainerOutputs"]

log = logging.getLogger("weir.container")


class ContainerOutputs:
    """The producers and task transactions of one container (see the module docstring).
    ``tasks`` are the container's task names."""

    def __init__(self, registry: SystemRegistry, job: JobConfig, tasks: Iterable[TaskName],
                 steps: StopSteps):
        self._registry, self._job, self._steps = registry, job, steps
        self._tasks = list(tasks)
        self.producers: dict[str, CountingProducer] = {}
        """The container's producer of each system, by system name."""
        self._transactions: dict[TaskName, TaskTransaction] = {}
        self._task_outputs: list[CountingProducer] = []   # tasks' transactional producers

    def start(self, systems: Iterable[str], specs: list[StoreSpec]) -> None:
        """Make, register and start one producer per system in ``systems``: every task is a
        source, and so is every logged store of ``specs`` whose changelog is on it."""
        for system in sorted(set(systems)):
            producer = CountingProducer(self._registry.producer(system))
            for name in self._tasks:
                producer.register(name)
                for spec in specs:
                    if spec.logged and spec.changelog[0] == system:
                        producer.register(changelog_source_name(name, spec.name))
            producer.start()
            self.producers[system] = producer
            self._steps.callback(producer.stop)

    # -- exactly-once ------------------------------------------------------------------------
    def make_transactions(self, checkpoints: CheckpointManager) -> None:
        """One transaction per task over the job's file-log systems; released after the
        tasks and their stores are closed (an ongoing transaction is aborted then)."""
        systems = transactional_systems(self._registry, self.producers)
        untransacted = sorted(set(self.producers) - set(systems))
        if untransacted:
            log.warning("task.processing.guarantee=exactly_once: outputs to %s stay "
                        "at-least-once (no transactions on %s)", ", ".join(untransacted),
                        "that system" if len(untransacted) == 1 else "those systems")
        for name in self._tasks:
            txn = TaskTransaction.for_task(name, self._job, self._registry, systems,
                                           str(checkpoints.path_for(name)))
            self._transactions[name] = txn
            self._steps.callback(txn.close)

    @property
    def transactional(self) -> bool:
        """Whether the tasks write through transactions (exactly-once)."""
        return bool(self._transactions)

    def transaction(self, name: TaskName) -> TaskTransaction | None:
        return self._transactions.get(name)

    def recover_transactions(self, last: Mapping[TaskName, Checkpoint | None], *,
                             job_config: str | None) -> None:
        """Check every task's previous transaction against its checkpoint, then finish them
        all (before restore: it reads committed data and must not be held back)."""
        for name, txn in self._transactions.items():   # every task, before any changes
            txn.check(last[name], job_config=job_config)
        for name, txn in self._transactions.items():
            txn.recover(last[name], job_config=job_config)

    # -- what tasks and stores write through ---------------------------------------------------
    def storage_producers(self, name: TaskName) -> dict[str, Any]:
        """The producers a task's changelogs write through: its transactional ones with
        exactly-once, else the container's (uncounted: changelogs are not task output)."""
        raw = {system: p.inner for system, p in self.producers.items()}
        txn = self._transactions.get(name)
        return {**raw, **txn.producers} if txn is not None else raw

    def task_producers(self, name: TaskName) -> dict[str, CountingProducer]:
        """The producers a task's collector sends through (counted for the results)."""
        shared = dict(self.producers)
        txn = self._transactions.get(name)
        if txn is None:
            return shared
        own = {system: CountingProducer(producer) for system, producer in txn.producers.items()}
        self._task_outputs.extend(own.values())
        return {**shared, **own}

    def counts(self) -> dict[SystemStream, int]:
        """Messages the tasks sent, per output stream."""
        outputs: dict[SystemStream, int] = {}
        for producer in [*self.producers.values(), *self._task_outputs]:
            for ss, n in producer.counts.items():
                outputs[ss] = outputs.get(ss, 0) + n
        return outputs
