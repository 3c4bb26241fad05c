"""Check a job before anything is created: every settings object built from config, every
directory the job must write.

A job that cannot run as configured must say so before it creates a changelog stream, a store
directory or a checkpoint: otherwise a bad ``task.max.concurrency`` (parsed when the run loop
is built, at the very end of a container's start) is refused after changelogs and first
checkpoints were written, and a read-only working directory ends in a raw ``PermissionError``
from deep inside the file log. :func:`check_job` builds, from config, everything a container
builds later -- run loop settings, the ``task.ignored.exceptions`` policy, metrics reporter
settings, store specs and their serdes, the chooser, each system's admin (which parses the
system's settings), the serdes of every configured stream, the offset policy of every input,
the consumers' settings -- and checks that the directories the job writes can be created
and written. It creates nothing, opens no file and writes nothing.

Errors are :class:`~weir.stores.errors.ConfigError` (``weir run`` exits with code 2) naming
the key and where it was set; a directory that cannot be written is an
:class:`~weir.engine.errors.UnwritableDirectoryError` naming the directory, why, and the key
that chose it.

Example::

    >>> import tempfile
    >>> from weir.stores.config import Config
    >>> root = tempfile.mkdtemp()
    >>> config = Config({"job.name": "wc", "task.class": "x:Y", "task.inputs": "memory.words",
    ...                  "task.max.concurrency": "0"})
    >>> check_job(config, JobConfig.from_config(config, cwd=Path(root)), SystemRegistry(config))
    Traceback (most recent call last):
    ...
    weir.stores.errors.ConfigError: config key 'task.max.concurrency': must be >= 1, got 0
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.serdes import serde_from_name
from weir.stores.spec import STORE_KEY_SERDE, STORE_MSG_SERDE, StoreSpec, stores_in

from weir.engine.chooser.spec import ChooserSpec
from weir.engine.config.job import (_LOGGED_BASE_ENV, JOB_LOGGED_STORE_BASE_DIR,
                                    JOB_DATA_DIR, JOB_NON_LOGGED_STORE_BASE_DIR, TASK_CHECKPOINT_PATH, JobConfig,
                                    StoreBase)
from weir.engine.config.streams import JOB_DEFAULT_SYSTEM, all_input_streams
from weir.engine.consumers.consumers import (TASK_DROP_DESERIALIZATION_ERRORS,
                                             TASK_NO_NEW_MESSAGES_TIMEOUT_MS, TASK_POLL_INTERVAL_MS)
from weir.engine.consumers.offsets import offset_policy
from weir.engine.control.settings import ControlSettings
from weir.engine.errors import UnwritableDirectoryError
from weir.engine.metrics import METRICS_REPORTER_FILE, METRICS_REPORTER_INTERVAL_MS
from weir.engine.model import SystemStream
from weir.engine.runloop.failures import IgnoredExceptions
from weir.engine.runloop.settings import RunLoopConfig
from weir.engine.systems.registry import SystemRegistry

__all__ = ["JobSettings", "check_job", "check_directories", "job_directories"]


@dataclass(frozen=True)
class JobSettings:
    """Everything :func:`check_job` built from config (proof that it parses)."""

    job: JobConfig
    run_loop: RunLoopConfig
    stores: tuple[StoreSpec, ...]
    chooser: ChooserSpec
    systems: tuple[str, ...]


@dataclass(frozen=True)
class _Directory:
    """A directory the job writes, with the key that chose it."""

    path: Path
    key: str
    origin: str | None
    what: str
    default: str | None  # the key's default when it was not set (for the message)


def check_job(config: Config, job: JobConfig, registry: SystemRegistry) -> JobSettings:
    """Build every settings object of the job from ``config`` and check the directories it
    writes; raise ConfigError (or UnwritableDirectoryError) for the first problem. Creates
    nothing."""
    run_loop = RunLoopConfig.from_config(config)
    IgnoredExceptions.from_config(config)
    METRICS_REPORTER_INTERVAL_MS.get(config)
    for key in (TASK_POLL_INTERVAL_MS, TASK_NO_NEW_MESSAGES_TIMEOUT_MS,
                TASK_DROP_DESERIALIZATION_ERRORS):
        key.get(config)
    specs = tuple(StoreSpec.from_config(config, name, changelog_system=job.changelog_system)
                  for name in stores_in(config))
    for spec in specs:
        serde_from_name(spec.key_serde, config, key=STORE_KEY_SERDE.key(store=spec.name))
        serde_from_name(spec.value_serde, config, key=STORE_MSG_SERDE.key(store=spec.name))
    chooser = ChooserSpec.from_config(config)
    ControlSettings.from_config(config, checkpoint_dir=job.checkpoint_dir)
    inputs = all_input_streams(config)
    for spec in specs:
        if spec.logged:
            changelog_admin(registry, spec)  # names stores.<s>.changelog when unusable
    systems = _systems(config, registry, inputs, specs)
    for system in systems:
        registry.admin(system)  # resolves the factory and parses the system's settings
    for ss in sorted(set(inputs) | set(_configured_streams(config, systems))):
        registry.serdes.for_stream(ss)
    for ss in inputs:
        offset_policy(config, ss)
    check_directories(job_directories(config, job, specs, registry))
    return JobSettings(job, run_loop, specs, chooser, tuple(systems))


def changelog_admin(registry: SystemRegistry, spec: StoreSpec):
    """The admin of the system holding ``spec``'s changelog; a system that cannot be used is a
    ConfigError naming ``stores.<s>.changelog`` and where it was set (the key to fix)."""
    system, stream = spec.changelog
    key = f"stores.{spec.name}.changelog"
    try:
        return registry.admin(system)
    except ConfigError as exc:
        raise ConfigError(
            f"the changelog '{system}.{stream}' of store '{spec.name}' is on system "
            f"'{system}', which cannot be used ({exc}); configure "
            f"systems.{system}.factory, or point the store's changelog at a configured "
            f"system ({', '.join(registry.systems()) or 'none configured'})",
            key=key, origin=registry.config.origin(key)) from None


def _systems(config: Config, registry: SystemRegistry, inputs: Iterable[SystemStream],
             specs: Iterable[StoreSpec]) -> list[str]:
    """The systems a container makes producers (and consumers) for."""
    systems = set(registry.systems())
    systems.update(ss.system for ss in inputs)
    systems.update(spec.changelog[0] for spec in specs if spec.logged)
    default = JOB_DEFAULT_SYSTEM.get(config)
    if default:
        systems.add(default)
    return sorted(systems)


def _configured_streams(config: Config, systems: Iterable[str]) -> list[SystemStream]:
    """Streams named by ``systems.<system>.streams.<stream>.*`` keys (their serdes are
    resolved from config before anything runs)."""
    out = set()
    for system in systems:
        prefix = f"systems.{system}.streams."
        for key in config:
            if key.startswith(prefix):
                stream = key[len(prefix):].split(".", 1)[0]
                if stream:
                    out.add(SystemStream(system, stream))
    return sorted(out)


def job_directories(config: Config, job: JobConfig, specs: Iterable[StoreSpec],
                    registry: SystemRegistry) -> list[_Directory]:
    """The directories a container of this job creates and writes, each with the key (or
    environment variable) that chose it: the checkpoint directory, the store base directories
    of persistent stores, the root of every file-log system that holds a changelog, and the
    metrics reporter file's directory."""
    out = [_chosen(config, job.checkpoint_dir, TASK_CHECKPOINT_PATH, "checkpoint directory")]
    bases = {StoreBase.LOGGED if spec.logged else StoreBase.NON_LOGGED
             for spec in specs if spec.persistent}
    if StoreBase.LOGGED in bases:
        if os.environ.get(_LOGGED_BASE_ENV):
            out.append(_Directory(job.logged_store_base_dir,
                                  f"{_LOGGED_BASE_ENV} (environment variable)", None,
                                  "store directory", None))
        else:
            out.append(_chosen(config, job.logged_store_base_dir, JOB_LOGGED_STORE_BASE_DIR,
                               "store directory"))
    if StoreBase.NON_LOGGED in bases:
        out.append(_chosen(config, job.non_logged_store_base_dir, JOB_NON_LOGGED_STORE_BASE_DIR,
                           "store directory"))
    for system in sorted({spec.changelog[0] for spec in specs if spec.logged}):
        root = _file_log_root(registry, system)
        if root is not None:
            key = f"systems.{system}.root"
            out.append(_Directory(Path(root), key, config.origin(key),
                                  "file log (it holds the changelogs)",
                                  None if key in config else "./weir-data/log"))
    report = METRICS_REPORTER_FILE.get(config)
    if report and METRICS_REPORTER_INTERVAL_MS.get(config) > 0:
        out.append(_Directory(Path(report).absolute().parent, METRICS_REPORTER_FILE.name,
                              config.origin(METRICS_REPORTER_FILE.name),
                              "metrics reporter file's directory", None))
    return out


def _default(config: Config, key) -> str | None:
    return None if key.name in config else str(key.default)


def _chosen(config: Config, path: Path, key, what: str) -> _Directory:
    """The directory ``path`` with the key that chose it: ``key`` when it is set, else
    ``job.data.dir`` (which holds every default directory of the job)."""
    if key.name in config:
        return _Directory(path, key.name, config.origin(key.name), what, None)
    return _Directory(path, JOB_DATA_DIR.name, config.origin(JOB_DATA_DIR.name), what,
                      _default(config, JOB_DATA_DIR) or None)


def _file_log_root(registry: SystemRegistry, system: str) -> str | None:
    try:
        from weir.engine.systems.filelog import FileLogSystemFactory
    except ImportError:
        return None
    if not isinstance(registry.factory(system), FileLogSystemFactory):
        return None
    return getattr(registry.admin(system), "root", None)


def check_directories(directories: Iterable[_Directory]) -> None:
    """Raise UnwritableDirectoryError for the first directory that cannot be created (its
    nearest existing ancestor is not writable) or written."""
    for d in directories:
        problem = unwritable_reason(d.path)
        if problem is None:
            continue
        chosen = (f" (the default {d.default!r}, relative to the working directory "
                  f"{Path.cwd()})" if d.default is not None else "")
        raise UnwritableDirectoryError(
            f"the {d.what} {d.path}{chosen} cannot be created or written: {problem}. Make it "
            f"writable for this user, or set {d.key.split(' ')[0]} to a directory this job may "
            f"write; nothing was created", path=str(d.path), key=d.key, origin=d.origin)


def unwritable_reason(path: Path) -> str | None:
    """Why ``path`` (a directory, existing or to be created) cannot be written, or None."""
    probe = Path(path)
    while not probe.exists():
        if probe.parent == probe:
            return f"no ancestor of {path} exists"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is a file, not a directory"
    try:
        if os.statvfs(probe).f_flag & os.ST_RDONLY:
            return f"{probe} is on a read-only filesystem (EROFS)"
    except OSError:
        pass
    effective = os.access in os.supports_effective_ids
    if not os.access(probe, os.W_OK | os.X_OK, effective_ids=effective):
        return (f"{probe} is not writable by this process (uid {os.geteuid()}): permission "
                f"denied (EACCES)")
    return None
