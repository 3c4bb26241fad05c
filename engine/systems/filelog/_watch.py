"""Waking a waiting consumer when a partition directory changes: Linux inotify.

A :class:`DirectoryWatch` watches the directories of the partitions a consumer reads (a
record appended to a segment, a new segment, the end marker renamed into place, the
directory deleted) and lets the consumer sleep until one of them changes or its timeout
passes, instead of waking up on a schedule to look. Measured (bench/RESULTS.md, "Latency"):
a waiting consumer notices an appended record within a fraction of a millisecond, where
bounded-sleep polling took up to its sleep (``poll.max.sleep.ms``), with less idle CPU.

inotify is only a wake-up: the consumer still looks every 100 ms without a change (a file
changed by another machine on a shared filesystem raises no event here), and a watch
that cannot be made -- not Linux, the per-user limits ``fs.inotify.max_user_instances`` /
``max_user_watches`` reached, a directory not there yet -- leaves the consumer polling as
before (:meth:`DirectoryWatch.open` returns None, :meth:`DirectoryWatch.add` False).

Each watched directory has a key (the consumer's partition); :meth:`DirectoryWatch.drain` and
:meth:`DirectoryWatch.wait` say which keys changed, so the consumer reads again only the
partitions that did (:data:`EVERYTHING` when the kernel's event queue overflowed).

Example::

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> w = DirectoryWatch.open()
    >>> w is None or (w.add(d, "p0") and not w.wait(0.001)
    ...               and (open(os.path.join(d, "f"), "wb").write(b"x"), w.wait(1.0))[1]
    ...               == {"p0"})
    True
    >>> w is None or (open(os.path.join(d, "f"), "ab").write(b"y"), w.drain())[1] == {"p0"}
    True
    >>> _ = w is None or w.close()
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import sys
import weakref
from collections.abc import Hashable

__all__ = ["DirectoryWatch", "EVERYTHING", "NOTHING"]

_log = logging.getLogger(__name__)

# <sys/inotify.h>
_IN_MODIFY, _IN_CLOSE_WRITE, _IN_MOVED_TO, _IN_CREATE = 0x2, 0x8, 0x80, 0x100
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW = 0x4000
_MASK = (_IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE_SELF
         | _IN_MOVE_SELF)
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_EVENT = struct.Struct("iIII")   # struct inotify_event: wd, mask, cookie, len (then the name)

NOTHING: frozenset = frozenset()
"""No watched directory changed."""


class _Everything(frozenset):
    """Every watched directory may have changed (the kernel dropped events)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "EVERYTHING"


EVERYTHING = _Everything()
"""The kernel's event queue overflowed: every watched directory may have changed."""

_libc: ctypes.CDLL | None = None
_unavailable: str | None = None


def _load() -> ctypes.CDLL | None:
    global _libc, _unavailable
    if _libc is not None or _unavailable is not None:
        return _libc
    if not sys.platform.startswith("linux"):
        _unavailable = f"no inotify on {sys.platform}"
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError) as exc:
        _unavailable = f"inotify not found in the C library ({exc})"
        return None
    _libc = libc
    return libc


def _close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class DirectoryWatch:
    """An inotify instance with watches on directories; see the module docstring. Used by
    one consumer, from one thread at a time."""

    __slots__ = ("_fd", "_poller", "_keys", "_finalizer", "__weakref__")

    def __init__(self, fd: int):
        self._fd = fd
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)
        self._keys: dict[int, Hashable] = {}    # watch descriptor -> key
        self._finalizer = weakref.finalize(self, _close_fd, fd)

    @classmethod
    def open(cls) -> "DirectoryWatch | None":
        """A new watch, or None when inotify cannot be used here (then poll instead)."""
        libc = _load()
        if libc is None:
            return None
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            _log.debug("inotify_init1 failed (%s): consumers poll instead%s",
                       os.strerror(err),
                       "; raise fs.inotify.max_user_instances" if err == errno.EMFILE else "")
            return None
        return cls(fd)

    def add(self, path: str, key: Hashable) -> bool:
        """Watch directory ``path``, reporting its changes as ``key``; False when it cannot be
        watched (then poll)."""
        wd = _libc.inotify_add_watch(self._fd, os.fsencode(path), _MASK)
        if wd < 0:
            err = ctypes.get_errno()
            _log.debug("inotify_add_watch(%s) failed (%s): this consumer polls instead%s",
                       path, os.strerror(err),
                       "; raise fs.inotify.max_user_watches" if err == errno.ENOSPC else "")
            return False
        self._keys[wd] = key
        return True

    def drain(self) -> frozenset:
        """The keys of the directories that changed since the last call (:data:`NOTHING`,
        or :data:`EVERYTHING` when events were lost), without waiting."""
        if not self._poller.poll(0):
            return NOTHING
        changed: set[Hashable] = set()
        keys, unpack, size = self._keys, _EVENT.unpack_from, _EVENT.size
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            at = 0
            while at + size <= len(data):
                wd, mask, _, length = unpack(data, at)
                at += size + length
                key = keys.get(wd)
                if mask & _IN_Q_OVERFLOW or key is None:
                    return self._everything()
                changed.add(key)
        return frozenset(changed) if changed else NOTHING

    def _everything(self) -> frozenset:
        """Events were lost: drop the rest of the queue and say everything changed."""
        while True:
            try:
                if not os.read(self._fd, 65536):
                    return EVERYTHING
            except BlockingIOError:
                return EVERYTHING

    def wait(self, timeout: float) -> frozenset:
        """Wait up to ``timeout`` seconds for a change in a watched directory; the keys that
        changed (:meth:`drain`), :data:`NOTHING` when none did in time."""
        if not self._poller.poll(max(0, int(timeout * 1000 + 0.999))):
            return NOTHING
        return self.drain()

    def close(self) -> None:
        self._finalizer()
