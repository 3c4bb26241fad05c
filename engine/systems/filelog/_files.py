"""File-system helpers of the file log: names and advisory locks (atomic writes and
``fsync_dir``: :mod:`weir.stores.filesafety`).

Files in a partition directory ``<root>/<stream>/<partition>/``:

=================================  =========================================================
``<base:020d>.log``                a plain segment (the active one is always plain)
``<base:020d>.log.zst``            the same records, zstd-compressed after sealing
``<base:020d>.g<gen>.log[.zst]``   generation ``gen`` of a segment rewritten by compaction
``<segment file>.idx``             the segment's index (required for compacted segments)
``<segment file>.tail``            the active segment's tail hint (where counting resumes)
``end-of-stream.json``             the end marker of a bounded stream's partition
``.writer.lock``                   flock held by an exclusive writer (tools, the admin)
``.producers.lock``                flock held *shared* by every process's producer writer for
                                   its life, *exclusive* by an exclusive writer or a deletion
``.append.lock``                   flock a producer writer holds while it appends (one at a time)
``.maintenance.lock``              flock held while compressing, deleting or compacting
``.<lock>.tmp``                    a lock's holder record being written (see stores.locking)
``*.tmp``                          a file being written (never read)
=================================  =========================================================
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from weir.stores import locking
from weir.stores.locking import LockHolder

__all__ = [
    "STREAM_META",
    "END_MARKER",
    "WRITER_LOCK",
    "MAINTENANCE_LOCK",
    "SegmentName",
    "parse_segment_name",
    "segment_file_name",
    "FileLock",
    "LockBusy",
    "PRODUCERS_LOCK",
    "APPEND_LOCK",
    "LOCK_FILES",
    "FlockFile",
    "flock_holders",
]

STREAM_META = "stream.json"
END_MARKER = "end-of-stream.json"
WRITER_LOCK = ".writer.lock"
MAINTENANCE_LOCK = ".maintenance.lock"
PRODUCERS_LOCK = ".producers.lock"
APPEND_LOCK = ".append.lock"
LOCK_FILES = (WRITER_LOCK, MAINTENANCE_LOCK, PRODUCERS_LOCK, APPEND_LOCK)
"""Every lock file a partition directory may hold (none of them is data)."""

_SEGMENT_RE = re.compile(r"^(\d{20})(?:\.g(\d+))?\.log(\.zst)?$")


@dataclass(frozen=True, slots=True)
class SegmentName:
    """What a segment's file name says: base offset, generation (0 = as written by the
    producer, n > 0 = rewritten by compaction n times) and whether it is zstd-compressed."""

    base: int
    generation: int
    compressed: bool

    @property
    def file_name(self) -> str:
        return segment_file_name(self.base, self.generation, self.compressed)


def parse_segment_name(name: str) -> SegmentName | None:
    """The parsed name of a segment file, or None for any other file."""
    m = _SEGMENT_RE.match(name)
    if m is None:
        return None
    return SegmentName(int(m.group(1)), int(m.group(2) or 0), m.group(3) is not None)


def segment_file_name(base: int, generation: int = 0, compressed: bool = False) -> str:
    gen = f".g{generation}" if generation else ""
    return f"{base:020d}{gen}.log{'.zst' if compressed else ''}"


class LockBusy(Exception):
    """The lock is held by another open file (another process, or another object in this
    one); ``holder`` is what the holder wrote into the lock file ({} if unknown)."""

    def __init__(self, path: str, holder: dict):
        super().__init__(path)
        self.path, self.holder = path, holder


def _busy(path: Path, holder: LockHolder | None) -> LockBusy:
    return LockBusy(str(path), holder.as_dict() if holder else {})


class FileLock:
    """A partition's writer or maintenance lock: a :mod:`weir.stores.locking` lock on ``path``
    that records the holder's role and command line.

    The OS releases the lock when the holding process dies, so a crash never leaves a
    partition locked; the recorded holder (pid, host, since, role) only explains who has it.
    """

    def __init__(self, path: str):
        self.path = path
        self._lock: locking.FileLock | None = None

    @property
    def held(self) -> bool:
        return self._lock is not None and self._lock.held

    def acquire(self, role: str) -> None:
        """Take the lock or raise :class:`LockBusy`."""
        self._lock = locking.acquire_lock(
            self.path, error=_busy, details={"role": role, "command": " ".join(sys.argv)[:200]})

    def release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def __enter__(self) -> "FileLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class FlockFile:
    """A plain ``flock`` on a lock file that is never renamed or removed while in use: shared
    (``LOCK_SH``) or exclusive (``LOCK_EX``), with no holder record (it is taken per write).

    The lock belongs to this object's open file; the OS drops it when the process dies. A
    forked child closes its copy at once (without unlocking: that would release the parent's
    lock), so a child never keeps a dead parent's lock alive.

    Example::

        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), ".append.lock")
        >>> a, b = FlockFile(path), FlockFile(path)
        >>> a.try_lock(shared=True), b.try_lock(shared=True), b.try_lock(shared=False)
        (True, True, False)
        >>> a.close(); b.try_lock(shared=False)
        True
        >>> b.close()
    """

    __slots__ = ("path", "_fd", "__weakref__")

    def __init__(self, path: str):
        self.path = path
        self._fd = -1

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            locking.drop_in_forked_children(self)
        return self._fd

    def try_lock(self, *, shared: bool) -> bool:
        """Take (or convert to) the lock without waiting; False when another open file holds
        a conflicting one."""
        fd = self._open()
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def lock(self, timeout_s: float) -> bool:
        """Take the exclusive lock, waiting up to ``timeout_s`` (polling with a growing pause,
        so a stopped holder cannot hang the caller forever); False on timeout."""
        if self.try_lock(shared=False):
            return True
        deadline = time.monotonic() + timeout_s
        pause = 0.00005
        while True:
            time.sleep(pause)
            if self.try_lock(shared=False):
                return True
            if time.monotonic() >= deadline:
                return False
            pause = min(pause * 2, 0.005)

    def unlock(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Drop the lock and close the file."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            locking.drop_in_forked_children(self, held=False)
            os.close(fd)


def flock_holders(path: str) -> list[int]:
    """The pids holding a ``flock`` on ``path``, as the kernel lists them (``/proc/locks``;
    Linux only, [] elsewhere or when unreadable). For messages: who stands in the way."""
    try:
        st = os.stat(path)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK" or parts[2] == "->":
            continue
        try:
            _, _, inode = parts[5].split(":")
            if int(inode) == st.st_ino:
                pids.append(int(parts[4]))
        except ValueError:
            continue
    return sorted(set(pids))
