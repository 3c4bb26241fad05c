"""Starting a job's state over without deleting anything: :func:`plan_state_reset`.

One module for every way a job's state is reset: ``weir checkpoint reset`` and the job
coordinator's ``weir run --reset-state`` both call it. A reset moves aside, together:

1. the checkpoints: the files of ``task.checkpoint.path`` (into a sibling directory; the lock
   files stay) or the checkpoint stream (``task.checkpoint.system``, renamed);
2. each logged store's changelog stream (renamed);
3. each persistent store's local directory (``<base>/<store>``, renamed);
4. with exactly-once, the producer state of the job's tasks on each file log (their id
   mappings, states, owner locks and epoch claims under ``<root>/.transactions``, into
   ``<root>/.transactions.reset-<UTC time>``): the next run's producers start afresh. Left in
   place, a task's producer wrote the commit markers of its last transaction again into the
   new, empty changelog at its start, and that start refused the job for state without a
   checkpoint (issue 23, point 9). A transaction the job left unfinished (a run killed before
   its commit markers) is completed first, while its checkpoint is still in place, as the
   job's next start would: rolled forward when the checkpoint names it, aborted otherwise, so
   that no reader of the job's outputs is held back by it;

each renamed to ``<name>.reset-<UTC time>``, never deleted (remove the copies yourself once the
new state is trusted). The input offsets and the state always move together: a reset that moved
the checkpoints but not a changelog would restore old state under new input positions and count
messages twice. So everything is checked before anything moves (a store directory some process
holds, a live producer, a changelog on a system that cannot rename streams, a target name that
exists: nothing moves), and the checkpoints move first (after completing unfinished
transactions, which needs them): a reset interrupted halfway leaves a job without checkpoints
but with state, which the next start refuses (``container/safety.py``) instead of
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

from weir.stores.filesafety import fsync_dir
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
    """``transaction`` (an unfinished transaction completed, not moved), ``checkpoints``,
    ``changelog``, ``store`` or ``producers``."""
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
            if move.kind == "transaction":
                continue  # completing it logged what became of it
            log.warning("reset of job '%s': moved %s aside: %s -> %s", self.job, move.what,
                        move.source, move.target)
        return done

    def of_kind(self, kind: str) -> list[ResetMove]:
        return [m for m in self.moves if m.kind == kind]

    def summary(self) -> str:
        counts = {k: len(self.of_kind(k))
                  for k in ("checkpoints", "changelog", "store", "producers", "transaction")}
        completed = (f"completed {counts['transaction']} unfinished transaction(s), "
                     if counts["transaction"] else "")
        return (f"job '{self.job}' state reset: {completed}moved aside {counts['checkpoints']} "
                f"checkpoint location(s), {counts['changelog']} changelog stream(s), "
                f"{counts['store']} local store director(y/ies), {counts['producers']} "
                f"producer state location(s) with suffix .{self.suffix}; nothing deleted")


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

    producers = _producers(jobs, registry, suffix)
    # 0. unfinished transactions, completed while their checkpoints are there to decide them
    for producer in producers:
        moves.extend(producer.completions())
    # 1. checkpoints (first of the moves: see the module docstring)
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
    # 4. the producer state of the job's transactional producers (exactly-once)
    for producer in producers:
        add(producer.move())
    return ResetPlan(name, suffix, moves)


@dataclass
class _JobProducers:
    """The transactional producers of a job on one file log (one ``root``): ``found`` holds
    ``(transactional id, producer id, state)``, checked: none is live."""

    settings: Any
    root: str
    target: Path
    found: list[tuple[str, int, Any]]

    def completions(self) -> list[ResetMove]:
        from weir.engine.systems.filelog.producer_state import producer_state_path
        out = []
        for tid, pid, state in self.found:
            txn = state.transaction if state is not None else None
            if txn is None or not txn.open:
                continue
            out.append(ResetMove(
                f"unfinished transaction {txn.sequence} of '{tid}' ({txn.state.value})",
                "transaction", producer_state_path(self.root, pid),
                "completed: rolled forward when its checkpoint names it, aborted otherwise",
                lambda s=self.settings, t=tid: _complete(s, t)))
        return out

    def move(self) -> ResetMove:
        found = list(self.found)

        def run() -> None:
            from weir.engine.systems.filelog.producer_state import move_producer_aside
            for tid, pid, _ in found:
                move_producer_aside(self.root, tid, pid, str(self.target))

        source = Path(self.root) / ".transactions"
        return ResetMove(f"producer state of {len(found)} exactly-once task(s)", "producers",
                         f"{source}{os.sep}", str(self.target), run)


def _producers(jobs: list[tuple[Config, JobConfig]], registry: Any,
               suffix: str) -> list[_JobProducers]:
    """The job's transactional producers on each file log it uses, checked: a producer whose
    owner lock a live process holds, or whose state is damaged, refuses the reset."""
    from weir.engine.container.exactly_once import transactional_id, transactional_systems
    from weir.engine.errors import ProducerStateCorruptError
    from weir.engine.systems.filelog.producer_state import (TRANSACTIONS_DIR,
                                                            load_producer_state,
                                                            producer_owner, producers_of)
    prefixes = sorted({transactional_id(job, "") for _, job in jobs})
    out: list[_JobProducers] = []
    roots: set[str] = set()
    for system in transactional_systems(registry, _job_systems(jobs, registry)):
        settings = registry.admin(system).settings
        root = str(settings.root)
        if root in roots:
            continue
        roots.add(root)
        found = []
        for prefix in prefixes:
            try:
                for tid, pid in producers_of(root, prefix):
                    owner = producer_owner(root, pid)
                    if owner:
                        raise RecoveryError(
                            f"cannot reset: the producer of '{tid}' on system '{system}' is "
                            f"live (pid {owner.get('pid', '?')} on {owner.get('host', '?')}, "
                            f"{owner.get('role', '?')}); nothing was changed. Stop that "
                            f"process (a container of the job, or a tool), then reset again")
                    found.append((tid, pid, load_producer_state(root, pid)))
            except ProducerStateCorruptError as exc:
                raise RecoveryError(
                    f"cannot reset: {exc}. A reset completes the job's unfinished "
                    f"transactions from their producer state before moving it aside; nothing "
                    f"was changed") from None
        if found:
            target = Path(root) / f"{TRANSACTIONS_DIR}.{suffix}"
            _free(target)
            out.append(_JobProducers(settings, root, target, found))
    return out


def _job_systems(jobs: list[tuple[Config, JobConfig]], registry: Any) -> set[str]:
    """The systems the job's containers make producers for (as ``JobSettings`` does):
    configured ones, the inputs', the changelogs' and ``job.default.system``."""
    from weir.engine.config.streams import JOB_DEFAULT_SYSTEM, all_input_streams
    systems = set(registry.systems())
    for config, job in jobs:
        systems.update(ss.system for ss in all_input_streams(config))
        systems.update(spec.changelog[0] for spec in _specs(config, job) if spec.logged)
        default = JOB_DEFAULT_SYSTEM.get(config)
        if default:
            systems.add(default)
    return systems


def _complete(settings: Any, tid: str) -> None:
    """Finish the unfinished transaction of ``tid`` as the job's next start would (its
    producer, initialised and stopped: rolled forward when the checkpoint it names decides
    it, aborted otherwise)."""
    from weir.engine.systems.filelog.transactions import TransactionalProducer
    producer = TransactionalProducer(settings, tid)
    result = producer.init_transactions()
    producer.stop()
    if result.resolved is not None:
        log.warning("reset: %s transaction %d of '%s' (its run ended before its commit "
                    "markers)", "rolled forward" if result.resolved == "committed" else
                    "aborted", result.previous.sequence, tid)


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
    if not admin.renames_streams:
        raise RecoveryError(
            f"cannot reset: the {what} '{ss.system}.{ss.stream}' is on a system that cannot "
            f"move streams aside; nothing was changed. Move or delete that stream with the "
            f"system's own tools, then reset again")
    new_name = f"{ss.stream}.{suffix}"
    if admin.stream_exists(new_name):
        raise RecoveryError(f"cannot move the {what} '{ss.system}.{ss.stream}' aside: "
                            f"'{new_name}' exists; nothing was changed, try again")

    def where(stream: str) -> str:
        path = admin.stream_path(stream)
        return f"{ss.system}.{stream}" if path is None else str(path)

    return ResetMove(what, kind, where(ss.stream), where(new_name),
                     lambda r=admin.rename_stream, s=ss.stream, n=new_name: r(s, n))


def _free(target: Path) -> None:
    if target.exists():
        raise RecoveryError(f"cannot move aside to {target}: it exists; nothing was changed, "
                            f"try again in a second")


def _rename(source: Path, target: Path) -> None:
    os.rename(source, target)
    fsync_dir(target.parent)
