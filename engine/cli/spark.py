"""``weir spark show|repartition CHECKPOINT``: the state Weir keeps in a Spark query's checkpoint.

* ``weir spark show CHECKPOINT [--operator NAME] [--json]``: every operator under
  ``CHECKPOINT/weir`` (kind, partitions, stores with their providers) and, per partition, the
  versions it holds (first, newest, changelogs, snapshots), its rows at the newest version and
  its bytes on disk. No Spark needed.
* ``weir spark repartition CHECKPOINT --operator NAME --partitions N [--key-types T,...]``:
  rewrite an operator's state for N partitions while its query is stopped
  (:mod:`weir.engine.spark.repartition`); the old state is kept beside it. Exit codes: 0 done
  (or nothing to do), 2 refused (nothing changed).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "spark", help="inspect or repartition the state Weir keeps in a Spark checkpoint",
        description="The state of Weir's Spark operators (docs/SPARK.md).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="operators, partitions, versions, rows and sizes")
    show.add_argument("checkpoint", help="the query's checkpoint location")
    show.add_argument("--operator", help="only this operator")
    show.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    show.set_defaults(func=_show)
    again = actions.add_parser(
        "repartition", help="rewrite an operator's state for another partition count",
        description="Rewrite an operator's state (StateOperator or transform_with_state) for "
                    "another partition count, offline: stop the query first, run this, then "
                    "start the query with the new partition count.")
    again.add_argument("checkpoint", help="the query's checkpoint location")
    again.add_argument("--operator", required=True, help="the operator's name")
    again.add_argument("--partitions", required=True, type=int, help="the new partition count")
    again.add_argument("--key-types", default=None,
                       help="Spark types of the key columns, comma-separated (string, long, "
                            "int, double, ...), when the operator's metadata has none")
    again.add_argument("--json", action="store_true", help="print the result as JSON")
    again.set_defaults(func=_repartition)


def _show(args: argparse.Namespace) -> int:
    from weir.engine.spark.durable import OperatorCheckpoint, list_operators
    from weir.engine.spark.statefile import VersionKind

    operators = [args.operator] if args.operator else list_operators(args.checkpoint)
    rows = []
    for name in operators:
        op = OperatorCheckpoint(args.checkpoint, name)
        meta = op.read_meta()
        if meta is None:
            print(f"weir: error: no operator '{name}' in {args.checkpoint}", file=sys.stderr)
            return 2
        for p in range(meta.partitions):
            files = op.partition(p)
            listing = files.listing()
            size = sum(e.size for e in files.storage.entries(files.directory)
                       if e.name.endswith(".zst"))
            state_rows = None
            if listing.changelogs:
                header = files.read(listing.latest, VersionKind.CHANGELOG, sections=[])
                state_rows = sum((header.meta.get("rows") or {}).values())
            rows.append({"operator": name, "kind": meta.kind, "partitions": meta.partitions,
                         "stores": {s: d.get("provider") for s, d in meta.stores.items()},
                         "partition": p,
                         "first_version": listing.changelogs[0] if listing.changelogs else None,
                         "latest_version": listing.changelogs[-1] if listing.changelogs else None,
                         "changelogs": len(listing.changelogs),
                         "snapshots": len(listing.snapshots), "rows": state_rows,
                         "bytes": size})
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Weir state in {args.checkpoint}")
    for column in ("operator", "kind", "partition", "versions", "changelogs", "snapshots",
                   "rows", "bytes"):
        table.add_column(column, justify="right" if column in ("rows", "bytes") else "left")
    for row in rows:
        versions = (f"{row['first_version']}..{row['latest_version']}"
                    if row["latest_version"] is not None else "-")
        table.add_row(row["operator"], row["kind"], str(row["partition"]), versions,
                      str(row["changelogs"]), str(row["snapshots"]),
                      f"{row['rows']:,}" if row["rows"] is not None else "-", f"{row['bytes']:,}")
    Console().print(table)
    print(f"{len({r['operator'] for r in rows})} operator(s), {len(rows)} partition(s), "
          f"{sum(r['rows'] or 0 for r in rows):,} row(s), {sum(r['bytes'] for r in rows):,} bytes")
    return 0


def _repartition(args: argparse.Namespace) -> int:
    from weir.engine.spark.repartition import repartition

    types = [t.strip() for t in args.key_types.split(",")] if args.key_types else None
    result = repartition(args.checkpoint, args.operator, args.partitions, key_types=types)
    if args.json:
        print(json.dumps({"operator": result.operator, "version": result.version,
                          "before": list(result.before), "after": list(result.after),
                          "kept": str(result.kept) if result.kept else None,
                          "seconds": round(result.seconds, 3)}))
        return 0
    if result.kept is None:
        print(f"operator '{result.operator}' already has {args.partitions} partitions; nothing "
              f"to do")
        return 0
    print(f"operator '{result.operator}': version {result.version} rewritten from "
          f"{len(result.before)} to {len(result.after)} partitions "
          f"({sum(result.after):,} keys; per partition {', '.join(map(str, result.after))}) in "
          f"{result.seconds:.2f} s; the old state is kept in {result.kept}")
    return 0
