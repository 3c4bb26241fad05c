"""The adjunct stores (docs/ADJUNCT.md) as ``weir state list`` and ``show`` see them: one
directory per owner, with the versions it serves and builds and the input offsets recorded
beside it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from weir.recovery.storage import task_directory_name
from weir.stores.spec import StoreSpec

from weir.engine.cli._job import JobTools
from weir.engine.cli.state.stores import (adjunct_names, directory_size, read_entries,
                                          store_serdes)

__all__ = ["adjunct_dirs", "adjunct_rows", "adjunct_entries"]


def adjunct_dirs(tools: JobTools, store: str | None = None) -> list[tuple[Path, Any]]:
    """``(directory, what its ADJUNCT-OFFSETS records, or why not)`` of every adjunct store
    (of ``store``) under the logged store base."""
    from weir.engine.config.job import StoreBase
    from weir.recovery.adjunct import list_adjunct_stores
    names = adjunct_names(tools)
    return [(d, rec) for d, rec in list_adjunct_stores(tools.job.base_dir(StoreBase.LOGGED))
            if d.parent.name in names and (store is None or d.parent.name == store)]


def adjunct_rows(tools: JobTools, stores: list[str] | None) -> list[dict[str, Any]]:
    """One row per adjunct store: owner (a task's directory or ``broadcast-container-<id>``),
    the version served and the one being built, the input offsets recorded beside it."""
    rows = []
    for directory, rec in adjunct_dirs(tools):
        if stores and directory.parent.name not in stores:
            continue
        if isinstance(rec, str):
            rows.append({"store": directory.parent.name, "owner": directory.name,
                         "directory": str(directory), "error": rec})
            continue
        rows.append({"store": rec.store, "owner": directory.name, "directory": str(directory),
                     "engine": rec.engine, "input": rec.input, "serving_version": rec.serving,
                     "building_version": rec.building, "offsets": dict(rec.offsets),
                     "written_at_ms": rec.written_at_ms,
                     "size_bytes": directory_size(directory)})
    return rows


def adjunct_entries(tools: JobTools, args: argparse.Namespace, spec: StoreSpec, prefix: Any
                    ) -> Iterator[tuple[str, Any, Any]]:
    """Entries of the version each copy of adjunct store ``spec`` serves."""
    from weir.stores.offline import open_read_only
    key_serde, value_serde = store_serdes(tools, spec)
    origin = tools.config.origin(f"stores.{spec.name}.factory")
    owners = {task_directory_name(t) for t in args.task} if args.task else None
    for directory, rec in adjunct_dirs(tools, spec.name):
        if isinstance(rec, str) or rec.serving is None:
            continue
        if owners is not None and directory.name not in owners:
            continue
        engine = open_read_only(spec, directory / f"v{rec.serving}", origin=origin)
        for key, value in read_entries(engine, prefix, args.limit):
            yield (f"{directory.name} v{rec.serving}", key_serde.from_bytes(key),
                   value_serde.from_bytes(value))
