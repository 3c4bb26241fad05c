"""Process-scoped exclusive locks on files, with a record naming the holder.

A lock is an ``flock(LOCK_EX | LOCK_NB)`` on a lock file; the kernel drops it when the holder
exits for any reason (SIGKILL included), so a lock can never outlive its process. While held,
the file contains JSON naming the holder, ``{"pid": ..., "host": ..., "since": ..., ...}`` plus
what the locker adds (``store``; the file log's ``role`` and ``command``), which is what a
second locker reports in its error. Users:

- :class:`DirectoryLock`: every persistent store engine (and a restore) locks its directory
  through ``<dir>/WEIR.LOCK``; a second opener gets :class:`~weir.stores.errors.StoreLockedError`.
- :func:`acquire_lock` with an error factory: the file log's writer and maintenance locks
  (``weir.engine.systems.filelog._files``), whose callers turn a busy lock into
  ``PartitionLockedError``.

The holder record is written atomically (temp file, fsync, rename, fsync dir) so a reader never
sees half a record. Renaming replaces the file's inode, and ``flock`` locks inodes, so the
protocol is:

1. open the lock file (creating it) and ``flock`` it; this inode is the *gate*;
2. check that the path still names the inode we locked (someone may have renamed a new
   record over it since we opened it); if not, start again;
3. write the record to ``<lock file>.tmp``, fsync it, ``flock`` it (nobody else can hold a
   lock on a file only we know), rename it over the lock file and fsync the directory;
4. close the gate. From now on the lock is the flock on the renamed inode.

Every locker holds the lock on the inode currently at the path before it touches anything, so
only one locker at a time is ever inside step 3. On release the file is unlinked (while still
locked) and then unlocked; a locker that raced with the unlink fails the inode check and
retries.

A ``flock`` belongs to the open file, which ``fork()`` shares with the child: a child forked by
the holder (``multiprocessing``, a forking server) would keep the lock alive after the holder
died. So a forked child closes its copies of every held lock at once (without unlocking, which
would release the parent's lock too); the lock stays the parent's alone.

Example::

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with DirectoryLock.acquire(d, store="counts") as lock:
    ...     lock.holder.pid == os.getpid()
    True
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import socket
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from weir.stores.filesafety import fsync_dir, pid_alive
from weir.stores.errors import StoreError, StoreLockedError

__all__ = ["LOCK_FILE_NAME", "LockHolder", "FileLock", "DirectoryLock", "LockErrorFactory",
           "acquire_lock", "drop_in_forked_children", "read_holder", "read_lock_holder"]

LOCK_FILE_NAME = "WEIR.LOCK"

_STALE_RECORD_WAIT_S = 0.5
"""How long to wait for a fresh holder record when the record found names a dead process.

That happens only in the microseconds between another locker taking the gate and renaming
its record into place; after this long we report whatever record we have."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or last held) a lock: process, host, since when, and what the locker added
    (``details``: a store's ``store``, the file log's ``role`` and ``command``)."""

    pid: int
    host: str
    since: str
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def store(self) -> str | None:
        return self.details.get("store")

    def as_dict(self) -> dict:
        return {**self.details, "pid": self.pid, "host": self.host, "since": self.since}

    def is_this_process(self) -> bool:
        return self.pid == os.getpid() and self.host == socket.gethostname()

    def is_alive(self) -> bool | None:
        """True/False when the holder runs on this host; None when it cannot be known."""
        if self.host != socket.gethostname():
            return None
        return pid_alive(self.pid)


LockErrorFactory = Callable[[Path, "LockHolder | None"], Exception]
"""Builds the error raised when the lock file (first argument) is held by another open file:
by another process, or another lock object in this one (the holder, None if unreadable)."""


def read_holder(path: Path | str) -> LockHolder | None:
    """The holder record in lock file ``path``, or None if absent or unreadable.

    The record is meaningful only while the lock is held; use it for messages and tooling.
    """
    try:
        data = json.loads(Path(path).read_bytes())
        details = {k: v for k, v in data.items() if k not in ("pid", "host", "since")}
        return LockHolder(pid=int(data["pid"]), host=str(data["host"]),
                          since=str(data["since"]), details=details)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def read_lock_holder(directory: Path | str) -> LockHolder | None:
    """The holder record of store directory ``directory`` (``WEIR.LOCK``), or None."""
    return read_holder(Path(directory) / LOCK_FILE_NAME)


class FileLock:
    """An exclusive, process-scoped lock on one lock file, taken with :func:`acquire_lock`.
    Release with :meth:`release` (or use it as a context manager); releasing twice is
    harmless."""

    __slots__ = ("path", "holder", "_fd", "__weakref__")

    def __init__(self, path: Path, holder: LockHolder, fd: int):
        self.path = path
        self.holder = holder
        self._fd = fd
        _HELD.add(self)

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Remove the holder record and drop the lock."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        _HELD.discard(self)
        try:
            try:
                if _still_names(self.path, fd):
                    os.unlink(self.path)
            except OSError:
                pass  # the directory was removed under us; the flock still goes below
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> "FileLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"{type(self).__name__}({str(self.path)!r}, {state})"


_HELD: "weakref.WeakSet[Any]" = weakref.WeakSet()
"""The locks this process holds, for :func:`_drop_inherited_locks`: :class:`FileLock` objects and
whatever else was handed to :func:`drop_in_forked_children`."""


def drop_in_forked_children(lock: Any, *, held: bool = True) -> None:
    """Have a forked child close ``lock``'s file without unlocking it (the lock stays the
    parent's), or with ``held=False`` stop doing so. ``lock`` is any object whose ``_fd``
    attribute is its open lock file (-1 when closed), such as the file log's ``FlockFile``."""
    if held:
        _HELD.add(lock)
    else:
        _HELD.discard(lock)


def _drop_inherited_locks() -> None:
    """In a forked child: close the inherited lock files, leaving the locks to the parent."""
    for lock in list(_HELD):
        fd, lock._fd = lock._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
    _HELD.clear()


os.register_at_fork(after_in_child=_drop_inherited_locks)


def acquire_lock(path: Path | str, *, error: LockErrorFactory,
                 details: Mapping[str, Any] | None = None) -> FileLock:
    """Lock ``path`` (its directory must exist), recording this process and ``details``, or
    raise ``error(path, holder)`` when another open lock holds it."""
    return _acquire(FileLock, Path(path), error, details or {})


class DirectoryLock(FileLock):
    """The lock of one store directory, ``<dir>/WEIR.LOCK``; a second locker gets
    :class:`StoreLockedError` naming the holder and what to do."""

    __slots__ = ()

    @classmethod
    def acquire(cls, directory: Path | str, *, store: str | None = None) -> "DirectoryLock":
        """Lock ``directory`` (which must exist) or raise :class:`StoreLockedError`."""
        directory = Path(directory)
        return _acquire(cls, directory / LOCK_FILE_NAME,
                        functools.partial(_store_locked_error, store), {"store": store})

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def store(self) -> str | None:
        return self.holder.store


def _acquire(cls: type, path: Path, error: LockErrorFactory,
             details: Mapping[str, Any]) -> Any:
    deadline = time.monotonic() + _STALE_RECORD_WAIT_S
    while True:
        gate = _open_lock_file(path, details)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(gate)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StoreError(f"cannot lock {path}: {exc}",
                                 store=details.get("store")) from exc
            holder = read_holder(path)
            if _record_may_be_stale(holder) and time.monotonic() < deadline:
                time.sleep(0.005)
                continue
            raise error(path, holder) from None
        if not _still_names(path, gate):
            os.close(gate)  # a newer record replaced the file we opened; use that one
            continue
        try:
            holder = LockHolder(pid=os.getpid(), host=socket.gethostname(),
                                since=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                details=dict(details))
            fd = _install_record(path, holder)
        finally:
            os.close(gate)
        return cls(path, holder, fd)


def _open_lock_file(path: Path, details: Mapping[str, Any]) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot open lock file {path}: {exc}; check that its directory "
                         f"exists and is writable", store=details.get("store")) from exc


def _still_names(path: Path, fd: int) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_ino, st.st_dev) == (own.st_ino, own.st_dev)


def _install_record(path: Path, holder: LockHolder) -> int:
    """Write the holder record to a locked temp file and rename it over ``path``.

    Called only while holding the gate, so the fixed temp name cannot be in use by anyone else;
    a temp file left by a crashed locker is simply truncated and reused. A failure (a full
    disk) closes the temp file, so this process holds nothing.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, json.dumps(holder.as_dict(), sort_keys=True).encode() + b"\n")
        os.fsync(fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _record_may_be_stale(holder: LockHolder | None) -> bool:
    """A locked file whose record is missing or names a dead process is mid-handover."""
    return holder is None or holder.is_alive() is False


def _store_locked_error(store: str | None, path: Path,
                        holder: LockHolder | None) -> StoreLockedError:
    directory = path.parent
    if holder is None:
        message = (f"directory {directory} is locked by another process whose identity could not "
                   f"be read from {LOCK_FILE_NAME}; stop the other process using this store, or "
                   f"wait; if that process is gone, the lock is released automatically")
    elif holder.is_this_process():
        message = (f"directory {directory} is already open in this process (pid {holder.pid}, "
                   f"since {holder.since}); close the other engine on this directory first")
    elif holder.is_alive() is False:
        message = (f"directory {directory} is locked, but process {holder.pid}, which took the "
                   f"lock (since {holder.since}), has exited: another process still has {path} "
                   f"open; find it with `lsof {path}` and stop it")
    else:
        message = (f"directory {directory} is locked by process {holder.pid} on host "
                   f"{holder.host} (since {holder.since}); stop process {holder.pid} on "
                   f"{holder.host}, or wait; if that process is gone, the lock is released "
                   f"automatically")
    return StoreLockedError(message, store=store, path=str(directory),
                            holder=holder.as_dict() if holder else None)
