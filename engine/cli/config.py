"""``weir config``: the effective config of a job, and the generated key reference.

* ``weir config show job.properties [--set k=v ...] [--defaults] [--strict]`` prints every
  key with its value and where it was set (``file:line``, ``--set``, ``default``), then the
  warnings (unknown keys, with the closest known key) and the notes (Samza keys Weir accepts
  and does not use, and what it does instead). It runs ``weir run``'s own check first
  (:func:`~weir.engine.container.preflight.preflight`: keys, task or application class,
  every setting, every directory; an application is planned, as ``weir run`` plans it), so
  a config it passes, ``weir run`` accepts. A bad value fails with the key, its place and
  what is allowed. ``--strict`` exits 1 when there are warnings (not for notes).
* ``weir config docs [--output FILE|-] [--check]`` writes the key reference generated from
  every ``declare(...)``: to ``--output`` (``-`` is standard output); without it, to
  ``docs/CONFIG.md`` when run at the root of a Weir checkout (with the key index
  ``engine/config/_declared_keys.py`` that lets a run import only the modules declaring its
  keys), else to standard output. ``--check`` writes nothing and exits 1 with a diff when a
  file is stale.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tomllib
from pathlib import Path

from rich.table import Table

from weir.stores.filesafety import atomic_write
from weir.stores.config import declared_keys

from weir.engine.errors import EngineError
from weir.engine.cli._console import console as _console
from weir.engine.config.declarations import INDEX_PATH, render_index
from weir.engine.config.job import (
    OVERRIDE_ORIGIN,
    config_docs_markdown,
    load_all_declarations,
    load_every_declaration,
    load_config,
    review_config,
)

__all__ = ["register", "write_atomically", "is_weir_checkout"]

_DEFAULT_OUTPUT = "docs/CONFIG.md"
_STDOUT = "-"
_DIFF_LINES = 40


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "config", help="show a job's effective config, generate the config reference",
        description="Show a job's effective config or generate docs/CONFIG.md.")
    sub = parser.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: _help(parser))

    show = sub.add_parser("show", help="print the effective config with origins and warnings")
    show.add_argument("path", help="job config (.properties, .yaml or .yml)")
    show.add_argument("--set", dest="overrides", action="append", default=[],
                      metavar="KEY=VALUE", help="override a key (repeatable)")
    show.add_argument("--defaults", action="store_true",
                      help="also list declared keys left at their defaults")
    show.add_argument("--strict", action="store_true", help="exit 1 when there are warnings")
    show.set_defaults(func=_show)

    docs = sub.add_parser("docs", help="generate the config key reference (docs/CONFIG.md)")
    docs.add_argument("--output", "-o", metavar="FILE",
                      help=f"where to write it, '-' for standard output (default: "
                           f"{_DEFAULT_OUTPUT} at the root of a Weir checkout, else standard "
                           f"output)")
    docs.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 with a diff if the file is stale")
    docs.set_defaults(func=_docs)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def _default_text(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(getattr(value, "value", value))


def _checked(config) -> tuple[list, list]:
    """``weir run``'s checks of ``config`` (an application planned first, as ``weir run``
    plans it): its warnings and notes."""
    from weir.engine.container.preflight import preflight, refuse_task_as_application
    if "app.class" in config and "task.class" not in config:
        refuse_task_as_application(config)
        from weir.engine.app.planner import plan_application
        own = review_config(config)
        checked = preflight(plan_application(config).job_config(None))
        warnings = [*own.warnings, *(w for w in checked.review.warnings
                                     if w.key not in {x.key for x in own.warnings})]
        return warnings, own.notes
    checked = preflight(config)
    return checked.review.warnings, checked.review.notes


def _show(args: argparse.Namespace) -> int:
    from weir.engine.cli.run import add_config_dir_to_path
    config = load_config(args.path, args.overrides)
    add_config_dir_to_path(args.path)  # task.class=module:Class beside the config, as weir run
    warnings, notes = _checked(config)
    load_all_declarations()  # every key, for --defaults
    out = _console()
    table = Table(title=f"Effective config of {args.path}", title_justify="left")
    table.add_column("key", style="bold", overflow="fold")
    table.add_column("value", overflow="fold")
    table.add_column("origin", style="dim", overflow="fold")
    rows = [(k, config[k], config.origin(k) or "") for k in config]
    if args.defaults:
        for decl in declared_keys():
            names = (decl.name, *decl.aliases)
            if "<" in decl.name or decl.default is None or any(n in config for n in names):
                continue
            rows.append((decl.name, _default_text(decl.default), "default"))
    for key, value, origin in sorted(rows):
        table.add_row(key, value, origin)
    out.print(table)
    overridden = sum(1 for k in config if config.origin(k) == OVERRIDE_ORIGIN)
    for warning in warnings:
        out.print(f"[yellow]warning:[/yellow] {warning.message}", markup=True, highlight=False)
    for note in notes:
        out.print(f"[cyan]note:[/cyan] {note.message}", markup=True, highlight=False)
    out.print(f"{len(config)} keys from {args.path} ({overridden} from --set); "
              f"{_count(len(warnings), 'warning')}, {_count(len(notes), 'note')}")
    return 1 if warnings and args.strict else 0


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'s' if n != 1 else ''}"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old or the new file, never half of
    one: temp file in the same directory, fsync, rename, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text.encode("utf-8"))


def is_weir_checkout(directory: Path) -> bool:
    """Whether ``directory`` is the root of a Weir source checkout: its ``pyproject.toml``
    names the project ``weir`` and it has a ``docs`` directory."""
    try:
        with open(directory / "pyproject.toml", "rb") as f:
            name = tomllib.load(f).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return name == "weir" and (directory / "docs").is_dir()


def _docs_target(args: argparse.Namespace) -> Path | None:
    """Where ``weir config docs`` writes (None: standard output)."""
    if args.output == _STDOUT:
        return None
    if args.output is not None:
        return Path(args.output)
    if is_weir_checkout(Path.cwd()):
        return Path(_DEFAULT_OUTPUT)
    if args.check:
        raise EngineError(f"nothing to check: {Path.cwd()} is not the root of a Weir checkout, "
                          f"so there is no {_DEFAULT_OUTPUT} here; pass --output FILE")
    return None


def _docs(args: argparse.Namespace) -> int:
    text = config_docs_markdown()
    path = _docs_target(args)
    keys = len(declared_keys())
    modules = len(load_every_declaration())
    if path is None:
        if args.check:
            raise EngineError("--check compares with a file: pass --output FILE")
        sys.stdout.write(text)
        return 0
    files = [(path, text)]
    if args.output is None:  # the root of a checkout: the key index too
        files.append((Path(INDEX_PATH), render_index()))
    if args.check:
        stale = False
        for target, generated in files:
            stale |= not _up_to_date(target, generated, args)
        if not stale:
            print(f"{', '.join(str(t) for t, _ in files)} up to date ({keys} keys from "
                  f"{modules} modules)")
        return 1 if stale else 0
    for target, generated in files:
        write_atomically(target, generated)
        print(f"wrote {target}: {keys} keys from {modules} modules")
    return 0


def _up_to_date(path: Path, text: str, args: argparse.Namespace) -> bool:
    """Whether ``path`` holds ``text``; if not, prints a diff and how to regenerate it."""
    if not path.exists():
        raise EngineError(f"{path} does not exist: generate it with "
                          f"`weir config docs --output {path}`")
    current = path.read_text(encoding="utf-8")
    if current == text:
        return True
    diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(),
                                     f"{path} (committed)", f"{path} (from the code)",
                                     lineterm="", n=1))
    for line in diff[:_DIFF_LINES]:
        print(line, file=sys.stderr)
    if len(diff) > _DIFF_LINES:
        print(f"... {len(diff) - _DIFF_LINES} more diff lines", file=sys.stderr)
    command = "weir config docs" + ("" if args.output is None else f" --output {path}")
    print(f"{path} is stale: regenerate it with `{command}` and commit it", file=sys.stderr)
    return False
