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
  is its deprecated alias).

One module per job: :mod:`~weir.engine.cli.state.inspection` (list, show, dump),
:mod:`~weir.engine.cli.state.verify`, :mod:`~weir.engine.cli.state.rebuild`,
:mod:`~weir.engine.cli.state.snapshot` (export, import; the file format in
:mod:`~weir.engine.cli.state.snapshot_file`), :mod:`~weir.engine.cli.state.repair`; what they
share: :mod:`~weir.engine.cli.state.stores` (the stores a command works on),
:mod:`~weir.engine.cli.state.adjunct` (adjunct stores), :mod:`~weir.engine.cli.state.restore`
(restoring one store as a start would) and :mod:`~weir.engine.cli.state.text` (cells).

Examples::

    weir state list job.properties
    weir state show job.properties --store counts --prefix user- --limit 20
    weir state verify job.properties --json
    weir state rebuild job.properties --store counts --task 'Partition 0'
    weir state export job.properties --out counts.weirsnap
"""

from __future__ import annotations

import argparse
from typing import Any

from weir.engine.cli._job import job_arguments
from weir.engine.cli.state.inspection import SHOW_LIMIT, dump_store, list_stores, show_store
from weir.engine.cli.state.rebuild import rebuild_stores
from weir.engine.cli.state.repair import add_repair_parser
from weir.engine.cli.state.snapshot import export_state, import_state
from weir.engine.cli.state.snapshot_file import SNAPSHOT_FORMAT
from weir.engine.cli.state.verify import verify_stores

__all__ = ["register", "SNAPSHOT_FORMAT"]


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
    p.set_defaults(func=list_stores)

    for name, func, text in (("show", show_store, "a store's contents as a table"),
                             ("dump", dump_store, "a store's contents as JSON lines")):
        p = actions.add_parser(name, parents=[job], help=text)
        p.add_argument("--store", required=True, help="the store (stores.<name>.*)")
        p.add_argument("--task", action="append", metavar="TASK",
                       help="only this task (repeatable; default: every task)")
        p.add_argument("--prefix", help="only keys starting with this (typed key, serialized "
                                        "with the store's key serde; bytes keys: UTF-8)")
        p.add_argument("--limit", type=int, default=SHOW_LIMIT if name == "show" else None,
                       help=f"at most this many entries per task (show: {SHOW_LIMIT})")
        if name == "show":
            p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=func)

    p = actions.add_parser(
        "verify", parents=[job, which, out],
        help="compare each local store with its changelog (exit 1 on a difference)")
    p.add_argument("--max-keys", type=int, default=10,
                   help="name at most this many differing keys per store (default 10)")
    p.set_defaults(func=verify_stores)

    p = actions.add_parser(
        "rebuild", parents=[job, which, out],
        help="rebuild local stores from their changelogs (the old files are kept aside)")
    p.set_defaults(func=rebuild_stores)

    p = actions.add_parser("export", parents=[job, out],
                           help="write a consistent snapshot of the job's state to a file")
    p.add_argument("--out", required=True, help="the snapshot file to write")
    p.set_defaults(func=export_state)

    p = actions.add_parser("import", parents=[job, out],
                           help="fill an empty job's state from a snapshot file")
    p.add_argument("--in", dest="source", required=True, help="the snapshot file to read")
    p.set_defaults(func=import_state)

    add_repair_parser(actions)
