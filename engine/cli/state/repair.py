"""``weir state repair JOB --task T --store S --keep-local|--accept-loss`` (``weir store repair``
is its deprecated alias): the repairs restore offers.

When a store's changelog cannot back the task's checkpoint (it ends before the checkpoint's
changelog offset: cut, emptied, recreated, or damaged at its end), ``weir run`` stops with a
``ChangelogMismatchError`` that names the store, the offsets and which of these repairs is safe.
This command carries one out for one store of one task, while the job is stopped, and exits:

* ``--keep-local``: the local copy's ``OFFSET`` file proves it holds the checkpoint's state.
  The changelog records it is missing are rewritten from it; nothing is lost.
* ``--accept-loss``: no copy proves the state. The store is restored from what the changelog
  still holds up to the checkpoint, and the changelog is padded to the checkpoint's offset; the
  effect of the missing changelog records is lost (the error said which), and their input
  messages are not processed again.

The checkpoint is read, never written. When the store needs no repair (its changelog reaches
the checkpoint) the command restores it as a start would and says so. Exit codes: 0 (repaired
or nothing to repair), 2 (the repair cannot be done safely, or bad arguments; nothing changed).
docs/RECOVERY.md has the table of what to do when which file is damaged.
"""

from __future__ import annotations

import argparse
import sys

from weir.recovery.restore import Repair
from weir.recovery.storage import ProgressMode

from weir.engine.cli._job import JobTools
from weir.engine.cli.state.restore import restore_store

__all__ = ["add_repair_parser", "repair_store"]


def add_repair_parser(actions: argparse._SubParsersAction) -> None:
    """Add the ``repair`` action (``weir state repair``, and its deprecated alias ``weir store repair``)."""
    repair = actions.add_parser(
        "repair", help="keep the local copy, or accept losing the changelog's missing records",
        description="Carry out the repair a ChangelogMismatchError offered for one store of "
                    "one task, then exit. The job must not be running.")
    repair.add_argument("path", help="job config (.properties, .yaml or .yml)")
    repair.add_argument("--task", required=True, help="task name, e.g. 'Partition 0'")
    repair.add_argument("--store", required=True, help="store name (stores.<name>.*)")
    repair.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config key (repeatable)")
    choice = repair.add_mutually_exclusive_group(required=True)
    choice.add_argument("--keep-local", dest="repair", action="store_const",
                        const="keep-local",
                        help="rewrite the missing changelog records from the local copy its "
                             "OFFSET file proves at the checkpoint (nothing is lost)")
    choice.add_argument("--accept-loss", dest="repair", action="store_const",
                        const="accept-loss",
                        help="restore what the changelog holds and pad it to the checkpoint "
                             "(the effect of the missing records is lost)")
    repair.set_defaults(func=repair_store)


def repair_store(args: argparse.Namespace) -> int:
    """Carry out ``args.repair`` for one store of one task, under the job lock."""
    tools = JobTools.load(args)
    try:
        with tools.locked("weir state repair"):
            return _repair_locked(tools, args)
    finally:
        tools.close()


def _repair_locked(tools: JobTools, args: argparse.Namespace) -> int:
    from weir.engine.container.container import create_changelog_streams
    from weir.stores.errors import ConfigError

    specs = {spec.name: spec for spec in tools.specs()}
    spec = specs.get(args.store)
    if spec is None or not spec.logged:
        known = ", ".join(sorted(n for n, s in specs.items() if s.logged)) or "none"
        raise ConfigError(f"store '{args.store}' is not a logged store of this job (logged "
                          f"stores: {known}); only stores with a changelog are repaired",
                          key=f"stores.{args.store}.changelog")
    task = tools.task(args.task)
    create_changelog_streams([spec], tools.registry, tools.model())  # as `weir run` does first
    checkpoint = tools.checkpoints.read_last(task.task_name)  # read only
    stats = restore_store(tools, task.task_name, spec, task.changelog_partition, checkpoint,
                          ProgressMode.LOG, Repair(args.repair))
    where = f"store '{spec.name}' of task '{task.task_name}'"
    if stats.repair is Repair.NONE:
        print(f"{where} needed no repair: its changelog reaches the checkpoint "
              f"({stats.action.value}: {stats.reason}); restored as a start would")
    else:
        done = stats.reason.removeprefix("repair: ")
        print(f"repaired {where}: {done} ({stats.realigned:,} changelog records written). "
              f"Start the job again.")
    sys.stdout.flush()
    return 0
