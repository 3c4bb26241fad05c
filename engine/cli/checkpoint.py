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
* ``weir checkpoint set job.properties --offset filelog.clicks#0=41``: set the checkpointed
  (last processed) offset of an input partition, as Samza's checkpoint tool does; the next run
  reads from 42. The task's stores stay as they are, so moving an input *backwards* in a task
  with stores would apply messages to state that already holds them: refused unless
  ``--allow-reprocess``. The replaced checkpoint becomes the previous one (``use-previous``
  undoes the change).
* ``weir checkpoint reset job.properties --yes``: start the job's state over. Moves the
  checkpoints, the local store directories *and* the changelog streams aside together (never
  one without the others, which would count messages twice), with exactly-once the job's
  producer state too (its unfinished transactions completed first), through the reset module the
  coordinator's ``--reset-state`` uses too (:mod:`weir.engine.container.state_reset`); the
  next run starts its inputs from ``samza.offset.default`` with empty stores.

The commands work the same on checkpoint files (``task.checkpoint.path``) and on a checkpoint
stream (``task.checkpoint.system``).

Examples::

    weir checkpoint show job.properties
    weir checkpoint use-previous job.properties --task 'Partition 0'
    weir checkpoint set job.properties --offset filelog.clicks#0=41
    weir checkpoint reset job.properties --yes
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime, timezone
from typing import Any

from rich.table import Table

from weir.recovery.checkpoint import Checkpoint, CheckpointEntry, CheckpointFile, aside_suffix
from weir.recovery.errors import CheckpointCorruptError, RecoveryError

from weir.engine.cli._job import JobTools, console as _console, job_arguments

__all__ = ["register", "entry_json"]


# -- wiring ---------------------------------------------------------------------------------

def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "checkpoint", help="show, set, go back to the previous, or reset a job's checkpoints",
        description="Show a job's checkpoints and change them safely: the input position and "
                    "the state always move together, and nothing is deleted (what is "
                    "replaced is renamed aside with a timestamp). Commands that change "
                    "anything refuse while the job runs.")
    actions = parser.add_subparsers(dest="checkpoint_command", metavar="ACTION", required=True)
    job = job_arguments()

    p = actions.add_parser("show", parents=[job], help="each task's checkpoint")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_show)

    p = actions.add_parser(
        "use-previous", parents=[job],
        help="make each task's previous checkpoint its last one",
        description="Make the previous checkpoint of a task (or of every task) its last one. "
                    "The input is read again from the older position and the stores are "
                    "restored to the older changelog offset, so nothing is counted twice. The "
                    "replaced checkpoint is kept (<file>.replaced-<time>, or a "
                    "checkpoint-replaced record of the checkpoint stream).")
    p.add_argument("--task", action="append", metavar="TASK",
                   help="only this task (repeatable; default: every task with a checkpoint)")
    p.set_defaults(func=_use_previous)

    p = actions.add_parser(
        "set", parents=[job], help="set the checkpointed offset of an input partition",
        description="Set the checkpointed (last processed) offset of input partitions, as "
                    "Samza's checkpoint tool does: the next run reads from the offset after "
                    "it. The task's stores stay as they are: moving an input backwards in a "
                    "task with stores is refused unless --allow-reprocess (its messages would "
                    "be applied again to state that holds them). The replaced checkpoint "
                    "becomes the previous one: `weir checkpoint use-previous` undoes it.")
    p.add_argument("--offset", action="append", required=True, metavar="SYSTEM.STREAM#P=N",
                   help="e.g. filelog.clicks#0=41 (repeatable)")
    p.add_argument("--allow-reprocess", action="store_true",
                   help="allow moving an offset backwards in a task that has stores")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_set)

    p = actions.add_parser(
        "reset", parents=[job], help="start the job's state over (moves everything aside)",
        description="Start the job's state over: move the checkpoints, the local store "
                    "directories and the changelog streams aside (renamed with a timestamp "
                    "suffix, never deleted). The next run reads its inputs from "
                    "samza.offset.default with empty stores.")
    p.add_argument("--yes", action="store_true", help="really do it (without: show the plan)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_reset)


def _entries(tools: JobTools) -> list[CheckpointEntry]:
    manager = tools.checkpoints
    return [manager.read_entry(task) for task in manager.task_names()]


# -- show -----------------------------------------------------------------------------------

def _show(args: argparse.Namespace) -> int:
    tools = JobTools.load(args)
    try:
        entries = _entries(tools)
    finally:
        tools.close()
    where = tools.checkpoint_location()
    if args.json:
        print(json.dumps({"job": tools.job.name, "checkpoint_dir": str(tools.job.checkpoint_dir),
                          "checkpoints": where,
                          "tasks": [entry_json(e) for e in entries]}, indent=2))
        return 0
    console = _console()
    if not entries:
        console.print(f"job '{tools.job.name}' has no checkpoints in {where}")
        return 0
    table = Table(title=f"checkpoints of job '{tools.job.name}' ({where})")
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
                      f"{tools.path} --task '{damaged[0]}'` goes back to the previous one")
    return 0


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


def _previous_cell(e: CheckpointEntry, now_ms: int) -> str:
    if e.previous is not None:
        offsets = ", ".join(f"{s[1]}#{s[2]}={o}"
                            for s, o in sorted(e.previous.checkpoint.input_offsets.items()))
        return f"{_when(e.previous.written_at_ms, now_ms)}\n{offsets}"
    return "[red]damaged[/red]" if e.previous_error else "none"


def checkpoint_json(f: CheckpointFile | None, error: str | None = None) -> dict[str, Any] | None:
    """A checkpoint as JSON (``--json`` output)."""
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


def entry_json(e: CheckpointEntry) -> dict[str, Any]:
    return {"task": e.task, "file": e.location, "location": e.location,
            "checkpoint": checkpoint_json(e.current, e.error),
            "previous": checkpoint_json(e.previous, e.previous_error)}


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
    tools = JobTools.load(args)
    where = tools.checkpoint_location()
    try:
        with tools.locked("weir checkpoint use-previous"):
            manager = tools.checkpoints
            tasks = args.task or manager.task_names()
            if not tasks:
                raise RecoveryError(f"job '{tools.job.name}' has no checkpoints in {where}; "
                                    f"nothing to go back to")
            # Check every task's previous checkpoint before changing any.
            plans = []
            for task in tasks:
                entry = manager.read_entry(task)
                if entry.previous is None:
                    why = entry.previous_error or "there is none"
                    raise CheckpointCorruptError(
                        f"task '{task}' has no usable previous checkpoint in {where} ({why}); "
                        f"nothing was changed. Put the checkpoints back from a backup, or "
                        f"start the job's state over with `weir checkpoint reset {tools.path} "
                        f"--yes`")
                plans.append(entry)
            suffix = aside_suffix("replaced")
            table = Table(title=f"job '{tools.job.name}': previous checkpoints in use")
            for column in ("task", "was", "now", "replaced checkpoint kept as"):
                table.add_column(column)
            for entry in plans:
                kept = manager.use_previous(entry.task, suffix=suffix)
                was = (_inputs_cell(entry.current.checkpoint) if entry.current is not None
                       else ("damaged" if entry.error else "missing"))
                table.add_row(entry.task, was, _inputs_cell(entry.previous.checkpoint),
                              str(kept) if kept is not None else "-")
    finally:
        tools.close()
    console = _console()
    console.print(table)
    console.print(f"{len(plans)} task(s) now resume from their previous checkpoint; the next "
                  f"`weir run {tools.path}` reads their input again from there and restores "
                  f"their stores to match")
    return 0


# -- set ------------------------------------------------------------------------------------

_OFFSET = re.compile(r"^(?P<system>[^.#=]+)\.(?P<stream>[^#=]+)#(?P<partition>\d+)="
                     r"(?P<offset>-?\d+)$")


def _parse_offsets(values: list[str]) -> dict[tuple[str, str, int], int]:
    out = {}
    for value in values:
        match = _OFFSET.match(value.strip())
        if match is None:
            raise RecoveryError(f"--offset {value!r} is not SYSTEM.STREAM#PARTITION=OFFSET "
                                f"(e.g. filelog.clicks#0=41); nothing was changed")
        ssp = (match["system"], match["stream"], int(match["partition"]))
        out[ssp] = int(match["offset"])
    return out


def _set(args: argparse.Namespace) -> int:
    from weir.engine.model import SystemStreamPartition
    from weir.engine.systems.changelog import SystemChangelogSource

    tools = JobTools.load(args)
    wanted = _parse_offsets(args.offset)
    owners = {tuple(ssp): name for name, task in tools.tasks().items() for ssp in task.ssps}
    rows = []
    try:
        with tools.locked("weir checkpoint set"):
            manager = tools.checkpoints
            by_task: dict[str, dict[tuple[str, str, int], int]] = {}
            for ssp, offset in wanted.items():
                name = f"{ssp[0]}.{ssp[1]}#{ssp[2]}"
                task = owners.get(ssp)
                if task is None:
                    raise RecoveryError(f"{name} is not an input partition of job "
                                        f"'{tools.job.name}' (task.inputs); nothing was changed")
                source = SystemChangelogSource(tools.registry, SystemStreamPartition(*ssp))
                newest = source.newest_offset()
                if offset < 0 or offset > newest:
                    raise RecoveryError(
                        f"offset {offset} of {name} is outside the partition (it holds offsets "
                        f"{source.oldest_offset()}..{newest}; the checkpointed offset is the "
                        f"last processed one); nothing was changed")
                by_task.setdefault(task, {})[ssp] = offset
            updates = []
            for task, offsets in sorted(by_task.items()):
                current = manager.read_last(task)
                if current is None:
                    raise RecoveryError(
                        f"task '{task}' has no checkpoint in {tools.checkpoint_location()}: it "
                        f"starts from samza.offset.default (or streams.<s>.samza.reset.offset); "
                        f"run the job once or set those instead; nothing was changed")
                for ssp, offset in offsets.items():
                    before = current.input_offsets.get(ssp)
                    if (before is not None and offset < before and current.changelog_offsets
                            and not args.allow_reprocess):
                        raise RecoveryError(
                            f"moving {ssp[0]}.{ssp[1]}#{ssp[2]} of task '{task}' back from "
                            f"{before} to {offset} would apply messages {offset + 1}..{before} "
                            f"again to its stores ({', '.join(sorted(current.changelog_offsets))}"
                            f"), which already hold them; nothing was changed. To go back with "
                            f"the state: `weir checkpoint use-previous {tools.path}` or `weir "
                            f"checkpoint reset {tools.path} --yes`; to reprocess into the "
                            f"state anyway: --allow-reprocess")
                    rows.append((task, f"{ssp[0]}.{ssp[1]}#{ssp[2]}", before, offset))
                updates.append((task, Checkpoint(
                    {**current.input_offsets, **offsets}, current.changelog_offsets,
                    current.extras, current.input_identities, current.changelog_identities,
                    changelog_partitions=current.changelog_partitions)))
            for task, checkpoint in updates:
                manager.set_last(task, checkpoint)
    finally:
        tools.close()
    if args.json:
        print(json.dumps({"job": tools.job.name, "set": [
            {"task": t, "partition": p, "was": b, "now": o} for t, p, b, o in rows]}, indent=2))
        return 0
    table = Table(title=f"job '{tools.job.name}': input offsets set")
    for column in ("task", "input partition", "was", "now", "next run reads from"):
        table.add_column(column)
    for task, partition, before, offset in rows:
        table.add_row(task, partition, "-" if before is None else str(before), str(offset),
                      str(offset + 1))
    console = _console()
    console.print(table)
    console.print(f"{len(rows)} offset(s) set; the replaced checkpoints are the previous ones "
                  f"(`weir checkpoint use-previous {tools.path}` undoes this)")
    return 0


# -- reset ----------------------------------------------------------------------------------

def _reset(args: argparse.Namespace) -> int:
    from weir.engine.container.state_reset import plan_state_reset

    tools = JobTools.load(args)
    console = _console()
    with tools.locked("weir checkpoint reset"):
        plan = plan_state_reset(tools.configs(), tools.registry, suffix=aside_suffix("reset"))
        if args.json:
            doc = {"job": tools.job.name, "done": bool(args.yes), "moves": [
                {"what": m.what, "kind": m.kind, "from": m.source, "to": m.target}
                for m in plan.moves]}
        table = Table(title=f"job '{tools.job.name}': reset moves")
        table.add_column("what")
        for column in ("from", "to"):
            table.add_column(column, overflow="fold")
        for move in plan.moves:
            table.add_row(move.what, move.source, move.target)
        if not args.yes:
            if args.json:
                print(json.dumps(doc, indent=2))
            else:
                console.print(table)
                console.print("nothing was changed; run again with --yes to move these aside")
            return 2
        plan.run()
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    console.print(table)
    completed = len(plan.of_kind("transaction"))
    finished = f"{completed} unfinished transaction(s) completed, " if completed else ""
    console.print(f"job '{tools.job.name}' starts over at its next run: inputs from "
                  f"samza.offset.default, empty stores; {finished}"
                  f"{len(plan.moves) - completed} item(s) moved aside, nothing deleted")
    return 0
