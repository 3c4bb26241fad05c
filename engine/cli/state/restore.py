"""Restoring one store of one task as ``weir run`` would, for ``weir state rebuild`` and
``repair``; and the changelog producer a task writes a store's changelog with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.restore import Repair, RestoreStats
from weir.recovery.storage import ProgressMode
from weir.stores.spec import StoreSpec

from weir.engine.cli._job import JobTools

__all__ = ["changelog_producer", "restore_store"]


@contextmanager
def changelog_producer(tools: JobTools, task: str, spec: StoreSpec
                       ) -> Iterator[tuple[Any, str]]:
    """``(producer, source name)``: a started producer of the system of ``spec``'s changelog,
    registered under the source name task ``task`` writes that changelog with; stopped on
    exit."""
    from weir.engine.container.task_storage import changelog_source_name

    source = changelog_source_name(task, spec.name)
    producer = tools.registry.producer(spec.changelog[0])
    producer.register(source)
    producer.start()
    try:
        yield producer, source
    finally:
        producer.stop()


def restore_store(tools: JobTools, task: str, spec: StoreSpec, changelog_partition: int,
                  checkpoint: Checkpoint | None, progress: ProgressMode,
                  repair: Repair = Repair.NONE) -> RestoreStats:
    """Open logged store ``spec`` of ``task`` at ``checkpoint`` as a start would (restoring
    it from its changelog where its local copy does not match, applying ``repair``), close
    it, and return what the restore did."""
    from weir.engine.container.task_storage import TaskStorage

    with changelog_producer(tools, task, spec) as (producer, _):
        storage = TaskStorage(task, [spec], tools.job, changelog_partition,
                              {spec.changelog[0]: producer}, tools.registry, tools.config,
                              progress, repairs={spec.name: repair})
        storage.open(checkpoint)
        storage.close()
    (stats,) = storage.restore_stats()
    return stats
