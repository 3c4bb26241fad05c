"""The directory lock every persistent engine takes on open: ``<dir>/WEIR.LOCK``.

One process at a time may open a store directory. The lock is an ``flock(LOCK_EX | LOCK_NB)``
on ``WEIR.LOCK``; the kernel drops it when the holder exits for any reason (SIGKILL included),
so a lock can never outlive its process. While held, the file contains JSON naming the
holder, ``{"pid": ..., "host": ..., "since": ..., "store": ...}``, which is what a second
opener reports in its :class:`~stores.errors.StoreLockedError`.

The holder record is written atomically (temp file, fsync, rename, fsync dir) so a reader never
sees half a record. Renaming replaces the file's inode, and ``flock`` locks inodes, so the
protocol is:

1. open ``WEIR.LOCK`` (creating it) and ``flock`` it; this inode is the *gate*;
2. check that the path still names the inode we locked (someone may have renamed a new
   record over it since we opened it); if not, start again;
3. write the record to ``WEIR.LOCK.tmp``, fsync it, ``flock`` it (nobody else can hold a
   lock on a file only we know), rename it over ``WEIR.LOCK`` and fsync the directory;
4. close the gate. From now on the lock is the flock on the renamed inode.

Every opener holds the lock on the inode currently at the path before it touches anything, so
only one opener at a time is ever inside step 3. On release the file is unlinked (while still
locked) and then unlocked; an opener that raced with the unlink fails the inode check and
retries.

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
import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import StoreError, StoreLockedError

__all__ = ["LOCK_FILE_NAME", "LockHolder", "DirectoryLock", "read_lock_holder"]

LOCK_FILE_NAME = "WEIR.LOCK"
_TMP_NAME = LOCK_FILE_NAME + ".tmp"

_STALE_RECORD_WAIT_S = 0.5
"""How long to wait for a fresh holder record when the record found names a dead process.

That happens only in the microseconds between another opener taking the gate and renaming
its record into place; after this long we report whatever record we have."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or last held) a store directory's lock."""

    pid: int
    host: str
    since: str
    store: str | None = None

    def as_dict(self) -> dict:
        return {"pid": self.pid, "host": self.host, "since": self.since, "store": self.store}

    def is_this_process(self) -> bool:
        return self.pid == os.getpid() and self.host == socket.gethostname()

    def is_alive(self) -> bool | None:
        """True/False when the holder runs on this host; None when it cannot be known."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, owned by another user
            return True
        return True


def read_lock_holder(directory: Path | str) -> LockHolder | None:
    """The holder record in ``directory/WEIR.LOCK``, or None if absent or unreadable.

    The record is meaningful only while the lock is held; use it for messages and tooling.
    """
    try:
        raw = (Path(directory) / LOCK_FILE_NAME).read_bytes()
        data = json.loads(raw)
        return LockHolder(pid=int(data["pid"]), host=str(data["host"]),
                          since=str(data["since"]), store=data.get("store"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class DirectoryLock:
    """An exclusive, process-scoped lock on one store directory. Release with :meth:`release`
    (or use it as a context manager); releasing twice is harmless."""

    __slots__ = ("directory", "store", "holder", "_fd")

    def __init__(self, directory: Path, store: str | None, holder: LockHolder, fd: int):
        self.directory = directory
        self.store = store
        self.holder = holder
        self._fd = fd

    @classmethod
    def acquire(cls, directory: Path | str, *, store: str | None = None) -> "DirectoryLock":
        """Lock ``directory`` (which must exist) or raise :class:`StoreLockedError`."""
        directory = Path(directory)
        path = directory / LOCK_FILE_NAME
        deadline = time.monotonic() + _STALE_RECORD_WAIT_S
        while True:
            gate = _open_lock_file(path, store)
            try:
                fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(gate)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StoreError(f"cannot lock {path}: {exc}", store=store) from exc
                holder = read_lock_holder(directory)
                if _record_may_be_stale(holder) and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                raise _locked_error(directory, store, holder) from None
            if not _still_names(path, gate):
                os.close(gate)  # a newer record replaced the file we opened; use that one
                continue
            try:
                holder = LockHolder(pid=os.getpid(), host=socket.gethostname(),
                                    since=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                    store=store)
                fd = _install_record(directory, path, holder)
            finally:
                os.close(gate)
            return cls(directory, store, holder, fd)

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Remove the holder record and drop the lock."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        try:
            try:
                if _still_names(self.directory / LOCK_FILE_NAME, fd):
                    os.unlink(self.directory / LOCK_FILE_NAME)
            except OSError:
                pass  # the directory was removed under us; the flock still goes below
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> "DirectoryLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"DirectoryLock({str(self.directory)!r}, {state})"


def _open_lock_file(path: Path, store: str | None) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot open lock file {path}: {exc}; check that the store directory "
                         f"exists and is writable", store=store) from exc


def _still_names(path: Path, fd: int) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_ino, st.st_dev) == (own.st_ino, own.st_dev)


def _install_record(directory: Path, path: Path, holder: LockHolder) -> int:
    """Write the holder record to a locked temp file and rename it over ``path``.

    Called only while holding the gate, so the fixed temp name cannot be in use by anyone else;
    a temp file left by a crashed opener is simply truncated and reused.
    """
    tmp = directory / _TMP_NAME
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, json.dumps(holder.as_dict(), sort_keys=True).encode() + b"\n")
        os.fsync(fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, path)
        _fsync_dir(directory)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fsync_dir(directory: Path) -> None:
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _record_may_be_stale(holder: LockHolder | None) -> bool:
    """A locked file whose record is missing or names a dead process is mid-handover."""
    return holder is None or holder.is_alive() is False


def _locked_error(directory: Path, store: str | None,
                  holder: LockHolder | None) -> StoreLockedError:
    if holder is None:
        message = (f"directory {directory} is locked by another process whose identity could not "
                   f"be read from {LOCK_FILE_NAME}; stop the other process using this store, or "
                   f"wait; if that process is gone, the lock is released automatically")
    elif holder.is_this_process():
        message = (f"directory {directory} is already open in this process (pid {holder.pid}, "
                   f"since {holder.since}); close the other engine on this directory first")
    else:
        message = (f"directory {directory} is locked by process {holder.pid} on host "
                   f"{holder.host} (since {holder.since}); stop process {holder.pid} on "
                   f"{holder.host}, or wait; if that process is gone, the lock is released "
                   f"automatically")
    return StoreLockedError(message, store=store, path=str(directory),
                            holder=holder.as_dict() if holder else None)
