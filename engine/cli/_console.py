"""The rich console the ``weir`` commands print their tables on."""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console

__all__ = ["console"]


def console(stream: TextIO | None = None, *, width: int = 200) -> Console:
    """Rich output on ``stream`` (standard output by default): as wide as the terminal, or
    ``width`` columns when the output goes to a file or a pipe, so that scripts grepping it
    see whole table rows and paths."""
    stream = stream or sys.stdout
    interactive = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=stream, width=None if interactive else width, soft_wrap=False,
                   highlight=False)
