"""Deleting a file-log stream, which only happens when asked (``weir log delete --yes``).

:func:`delete_stream` refuses while any process writes to or maintains the stream: it takes
the writer lock, the maintenance lock and (exclusively) the producers lock of every partition
without waiting (:func:`hold_partitions`, also used to move a stream aside), and a held lock
raises :class:`~weir.engine.errors.PartitionLockedError` naming the holder (pid, host, since;
a job's producers share their lock and are named by role only).
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
from collections.abc import Callable
from dataclasses import dataclass

from weir.stores.filesafety import fsync_dir, pid_alive
from weir.engine.errors import PartitionLockedError

from weir.engine.systems.filelog._files import (MAINTENANCE_LOCK, PRODUCERS_LOCK, WRITER_LOCK,
                                                FileLock, FlockFile, LockBusy, flock_holders)
from weir.engine.systems.filelog.stream import load_meta, partition_dir, stream_dir

__all__ = ["DeletedStream", "delete_stream", "hold_partitions", "release_partitions",
           "DELETED_PREFIX"]

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

    def locked(partition: int, role: str, who: str, holder: dict) -> PartitionLockedError:
        return PartitionLockedError(
            f"cannot delete stream '{system}.{stream}': partition {partition} has a {role} "
            f"({who}); stop the job or producer that writes to it, then delete again",
            stream=stream, partition=partition, holder=holder)

    locks = hold_partitions(root, stream, meta.partitions, "delete", locked)
    try:
        files, size = _count(directory)
        hidden = os.path.join(root, f"{DELETED_PREFIX}{stream}-{os.getpid()}-{time.time_ns()}")
        os.rename(directory, hidden)
        fsync_dir(root)
    finally:
        release_partitions(locks)
    shutil.rmtree(hidden)
    _remove_leftovers(root)
    return DeletedStream(stream, meta.partitions, files, size)


def hold_partitions(root: str, stream: str, partitions: int, purpose: str,
                    error: Callable[[int, str, str, dict], Exception]
                    ) -> list[FileLock | FlockFile]:
    """Take, without waiting, every lock of every partition of ``stream``: the writer and
    maintenance locks (recording ``purpose``) and the producers lock exclusively, so that no
    writer of any kind and no maintenance runs while the caller moves or removes the stream.
    A held lock releases what was taken and raises ``error(partition, role, who, holder)``
    (role ``writer``, ``maintenance`` or ``producer``; ``who`` describes the holder for a
    message, ``holder`` is its record). Release with :func:`release_partitions`."""
    locks: list[FileLock | FlockFile] = []
    try:
        for partition in range(partitions):
            directory = partition_dir(root, stream, partition)
            os.makedirs(directory, exist_ok=True)
            for name, role in ((WRITER_LOCK, "writer"), (MAINTENANCE_LOCK, "maintenance")):
                lock = FileLock(os.path.join(directory, name))
                try:
                    lock.acquire(purpose)
                except LockBusy as busy:
                    raise error(partition, role, _who(busy), busy.holder) from None
                locks.append(lock)
            producers = FlockFile(os.path.join(directory, PRODUCERS_LOCK))
            if not producers.try_lock(shared=False):
                producers.close()
                pids = flock_holders(producers.path)
                who = f"pid {', '.join(map(str, pids))}" if pids else "pid unknown"
                raise error(partition, "producer", f"a producer of a running job: {who}, "
                            f"lock file {producers.path}", {"pids": pids})
            locks.append(producers)
    except BaseException:
        release_partitions(locks)
        raise
    return locks


def release_partitions(locks: list[FileLock | FlockFile]) -> None:
    """Release what :func:`hold_partitions` took."""
    for lock in reversed(locks):
        if isinstance(lock, FlockFile):
            lock.close()
        else:
            lock.release()


def _who(busy: LockBusy) -> str:
    holder = busy.holder
    return (f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, since "
            f"{holder.get('since', '?')}, lock file {busy.path}")


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
    return pid_alive(pid)
