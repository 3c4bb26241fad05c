"""Starting a job's state over without deleting anything: :func:`plan_state_reset`.

One module for every way a job's state is reset: ``weir checkpoint reset`` and the job
coordinator's ``weir run --reset-state`` both call it. A reset moves aside, together:

1. the checkpoints: the files of ``task.checkpoint.path`` (into a sibling directory; the lock
   files stay) or the checkpoint stream (``task.checkpoint.system``, renamed);
2. each logged store's changelog stream (renamed);
3. each persistent store's local directory (``<base>/<store>``, renamed);

each renamed to ``<name>.reset-<UTC time>``, never deleted (remove the copies yourself once the
new state is trusted). The input offsets and the state always move together: a reset that moved
the checkpoints but not a changelog would restore old state under new input positions and count
messages twice. So everything is checked before anything moves (a store directory some process
holds, a changelog on a system that cannot rename streams, a target name that exists: nothing
moves), and the checkpoints move first: a reset interrupted halfway leaves a job without
checkpoints but with state, which the next start refuses (``container/safety.py``) instead of
double-counting; running the reset again finishes it.

Streams of the in-process memory system are not moved: they live only in the process that
wrote them.

Example::

    plan = plan_state_reset([config], SystemRegistry(config), suffix=aside_suffix("reset"))
    for move in plan.moves:
        print(move.what, move.source, "->", move.target)
    plan.run()
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.recovery._atomic import fsync_dir
from weir.recovery.checkpoint import FileCheckpointManager
from weir.recovery.errors import RecoveryError
from weir.recovery.job_lock import is_lock_file
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.locking import DirectoryLock
from weir.stores.spec import StoreSpec, stores_in

from weir.engine.config.job import JobConfig, StoreBase
from weir.engine.container.checkpoints import CheckpointKind, CheckpointSettings
from weir.engine.model import SystemStream

__all__ = ["ResetMove", "ResetPlan", "plan_state_reset"]

log = logging.getLogger("weir.reset")


@dataclass(frozen=True)
class ResetMove:
    """One thing a reset moves aside: ``what`` (for people), from ``source`` to ``target``."""

    what: str
    kind: str
    """``checkpoints``, ``changelog`` or ``store``."""
    source: str
    target: str
    run: Callable[[], Any] = field(repr=False, compare=False)


@dataclass
class ResetPlan:
    """Every move of a reset, checked; :meth:`run` carries them out in order."""

    job: str
    suffix: str
    moves: list[ResetMove]

    def run(self) -> list[ResetMove]:
        """Move everything aside (checkpoints first); returns the moves done."""
        done = []
        for move in self.moves:
            move.run()
            done.append(move)
            log.warning("reset of job '%s': moved %s aside: %s -> %s", self.job, move.what,
                        move.source, move.target)
        return done

    def of_kind(self, kind: str) -> list[ResetMove]:
        return [m for m in self.moves if m.kind == kind]

    def summary(self) -> str:
        counts = {k: len(self.of_kind(k)) for k in ("checkpoints", "changelog", "store")}
        return (f"job '{self.job}' state reset: moved aside {counts['checkpoints']} checkpoint "
                f"location(s), {counts['changelog']} changelog stream(s), {counts['store']} "
                f"local store director(y/ies) with suffix .{self.suffix}; nothing deleted")


def _specs(config: Config, job: JobConfig) -> list[StoreSpec]:
    specs = []
    for name in stores_in(config):
        try:
            specs.append(StoreSpec.from_config(config, name,
                                               changelog_system=job.changelog_system))
        except ConfigError:
            continue  # an old config's store that no longer parses names nothing we trust
    return specs


def _job_configs(configs: Iterable[Config]) -> list[tuple[Config, JobConfig]]:
    out = []
    for config in configs:
        if not len(config):
            continue
        try:
            out.append((config, JobConfig.from_config(config)))
        except ConfigError:
            continue
    return out


def plan_state_reset(configs: Sequence[Config], registry: Any, *, suffix: str) -> ResetPlan:
    """Plan the reset of the state named by ``configs`` (the job's config; the coordinator
    passes the previous and the new one). Raises a :class:`RecoveryError` (nothing moved)
    when something cannot be moved aside."""
    jobs = _job_configs(configs)
    if not jobs:
        raise RecoveryError("cannot reset: no parseable job config was given")
    name = jobs[-1][1].name
    moves: list[ResetMove] = []
    seen: set[str] = set()

    def add(move: ResetMove) -> None:
        if move.source not in seen:
            seen.add(move.source)
            moves.append(move)

    # 1. checkpoints (first: see the module docstring)
    for config, job in jobs:
        settings = CheckpointSettings.from_config(config, job)
        if settings.kind is CheckpointKind.STREAM:
            move = _stream_move(registry, settings.system_stream, suffix,
                                "checkpoint stream", "checkpoints")
            if move is not None:
                add(move)
        directory = job.checkpoint_dir
        if directory.is_dir() and any(not is_lock_file(p.name) and p.is_file()
                                      for p in directory.iterdir()):
            target = directory.with_name(f"{directory.name}.{suffix}")
            _free(target)
            manager = FileCheckpointManager(directory)
            add(ResetMove("checkpoints", "checkpoints", str(directory) + os.sep,
                          str(target), lambda m=manager, t=target: m.move_aside(t)))
    # 2. changelogs
    for config, job in jobs:
        for spec in _specs(config, job):
            if spec.changelog is not None:
                move = _stream_move(registry, SystemStream(*spec.changelog), suffix,
                                    f"changelog of store '{spec.name}'", "changelog")
                if move is not None:
                    add(move)
    # 3. local store directories (every base of every config, logged or not)
    for config, job in jobs:
        for spec in _specs(config, job):
            if not spec.persistent:
                continue
            for base in (StoreBase.LOGGED, StoreBase.NON_LOGGED):
                directory = job.base_dir(base) / spec.name
                if str(directory) in seen or not directory.is_dir():
                    continue
                for task_dir in sorted(p for p in directory.iterdir() if p.is_dir()):
                    DirectoryLock.acquire(task_dir, store=spec.name).release()  # no live opener
                target = directory.with_name(f"{directory.name}.{suffix}")
                _free(target)
                add(ResetMove(f"local store '{spec.name}'", "store", str(directory),
                              str(target), lambda d=directory, t=target: _rename(d, t)))
    return ResetPlan(name, suffix, moves)


def _stream_move(registry: Any, ss: SystemStream | None, suffix: str, what: str,
                 kind: str) -> ResetMove | None:
    from weir.engine.systems.memory import MemorySystemAdmin

    if ss is None:
        return None
    admin = registry.admin(ss.system)
    if not admin.stream_exists(ss.stream):
        return None
    if isinstance(admin, MemorySystemAdmin):
        return None  # in process memory only: gone with the process that wrote it
    rename = getattr(admin, "rename_stream", None)
    if not callable(rename):
        raise RecoveryError(
            f"cannot reset: the {what} '{ss.system}.{ss.stream}' is on a system that cannot "
            f"move streams aside; nothing was changed. Move or delete that stream with the "
            f"system's own tools, then reset again")
    new_name = f"{ss.stream}.{suffix}"
    if admin.stream_exists(new_name):
        raise RecoveryError(f"cannot move the {what} '{ss.system}.{ss.stream}' aside: "
                            f"'{new_name}' exists; nothing was changed, try again")
    path = getattr(admin, "stream_path", lambda s: f"{ss.system}.{s}")
    return ResetMove(what, kind, str(path(ss.stream)), str(path(new_name)),
                     lambda r=rename, s=ss.stream, n=new_name: r(s, n))


def _free(target: Path) -> None:
    if target.exists():
        raise RecoveryError(f"cannot move aside to {target}: it exists; nothing was changed, "
                            f"try again in a second")


def _rename(source: Path, target: Path) -> None:
    os.rename(source, target)
    fsync_dir(target.parent)
