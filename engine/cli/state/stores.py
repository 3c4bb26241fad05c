"""What the ``weir state`` commands work on: the stores of a stopped job's tasks
(:class:`StoreRef`), their local files, serdes, changelogs and checkpoints."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.offset_file import OffsetFileCorruptError, read_offset_file
from weir.recovery.storage import task_directory_name
from weir.stores.changelog import NO_OFFSET
from weir.stores.locking import LOCK_FILE_NAME
from weir.stores.spec import StoreSpec

from weir.engine.cli._job import JobTools

__all__ = ["StoreRef", "store_refs", "adjunct_names", "has_files", "directory_size",
           "open_local", "read_entries", "store_serdes", "changelog_source",
           "changelog_exists", "changelog_state", "last_checkpoints", "offset_file_of"]


@dataclass(frozen=True)
class StoreRef:
    """One store of one task: its spec, its local directory and its changelog partition."""

    task: str
    spec: StoreSpec
    directory: Path | None
    changelog_partition: int
    engine_origin: str | None = None
    """Where the config the tool read sets the store's engine (``file:line``, or the
    coordinator stream and offset)."""

    @property
    def changelog_ssp(self) -> Any:
        from weir.engine.model import SystemStreamPartition
        assert self.spec.changelog is not None
        return SystemStreamPartition(*self.spec.changelog, self.changelog_partition)


def store_refs(tools: JobTools, stores: list[str] | None, tasks: list[str] | None
               ) -> list[StoreRef]:
    """Every store (of ``stores``) of every task (of ``tasks``), adjunct stores left out."""
    from weir.engine.config.job import StoreBase

    # Adjunct stores (docs/ADJUNCT.md) have no changelog and their own layout: listed and
    # shown by weir.engine.cli.state.adjunct, never opened as a task's store here.
    adjuncts = adjunct_names(tools)
    specs = [tools.spec(s) for s in stores] if stores else tools.specs()
    specs = [spec for spec in specs if spec.name not in adjuncts]
    chosen = {t: tools.task(t) for t in tasks} if tasks else tools.tasks()
    refs = []
    for name, task in chosen.items():
        for spec in specs:
            directory = None
            if spec.persistent:
                base = tools.job.base_dir(StoreBase.LOGGED if spec.logged
                                          else StoreBase.NON_LOGGED)
                directory = base / spec.name / task_directory_name(name)
            refs.append(StoreRef(name, spec, directory, task.changelog_partition,
                                 tools.config.origin(f"stores.{spec.name}.factory")))
    return refs


def adjunct_names(tools: JobTools) -> set[str]:
    """The names of the job's adjunct stores."""
    from weir.stores.adjunct import adjunct_specs
    return set(adjunct_specs(tools.config))


def has_files(directory: Path | None) -> bool:
    """Whether ``directory`` holds a store's files (its lock file alone does not count)."""
    return directory is not None and directory.is_dir() and any(
        p.name != LOCK_FILE_NAME for p in directory.iterdir())


def directory_size(directory: Path) -> int:
    """Bytes in the files under ``directory``."""
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def open_local(ref: StoreRef) -> Any:
    """The files of ``ref``'s local directory, opened read only: nothing is created or
    changed there, and files of another engine than the config names are refused
    (:class:`~weir.stores.offline.StoreFilesMismatchError`)."""
    from weir.stores.offline import open_read_only
    return open_read_only(ref.spec, ref.directory, origin=ref.engine_origin)


def read_entries(engine: Any, prefix: bytes | None, limit: int | None
                 ) -> Iterator[tuple[bytes, bytes]]:
    """At most ``limit`` entries of an open ``engine`` or read-only files (only keys starting
    with ``prefix``, when given), in key order; closes it when done."""
    try:
        with (engine.prefix(prefix) if prefix is not None else engine.all()) as entries:
            for n, (key, value) in enumerate(entries):
                if limit is not None and n >= limit:
                    break
                yield key, value
    finally:
        engine.close()


def store_serdes(tools: JobTools, spec: StoreSpec) -> tuple[Any, Any]:
    """The key and value serdes the job config gives store ``spec``."""
    from weir.stores.serdes import serde_from_name
    from weir.stores.spec import STORE_KEY_SERDE, STORE_MSG_SERDE
    return (serde_from_name(spec.key_serde, tools.config,
                            key=STORE_KEY_SERDE.key(store=spec.name)),
            serde_from_name(spec.value_serde, tools.config,
                            key=STORE_MSG_SERDE.key(store=spec.name)))


def changelog_source(tools: JobTools, ref: StoreRef) -> Any:
    """A reader of ``ref``'s changelog partition."""
    from weir.engine.systems.changelog import SystemChangelogSource
    return SystemChangelogSource(tools.registry, ref.changelog_ssp)


def changelog_exists(tools: JobTools, spec: StoreSpec) -> bool:
    system, stream = spec.changelog
    return tools.registry.admin(system).stream_exists(stream)


def changelog_state(source: Any, upto: int) -> dict[bytes, bytes]:
    """The state a changelog partition describes at offset ``upto`` (inclusive): the latest
    value of every key, deletes applied."""
    state: dict[bytes, bytes | None] = {}
    if upto == NO_OFFSET or source.newest_offset() == NO_OFFSET:
        return {}
    for _, key, value in source.read(source.oldest_offset(), upto):
        state[key] = value
    return {k: v for k, v in state.items() if v is not None}


def last_checkpoints(tools: JobTools, tasks: set[str]) -> dict[str, Checkpoint | None]:
    """The last checkpoint of each of ``tasks`` (``None``: the task has none)."""
    manager = tools.checkpoints
    return {t: manager.read_last(t) for t in sorted(tasks)}


def offset_file_of(directory: Path | None) -> tuple[Any, str | None]:
    """``(the OFFSET file of a store directory or None, why it cannot be read or None)``."""
    if directory is None or not directory.is_dir():
        return None, None
    try:
        return read_offset_file(directory), None
    except OffsetFileCorruptError as exc:
        return None, str(exc)
