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
and written. It creates nothing, opens no file and writes nothing. What it builds is the
:class:`~weir.engine.container.settings.JobSettings` the container then runs with (config is
parsed once).

Errors are :class:`~weir.stores.errors.ConfigError` (``weir run`` exits with code 2) naming
the key and where it was set; a directory that cannot be written is an
:class:`~weir.engine.errors.UnwritableDirectoryError` naming the directory, why, and the key
that chose it.

:func:`preflight` is the one check ``weir run`` and ``weir config show`` share: the config's
keys (bad values and unknown keys in strict namespaces refused, the rest warned about, Samza
keys accepted and explained by notes), the task or application class, then :func:`check_job`.
A config ``weir config show`` passes, ``weir run`` accepts (streams that do not exist yet
aside).

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

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from weir.stores.config import Config
from weir.stores.spec import StoreSpec

from weir.engine.config.job import (_LOGGED_BASE_ENV, JOB_DATA_DIR, JOB_LOGGED_STORE_BASE_DIR,
                                    JOB_NON_LOGGED_STORE_BASE_DIR, TASK_CHECKPOINT_PATH, ConfigReview,
                                    JobConfig, StoreBase, review_config)
from weir.engine.container.settings import JobSettings, changelog_admin
from weir.engine.errors import EngineError, UnwritableDirectoryError
from weir.engine.metrics import METRICS_REPORTER_FILE, METRICS_REPORTER_INTERVAL_MS
from weir.engine.systems.registry import SystemRegistry
from weir.engine.task import describe_task, load_object, load_task_factory

__all__ = ["check_job", "check_directories", "job_directories", "changelog_admin", "preflight",
           "CheckedJob", "refuse_task_as_application"]

_APP_CLASS = "app.class"

log = logging.getLogger("weir.runner")


@dataclass(frozen=True)
class CheckedJob:
    """A job config that passed :func:`preflight`: what the check found (warnings, notes)
    and what it built (the job's directories, systems and settings)."""

    config: Config
    review: ConfigReview
    job: JobConfig
    registry: SystemRegistry
    settings: JobSettings


def preflight(config: Config, *, registry: SystemRegistry | None = None) -> CheckedJob:
    """Every check ``weir run`` makes before it writes anything, in its order: the keys
    (:func:`~weir.engine.config.job.review_config`), the job's name and directories, the task
    class (``task.class``, ``task.wrapper.class``; an ``app.class`` naming a task is refused,
    :func:`refuse_task_as_application`), every settings object and every directory
    (:func:`check_job`). Raises ConfigError (or UnwritableDirectoryError) for the first
    problem; creates nothing."""
    try:
        review = review_config(config)  # imports the modules declaring its keys only
    except EngineError as exc:
        # A module declaring some key failed to import (a missing extra): check against what
        # is declared, and let the component that needs it fail with its own message.
        log.warning("checking config keys against the declarations of the modules that "
                    "import: %s", exc)
        review = review_config(config, load_declarations=False)
    job = JobConfig.from_config(config)
    refuse_task_as_application(config)
    load_task_factory(config)  # a bad task.class / task.wrapper.class fails before any setup
    registry = registry if registry is not None else SystemRegistry(config)
    return CheckedJob(config, review, job, registry, check_job(config, job, registry))


def refuse_task_as_application(config: Config) -> None:
    """A ConfigError when ``app.class`` names a low-level task (a class with ``process``):
    it belongs in ``task.class``."""
    spec = config.get_str(_APP_CLASS)
    if not spec:
        return
    target = load_object(spec, key=_APP_CLASS, origin=config.origin(_APP_CLASS))
    candidate = target
    if isinstance(target, type):
        if callable(getattr(target, "describe", None)):
            return
        try:
            candidate = target()
        except Exception:  # noqa: BLE001 - not made without arguments: the planner says so
            return
    try:
        describe_task(candidate)
    except TypeError:
        return
    from weir.stores.errors import ConfigError
    raise ConfigError(f"names {spec!r}, a task (it has process()), not an application; name a "
                      f"task in task.class (with task.inputs), and an application "
                      f"(StreamApplication, docs/APPLICATIONS.md) in app.class",
                      key=_APP_CLASS, origin=config.origin(_APP_CLASS))


@dataclass(frozen=True)
class _Directory:
    """A directory the job writes, with the key that chose it."""

    path: Path
    key: str
    origin: str | None
    what: str
    default: str | None  # the key's default when it was not set (for the message)


def check_job(config: Config, job: JobConfig, registry: SystemRegistry) -> JobSettings:
    """Build every settings object of the job from ``config`` (:meth:`JobSettings.from_config`)
    and check the directories it writes; raise ConfigError (or UnwritableDirectoryError) for
    the first problem. Creates nothing. The settings are what the container runs with."""
    settings = JobSettings.from_config(config, registry, job=job)
    check_directories(job_directories(config, job, settings.stores, registry))
    return settings


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
    return registry.admin(system).root


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
