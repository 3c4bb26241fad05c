"""``weir log create`` and ``weir log delete``: a stream comes and goes."""

from __future__ import annotations

import argparse

from weir.engine.errors import EngineError, UnsupportedOperationError
from weir.engine.systems.api import CleanupPolicy, StreamSpec
from weir.engine.cli.log.stream_info import human_bytes, summary
from weir.engine.cli.log.target import existing_stream, system_root, target, where

__all__ = ["create_stream", "delete_stream"]


def create_stream(args: argparse.Namespace) -> int:
    """``weir log create STREAM``: create it (an existing stream is left as it is)."""
    reg, system = target(args)
    policy = CleanupPolicy.COMPACT if args.compact else CleanupPolicy.DELETE
    spec = StreamSpec(args.stream, args.partitions, policy, bounded=args.bounded)
    created = reg.admin(system).create_stream(spec)
    traits = ", ".join([policy.value] + (["bounded"] if args.bounded else []))
    verb = "created" if created else "already exists:"
    print(f"{verb} {system}.{args.stream} with {args.partitions} partition(s), {traits}"
          f"{where(reg, system)}")
    return 0


def delete_stream(args: argparse.Namespace) -> int:
    """``weir log delete STREAM --yes``: the stream and every record in it."""
    reg, ss, admin, _ = existing_stream(args)
    if not admin.deletes_streams:
        raise UnsupportedOperationError(ss.system, "delete streams", "only the file log can")
    row = summary(admin, ss.system, args.stream)
    size = "" if row.bytes is None else f", {human_bytes(row.bytes)}"
    root = system_root(reg, ss.system)
    what = (f"{ss}{f' in {root}' if root else ''}: {row.partitions} partition(s), "
            f"{row.records:,} record(s){size}")
    if not args.yes:
        raise EngineError(f"not deleting {what}; deleting a stream removes every record in "
                          f"it and cannot be undone: run again with --yes")
    admin.delete_stream(args.stream)
    print(f"deleted {what}")
    return 0
