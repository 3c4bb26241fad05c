"""What the offline tools (``weir checkpoint``, ``weir state``) know about a stopped job:
:class:`JobTools`.

A job is named by its config file (relative paths resolved against the working directory, as
``weir run`` does). The config the tools work with is the one the job last ran with: its
coordinator stream's (``weir run`` writes the file's config there, and ``weir coordinator
set-config`` changes it while the job runs: a store switched to another engine that way holds
that engine's files), with ``--set`` overrides on top; the file's when the job never ran (no
coordinator stream). Where the two differ the tools say so on standard error. From that
config: the job settings, the store specs, the job model (with the changelog partitions the
coordinator stream assigned), the checkpoint manager the job uses (files or stream) and the
job lock. Commands that open stores or change anything take the job lock first and refuse,
naming the holder, while the job runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from weir.recovery.job_lock import JobLock, LockAccess
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
    """The effective config: the coordinator stream's (the last run's), else the file's."""
    job: Any
    file_config: Config | None = field(default=None, repr=False)
    """The config file's (with ``--set``), when it is not :attr:`config`."""
    coordinator: Any = field(default=None, repr=False)
    """What the coordinator stream says (``CoordinatorState``; None: no stream)."""
    _registry: Any = field(default=None, repr=False)
    _model: Any = field(default=None, repr=False)
    _checkpoints: Any = field(default=None, repr=False)

    @classmethod
    def load(cls, args: argparse.Namespace) -> "JobTools":
        from weir.engine.cli.run import add_config_dir_to_path
        from weir.engine.config.job import JobConfig, apply_overrides, load_config

        config = load_config(args.path, args.overrides)
        add_config_dir_to_path(args.path)
        state = _coordinator_state(config)
        if state is None or state.is_new:
            return cls(args.path, config, JobConfig.from_config(config), coordinator=state)
        effective = apply_overrides(state.config, args.overrides)
        _say_differences(args.path, config, effective)
        return cls(args.path, effective, JobConfig.from_config(effective), file_config=config,
                   coordinator=state)

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
        state = self.coordinator
        return dict(state.changelog) or None if state is not None else None

    def configs(self) -> list[Config]:
        """Every config the job's state may have been built with: the file's and the
        effective one (what a reset moves aside the stores and changelogs of)."""
        return [c for c in (self.file_config, self.config) if c is not None]

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
    def locked(self, role: str, access: LockAccess = LockAccess.CHANGE) -> Iterator[JobLock]:
        """The job's run lock and job lock, for ``role``: refused, naming the holder, while
        the job runs, whatever directories it runs with, and a ``weir run`` of the job is
        refused while the tool works (:func:`~weir.engine.coordinator.run_lock.hold_stopped_job`).
        ``access``: a tool that only looks (:attr:`LockAccess.READ`) works on a job whose
        directories it cannot write, under shared locks, and says so on standard error."""
        from weir.engine.coordinator.run_lock import hold_stopped_job
        with hold_stopped_job(self.config, self.registry, role, self.job.checkpoint_dir,
                              self.job.name, access=access) as lock:
            if lock.shared:
                print(f"{role}: {self.job.checkpoint_dir} cannot be written here (read-only "
                      f"file system or permissions): reading the job's state without taking "
                      f"its job lock; a shared lock keeps a run of the job on this machine out "
                      f"meanwhile, and nothing is written", file=sys.stderr)
            yield lock

    def looking(self, role: str) -> Any:
        """:meth:`locked` for a tool that only reads the job's state."""
        return self.locked(role, LockAccess.READ)

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.stop()
            self._checkpoints = None


def _coordinator_state(config: Config) -> Any:
    """What the job's coordinator stream says (None when the job has none: its system keeps
    nothing, or the stream was never written). A damaged stream raises its typed error."""
    from weir.engine.coordinator.errors import CoordinatorStreamCorruptError
    from weir.engine.coordinator.state import CoordinatorState
    from weir.engine.coordinator.stream import CoordinatorStreamStore
    try:
        with CoordinatorStreamStore.for_job(config, source="weir-tools") as store:
            if not store.exists():
                return None
            store.bootstrap()
            return CoordinatorState.from_store(store)
    except CoordinatorStreamCorruptError:
        raise
    except Exception as exc:  # noqa: BLE001 - no coordinator stream to read: the file's config
        print(f"weir: cannot read the job's coordinator stream ({type(exc).__name__}: {exc}); "
              f"using the config file as it is", file=sys.stderr)
        return None


_SHOWN_DIFFERENCES = 6


def _say_differences(path: str, file_config: Config, effective: Config) -> None:
    """Tell on standard error where the config the job last ran with differs from the file."""
    keys = sorted(k for k in set(file_config) | set(effective)
                  if file_config.get(k) != effective.get(k))
    if not keys:
        return
    shown = []
    for key in keys[:_SHOWN_DIFFERENCES]:
        theirs = file_config.get(key)
        where = file_config.origin(key) or path
        shown.append(f"{key}={effective.get(key, '(unset)')} ({where} says "
                     f"{'nothing' if theirs is None else theirs})")
    more = f" and {len(keys) - _SHOWN_DIFFERENCES} more" if len(keys) > _SHOWN_DIFFERENCES else ""
    print(f"weir: the job last ran with the config in its coordinator stream, which differs from "
          f"{path}: {'; '.join(shown)}{more}. Its state is read with the coordinator stream's "
          f"config (`weir coordinator show --job {path}`); the next `weir run {path}` submits the "
          f"file's", file=sys.stderr)
