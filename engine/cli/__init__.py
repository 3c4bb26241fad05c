"""The ``weir`` command line.

Each subcommand group lives in its own module under ``weir.engine.cli`` exposing
``register(subparsers)``; the module adds its parser (named as the module: ``weir.engine.cli.run``
adds ``run``) and sets ``func`` on it, a callable taking the parsed args and returning the
exit code. ``weir COMMAND ...`` imports only that command's module (``weir run`` does not pay
for the imports of ``weir state`` or ``weir log``); ``weir``, ``weir --help`` and an unknown
command build the whole parser.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from weir.engine import __version__
from weir.stores.errors import WeirError

__all__ = ["main", "build_parser"]

_COMMAND_MODULES = (
    "weir.engine.cli.log",      # weir log create|produce|tail|list|describe|delete|transactions
    "weir.engine.cli.config",   # weir config docs|show
    "weir.engine.cli.run",      # weir run job.properties
    "weir.engine.cli.checkpoint",  # weir checkpoint show|set|use-previous|reset job.properties
    "weir.engine.cli.state",    # weir state list|show|dump|verify|rebuild|export|import|repair
    "weir.engine.cli.store",    # weir store repair (deprecated alias of weir state repair)
    "weir.engine.cli.coordinator",  # weir coordinator set-config|show
    "weir.engine.cli.plan",     # weir plan app.properties
    "weir.engine.cli.drain",    # weir drain job.properties
    "weir.engine.cli.spark",    # weir spark show|repartition CHECKPOINT
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``weir`` parser with every subcommand, or only ``command``'s when it names one
    (the others are then not imported)."""
    parser = argparse.ArgumentParser(
        prog="weir", description="Weir: stateful stream processing for Python.")
    parser.add_argument("--version", action="version", version=f"weir {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    only = _module_of(command)
    for name in _COMMAND_MODULES if only is None else (only,):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def _module_of(command: str | None) -> str | None:
    """The module of subcommand ``command`` (None: not one of them)."""
    if command is None:
        return None
    return next((m for m in _COMMAND_MODULES if m.rpartition(".")[2] == command), None)


def _command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first argument, unless that is an option."""
    return argv[0] if argv and not argv[0].startswith("-") else None


USAGE_ERROR = 2
"""The exit code of a command line that names no command (argparse's for usage errors)."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return USAGE_ERROR  # `weir` alone did nothing: a script must not take it for success
    try:
        code = int(func(args) or 0)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except BrokenPipeError:
        # `weir state dump ... | head`: the reader has what it wanted. Point standard output
        # at /dev/null so the interpreter's last flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
    except WeirError as exc:
        print(f"weir: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # What the checks before a run cannot foresee (a disk that fills or turns read-only
        # while the job starts): say what failed and where, not a traceback.
        from weir.engine.runloop.failures import machine_fault
        fault = machine_fault(exc)
        what = f"the machine failed: {fault.describe()}: " if fault is not None else ""
        print(f"weir: error: {what}{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
