"""A container's stores brought back to its tasks' checkpoints, before any task starts.

:class:`ContainerRestore` builds every task's
:class:`~weir.engine.container.task_storage.TaskStorage`, checks every task before anything is
restored (:mod:`weir.engine.container.safety`: checkpoints written against the same
incarnations of the input and changelog streams, no state without a checkpoint), so a
mismatch changes nothing; then binds the streams' identities into every checkpoint this run
writes, finishes the previous run's exactly-once transactions
(:class:`~weir.engine.container.outputs.ContainerOutputs`), and restores every store of every
task in parallel through the
:class:`~weir.recovery.container_storage.ContainerStorageManager` (docs/ARCHITECTURE.md, "The
life of a store").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.container_storage import ContainerStorageManager
from weir.recovery.storage import ProgressMode
from weir.stores.config import Config
from weir.stores.spec import StoreSpec

from weir.engine.config.job import JobConfig
from weir.engine.container.outputs import ContainerOutputs
from weir.engine.container.safety import (check_identities, check_state_without_checkpoint,
                                          config_file_of, current_identities, reset_ssps)
from weir.engine.container.settings import JobSettings
from weir.engine.container.stop_steps import StopSteps
from weir.engine.container.task_storage import TaskStorage
from weir.engine.jobmodel.model import ContainerModel
from weir.engine.model import TaskName
from weir.engine.systems.registry import SystemRegistry

__all__ = ["ContainerRestore"]


class ContainerRestore:
    """Restores the stores of container ``container_id`` (see the module docstring).
    ``close_storage`` closes a task's storage when the start fails before its task instance
    exists (the container decides whether the stores may be closed)."""

    def __init__(self, container_id: str, model: ContainerModel, job: JobConfig,
                 registry: SystemRegistry, config: Config, settings: JobSettings,
                 outputs: ContainerOutputs, steps: StopSteps, *,
                 close_storage: Callable[[TaskStorage], None],
                 progress: ProgressMode = ProgressMode.AUTO):
        self._id, self._model, self._job = container_id, model, job
        self._registry, self._config, self._settings = registry, config, settings
        self._outputs, self._steps, self._close_storage = outputs, steps, close_storage
        self._progress = progress

    def restore(self, specs: list[StoreSpec], last: Mapping[TaskName, Checkpoint | None],
                checkpoints: Any) -> dict[TaskName, TaskStorage]:
        """Every task's storage, its stores restored to ``last`` (each task's last
        checkpoint); raises before anything is restored when a check fails."""
        restore = self._settings.restore
        storages = {name: TaskStorage(name, specs, self._job, task.changelog_partition,
                                      self._outputs.storage_producers(name),
                                      self._registry, self._config, self._progress,
                                      restore=restore)
                    for name, task in self._model.tasks.items()}
        # Every task is checked before any store is restored: a mismatch changes nothing.
        self._check_before_restore(storages, last, checkpoints)
        # Exactly-once: finish each task's previous transaction (restore reads committed data
        # and must not be held back by it).
        if self._outputs.transactional:
            self._outputs.recover_transactions(last, job_config=config_file_of(self._config))
            # Recovery may have waited for a live incarnation of the same tasks (another copy
            # of the job, started beside this one with other checkpoints) to let go of its
            # producers; what it committed meanwhile is state this run has no checkpoint for.
            self._check_state_without_checkpoints(storages, last, checkpoints)
        # Every store of every task: decided first, then restored in parallel restore threads.
        managers = [m for storage in storages.values() for m in storage.managers]
        csm = ContainerStorageManager(managers, restore, progress=self._progress,
                                      title=f"container {self._id}")
        csm.restore({name: last[name] for name in storages})
        out: dict[TaskName, TaskStorage] = {}
        for name, storage in storages.items():
            storage.adopted()
            out[name] = storage
            # Closed by the task instance once it exists; this covers a failed start.
            self._steps.callback(lambda storage=storage: self._close_storage(storage))
        return out

    def _check_before_restore(self, storages: dict[TaskName, TaskStorage],
                              last: Mapping[TaskName, Checkpoint | None],
                              checkpoints: Any) -> None:
        """Refuse to start when a checkpoint was written against other incarnations of the
        streams, or a task without a checkpoint has state (see ``safety``); then bind the
        streams' identities into every checkpoint this run writes."""
        job_config = config_file_of(self._config)
        logged = {name: storage.logged_stores() for name, storage in storages.items()}
        ssps = {ssp for task in self._model.tasks.values() for ssp in task.ssps}
        ssps.update(store.changelog for stores in logged.values() for store in stores)
        identities = current_identities(self._registry, sorted(ssps))
        for name, task in self._model.tasks.items():
            path = checkpoints.location(name)
            reset = reset_ssps(self._settings.offsets, task.ssps)
            inputs = {ssp: identities.get(ssp) for ssp in task.ssps}
            changelogs = {store.name: (store.changelog, identities.get(store.changelog))
                          for store in logged[name]}
            check_identities(name, last[name], inputs, changelogs, checkpoint_path=path,
                             job_config=job_config, reset=reset)
            if last[name] is not None:
                checkpoints.allow_rewind(name, [s for s in reset
                                                if s in last[name].input_offsets])
            checkpoints.bind(name, inputs={s: i for s, i in inputs.items() if i},
                             changelogs={store: i for store, (_, i) in changelogs.items() if i},
                             changelog_partitions={store: ssp for store, (ssp, _)
                                                   in changelogs.items()})
        self._check_state_without_checkpoints(storages, last, checkpoints)

    def _check_state_without_checkpoints(self, storages: dict[TaskName, TaskStorage],
                                         last: Mapping[TaskName, Checkpoint | None],
                                         checkpoints: Any) -> None:
        """Refuse to start when a task without a checkpoint has state (``safety``)."""
        job_config = config_file_of(self._config)
        for name in self._model.tasks:
            if last[name] is None:
                check_state_without_checkpoint(
                    name, storages[name].logged_stores(),
                    checkpoint_path=checkpoints.location(name), job_config=job_config,
                    previous_exists=checkpoints.has_previous(name))
