"""Partition writers shared by every producer (and admin) of one process.

The partition lock makes a *process* the single writer of a partition; inside that process
several producers (one per container, tests, tools) may write the same partition. They share
one :class:`PartitionWriter` through this registry, reference-counted, and serialise their
appends with its ``mutex``. The last :func:`release` closes the writer (flush, fsync, unlock).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from weir.engine.systems.filelog.writer import PartitionWriter, WriterSharing

if TYPE_CHECKING:
    from weir.engine.systems.filelog.settings import FileLogSettings
    from weir.engine.systems.filelog.stream import StreamMeta

__all__ = ["acquire", "acquire_for_producer", "release"]

_registry: dict[tuple[str, str, int], PartitionWriter] = {}
_refs: dict[int, int] = {}
_guard = threading.Lock()


def acquire(root: str, stream: str, partition: int,
            open_writer: Callable[[], PartitionWriter]) -> PartitionWriter:
    """This process's writer of the partition, opened with ``open_writer`` if there is none
    (which may raise PartitionLockedError when another process has it)."""
    key = (os.path.realpath(root), stream, partition)
    with _guard:
        writer = _registry.get(key)
        if writer is None or writer.closed:
            writer = _registry[key] = open_writer()
            _refs[id(writer)] = 0
        _refs[id(writer)] += 1
        return writer


def acquire_for_producer(settings: "FileLogSettings", meta: "StreamMeta",
                         partition: int) -> PartitionWriter:
    """:func:`acquire` for a producer (plain, transactional, or one completing a dead
    producer's transaction): a writer shared with other processes, with the producers'
    buffer size, linger and append-lock timeout (the first producer of the process to open
    the partition sets them)."""
    return acquire(settings.root, meta.name, partition, lambda: PartitionWriter(
        settings.root, meta, partition, settings.for_stream(meta.name, meta.config),
        buffer_bytes=settings.producer_buffer_bytes, system=settings.system,
        sharing=WriterSharing.SHARED, append_lock_timeout_ms=settings.append_lock_timeout_ms,
        linger_ms=settings.producer_linger_ms))


def release(writer: PartitionWriter) -> None:
    """Drop one reference; the last one closes the writer."""
    with _guard:
        left = _refs.get(id(writer), 1) - 1
        if left > 0:
            _refs[id(writer)] = left
            return
        _refs.pop(id(writer), None)
        for key, value in list(_registry.items()):
            if value is writer:
                del _registry[key]
    with writer.mutex:
        writer.close()
