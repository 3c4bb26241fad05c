"""``weir state``: look at, check, rebuild, export and import a stopped job's stores.

Every command takes the job's config file and works on the job while it is stopped: each takes
the job lock first and refuses, naming the holder, while the job runs (opening a store a live
job has open would be refused by the store's own lock anyway). Tables by default, ``--json``
for scripts.

* ``weir state list job.properties``: every store of every task: engine, local directory size,
  keys, its ``OFFSET`` file, the checkpoint's changelog offset, the changelog's range, and
  what the next start does with it.
* ``weir state show job.properties --store S [--task T] [--prefix P] [--limit N]``: the
  store's contents, typed with the store's serdes from the job config (``dump`` prints every
  entry as JSON lines).
* ``weir state verify job.properties [--store S] [--task T]``: compare each local store with
  the state its changelog describes at the offset its ``OFFSET`` file claims; exit 1 and
  name the first differing keys when they differ.
* ``weir state rebuild job.properties [--store S] [--task T]``: move the local store aside
  (``<dir>.rebuild-<time>``, kept) and rebuild it from its changelog to the task's checkpoint,
  with the restore progress bar.
* ``weir state export job.properties --out job.weirsnap`` / ``weir state import
  job.properties --in job.weirsnap``: a consistent snapshot of the job's state (every task's
  checkpoint and every store's contents at that checkpoint, read from the changelog) in one
  checksummed file, to move a job to another machine. Import fills an empty job: it writes the
  changelogs, then the checkpoints (an import cut short leaves changelog records without a
  checkpoint, which the next start refuses; reset and import again); the next start restores
  the local stores from the changelogs.
* ``weir state repair ...``: the repairs a changelog mismatch offers (``weir store repair``
  is the same command under its old name).

Examples::

    weir state list job.properties
    weir state show job.properties --store counts --prefix user- --limit 20
    weir state verify job.properties --json
    weir state rebuild job.properties --store counts --task 'Partition 0'
    weir state export job.properties --out counts.weirsnap
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import crc32c
import msgpack
import orjson
import zstandard
from rich.table import Table

from weir.recovery._atomic import fsync_dir, temp_path_for
from weir.recovery.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from weir.recovery.errors import RecoveryError
from weir.recovery.offset_file import OffsetFileCorruptError, read_offset_file
from weir.recovery.storage import task_directory_name
from weir.stores.changelog import NO_OFFSET
from weir.stores.locking import LOCK_FILE_NAME
from weir.stores.spec import StoreSpec

from weir.engine.cli._job import JobTools, console as _console, job_arguments

__all__ = ["register", "SNAPSHOT_FORMAT"]

SNAPSHOT_FORMAT = 1
_SNAPSHOT_KIND = "weir-state-snapshot"
_CHUNK = 10_000
_SHOW_LIMIT = 20


# -- wiring ---------------------------------------------------------------------------------

def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "state", help="list, show, verify, rebuild, export or import a stopped job's stores",
        description="Work on a stopped job's stores (each command refuses while the job "
                    "runs). Nothing is deleted: what a command replaces is renamed aside.")
    actions = parser.add_subparsers(dest="state_command", metavar="ACTION", required=True)
    job = job_arguments()
    which = argparse.ArgumentParser(add_help=False)
    which.add_argument("--store", action="append", metavar="STORE",
                       help="only this store (repeatable; default: every store)")
    which.add_argument("--task", action="append", metavar="TASK",
                       help="only this task (repeatable; default: every task)")
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--json", action="store_true", help="machine-readable output")

    p = actions.add_parser("list", parents=[job, which, out],
                           help="every store of every task, with its offsets and size")
    p.set_defaults(func=_list)

    for name, func, text in (("show", _show, "a store's contents as a table"),
                             ("dump", _dump, "a store's contents as JSON lines")):
        p = actions.add_parser(name, parents=[job], help=text)
        p.add_argument("--store", required=True, help="the store (stores.<name>.*)")
        p.add_argument("--task", action="append", metavar="TASK",
                       help="only this task (repeatable; default: every task)")
        p.add_argument("--prefix", help="only keys starting with this (typed key, serialized "
                                        "with the store's key serde; bytes keys: UTF-8)")
        p.add_argument("--limit", type=int, default=_SHOW_LIMIT if name == "show" else None,
                       help=f"at most this many entries per task (show: {_SHOW_LIMIT})")
        if name == "show":
            p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=func)

    p = actions.add_parser(
        "verify", parents=[job, which, out],
        help="compare each local store with its changelog (exit 1 on a difference)")
    p.add_argument("--max-keys", type=int, default=10,
                   help="name at most this many differing keys per store (default 10)")
    p.set_defaults(func=_verify)

    p = actions.add_parser(
        "rebuild", parents=[job, which, out],
        help="rebuild local stores from their changelogs (the old files are kept aside)")
    p.set_defaults(func=_rebuild)

    p = actions.add_parser("export", parents=[job, out],
                           help="write a consistent snapshot of the job's state to a file")
    p.add_argument("--out", required=True, help="the snapshot file to write")
    p.set_defaults(func=_export)

    p = actions.add_parser("import", parents=[job, out],
                           help="fill an empty job's state from a snapshot file")
    p.add_argument("--in", dest="source", required=True, help="the snapshot file to read")
    p.set_defaults(func=_import)

    from weir.engine.cli.store import add_repair_parser
    add_repair_parser(actions)


# -- what the commands work on ----------------------------------------------------------------

@dataclass(frozen=True)
class _StoreRef:
    """One store of one task: its spec, its local directory and its changelog partition."""

    task: str
    spec: StoreSpec
    directory: Path | None
    changelog_partition: int

    @property
    def changelog_ssp(self) -> Any:
        from weir.engine.model import SystemStreamPartition
        assert self.spec.changelog is not None
        return SystemStreamPartition(*self.spec.changelog, self.changelog_partition)


def _refs(tools: JobTools, stores: list[str] | None, tasks: list[str] | None) -> list[_StoreRef]:
    from weir.engine.config.job import StoreBase

    # Adjunct stores (docs/ADJUNCT.md) have no changelog and their own layout: listed and
    # shown by _adjunct_rows / _adjunct_entries, never opened as a task's store here.
    adjuncts = _adjunct_names(tools)
    specs = [tools.spec(s) for s in stores] if stores else tools.specs()
    specs = [spec for spec in specs if spec.name not in adjuncts]
    chosen = {t: tools.task(t) for t in tasks} if tasks else tools.tasks()
    refs = []
    for name, task in chosen.items():
        for spec in specs:
            directory = None
            if spec.persistent:
                base = tools.job.base_dir(StoreBase.LOGGED if spec.logged
                                          else StoreBase.NON_LOGGED)
                directory = base / spec.name / task_directory_name(name)
            refs.append(_StoreRef(name, spec, directory, task.changelog_partition))
    return refs


def _adjunct_names(tools: JobTools) -> set[str]:
    from weir.stores.adjunct import adjunct_specs
    return set(adjunct_specs(tools.config))


def _adjunct_dirs(tools: JobTools, store: str | None = None) -> list[tuple[Path, Any]]:
    """``(directory, what its ADJUNCT-OFFSETS records, or why not)`` of every adjunct store
    (of ``store``) under the logged store base."""
    from weir.engine.config.job import StoreBase
    from weir.recovery.adjunct import list_adjunct_stores
    names = _adjunct_names(tools)
    return [(d, rec) for d, rec in list_adjunct_stores(tools.job.base_dir(StoreBase.LOGGED))
            if d.parent.name in names and (store is None or d.parent.name == store)]


def _adjunct_rows(tools: JobTools, stores: list[str] | None) -> list[dict[str, Any]]:
    """One row per adjunct store: owner (a task's directory or ``broadcast-container-<id>``),
    the version served and the one being built, the input offsets recorded beside it."""
    rows = []
    for directory, rec in _adjunct_dirs(tools):
        if stores and directory.parent.name not in stores:
            continue
        if isinstance(rec, str):
            rows.append({"store": directory.parent.name, "owner": directory.name,
                         "directory": str(directory), "error": rec})
            continue
        rows.append({"store": rec.store, "owner": directory.name, "directory": str(directory),
                     "engine": rec.engine, "input": rec.input, "serving_version": rec.serving,
                     "building_version": rec.building, "offsets": dict(rec.offsets),
                     "written_at_ms": rec.written_at_ms, "size_bytes": _size(directory)})
    return rows


def _adjunct_entries(tools: JobTools, args: argparse.Namespace, spec: StoreSpec, prefix: Any
                     ) -> Iterator[tuple[str, Any, Any]]:
    """Entries of the version each copy of adjunct store ``spec`` serves."""
    from weir.stores.builder import open_engine
    key_serde, value_serde = _serdes(tools, spec)
    owners = {task_directory_name(t) for t in args.task} if args.task else None
    for directory, rec in _adjunct_dirs(tools, spec.name):
        if isinstance(rec, str) or rec.serving is None:
            continue
        if owners is not None and directory.name not in owners:
            continue
        engine = open_engine(spec, directory / f"v{rec.serving}", logged=False)
        try:
            with (engine.prefix(prefix) if prefix is not None else engine.all()) as entries:
                for n, (key, value) in enumerate(entries):
                    if args.limit is not None and n >= args.limit:
                        break
                    yield (f"{directory.name} v{rec.serving}", key_serde.from_bytes(key),
                           value_serde.from_bytes(value))
        finally:
            engine.close()


def _has_files(directory: Path | None) -> bool:
    return directory is not None and directory.is_dir() and any(
        p.name != LOCK_FILE_NAME for p in directory.iterdir())


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _open_engine(ref: _StoreRef) -> Any:
    from weir.stores.builder import open_engine
    return open_engine(ref.spec, ref.directory, logged=ref.spec.logged)


def _serdes(tools: JobTools, spec: StoreSpec) -> tuple[Any, Any]:
    from weir.stores.serdes import serde_from_name
    from weir.stores.spec import STORE_KEY_SERDE, STORE_MSG_SERDE
    return (serde_from_name(spec.key_serde, tools.config,
                            key=STORE_KEY_SERDE.key(store=spec.name)),
            serde_from_name(spec.value_serde, tools.config,
                            key=STORE_MSG_SERDE.key(store=spec.name)))


def _source(tools: JobTools, ref: _StoreRef) -> Any:
    from weir.engine.systems.changelog import SystemChangelogSource
    return SystemChangelogSource(tools.registry, ref.changelog_ssp)


def _changelog_exists(tools: JobTools, spec: StoreSpec) -> bool:
    system, stream = spec.changelog
    return tools.registry.admin(system).stream_exists(stream)


def changelog_state(source: Any, upto: int) -> dict[bytes, bytes]:
    """The state a changelog partition describes at offset ``upto`` (inclusive): the latest
    value of every key, deletes applied."""
    state: dict[bytes, bytes | None] = {}
    if upto == NO_OFFSET or source.newest_offset() == NO_OFFSET:
        return {}
    for _, key, value in source.read(source.oldest_offset(), upto):
        state[key] = value
    return {k: v for k, v in state.items() if v is not None}


def _checkpoints(tools: JobTools, tasks: set[str]) -> dict[str, Checkpoint | None]:
    manager = tools.checkpoints
    return {t: manager.read_last(t) for t in sorted(tasks)}


def _offset_file(directory: Path | None) -> tuple[Any, str | None]:
    if directory is None or not directory.is_dir():
        return None, None
    try:
        return read_offset_file(directory), None
    except OffsetFileCorruptError as exc:
        return None, str(exc)


# -- list -----------------------------------------------------------------------------------

def _list(args: argparse.Namespace) -> int:
    tools = JobTools.load(args)
    rows = []
    try:
        with tools.locked("weir state list"):
            refs = _refs(tools, args.store, args.task)
            checkpoints = _checkpoints(tools, {r.task for r in refs})
            for ref in refs:
                rows.append(_describe(tools, ref, checkpoints[ref.task]))
            adjunct = _adjunct_rows(tools, args.store)
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
        table.add_row(r["task"], r["store"], r["engine"], _bytes(r["size_bytes"]),
                      "-" if r["keys"] is None else f"{r['keys']:,}",
                      _offset_cell(r), _num(r["checkpoint_changelog_offset"]),
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
                _bytes(r["size_bytes"]))
        console.print(versions)
    return 0


def _describe(tools: JobTools, ref: _StoreRef, checkpoint: Checkpoint | None) -> dict[str, Any]:
    spec = ref.spec
    row: dict[str, Any] = {"task": ref.task, "store": spec.name, "engine": spec.engine.value,
                           "directory": str(ref.directory) if ref.directory else None,
                           "size_bytes": None, "keys": None, "offset_file": None,
                           "offset_file_error": None, "checkpoint_changelog_offset": None,
                           "changelog": None, "changelog_oldest": None,
                           "changelog_newest": None}
    target = None
    if checkpoint is not None and spec.name in checkpoint.changelog_offsets:
        target = checkpoint.changelog_offsets[spec.name]
        row["checkpoint_changelog_offset"] = target
    if spec.logged:
        ssp = ref.changelog_ssp
        row["changelog"] = f"{ssp.system}.{ssp.stream}#{ssp.partition}"
        if _changelog_exists(tools, spec):
            source = _source(tools, ref)
            row["changelog_oldest"] = source.oldest_offset()
            row["changelog_newest"] = source.newest_offset()
    local, error = _offset_file(ref.directory)
    row["offset_file_error"] = error
    if local is not None:
        row["offset_file"] = {"offset": local.offset, "written_at_ms": local.written_at_ms,
                              "changelog": local.changelog, "engine": local.engine}
    if _has_files(ref.directory):
        row["size_bytes"] = _size(ref.directory)
        engine = _open_engine(ref)
        try:
            with engine.all() as entries:
                row["keys"] = sum(1 for _ in entries)
        finally:
            engine.close()
    row["status"] = _status(ref, local, error, target)
    return row


def _status(ref: _StoreRef, local: Any, error: str | None, target: int | None) -> str:
    spec = ref.spec
    if not spec.persistent:
        return "in memory: restored from the changelog" if spec.logged else "in memory: empty"
    if not _has_files(ref.directory):
        return "no local store: restored from the changelog" if spec.logged else "created empty"
    if not spec.logged:
        return "kept (no changelog)"
    if error is not None:
        return "OFFSET file damaged: rebuilt from the changelog"
    if local is None:
        return "no OFFSET file: rebuilt from the changelog"
    if target is None:
        return "no checkpoint: the next start refuses (state without a checkpoint)"
    if local.offset == target:
        return "at the checkpoint: used as is"
    if local.offset < target:
        return f"{target - local.offset:,} changelog record(s) behind: caught up"
    return f"{local.offset - target:,} uncommitted record(s) ahead: reverted"


def _offset_cell(r: dict[str, Any]) -> str:
    if r["offset_file_error"]:
        return "damaged"
    if r["offset_file"] is None:
        return "-"
    return _num(r["offset_file"]["offset"])


def _num(n: int | None) -> str:
    if n is None:
        return "-"
    return "empty" if n == NO_OFFSET else f"{n:,}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


# -- show / dump ----------------------------------------------------------------------------

def _entries(tools: JobTools, args: argparse.Namespace) -> Iterator[tuple[str, Any, Any]]:
    """``(task, key, value)`` of the chosen store, typed, under the job lock."""
    spec = tools.spec(args.store)
    key_serde, value_serde = _serdes(tools, spec)
    prefix = None
    if args.prefix is not None:
        prefix = (key_serde.to_bytes(args.prefix) if spec.key_serde in ("string", "utf8")
                  else args.prefix.encode())
    if spec.name in _adjunct_names(tools):
        yield from _adjunct_entries(tools, args, spec, prefix)
        return
    for ref in _refs(tools, [args.store], args.task):
        if not spec.persistent:
            raise RecoveryError(f"store '{spec.name}' is in memory: it has no files to show "
                                f"while the job is stopped")
        if not _has_files(ref.directory):
            continue
        engine = _open_engine(ref)
        try:
            with (engine.prefix(prefix) if prefix is not None else engine.all()) as entries:
                for n, (key, value) in enumerate(entries):
                    if args.limit is not None and n >= args.limit:
                        break
                    yield ref.task, key_serde.from_bytes(key), value_serde.from_bytes(value)
        finally:
            engine.close()


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode()
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(data).decode()}
    try:
        orjson.dumps(value)
        return value
    except TypeError:
        return repr(value)


def _show(args: argparse.Namespace) -> int:
    tools = JobTools.load(args)
    try:
        with tools.locked("weir state show"):
            rows = list(_entries(tools, args))
    finally:
        tools.close()
    if args.json:
        print(json.dumps({"job": tools.job.name, "store": args.store, "entries": [
            {"task": t, "key": _jsonable(k), "value": _jsonable(v)} for t, k, v in rows]},
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


def _dump(args: argparse.Namespace) -> int:
    tools = JobTools.load(args)
    count = 0
    try:
        with tools.locked("weir state dump"):
            for task, key, value in _entries(tools, args):
                sys.stdout.write(orjson.dumps({"task": task, "key": _jsonable(key),
                                               "value": _jsonable(value)}).decode() + "\n")
                count += 1
    finally:
        tools.close()
    print(f"dumped {count} entr(y/ies) of store '{args.store}'", file=sys.stderr)
    return 0


# -- verify ---------------------------------------------------------------------------------

def _verify(args: argparse.Namespace) -> int:
    tools = JobTools.load(args)
    results = []
    try:
        with tools.locked("weir state verify"):
            refs = [r for r in _refs(tools, args.store, args.task)
                    if r.spec.logged and r.spec.persistent]
            if not refs:
                raise RecoveryError("no persistent store with a changelog to verify (in-memory "
                                    "and non-logged stores have no local copy to compare)")
            checkpoints = _checkpoints(tools, {r.task for r in refs})
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
            table.add_row(r["task"], r["store"], _num(r["offset"]), _num(r["keys"]),
                          f"[{color}]{r['result']}[/{color}]" + (f": {r['note']}" if r["note"]
                                                                  else ""),
                          "\n".join(f"{d['key']}: {d['why']}" for d in r["differences"]))
        console = _console()
        console.print(table)
        console.print(f"{len(results)} store(s) verified, {len(differ)} differ" +
                      (f"; `weir state rebuild {tools.path}` rebuilds them from their "
                       f"changelogs (the old files are kept aside)" if differ else ""))
    return 1 if differ else 0


def _verify_one(tools: JobTools, ref: _StoreRef, checkpoint: Checkpoint | None,
                max_keys: int) -> dict[str, Any]:
    out: dict[str, Any] = {"task": ref.task, "store": ref.spec.name, "offset": None,
                           "keys": None, "result": "no local store", "note": "",
                           "differences": []}
    if not _has_files(ref.directory):
        out["note"] = "restored from the changelog at the next start"
        return out
    local, error = _offset_file(ref.directory)
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
    expected = changelog_state(_source(tools, ref), at) if _changelog_exists(tools, ref.spec) \
        else {}
    key_serde, _ = _serdes(tools, ref.spec)
    engine = _open_engine(ref)
    differences = []
    count = 0
    try:
        with engine.all() as entries:
            for key, value in entries:
                count += 1
                want = expected.pop(key, None)
                if want is None:
                    differences.append((key, "only in the local store"))
                elif want != value:
                    differences.append((key, "values differ"))
    finally:
        engine.close()
    differences.extend((key, "missing from the local store") for key in expected)
    out["keys"] = count
    out["result"] = "differs" if differences else "same"
    out["difference_count"] = len(differences)
    out["differences"] = [{"key": _jsonable(_typed(key_serde, key)), "why": why}
                          for key, why in sorted(differences)[:max_keys]]
    return out


def _typed(serde: Any, key: bytes) -> Any:
    try:
        return serde.from_bytes(key)
    except Exception:  # noqa: BLE001 - a key the serde cannot read is shown as bytes
        return key


# -- rebuild --------------------------------------------------------------------------------

def _rebuild(args: argparse.Namespace) -> int:
    from weir.engine.container.container import create_changelog_streams
    from weir.engine.container.task_storage import TaskStorage, changelog_source_name
    from weir.recovery.storage import ProgressMode

    tools = JobTools.load(args)
    done = []
    try:
        with tools.locked("weir state rebuild"):
            refs = [r for r in _refs(tools, args.store, args.task)
                    if r.spec.logged and r.spec.persistent]
            if not refs:
                raise RecoveryError("no persistent store with a changelog to rebuild")
            checkpoints = _checkpoints(tools, {r.task for r in refs})
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
                if _has_files(ref.directory):
                    kept = ref.directory.with_name(f"{ref.directory.name}.rebuild-{stamp}")
                    os.rename(ref.directory, kept)
                    fsync_dir(kept.parent)
                system = ref.spec.changelog[0]
                producer = tools.registry.producer(system)
                producer.register(changelog_source_name(ref.task, ref.spec.name))
                producer.start()
                try:
                    storage = TaskStorage(ref.task, [ref.spec], tools.job,
                                          ref.changelog_partition, {system: producer},
                                          tools.registry, tools.config, ProgressMode.AUTO)
                    storage.open(checkpoints[ref.task])
                    storage.close()
                finally:
                    producer.stop()
                (stats,) = storage.restore_stats()
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
        table.add_row(d["task"], d["store"], f"{d['records']:,}", _num(d["offset"]),
                      d["kept"] or "-")
    console = _console()
    console.print(table)
    console.print(f"rebuilt {len(done)} store(s); remove the kept copies once you trust the "
                  f"rebuilt stores")
    return 0


# -- export / import ------------------------------------------------------------------------

def _export(args: argparse.Namespace) -> int:
    tools = JobTools.load(args)
    out = Path(args.out)
    if out.exists():
        raise RecoveryError(f"{out} exists; choose another file (nothing was written)")
    try:
        with tools.locked("weir state export"):
            summary = _write_snapshot(tools, out)
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


def _write_snapshot(tools: JobTools, out: Path) -> dict[str, Any]:
    refs = [r for r in _refs(tools, None, None) if r.spec.persistent or r.spec.logged]
    checkpoints = _checkpoints(tools, set(tools.tasks()))
    written = {t: encode_checkpoint(t, cp) for t, cp in checkpoints.items() if cp is not None}
    stores = []
    header = {"kind": _SNAPSHOT_KIND, "format": SNAPSHOT_FORMAT, "job": tools.job.name,
              "job_id": tools.job.id, "created_ms": int(time.time() * 1000),
              "checkpoints": written}
    crc = 0
    records = 0
    temp = temp_path_for(out)
    with open(temp, "wb") as raw:
        writer = zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
        packer = msgpack.Packer(use_bin_type=True)
        writer.write(packer.pack(header))
        for ref in refs:
            checkpoint = checkpoints.get(ref.task)
            state, source = _snapshot_state(tools, ref, checkpoint)
            if state is None:
                continue
            pairs = sorted(state.items())
            stores.append({"task": ref.task, "store": ref.spec.name, "records": len(pairs),
                           "from": source})
            writer.write(packer.pack({"store": ref.spec.name, "task": ref.task,
                                      "records": len(pairs), "from": source}))
            for i in range(0, len(pairs), _CHUNK):
                chunk = pairs[i:i + _CHUNK]
                for key, value in chunk:
                    crc = crc32c.crc32c(value, crc32c.crc32c(key, crc))
                writer.write(packer.pack([list(p) for p in chunk]))
            records += len(pairs)
        writer.write(packer.pack({"end": True, "records": records, "crc32c": crc}))
        writer.close()
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(temp, out)
    fsync_dir(out.parent)
    return {"job": tools.job.name, "file": str(out), "checkpoints": sorted(written),
            "stores": stores}


def _snapshot_state(tools: JobTools, ref: _StoreRef, checkpoint: Checkpoint | None
                    ) -> tuple[dict[bytes, bytes] | None, str]:
    """A logged store's state at its checkpoint (from the changelog: consistent with the
    checkpoint by construction); a non-logged persistent store's local files."""
    if ref.spec.logged:
        if checkpoint is None or ref.spec.name not in checkpoint.changelog_offsets:
            return None, ""
        if not _changelog_exists(tools, ref.spec):
            return {}, "changelog"
        return changelog_state(_source(tools, ref),
                               checkpoint.changelog_offsets[ref.spec.name]), "changelog"
    if not _has_files(ref.directory):
        return None, ""
    engine = _open_engine(ref)
    try:
        with engine.all() as entries:
            return dict(entries), "local"
    finally:
        engine.close()


def _read_snapshot(path: Path) -> Iterator[Any]:
    with open(path, "rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        unpacker = msgpack.Unpacker(reader, raw=False, strict_map_key=False,
                                    max_buffer_size=1 << 30)
        try:
            yield from unpacker
        except (msgpack.UnpackException, ValueError, zstandard.ZstdError) as exc:
            raise RecoveryError(f"snapshot {path} is damaged ({exc}); nothing was imported. "
                                f"Export it again") from None


def _load_snapshot(path: Path) -> tuple[dict[str, Any], list[tuple[dict, list]]]:
    """The whole snapshot, checked (kind, format, record count, checksum) before any use."""
    items = iter(_read_snapshot(path))
    header = next(items, None)
    if not isinstance(header, dict) or header.get("kind") != _SNAPSHOT_KIND:
        raise RecoveryError(f"{path} is not a weir state snapshot; nothing was imported")
    if header.get("format") != SNAPSHOT_FORMAT:
        raise RecoveryError(f"snapshot {path} has format {header.get('format')}, this weir "
                            f"reads format {SNAPSHOT_FORMAT}; use the weir that wrote it")
    stores: list[tuple[dict, list]] = []
    crc = 0
    records = 0
    end = None
    for item in items:
        if isinstance(item, dict) and item.get("end"):
            end = item
            break
        if isinstance(item, dict):
            stores.append((item, []))
            continue
        for key, value in item:
            crc = crc32c.crc32c(value, crc32c.crc32c(key, crc))
            stores[-1][1].append((key, value))
            records += 1
    if end is None or end.get("records") != records or end.get("crc32c") != crc:
        raise RecoveryError(f"snapshot {path} is incomplete or damaged (its checksum or record "
                            f"count does not match); nothing was imported. Export it again")
    for meta, pairs in stores:
        if meta.get("records") != len(pairs):
            raise RecoveryError(f"snapshot {path}: store '{meta.get('store')}' of task "
                                f"'{meta.get('task')}' is incomplete; nothing was imported")
    return header, stores


def _import(args: argparse.Namespace) -> int:
    from weir.engine.container.checkpoints import open_checkpoint_manager
    from weir.engine.container.container import create_changelog_streams
    from weir.engine.container.task_storage import changelog_source_name
    from weir.engine.systems.changelog import SystemChangelogSink
    from weir.stores.builder import open_engine

    tools = JobTools.load(args)
    path = Path(args.source)
    header, stores = _load_snapshot(path)
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
    refs = {(r.task, r.spec.name): r for r in _refs(tools, None, None)}
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
                    system = ref.spec.changelog[0]
                    producer = tools.registry.producer(system)
                    source_name = changelog_source_name(ref.task, ref.spec.name)
                    producer.register(source_name)
                    producer.start()
                    try:
                        sink = SystemChangelogSink(producer, ref.changelog_ssp, source_name)
                        for i in range(0, len(pairs), _CHUNK):
                            sink.append_all(pairs[i:i + _CHUNK])
                        sink.flush()
                    finally:
                        producer.stop()
                    offsets.setdefault(ref.task, {})[ref.spec.name] = \
                        _source(tools, ref).newest_offset()
                elif ref.spec.persistent:
                    engine = open_engine(ref.spec, ref.directory, logged=False)
                    try:
                        engine.put_all(pairs)
                        engine.flush()
                    finally:
                        engine.close()
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


def _check_empty(tools: JobTools, manager: Any, refs: Any) -> None:
    """Import fills an empty job only: no checkpoint, no changelog records, no local files."""
    found = [f"checkpoint of task '{t}'" for t in manager.task_names()]
    for ref in refs:
        if ref.spec.logged and _changelog_exists(tools, ref.spec) and \
                _source(tools, ref).newest_offset() != NO_OFFSET:
            found.append(f"changelog records of store '{ref.spec.name}' for task '{ref.task}'")
        if _has_files(ref.directory):
            found.append(f"local files of store '{ref.spec.name}' ({ref.directory})")
    if found:
        raise RecoveryError(
            f"job '{tools.job.name}' already has state ({'; '.join(found[:5])}"
            f"{'; ...' if len(found) > 5 else ''}); import fills an empty job only, so nothing "
            f"was imported. Move the job's state aside first with `weir checkpoint reset "
            f"{tools.path} --yes`")
