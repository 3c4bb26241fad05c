"""``weir state verify``: compare each local store with the state its changelog describes at
the offset its ``OFFSET`` file claims; exit 1, naming the first differing keys, when they
differ."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.errors import RecoveryError

from weir.engine.cli._job import JobTools, console as _console
from weir.engine.cli.state.stores import (StoreRef, changelog_exists, changelog_source,
                                          changelog_state, has_files, last_checkpoints,
                                          offset_file_of, open_local, read_entries,
                                          store_refs, store_serdes)
from weir.engine.cli.state.text import jsonable, num, typed_key

__all__ = ["verify_stores"]


def verify_stores(args: argparse.Namespace) -> int:
    """``weir state verify``: exit 0 when every local store matches its changelog, else 1."""
    tools = JobTools.load(args)
    results = []
    try:
        with tools.looking("weir state verify"):
            refs = [r for r in store_refs(tools, args.store, args.task)
                    if r.spec.logged and r.spec.persistent]
            if not refs:
                raise RecoveryError("no persistent store with a changelog to verify (in-memory "
                                    "and non-logged stores have no local copy to compare)")
            checkpoints = last_checkpoints(tools, {r.task for r in refs})
            for ref in refs:
                results.append(_verify_one(tools, ref, checkpoints[ref.task], args.max_keys))
    finally:
        tools.close()
    differ = [r for r in results if r["result"] == "differs"]
    if args.json:
        print(json.dumps({"job": tools.job.name, "stores": results}, indent=2))
    else:
        table = Table(title=f"job '{tools.job.name}': local stores against their changelogs")
        for column in ("task", "store", "compared at", "keys", "result", "first differences"):
            table.add_column(column, overflow="fold")
        for r in results:
            color = {"same": "green", "differs": "red"}.get(r["result"], "yellow")
            table.add_row(r["task"], r["store"], num(r["offset"]), num(r["keys"]),
                          f"[{color}]{r['result']}[/{color}]" + (f": {r['note']}" if r["note"]
                                                                  else ""),
                          "\n".join(f"{d['key']}: {d['why']}" for d in r["differences"]))
        console = _console()
        console.print(table)
        console.print(f"{len(results)} store(s) verified, {len(differ)} differ" +
                      (f"; `weir state rebuild {tools.path}` rebuilds them from their "
                       f"changelogs (the old files are kept aside)" if differ else ""))
    return 1 if differ else 0


def _verify_one(tools: JobTools, ref: StoreRef, checkpoint: Checkpoint | None,
                max_keys: int) -> dict[str, Any]:
    out: dict[str, Any] = {"task": ref.task, "store": ref.spec.name, "offset": None,
                           "keys": None, "result": "no local store", "note": "",
                           "differences": []}
    if not has_files(ref.directory):
        out["note"] = "restored from the changelog at the next start"
        return out
    local, error = offset_file_of(ref.directory)
    target = (checkpoint.changelog_offsets.get(ref.spec.name)
              if checkpoint is not None else None)
    if local is not None:
        at = local.offset
        if target is not None and at != target:
            out["note"] = f"its OFFSET file is at {at:,}, the checkpoint at {target:,}"
    elif target is not None:
        at = target
        out["note"] = ("OFFSET file damaged" if error else "no OFFSET file") + \
            "; compared at the checkpoint"
    else:
        out["result"] = "unknown"
        out["note"] = "no OFFSET file and no checkpoint: no offset to compare at"
        return out
    out["offset"] = at
    expected = changelog_state(changelog_source(tools, ref), at) \
        if changelog_exists(tools, ref.spec) else {}
    key_serde, _ = store_serdes(tools, ref.spec)
    differences = []
    count = 0
    for key, value in read_entries(open_local(ref), None, None):
        count += 1
        want = expected.pop(key, None)
        if want is None:
            differences.append((key, "only in the local store"))
        elif want != value:
            differences.append((key, "values differ"))
    differences.extend((key, "missing from the local store") for key in expected)
    out["keys"] = count
    out["result"] = "differs" if differences else "same"
    out["difference_count"] = len(differences)
    out["differences"] = [{"key": jsonable(typed_key(key_serde, key)), "why": why}
                          for key, why in sorted(differences)[:max_keys]]
    return out
