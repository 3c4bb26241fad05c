"""Where the stream of a ``weir log`` command lives: the system registry and system that
``--root``, ``--config``, ``--system`` and ``--set`` point at, and the named stream there."""

from __future__ import annotations

import argparse
from typing import Any

from weir.stores.config import Config

from weir.engine.errors import EngineError
from weir.engine.model import SystemStream
from weir.engine.systems.registry import SystemRegistry

__all__ = ["DEFAULT_SYSTEM", "target", "system_root", "where", "existing_stream"]

DEFAULT_SYSTEM = "filelog"


def target(args: argparse.Namespace) -> tuple[SystemRegistry, str]:
    """The registry and system name the arguments point at."""
    system = args.system or DEFAULT_SYSTEM
    if args.config:
        from weir.engine.cli.run import add_config_dir_to_path
        from weir.engine.config.job import load_config
        add_config_dir_to_path(args.config)  # a serde class beside the config, as weir run
        config = load_config(args.config, args.set)
    else:
        config = Config().merged(_parse_sets(args.set), origin="--set")
    if args.root:
        config = config.merged({f"systems.{system}.root": args.root}, origin="--root")
    return SystemRegistry(config), system


def _parse_sets(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise EngineError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def system_root(reg: SystemRegistry, system: str) -> str | None:
    """The directory the system keeps its streams in (the file log's root), if it has one."""
    return reg.admin(system).root


def where(reg: SystemRegistry, system: str) -> str:
    """`` (root DIR)`` for a system with a root directory, else nothing."""
    root = system_root(reg, system)
    return f" (root {root})" if root else ""


def existing_stream(args: argparse.Namespace) -> tuple[SystemRegistry, SystemStream, Any, int]:
    """The registry, stream, admin and partition count of ``args.stream``, which must exist
    (and have ``args.partition``, when given)."""
    reg, system = target(args)
    ss = SystemStream(system, args.stream)
    admin = reg.admin(system)
    if not admin.stream_exists(args.stream):
        root = system_root(reg, system)
        raise reg.stream_not_found(system, args.stream, f"create it with `weir log create "
                                   f"{args.stream}{' --root ' + root if root else ''}`, or "
                                   f"point --root/--config/--system at where it is")
    count = admin.partition_count(args.stream)
    partition = getattr(args, "partition", None)
    if partition is not None and partition >= count:
        raise EngineError(f"--partition {partition}: stream '{ss}' has partitions "
                          f"0..{count - 1}")
    return reg, ss, admin, count
