"""Atomic small-file writes: temp file, fsync, rename, fsync of the directory.

A reader sees either the old content or the new one, never a half-written file, whatever
moment the writer dies at (SIGKILL or power loss). Temp files are named
``<name>.<pid>.tmp`` in the target's directory; a crash may leave one behind, and
:func:`remove_stray_temps` deletes them (readers never look at them).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["atomic_write", "fsync_dir", "remove_durably", "remove_stray_temps", "temp_path_for"]


def temp_path_for(path: Path) -> Path:
    """The temp file :func:`atomic_write` uses for ``path`` in this process."""
    return path.with_name(f"{path.name}.{os.getpid()}.tmp")


def fsync_dir(directory: Path) -> None:
    """Make renames and unlinks inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, previous: Path | None = None) -> None:
    """Replace ``path`` with ``data`` atomically.

    With ``previous``, the content ``path`` had before this write (if any) is kept at that
    path; ``path`` itself is never missing at any moment, so a crash between the steps leaves
    ``path`` readable (old or new content).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> atomic_write(d / "a", b"one"); atomic_write(d / "a", b"two", previous=d / "a.prev")
    >>> (d / "a").read_bytes(), (d / "a.prev").read_bytes()
    (b'two', b'one')
    """
    path = Path(path)
    tmp = temp_path_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if previous is not None and path.exists():
        _keep_previous(path, Path(previous))
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _keep_previous(path: Path, previous: Path) -> None:
    """Point ``previous`` at ``path``'s current content without ever removing ``path``."""
    link_tmp = temp_path_for(previous)
    try:
        link_tmp.unlink(missing_ok=True)
        os.link(path, link_tmp)  # the old inode survives the replace of ``path``
    except OSError:
        # No hard links here (some network or FUSE filesystems): copy the bytes instead.
        atomic_write(previous, path.read_bytes())
        return
    os.replace(link_tmp, previous)


def remove_durably(path: Path) -> bool:
    """Unlink ``path`` (if present) and fsync its directory. True if something was removed."""
    path = Path(path)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def remove_stray_temps(directory: Path, name: str) -> list[Path]:
    """Delete temp files a crashed :func:`atomic_write` of ``directory/name`` left behind."""
    removed = []
    for stray in Path(directory).glob(f"{_glob_escape(name)}.*.tmp"):
        stray.unlink(missing_ok=True)
        removed.append(stray)
    return removed


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)
