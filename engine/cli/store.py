"""``weir store repair``: a deprecated alias of ``weir state repair``
(:mod:`weir.engine.cli.state.repair`), kept so that existing scripts keep working. It takes
the same arguments, does the same thing, and says on stderr that it is deprecated; errors and
docs advise ``weir state repair``."""

from __future__ import annotations

import argparse
import sys

from weir.engine.cli.state.repair import add_repair_parser

__all__ = ["DEPRECATION", "register"]

DEPRECATION = ("weir: `weir store repair` is deprecated and will be removed; use `weir state "
               "repair` (same arguments)")
"""What the alias prints on stderr before it runs."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "store", help="deprecated: use `weir state repair`",
        description="Deprecated alias: `weir store repair` is `weir state repair` (same "
                    "arguments); use `weir state repair`.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_repair_parser(actions)
    repair = actions.choices["repair"]
    repair.set_defaults(func=_deprecated(repair.get_default("func")))


def _deprecated(func):
    def run(args: argparse.Namespace) -> int:
        print(DEPRECATION, file=sys.stderr)
        return func(args)

    return run
