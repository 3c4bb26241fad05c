"""``weir state list``, ``show`` and ``dump``: what a stopped job's stores hold, read only."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from rich.table import Table

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.container_storage import RestoreSettings
from weir.recovery.errors import RecoveryError
from weir.recovery.restore import Action
from weir.recovery.store_restore import StoreRestore
from weir.stores.offline import engine_of_files

from weir.engine.cli._job import JobTools, console as _console
from weir.engine.cli.state.adjunct import adjunct_entries, adjunct_rows
from weir.engine.cli.state.stores import (StoreRef, adjunct_names, changelog_exists,
                                          changelog_source, directory_size, has_files,
                                          last_checkpoints, offset_file_of, open_local,
                                          read_entries, store_refs, store_serdes)
from weir.engine.cli.state.text import jsonable, num, size_text

__all__ = ["list_stores", "show_store", "dump_store", "SHOW_LIMIT"]

SHOW_LIMIT = 20
"""How many entries per task ``weir state show`` prints unless ``--limit`` says."""


# -- list -----------------------------------------------------------------------------------

def list_stores(args: argparse.Namespace) -> int:
    """``weir state list``: every store of every task, its offsets, size and next start."""
    tools = JobTools.load(args)
    rows = []
    try:
        with tools.looking("weir state list"):
            refs = store_refs(tools, args.store, args.task)
            checkpoints = last_checkpoints(tools, {r.task for r in refs})
            for ref in refs:
                rows.append(_describe(tools, ref, checkpoints[ref.task]))
            adjunct = adjunct_rows(tools, args.store)
    finally:
        tools.close()
    if args.json:
        print(json.dumps({"job": tools.job.name, "stores": rows, "adjunct_stores": adjunct},
                         indent=2))
        return 0
    table = Table(title=f"stores of job '{tools.job.name}'")
    for column in ("task", "store", "engine", "size", "keys", "OFFSET", "checkpoint",
                   "changelog", "next start"):
        table.add_column(column, overflow="fold")
    for r in rows:
        engine = r["engine"]
        if r["files_engine"] not in (None, engine):
            engine += f" (files: {r['files_engine']})"
        table.add_row(r["task"], r["store"], engine, size_text(r["size_bytes"]),
                      "-" if r["keys"] is None else f"{r['keys']:,}",
                      _offset_cell(r), num(r["checkpoint_changelog_offset"]),
                      r["changelog"] or "-", r["status"])
    console = _console()
    console.print(table)
    console.print(f"{len(rows)} store(s) in {len({r['task'] for r in rows})} task(s)")
    if adjunct:
        versions = Table(title="adjunct stores (filled from their input streams)")
        for column in ("store", "owner", "input", "serving", "building", "offsets", "size"):
            versions.add_column(column, overflow="fold")
        for r in adjunct:
            if "error" in r:
                versions.add_row(r["store"], r["owner"], "-", "-", "-", r["error"], "-")
                continue
            versions.add_row(
                r["store"], r["owner"], r["input"],
                "-" if r["serving_version"] is None else f"v{r['serving_version']}",
                "-" if r["building_version"] is None else f"v{r['building_version']}",
                ", ".join(f"#{p}={o}" for p, o in sorted(r["offsets"].items())),
                size_text(r["size_bytes"]))
        console.print(versions)
    return 0


def _describe(tools: JobTools, ref: StoreRef, checkpoint: Checkpoint | None) -> dict[str, Any]:
    spec = ref.spec
    row: dict[str, Any] = {"task": ref.task, "store": spec.name, "engine": spec.engine.name,
                           "directory": str(ref.directory) if ref.directory else None,
                           "size_bytes": None, "keys": None, "offset_file": None,
                           "offset_file_error": None, "checkpoint_changelog_offset": None,
                           "changelog": None, "changelog_oldest": None,
                           "changelog_newest": None}
    if checkpoint is not None and spec.name in checkpoint.changelog_offsets:
        row["checkpoint_changelog_offset"] = checkpoint.changelog_offsets[spec.name]
    source = None
    if spec.logged:
        ssp = ref.changelog_ssp
        row["changelog"] = f"{ssp.system}.{ssp.stream}#{ssp.partition}"
        if changelog_exists(tools, spec):
            source = changelog_source(tools, ref)
            row["changelog_oldest"] = source.oldest_offset()
            row["changelog_newest"] = source.newest_offset()
    local, error = offset_file_of(ref.directory)
    row["offset_file_error"] = error
    if local is not None:
        row["offset_file"] = {"offset": local.offset, "written_at_ms": local.written_at_ms,
                              "changelog": local.changelog, "engine": local.engine}
    marker = None
    row["files_engine"] = None
    if has_files(ref.directory):
        row["size_bytes"] = directory_size(ref.directory)
        found = engine_of_files(ref.directory)
        row["files_engine"] = found.name if found is not None else None
        if found is spec.engine:  # files of another engine are not opened (nor created)
            engine = open_local(ref)
            marker = engine.commit_marker()
            row["keys"] = sum(1 for _ in read_entries(engine, None, None))
    row["status"] = _status(tools, ref, source, checkpoint, marker)
    return row


def _status(tools: JobTools, ref: StoreRef, source: Any, checkpoint: Checkpoint | None,
            marker: str | None) -> str:
    """What the next start does with the store: the start's own decision
    (:meth:`~weir.recovery.store_restore.StoreRestore.predict`), after the start's checks."""
    spec = ref.spec
    if spec.logged and checkpoint is None and _holds_state(ref, source):
        return "no checkpoint: the next start refuses (state without a checkpoint)"
    if spec.logged and source is None:
        if checkpoint is not None and spec.name in checkpoint.changelog_offsets:
            return "the next start stops: its changelog stream is gone"
        return "no changelog yet: created empty by the next start"
    if source is not None and checkpoint is not None:
        recorded = checkpoint.changelog_identities.get(spec.name)
        if recorded is not None and recorded != source.identity():
            return ("the next start stops: its changelog was deleted and created again since "
                    "the checkpoint (StreamIdentityMismatchError)")
    restore = StoreRestore(ref.task, spec, ref.directory or Path(), None, source, checkpoint,
                           config=tools.config, clock=lambda: time.time_ns() // 1_000_000,
                           options=RestoreSettings.from_config(tools.config).options)
    try:
        plan = restore.predict(marker)
    except RecoveryError as exc:
        return f"the next start stops: {exc}"
    if plan.action is Action.STOP:
        return f"the next start stops: {plan.reason}"
    text = {Action.REUSE: "at the checkpoint: used as is",
            Action.KEEP: "kept (no changelog)",
            Action.EMPTY: "in memory: empty",
            Action.REPLAY: "in memory: restored from the changelog"}.get(plan.action)
    if plan.action is Action.CATCH_UP:
        text = (f"{plan.target - plan.start + 1:,} changelog offset(s) behind the checkpoint: "
                f"caught up")
    elif plan.action is Action.REBUILD:
        text = ("no local store: restored from the changelog"
                if spec.logged and not has_files(ref.directory)
                else f"rebuilt from the changelog ({plan.reason})" if spec.logged
                else f"set aside, starts empty ({plan.reason})")
    if plan.trims and source is not None:
        reverted = sum(1 for _ in source.read(plan.target + 1, plan.newest))
        if reverted:
            text += (f"; {reverted:,} uncommitted changelog record(s) after the checkpoint "
                     f"reverted")
    assert text is not None
    return text


def _holds_state(ref: StoreRef, source: Any) -> bool:
    """Whether a start of a task without a checkpoint refuses the store for holding state:
    the start's own check (docs/RECOVERY.md, "State without a checkpoint")."""
    from weir.engine.container.safety import check_state_without_checkpoint
    from weir.engine.container.task_storage import LoggedStore
    from weir.recovery.errors import StateWithoutCheckpointError
    if source is None:
        return has_files(ref.directory)
    store = LoggedStore(ref.spec.name, ref.changelog_ssp, source, ref.directory, ref.spec)
    try:
        check_state_without_checkpoint(ref.task, [store], checkpoint_path="-",
                                       previous_exists=False, job_config="-")
    except StateWithoutCheckpointError:
        return True
    return False


def _offset_cell(r: dict[str, Any]) -> str:
    if r["offset_file_error"]:
        return "damaged"
    if r["offset_file"] is None:
        return "-"
    return num(r["offset_file"]["offset"])


# -- show / dump ----------------------------------------------------------------------------

def _entries(tools: JobTools, args: argparse.Namespace) -> Iterator[tuple[str, Any, Any]]:
    """``(task, key, value)`` of the chosen store, typed, under the job lock."""
    spec = tools.spec(args.store)
    key_serde, value_serde = store_serdes(tools, spec)
    prefix = None
    if args.prefix is not None:
        prefix = (key_serde.to_bytes(args.prefix) if spec.key_serde in ("string", "utf8")
                  else args.prefix.encode())
    if spec.name in adjunct_names(tools):
        yield from adjunct_entries(tools, args, spec, prefix)
        return
    for ref in store_refs(tools, [args.store], args.task):
        if not spec.persistent:
            raise RecoveryError(f"store '{spec.name}' is in memory: it has no files to show "
                                f"while the job is stopped")
        if not has_files(ref.directory):
            continue
        for key, value in read_entries(open_local(ref), prefix, args.limit):
            yield ref.task, key_serde.from_bytes(key), value_serde.from_bytes(value)


def show_store(args: argparse.Namespace) -> int:
    """``weir state show``: a store's contents as a table (or ``--json``)."""
    tools = JobTools.load(args)
    try:
        with tools.looking("weir state show"):
            rows = list(_entries(tools, args))
    finally:
        tools.close()
    if args.json:
        print(json.dumps({"job": tools.job.name, "store": args.store, "entries": [
            {"task": t, "key": jsonable(k), "value": jsonable(v)} for t, k, v in rows]},
            indent=2))
        return 0
    table = Table(title=f"store '{args.store}' of job '{tools.job.name}'"
                        + (f" (keys starting {args.prefix!r})" if args.prefix else ""))
    for column in ("task", "key", "value"):
        table.add_column(column, overflow="fold")
    for task, key, value in rows:
        table.add_row(task, repr(key) if not isinstance(key, str) else key, repr(value))
    console = _console()
    console.print(table)
    limit = f" (at most {args.limit} per task: --limit)" if args.limit is not None else ""
    console.print(f"{len(rows)} entr(y/ies){limit}")
    return 0


def dump_store(args: argparse.Namespace) -> int:
    """``weir state dump``: a store's contents as JSON lines on standard output."""
    tools = JobTools.load(args)
    count = 0
    try:
        with tools.looking("weir state dump"):
            for task, key, value in _entries(tools, args):
                sys.stdout.write(orjson.dumps({"task": task, "key": jsonable(key),
                                               "value": jsonable(value)}).decode() + "\n")
                count += 1
    finally:
        tools.close()
    print(f"dumped {count} entr(y/ies) of store '{args.store}'", file=sys.stderr)
    return 0
