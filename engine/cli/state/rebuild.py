"""``weir state rebuild``: move local stores aside (``<dir>.rebuild-<time>``, kept) and rebuild
them from their changelogs to the task's checkpoint, with the restore progress bar."""

from __future__ import annotations

import argparse
import json
import os
import time

from rich.table import Table

from weir.stores.filesafety import fsync_dir
from weir.recovery.errors import RecoveryError
from weir.recovery.storage import ProgressMode

from weir.engine.cli._job import JobTools, console as _console
from weir.engine.cli.state.restore import restore_store
from weir.engine.cli.state.stores import has_files, last_checkpoints, store_refs
from weir.engine.cli.state.text import num

__all__ = ["rebuild_stores"]


def rebuild_stores(args: argparse.Namespace) -> int:
    """``weir state rebuild``: every chosen persistent logged store, from its changelog."""
    from weir.engine.container.container import create_changelog_streams

    tools = JobTools.load(args)
    done = []
    try:
        with tools.locked("weir state rebuild"):
            refs = [r for r in store_refs(tools, args.store, args.task)
                    if r.spec.logged and r.spec.persistent]
            if not refs:
                raise RecoveryError("no persistent store with a changelog to rebuild")
            checkpoints = last_checkpoints(tools, {r.task for r in refs})
            missing = sorted({r.task for r in refs if checkpoints[r.task] is None})
            if missing:
                raise RecoveryError(
                    f"task(s) {', '.join(missing)} have no checkpoint: there is no committed "
                    f"state to rebuild (their stores start empty); nothing was changed")
            create_changelog_streams(sorted({r.spec for r in refs}, key=lambda s: s.name),
                                     tools.registry, tools.model())
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            for ref in refs:
                kept = None
                if has_files(ref.directory):
                    kept = ref.directory.with_name(f"{ref.directory.name}.rebuild-{stamp}")
                    os.rename(ref.directory, kept)
                    fsync_dir(kept.parent)
                stats = restore_store(tools, ref.task, ref.spec, ref.changelog_partition,
                                      checkpoints[ref.task], ProgressMode.AUTO)
                done.append({"task": ref.task, "store": ref.spec.name,
                             "records": stats.records,
                             "offset": checkpoints[ref.task].changelog_offsets.get(
                                 ref.spec.name),
                             "kept": str(kept) if kept else None})
    finally:
        tools.close()
    if args.json:
        print(json.dumps({"job": tools.job.name, "rebuilt": done}, indent=2))
        return 0
    table = Table(title=f"job '{tools.job.name}': stores rebuilt from their changelogs")
    for column in ("task", "store", "records replayed", "at changelog offset", "old files kept"):
        table.add_column(column, overflow="fold")
    for d in done:
        table.add_row(d["task"], d["store"], f"{d['records']:,}", num(d["offset"]),
                      d["kept"] or "-")
    console = _console()
    console.print(table)
    console.print(f"rebuilt {len(done)} store(s); remove the kept copies once you trust the "
                  f"rebuilt stores")
    return 0
