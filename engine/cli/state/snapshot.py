"""``weir state export`` / ``import``: a consistent snapshot of a stopped job's state (every
task's checkpoint and every store's contents at that checkpoint, read from the changelog) in
one checksummed file (:mod:`weir.engine.cli.state.snapshot_file`), to move a job to another
machine.

Import fills an empty job: it writes the changelogs, then the checkpoints (an import cut short
leaves changelog records without a checkpoint, which the next start refuses; reset and import
again); the next start restores the local stores from the changelogs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from weir.recovery.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from weir.recovery.errors import RecoveryError
from weir.stores.changelog import NO_OFFSET

from weir.engine.cli._job import JobTools, console as _console
from weir.engine.cli.state.restore import changelog_producer
from weir.engine.cli.state.snapshot_file import CHUNK, load_snapshot, write_snapshot
from weir.engine.cli.state.stores import (StoreRef, changelog_exists, changelog_source,
                                          changelog_state, has_files, last_checkpoints,
                                          open_local, read_entries, store_refs)

__all__ = ["export_state", "import_state"]


# -- export ---------------------------------------------------------------------------------

def export_state(args: argparse.Namespace) -> int:
    """``weir state export --out FILE``: the job's state at its checkpoints, to a new file."""
    tools = JobTools.load(args)
    out = Path(args.out)
    if out.exists():
        raise RecoveryError(f"{out} exists; choose another file (nothing was written)")
    try:
        with tools.looking("weir state export"):
            summary = _write(tools, out)
    finally:
        tools.close()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _console().print(
            f"exported job '{tools.job.name}': {len(summary['checkpoints'])} checkpoint(s), "
            f"{sum(s['records'] for s in summary['stores']):,} record(s) in "
            f"{len(summary['stores'])} store(s) to {out}")
    return 0


def _write(tools: JobTools, out: Path) -> dict[str, Any]:
    checkpoints = last_checkpoints(tools, set(tools.tasks()))
    written = {t: encode_checkpoint(t, cp) for t, cp in checkpoints.items() if cp is not None}
    header = {"job": tools.job.name, "job_id": tools.job.id,
              "created_ms": int(time.time() * 1000), "checkpoints": written}
    stores: list[dict[str, Any]] = []
    write_snapshot(out, header, _store_states(tools, checkpoints, stores))
    return {"job": tools.job.name, "file": str(out), "checkpoints": sorted(written),
            "stores": stores}


def _store_states(tools: JobTools, checkpoints: dict[str, Checkpoint | None],
                  summary: list[dict[str, Any]]
                  ) -> Iterator[tuple[dict[str, Any], list[tuple[bytes, bytes]]]]:
    """``(meta, sorted pairs)`` of every store that has state, one at a time; each also goes
    to ``summary``."""
    for ref in store_refs(tools, None, None):
        if not (ref.spec.persistent or ref.spec.logged):
            continue
        state, source = _state_of(tools, ref, checkpoints.get(ref.task))
        if state is None:
            continue
        pairs = sorted(state.items())
        summary.append({"task": ref.task, "store": ref.spec.name, "records": len(pairs),
                        "from": source})
        yield ({"store": ref.spec.name, "task": ref.task, "records": len(pairs),
                "from": source}, pairs)


def _state_of(tools: JobTools, ref: StoreRef, checkpoint: Checkpoint | None
              ) -> tuple[dict[bytes, bytes] | None, str]:
    """A logged store's state at its checkpoint (from the changelog: consistent with the
    checkpoint by construction); a non-logged persistent store's local files."""
    if ref.spec.logged:
        if checkpoint is None or ref.spec.name not in checkpoint.changelog_offsets:
            return None, ""
        if not changelog_exists(tools, ref.spec):
            return {}, "changelog"
        return changelog_state(changelog_source(tools, ref),
                               checkpoint.changelog_offsets[ref.spec.name]), "changelog"
    if not has_files(ref.directory):
        return None, ""
    return dict(read_entries(open_local(ref), None, None)), "local"


# -- import ---------------------------------------------------------------------------------

def import_state(args: argparse.Namespace) -> int:
    """``weir state import --in FILE``: fill an empty job's state from a snapshot."""
    from weir.engine.container.checkpoints import open_checkpoint_manager
    from weir.engine.container.container import create_changelog_streams

    tools = JobTools.load(args)
    path = Path(args.source)
    header, stores = load_snapshot(path)
    tasks = tools.tasks()
    checkpoints = {t: decode_checkpoint(raw, source=f"{path}: checkpoint of task '{t}'")[1]
                   for t, raw in header["checkpoints"].items()}
    unknown = sorted((set(checkpoints) | {m["task"] for m, _ in stores}) - set(tasks))
    if unknown:
        raise RecoveryError(f"snapshot {path} has task(s) {', '.join(unknown)} that job "
                            f"'{tools.job.name}' does not have (tasks: {', '.join(tasks)}); "
                            f"import into a job with the same inputs and grouping")
    specs = {s.name: s for s in tools.specs()}
    for meta, _ in stores:
        if meta["store"] not in specs:
            raise RecoveryError(f"snapshot {path} has store '{meta['store']}' that job "
                                f"'{tools.job.name}' does not configure; nothing was imported")
    refs = {(r.task, r.spec.name): r for r in store_refs(tools, None, None)}
    imported = []
    with tools.locked("weir state import"):
        settings = tools.checkpoint_settings
        manager = open_checkpoint_manager(
            settings, tools.job, tools.registry,
            {n: t.changelog_partition for n, t in tasks.items()}, job_config=tools.path,
            create=True, stream_partitions=tools.model().max_change_log_stream_partitions)
        for name in tasks:
            manager.register(name)
        manager.start()
        try:
            _check_empty(tools, manager, refs.values())
            create_changelog_streams([s for s in specs.values() if s.logged], tools.registry,
                                     tools.model())
            offsets: dict[str, dict[str, int]] = {}
            for meta, pairs in stores:
                ref = refs[(meta["task"], meta["store"])]
                if ref.spec.logged:
                    offsets.setdefault(ref.task, {})[ref.spec.name] = \
                        _write_changelog(tools, ref, pairs)
                elif ref.spec.persistent:
                    _write_local(ref, pairs)
                imported.append({"task": ref.task, "store": ref.spec.name,
                                 "records": len(pairs)})
            for task, checkpoint in sorted(checkpoints.items()):
                changelogs = dict(checkpoint.changelog_offsets)
                for store in changelogs:
                    changelogs[store] = offsets.get(task, {}).get(store, NO_OFFSET)
                # identities are left out: the next run binds the streams present here
                manager.write(task, Checkpoint(checkpoint.input_offsets, changelogs,
                                               checkpoint.extras))
        finally:
            manager.stop()
    summary = {"job": tools.job.name, "file": str(path), "checkpoints": sorted(checkpoints),
               "stores": imported}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _console().print(
            f"imported {sum(s['records'] for s in imported):,} record(s) in {len(imported)} "
            f"store(s) and {len(checkpoints)} checkpoint(s) from {path} into job "
            f"'{tools.job.name}'; the next `weir run {tools.path}` restores the local stores "
            f"from the changelogs and resumes the inputs where the snapshot was taken")
    return 0


def _write_changelog(tools: JobTools, ref: StoreRef, pairs: list[tuple[bytes, bytes]]) -> int:
    """Append ``pairs`` to ``ref``'s changelog partition; its newest offset afterwards."""
    from weir.engine.systems.changelog import SystemChangelogSink

    with changelog_producer(tools, ref.task, ref.spec) as (producer, source_name):
        sink = SystemChangelogSink(producer, ref.changelog_ssp, source_name)
        for i in range(0, len(pairs), CHUNK):
            sink.append_all(pairs[i:i + CHUNK])
        sink.flush()
    return changelog_source(tools, ref).newest_offset()


def _write_local(ref: StoreRef, pairs: list[tuple[bytes, bytes]]) -> None:
    """Put ``pairs`` into non-logged persistent store ``ref``'s local files."""
    from weir.stores.builder import open_engine
    engine = open_engine(ref.spec, ref.directory, logged=False)
    try:
        engine.put_all(pairs)
        engine.flush()
    finally:
        engine.close()


def _check_empty(tools: JobTools, manager: Any, refs: Any) -> None:
    """Import fills an empty job only: no checkpoint, no changelog records, no local files."""
    found = [f"checkpoint of task '{t}'" for t in manager.task_names()]
    for ref in refs:
        if ref.spec.logged and changelog_exists(tools, ref.spec) and \
                changelog_source(tools, ref).newest_offset() != NO_OFFSET:
            found.append(f"changelog records of store '{ref.spec.name}' for task '{ref.task}'")
        if has_files(ref.directory):
            found.append(f"local files of store '{ref.spec.name}' ({ref.directory})")
    if found:
        raise RecoveryError(
            f"job '{tools.job.name}' already has state ({'; '.join(found[:5])}"
            f"{'; ...' if len(found) > 5 else ''}); import fills an empty job only, so nothing "
            f"was imported. Move the job's state aside first with `weir checkpoint reset "
            f"{tools.path} --yes`")
