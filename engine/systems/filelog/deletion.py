"""Deleting a file-log stream, which only happens when asked (``weir log delete --yes``).

:func:`delete_stream` refuses while any process writes to or maintains the stream: it takes
the writer lock and the maintenance lock of every partition without waiting, and a held lock
raises :class:`~weir.engine.errors.PartitionLockedError` naming the holder (pid, host, since).
Holding every lock, it renames ``<root>/<stream>`` to a hidden ``<root>/.deleted-<stream>-...``
directory, so the stream disappears for every reader at once (its ``stream.json`` is no longer
under the stream's name) and a new stream of the same name can be created right away; then it
releases the locks and removes the hidden directory. A crash during the removal leaves only
that hidden directory, which is never read as a stream; the next deletion in the same root
removes it.

Readers of the stream in other processes are not asked: a consumer still polling a deleted
stream fails on its next read, as a Kafka consumer does when its topic is deleted.

Example::

    >>> import tempfile
    >>> from weir.engine.systems.api import StreamSpec
    >>> from weir.engine.systems.filelog.stream import create_stream, list_streams
    >>> root = tempfile.mkdtemp()
    >>> create_stream(root, StreamSpec("clicks", 2), "filelog", "none")
    True
    >>> delete_stream(root, "clicks", "filelog").partitions
    2
    >>> list_streams(root)
    []
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass

from weir.engine.errors import PartitionLockedError

from weir.engine.systems.filelog._files import (MAINTENANCE_LOCK, WRITER_LOCK, FileLock, LockBusy,
                                                fsync_dir)
from weir.engine.systems.filelog.stream import load_meta, stream_dir

__all__ = ["DeletedStream", "delete_stream", "DELETED_PREFIX"]

DELETED_PREFIX = ".deleted-"
"""Name prefix of a stream directory being removed (never a valid stream name)."""


@dataclass(frozen=True)
class DeletedStream:
    """What :func:`delete_stream` removed."""

    stream: str
    partitions: int
    files: int
    bytes: int


def delete_stream(root: str, stream: str, system: str) -> DeletedStream:
    """Delete ``stream`` under ``root`` (see the module docstring).

    Raises StreamNotFoundError when it does not exist and PartitionLockedError when a
    partition has a writer or a maintenance run in any process (this one included).
    """
    meta = load_meta(root, stream, system)
    directory = stream_dir(root, stream)
    locks: list[FileLock] = []
    try:
        for partition in range(meta.partitions):
            partition_dir = os.path.join(directory, str(partition))
            os.makedirs(partition_dir, exist_ok=True)
            for name, role in ((WRITER_LOCK, "writer"), (MAINTENANCE_LOCK, "maintenance")):
                lock = FileLock(os.path.join(partition_dir, name))
                try:
                    lock.acquire("delete")
                except LockBusy as busy:
                    raise _locked(system, stream, partition, role, busy) from None
                locks.append(lock)
        files, size = _count(directory)
        hidden = os.path.join(root, f"{DELETED_PREFIX}{stream}-{os.getpid()}-{time.time_ns()}")
        os.rename(directory, hidden)
        fsync_dir(root)
    finally:
        for lock in reversed(locks):
            lock.release()
    shutil.rmtree(hidden)
    _remove_leftovers(root)
    return DeletedStream(stream, meta.partitions, files, size)


def _locked(system: str, stream: str, partition: int, role: str,
            busy: LockBusy) -> PartitionLockedError:
    holder = busy.holder
    return PartitionLockedError(
        f"cannot delete stream '{system}.{stream}': partition {partition} has a {role} "
        f"(pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, since "
        f"{holder.get('since', '?')}, lock file {busy.path}); stop the job or producer that "
        f"writes to it, then delete again", stream=stream, partition=partition, holder=holder)


def _count(directory: str) -> tuple[int, int]:
    files = size = 0
    for base, _, names in os.walk(directory):
        for name in names:
            try:
                size += os.path.getsize(os.path.join(base, name))
            except FileNotFoundError:
                continue
            files += 1
    return files, size


def _remove_leftovers(root: str) -> None:
    """Remove hidden directories of deletions whose process died before it finished (one
    still running removes its own)."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(DELETED_PREFIX) and not _alive(name):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _alive(hidden_name: str) -> bool:
    """Whether the process that named ``.deleted-<stream>-<pid>-<ns>`` still runs."""
    try:
        pid = int(hidden_name.rsplit("-", 2)[1])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
