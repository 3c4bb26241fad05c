"""``weir checkpoint``: look at a job's checkpoints and move them, safely.

Every command takes the job's config file (``task.checkpoint.path``, the store base
directories and the changelog streams come from it; relative paths are resolved against the
working directory, as ``weir run`` does). Commands that change anything take the job lock
first (:class:`~weir.recovery.job_lock.JobLock`) and refuse while the job runs. Nothing is
ever deleted: what is replaced is renamed aside with a UTC timestamp suffix.

* ``weir checkpoint show job.properties [--json]``: per task, its input offsets, its stores'
  changelog offsets, when it was written, and whether a previous checkpoint (``.prev``) is
  there. Reads only (no lock).
* ``weir checkpoint use-previous job.properties [--task T]``: make each task's previous
  checkpoint its last one (the way out of a damaged checkpoint file). The input is read
  again from the older position and the stores are restored to the older changelog offset:
  nothing is counted twice.
* ``weir checkpoint reset job.properties --yes``: start the job's state over. Moves the
  checkpoints, the local store directories *and* the changelog streams aside together (never
  one without the others, which would count messages twice); the next run starts its inputs
  from ``samza.offset.default`` with empty stores.

Examples::

    weir checkpoint show job.properties
    weir checkpoint use-previous job.properties --task 'Partition 0'
    weir checkpoint reset job.properties --yes

Each action is one function below (``_show``, ``_use_previous``, ``_reset``) over a
:class:`_Job` (the parsed config, the checkpoint manager, the task names on disk), so more
actions (setting offsets, stream checkpoints) slot in beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from rich.console import Console
from rich.table import Table

from weir.recovery.checkpoint import (Checkpoint, CheckpointFile, FileCheckpointManager,
                                      aside_suffix)
from weir.recovery.errors import CheckpointCorruptError, RecoveryError
from weir.recovery._atomic import fsync_dir
from weir.recovery.job_lock import JobLock, is_lock_file
from weir.stores.config import Config

__all__ = ["register"]

_PREV = ".prev"


# -- wiring ---------------------------------------------------------------------------------

def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "checkpoint", help="show a job's checkpoints, go back to the previous one, or reset",
        description="Show a job's checkpoints and change them safely: the input position and "
                    "the state always move together, and nothing is deleted (what is "
                    "replaced is renamed aside with a timestamp). Commands that change "
                    "anything refuse while the job runs.")
    actions = parser.add_subparsers(dest="checkpoint_command", metavar="ACTION", required=True)

    job = argparse.ArgumentParser(add_help=False)
    job.add_argument("path", help="job config (.properties, .yaml or .yml)")
    job.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="override a config key (repeatable)")

    p = actions.add_parser("show", parents=[job], help="each task's checkpoint")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_show)

    p = actions.add_parser(
        "use-previous", parents=[job],
        help="make each task's previous checkpoint (.prev) its last one",
        description="Make the previous checkpoint of a task (or of every task) its last one. "
                    "The input is read again from the older position and the stores are "
                    "restored to the older changelog offset, so nothing is counted twice. The "
                    "replaced file is kept as <file>.replaced-<time>.")
    p.add_argument("--task", action="append", metavar="TASK",
                   help="only this task (repeatable; default: every task with a checkpoint)")
    p.set_defaults(func=_use_previous)

    p = actions.add_parser(
        "reset", parents=[job], help="start the job's state over (moves everything aside)",
        description="Start the job's state over: move the checkpoints, the local store "
                    "directories and the changelog streams aside (renamed with a timestamp "
                    "suffix, never deleted). The next run reads its inputs from "
                    "samza.offset.default with empty stores.")
    p.add_argument("--yes", action="store_true", help="really do it (without: show the plan)")
    p.set_defaults(func=_reset)


# -- the job --------------------------------------------------------------------------------

@dataclass
class _Job:
    """What every action needs: the config, its job settings and the checkpoint files."""

    path: str
    config: Config
    job: Any
    checkpoints: FileCheckpointManager

    @classmethod
    def load(cls, args: argparse.Namespace) -> "_Job":
        from weir.engine.cli.run import add_config_dir_to_path
        from weir.engine.config.job import JobConfig, load_config

        config = load_config(args.path, args.overrides)
        add_config_dir_to_path(args.path)
        job = JobConfig.from_config(config)
        return cls(args.path, config, job,
                   FileCheckpointManager(job.checkpoint_dir, job_config=args.path))

    @property
    def directory(self) -> Path:
        return self.checkpoints.directory

    def task_names(self) -> list[str]:
        """Tasks with a checkpoint file or a previous one here (from the file names, so a
        damaged file still counts)."""
        names = set()
        if self.directory.is_dir():
            for entry in self.directory.iterdir():
                name = entry.name
                if name.endswith(".json"):
                    names.add(unquote(name[:-len(".json")]))
                elif name.endswith(".json" + _PREV):
                    names.add(unquote(name[:-len(".json" + _PREV)]))
        return sorted(names)

    @contextmanager
    def locked(self, action: str) -> Iterator[JobLock]:
        with JobLock.acquire(self.directory, job=self.job.name,
                             role=f"weir checkpoint {action}") as lock:
            yield lock


# -- show -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Entry:
    """One task's checkpoint file and its previous one, as read (or why they could not be)."""

    task: str
    path: Path
    current: CheckpointFile | None
    error: str | None
    previous: CheckpointFile | None
    previous_error: str | None


def _read_entry(job: _Job, task: str) -> _Entry:
    path = job.checkpoints.path_for(task)
    current, error = _read(job.checkpoints, path)
    previous, previous_error = _read(job.checkpoints, job.checkpoints.previous_path_for(task))
    return _Entry(task, path, current, error, previous, previous_error)


def _read(checkpoints: FileCheckpointManager, path: Path
          ) -> tuple[CheckpointFile | None, str | None]:
    try:
        return checkpoints.read_file(path), None
    except RecoveryError as exc:
        return None, str(exc).split(";")[0]


def _show(args: argparse.Namespace) -> int:
    job = _Job.load(args)
    entries = [_read_entry(job, task) for task in job.task_names()]
    if args.json:
        print(json.dumps({"job": job.job.name, "checkpoint_dir": str(job.directory),
                          "tasks": [_entry_json(e) for e in entries]}, indent=2))
        return 0
    console = _console()
    if not entries:
        console.print(f"job '{job.job.name}' has no checkpoints in {job.directory}")
        return 0
    table = Table(title=f"checkpoints of job '{job.job.name}' ({job.directory})")
    for column in ("task", "input offsets", "changelog offsets", "written", "previous"):
        table.add_column(column)
    now_ms = _now_ms()
    for e in entries:
        if e.current is None:
            state = "[red]damaged: " + e.error + "[/red]" if e.error else "[yellow]missing[/yellow]"
            table.add_row(e.task, state, "", "", _previous_cell(e, now_ms))
            continue
        cp = e.current.checkpoint
        table.add_row(e.task, _inputs_cell(cp), _changelogs_cell(cp),
                      _when(e.current.written_at_ms, now_ms), _previous_cell(e, now_ms))
    console.print(table)
    damaged = [e.task for e in entries if e.error]
    if damaged:
        console.print(f"{len(damaged)} damaged checkpoint(s); `weir checkpoint use-previous "
                      f"{job.path} --task '{damaged[0]}'` goes back to the previous one")
    return 0


def _console() -> Console:
    """Rich output on stdout; wide enough not to wrap paths when it is not a terminal."""
    interactive = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if interactive else 160, soft_wrap=False,
                   highlight=False)


def _inputs_cell(cp: Checkpoint) -> str:
    lines = []
    for ssp, offset in sorted(cp.input_offsets.items()):
        identity = cp.input_identities.get(ssp)
        tag = f"  [dim]id {identity[:8]}[/dim]" if identity else ""
        lines.append(f"{ssp[0]}.{ssp[1]}#{ssp[2]} = {offset}{tag}")
    return "\n".join(lines) or "-"


def _changelogs_cell(cp: Checkpoint) -> str:
    lines = []
    for store, offset in sorted(cp.changelog_offsets.items()):
        identity = cp.changelog_identities.get(store)
        tag = f"  [dim]id {identity[:8]}[/dim]" if identity else ""
        lines.append(f"{store} = {offset if offset >= 0 else 'empty'}{tag}")
    return "\n".join(lines) or "-"


def _previous_cell(e: _Entry, now_ms: int) -> str:
    if e.previous is not None:
        offsets = ", ".join(f"{s[1]}#{s[2]}={o}"
                            for s, o in sorted(e.previous.checkpoint.input_offsets.items()))
        return f"{_when(e.previous.written_at_ms, now_ms)}\n{offsets}"
    return "[red]damaged[/red]" if e.previous_error else "none"


def _entry_json(e: _Entry) -> dict[str, Any]:
    def file_json(f: CheckpointFile | None, error: str | None) -> dict[str, Any] | None:
        if f is None and error is None:
            return None
        if f is None:
            return {"error": error}
        cp = f.checkpoint
        return {
            "format": f.format,
            "written_at_ms": f.written_at_ms,
            "input_offsets": [
                {"system": s, "stream": t, "partition": p, "offset": o,
                 "identity": cp.input_identities.get((s, t, p))}
                for (s, t, p), o in sorted(cp.input_offsets.items())],
            "changelog_offsets": dict(sorted(cp.changelog_offsets.items())),
            "changelog_identities": dict(sorted(cp.changelog_identities.items())),
            "extras": dict(cp.extras),
        }
    return {"task": e.task, "file": str(e.path), "checkpoint": file_json(e.current, e.error),
            "previous": file_json(e.previous, e.previous_error)}


def _now_ms() -> int:
    return int(datetime.now(timezone.utc).timestamp() * 1000)


def _when(ms: int, now_ms: int) -> str:
    if ms <= 0:
        return "unknown"
    stamp = datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({_age((now_ms - ms) / 1000)} ago)"


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


# -- use-previous ---------------------------------------------------------------------------

def _use_previous(args: argparse.Namespace) -> int:
    job = _Job.load(args)
    with job.locked("use-previous"):
        tasks = args.task or job.task_names()
        if not tasks:
            raise RecoveryError(f"job '{job.job.name}' has no checkpoints in {job.directory}; "
                                f"nothing to go back to")
        # Check every task's previous checkpoint before changing any file.
        plans = []
        for task in tasks:
            entry = _read_entry(job, task)
            if entry.previous is None:
                why = entry.previous_error or f"{job.checkpoints.previous_path_for(task)} is missing"
                raise CheckpointCorruptError(
                    f"task '{task}' has no usable previous checkpoint ({why}); nothing was "
                    f"changed. Put the checkpoint directory back from a backup, or start the "
                    f"job's state over with `weir checkpoint reset {job.path} --yes`")
            plans.append(entry)
        suffix = aside_suffix("replaced")
        table = Table(title=f"job '{job.job.name}': previous checkpoints in use")
        for column in ("task", "was", "now", "replaced file kept as"):
            table.add_column(column)
        for entry in plans:
            kept = job.checkpoints.use_previous(entry.task, suffix=suffix)
            was = (_inputs_cell(entry.current.checkpoint) if entry.current is not None
                   else ("damaged" if entry.error else "missing"))
            table.add_row(entry.task, was, _inputs_cell(entry.previous.checkpoint),
                          str(kept) if kept is not None else "-")
    console = _console()
    console.print(table)
    console.print(f"{len(plans)} task(s) now resume from their previous checkpoint; the next "
                  f"`weir run {job.path}` reads their input again from there and restores "
                  f"their stores to match")
    return 0


# -- reset ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Move:
    what: str
    source: str
    target: str
    run: Any  # () -> None


def _reset(args: argparse.Namespace) -> int:
    job = _Job.load(args)
    console = _console()
    with job.locked("reset"):
        suffix = aside_suffix("reset")
        moves = _plan_reset(job, suffix)
        table = Table(title=f"job '{job.job.name}': reset moves")
        for column in ("what", "from", "to"):
            table.add_column(column)
        for move in moves:
            table.add_row(move.what, move.source, move.target)
        if not args.yes:
            console.print(table)
            console.print("nothing was changed; run again with --yes to move these aside")
            return 2
        for move in moves:
            move.run()
    console.print(table)
    console.print(f"job '{job.job.name}' starts over at its next run: inputs from "
                  f"samza.offset.default, empty stores; {len(moves)} item(s) moved aside, "
                  f"nothing deleted")
    return 0


def _plan_reset(job: _Job, suffix: str) -> list[_Move]:
    """Everything ``reset`` moves, checked before anything moves: checkpoints first (so a
    reset stopped halfway leaves a state the next run refuses, never one it double-counts),
    then changelog streams, then local store directories."""
    from weir.engine.container.container import store_specs
    from weir.engine.config.job import StoreBase
    from weir.engine.systems.memory import MemorySystemAdmin
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.locking import DirectoryLock

    moves: list[_Move] = []
    checkpoints = job.checkpoints
    if checkpoints.directory.is_dir() and any(
            not is_lock_file(p.name) for p in checkpoints.directory.iterdir()):
        target = checkpoints.directory.with_name(f"{checkpoints.directory.name}.{suffix}")
        _free(target)
        moves.append(_Move("checkpoints", str(checkpoints.directory) + os.sep, str(target),
                           lambda t=target: checkpoints.move_aside(t)))
    specs = store_specs(job.config, job.job)
    registry = SystemRegistry(job.config)
    for spec in specs:
        if not spec.logged:
            continue
        system, stream = spec.changelog
        admin = registry.admin(system)
        if not admin.stream_exists(stream):
            continue
        if isinstance(admin, MemorySystemAdmin):
            continue  # in process memory only: gone with the process that wrote it
        rename = getattr(admin, "rename_stream", None)
        if not callable(rename):
            raise RecoveryError(
                f"cannot reset job '{job.job.name}': the changelog '{system}.{stream}' of store "
                f"'{spec.name}' is on a system that cannot move streams aside; nothing was "
                f"changed. Move or delete that stream with the system's own tools, then move "
                f"the checkpoints ({checkpoints.directory}) and the store directories aside")
        new_name = f"{stream}.{suffix}"
        if admin.stream_exists(new_name):
            raise RecoveryError(f"cannot move changelog '{system}.{stream}' aside: "
                                f"'{new_name}' exists; nothing was changed, try again")
        path = getattr(admin, "stream_path", lambda s: f"{system}.{s}")
        moves.append(_Move(f"changelog of store '{spec.name}'", str(path(stream)),
                           str(path(new_name)),
                           lambda r=rename, s=stream, n=new_name: r(s, n)))
    seen: set[Path] = set()
    for spec in specs:
        if not spec.persistent:
            continue
        base = job.job.base_dir(StoreBase.LOGGED if spec.logged else StoreBase.NON_LOGGED)
        directory = base / spec.name
        if directory in seen or not directory.exists():
            continue
        seen.add(directory)
        for task_dir in sorted(p for p in directory.iterdir() if p.is_dir()):
            DirectoryLock.acquire(task_dir, store=spec.name).release()  # no live opener
        target = directory.with_name(f"{directory.name}.{suffix}")
        _free(target)
        moves.append(_Move(f"local store '{spec.name}'", str(directory), str(target),
                           lambda d=directory, t=target: _rename(d, t)))
    return moves


def _free(target: Path) -> None:
    if target.exists():
        raise RecoveryError(f"cannot move aside to {target}: it exists; nothing was changed, "
                            f"try again in a second")


def _rename(source: Path, target: Path) -> None:
    os.rename(source, target)
    fsync_dir(target.parent)
