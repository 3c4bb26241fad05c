"""What the offline tools (``weir checkpoint``, ``weir state``) know about a stopped job:
:class:`JobTools`.

A job is named by its config file (relative paths resolved against the working directory, as
``weir run`` does). From it: the job settings, the store specs, the job model (with the
changelog partitions the coordinator stream assigned, when there is one), the checkpoint
manager the job uses (files or stream) and the job lock. Commands that open stores or change
anything take the job lock first and refuse, naming the holder, while the job runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from weir.recovery.job_lock import JobLock
from weir.stores.config import Config
from weir.stores.spec import StoreSpec

from weir.engine.cli._console import console as rich_console

__all__ = ["JobTools", "console", "job_arguments"]


def job_arguments() -> argparse.ArgumentParser:
    """The arguments every offline tool takes: the job config and ``--set`` overrides."""
    job = argparse.ArgumentParser(add_help=False)
    job.add_argument("path", help="job config (.properties, .yaml or .yml)")
    job.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="override a config key (repeatable)")
    return job


def console() -> Console:
    """Rich output on stdout for the offline tools; 160 columns when it is not a terminal."""
    return rich_console(width=160)


@dataclass
class JobTools:
    """A stopped job as the tools see it (see the module docstring)."""

    path: str
    config: Config
    job: Any
    _registry: Any = field(default=None, repr=False)
    _model: Any = field(default=None, repr=False)
    _checkpoints: Any = field(default=None, repr=False)

    @classmethod
    def load(cls, args: argparse.Namespace) -> "JobTools":
        from weir.engine.cli.run import add_config_dir_to_path
        from weir.engine.config.job import JobConfig, load_config

        config = load_config(args.path, args.overrides)
        add_config_dir_to_path(args.path)
        return cls(args.path, config, JobConfig.from_config(config))

    @property
    def registry(self) -> Any:
        if self._registry is None:
            from weir.engine.systems.registry import SystemRegistry
            self._registry = SystemRegistry(self.config)
        return self._registry

    @property
    def checkpoint_settings(self) -> Any:
        from weir.engine.container.checkpoints import CheckpointSettings
        return CheckpointSettings.from_config(self.config, self.job)

    def specs(self) -> list[StoreSpec]:
        from weir.engine.container.container import store_specs
        return store_specs(self.config, self.job)

    def spec(self, name: str) -> StoreSpec:
        from weir.stores.errors import ConfigError
        specs = {s.name: s for s in self.specs()}
        if name not in specs:
            raise ConfigError(f"the job has no store '{name}' (stores: "
                              f"{', '.join(sorted(specs)) or 'none'})",
                              key=f"stores.{name}.factory")
        return specs[name]

    def model(self) -> Any:
        """The job model, with the coordinator stream's changelog partitions when it has
        some (as ``weir run`` builds it)."""
        if self._model is None:
            from weir.engine.config.streams import all_input_streams
            from weir.engine.jobmodel.model import build_job_model
            counts = self.registry.partition_counts(all_input_streams(self.config))
            self._model = build_job_model(self.config, counts,
                                          changelog_mapping=self._changelog_mapping())
        return self._model

    def _changelog_mapping(self) -> dict[str, int] | None:
        try:
            from weir.engine.coordinator.state import CoordinatorState
            from weir.engine.coordinator.stream import CoordinatorStreamStore
            with CoordinatorStreamStore.for_job(self.config, source="weir-tools") as store:
                store.bootstrap()
                return dict(CoordinatorState.from_store(store).changelog) or None
        except Exception:  # noqa: BLE001 - no coordinator stream: the default mapping
            return None

    def tasks(self) -> dict[str, Any]:
        return {str(name): task for name, task in self.model().tasks().items()}

    def task(self, name: str) -> Any:
        from weir.stores.errors import ConfigError
        tasks = self.tasks()
        if name not in tasks:
            raise ConfigError(f"the job has no task '{name}' (tasks: "
                              f"{', '.join(tasks) or 'none'})")
        return tasks[name]

    @property
    def checkpoints(self) -> Any:
        """The job's checkpoint manager (files in ``task.checkpoint.path`` or the checkpoint
        stream), started, with every task of the job registered."""
        if self._checkpoints is None:
            from weir.engine.container.checkpoints import (CheckpointKind,
                                                           open_checkpoint_manager)
            settings = self.checkpoint_settings
            partitions: dict[str, int] = {}
            if settings.kind is CheckpointKind.STREAM:
                partitions = {n: t.changelog_partition for n, t in self.tasks().items()}
            manager = open_checkpoint_manager(settings, self.job, self.registry, partitions,
                                              job_config=self.path)
            for name in partitions:
                manager.register(name)
            if settings.kind is CheckpointKind.STREAM:
                manager.start()
            self._checkpoints = manager
        return self._checkpoints

    def checkpoint_location(self) -> str:
        settings = self.checkpoint_settings
        if settings.system is not None and settings.kind.value == "stream":
            return f"checkpoint stream {settings.system}.{settings.stream}"
        return str(self.job.checkpoint_dir)

    @contextmanager
    def locked(self, role: str) -> Iterator[JobLock]:
        """The job's run lock and job lock, for ``role``: refused, naming the holder, while
        the job runs, whatever directories it runs with, and a ``weir run`` of the job is
        refused while the tool works (:func:`~weir.engine.coordinator.run_lock.hold_stopped_job`)."""
        from weir.engine.coordinator.run_lock import hold_stopped_job
        with hold_stopped_job(self.config, self.registry, role, self.job.checkpoint_dir,
                              self.job.name) as lock:
            yield lock

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.stop()
            self._checkpoints = None
