"""``weir log transactions STREAM [--resolve]``: the file log's transactional producers and
the transactions open in each partition (what holds ``read_committed`` readers back); with
``--resolve``, complete those whose producer is gone (roll forward what its checkpoint
committed, abort the rest)."""

from __future__ import annotations

import argparse

from rich.table import Table

from weir.engine.errors import EngineError
from weir.engine.cli._console import console as _console
from weir.engine.cli.log.target import existing_stream, where
from weir.engine.cli.log.text import format_timestamp

__all__ = ["show_transactions"]


def show_transactions(args: argparse.Namespace) -> int:
    """``weir log transactions STREAM``: a table of the open transactions."""
    reg, ss, admin, count = existing_stream(args)
    from weir.engine.systems.filelog.admin import FileLogAdmin
    if not isinstance(admin, FileLogAdmin):
        raise EngineError(f"system '{ss.system}' has no transactions (only the file log has)")
    from weir.engine.systems.filelog.abandoned import complete_abandoned
    from weir.engine.systems.filelog.producer_state import producer_states
    states = {s.producer_id: s for s in producer_states(admin.root)}
    console = _console()
    table = Table(title=f"{ss}: open transactions" + where(reg, ss.system))
    for column in ("partition", "stable", "producer", "transactional id", "epoch",
                   "transaction", "first offset", "open since"):
        table.add_column(column, justify="left" if column == "transactional id" else "right")
    found = admin.open_transactions(args.stream)
    open_count = 0
    done = []
    for partition, (lso, open_txns) in sorted(found.items()):
        for txn in open_txns:
            open_count += 1
            state = states.get(txn.producer_id)
            table.add_row(str(partition), str(lso), str(txn.producer_id),
                          state.transactional_id if state else "?", str(txn.epoch),
                          str(txn.sequence), str(txn.first_offset),
                          format_timestamp(txn.since_ms))
            if args.resolve:
                done.append(f"partition {partition}: " + complete_abandoned(
                    admin.settings, args.stream, partition, txn.producer_id, txn.epoch,
                    txn.sequence))
    console.print(table)
    console.print(f"{open_count} open transaction(s) in {count} partition(s) of {ss}")
    for line in done:
        console.print(line, highlight=False, soft_wrap=True)
    return 0
