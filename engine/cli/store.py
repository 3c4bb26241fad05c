"""``weir store repair``: the old name of ``weir state repair``
(:mod:`weir.engine.cli.state.repair`), kept so that scripts and the advice in older error
messages keep working."""

from __future__ import annotations

import argparse

from weir.engine.cli.state.repair import add_repair_parser

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "store", help="repair a store (the old name of `weir state repair`)",
        description="Operator repairs of a task's store (run while the job is stopped); "
                    "`weir state repair` is the same command.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_repair_parser(actions)
