"""``weir log describe`` and ``weir log list``: a stream's partitions and offsets, and the
streams of a system with their size, policy and whether they ended."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import PartitionInfo
from weir.engine.cli._console import console as _console
from weir.engine.cli.log.stream_info import (human_bytes, partition_details,
                                             stable_offsets, summary, traits,
                                             value_text)
from weir.engine.cli.log.target import existing_stream, target, where

__all__ = ["describe_stream", "list_streams"]


def describe_stream(args: argparse.Namespace) -> int:
    """``weir log describe STREAM``: a table of its partitions."""
    reg, ss, admin, count = existing_stream(args)
    system = ss.system
    ssps = [SystemStreamPartition(system, args.stream, p) for p in range(count)]
    metadata = admin.metadata(ssps)
    details = partition_details(admin, args.stream)
    title = f"{system}.{args.stream}: {count} partition(s)" + traits(admin, args.stream)
    table = Table(title=title + where(reg, system))
    stable = stable_offsets(admin, args.stream)
    columns = ["partition", "oldest", "newest", "upcoming"]
    columns += ["stable"] if stable else []
    for column in columns + ["segments", "bytes", "ended"]:
        table.add_column(column, justify="left" if column == "ended" else "right")
    total = 0
    for ssp in ssps:
        md, info = metadata[ssp], details.get(ssp.partition, PartitionInfo(ssp.partition))
        total += md.upcoming - md.oldest
        row = [str(ssp.partition), str(md.oldest), str(md.newest), str(md.upcoming)]
        if stable:
            lso, open_txns = stable[ssp.partition]
            row.append(f"{lso} ({len(open_txns)} open)" if open_txns else str(lso))
        table.add_row(*row, value_text(info.segments), value_text(info.bytes, "{:,}"),
                      {True: "yes", False: "no"}.get(info.ended, "-"))
    console = _console()
    console.print(table)
    console.print(f"{total:,} offset(s) across {count} partition(s)"
                  + ("; 'stable': the last stable offset, where read_committed readers stop "
                     "while a transaction is open" if stable else ""))
    return 0


def list_streams(args: argparse.Namespace) -> int:
    """``weir log list``: a table of the system's streams (``--json``: one object a line)."""
    reg, system = target(args)
    admin = reg.admin(system)
    rows = [summary(admin, system, stream) for stream in admin.list_streams()]
    if args.json:
        for row in rows:
            print(json.dumps(row.as_json()))
        return 0
    at = where(reg, system)
    if not rows:
        print(f"no streams in {system}{at}; create one with `weir log create STREAM`")
        return 0
    console = _console()
    console.print(f"{system}: {len(rows)} stream(s){at}", soft_wrap=True)
    table = Table()
    for column, justify in (("stream", "left"), ("partitions", "right"), ("records", "right"),
                            ("size", "right"), ("policy", "left"), ("bounded", "left"),
                            ("ended", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for row in rows:
        table.add_row(row.stream, str(row.partitions),
                      f"{'' if row.records_exact else '<= '}{row.records:,}",
                      "-" if row.bytes is None else human_bytes(row.bytes),
                      row.cleanup_policy.value if row.cleanup_policy else "-",
                      {True: "yes", False: "no"}.get(row.bounded, "-"), row.ended_text)
    console.print(table)
    sizes = [row.bytes for row in rows if row.bytes is not None]
    total = f"{sum(row.records for row in rows):,} record(s)"
    if sizes:
        total += f", {human_bytes(sum(sizes))}"
    console.print(f"{total} in {len(rows)} stream(s)"
                  + ("; '<=' marks compacted streams, where compaction leaves gaps in the "
                     "offsets" if any(not row.records_exact for row in rows) else ""),
                  soft_wrap=True)
    return 0
