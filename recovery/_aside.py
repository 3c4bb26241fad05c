"""Setting a store's local files aside while it is rebuilt, instead of deleting them first.

A rebuild moves every file of the store directory (except its lock file) into a sibling
directory ``<store dir>.restore-aside`` (a rename each, same file system, then fsync of both
directories), rebuilds in the emptied directory, and only once the rebuilt store is complete
(its ``OFFSET`` file written) removes the set-aside copy -- or keeps it under
``<store dir>.kept-<UTC time>`` and says where, when the old files looked damaged. When the
rebuild fails, the partial rebuild is removed and the old files are put back: a failed restore
leaves the directory exactly as it found it.

A process killed during a rebuild leaves ``<store dir>.restore-aside`` behind; the next restore
calls :func:`recover_interrupted_rebuild` first: when the store directory holds a complete
rebuild (a valid ``OFFSET`` file) the set-aside copy is removed, otherwise the partial rebuild is
removed and the old files are put back, and restore decides again.

Example::

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "Partition_0"; d.mkdir()
    >>> _ = (d / "data").write_bytes(b"old")
    >>> aside = SetAside.move(d, store="counts")
    >>> sorted(p.name for p in d.iterdir()), (aside.path / "data").read_bytes()
    ([], b'old')
    >>> aside.put_back(); (d / "data").read_bytes()
    b'old'
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from weir.stores.locking import LOCK_FILE_NAME, DirectoryLock

from weir.stores.filesafety import fsync_dir
from weir.recovery.offset_file import OffsetFileCorruptError, read_offset_file

__all__ = ["ASIDE_SUFFIX", "KEPT_INFIX", "SetAside", "aside_path", "recover_interrupted_rebuild"]

ASIDE_SUFFIX = ".restore-aside"
KEPT_INFIX = ".kept-"


def aside_path(directory: Path) -> Path:
    """Where a rebuild of the store in ``directory`` keeps the old files."""
    directory = Path(directory)
    return directory.with_name(directory.name + ASIDE_SUFFIX)


def _entries(directory: Path) -> list[Path]:
    return [child for child in directory.iterdir() if child.name != LOCK_FILE_NAME]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _move_all(source: Path, target: Path) -> None:
    for child in _entries(source):
        os.rename(child, target / child.name)
    fsync_dir(target)
    fsync_dir(source)


@dataclass
class SetAside:
    """The old files of the store in ``directory``, moved to ``path`` during a rebuild."""

    directory: Path
    path: Path
    store: str

    @classmethod
    def move(cls, directory: Path, *, store: str) -> "SetAside | None":
        """Move the files of ``directory`` aside, under its lock (``StoreLockedError`` while
        another live process has the store open). None when there was nothing to move."""
        directory = Path(directory)
        if not directory.exists():
            # A new store: nothing to move, and no process can have it open (opening creates
            # the directory), so no lock is needed.
            directory.mkdir(parents=True, exist_ok=True)
            return None
        with DirectoryLock.acquire(directory, store=store):
            if not _entries(directory):
                return None
            path = aside_path(directory)
            path.mkdir()  # an old one was dealt with by recover_interrupted_rebuild
            fsync_dir(path.parent)
            _move_all(directory, path)
        return cls(directory, path, store)

    def put_back(self) -> None:
        """Remove what the rebuild wrote and move the old files back (the rebuild failed)."""
        with DirectoryLock.acquire(self.directory, store=self.store):
            for child in _entries(self.directory):
                _remove(child)
            _move_all(self.path, self.directory)
            self.path.rmdir()
            fsync_dir(self.path.parent)

    def discard(self) -> None:
        """Remove the old files (the rebuild succeeded)."""
        shutil.rmtree(self.path)
        fsync_dir(self.path.parent)

    def keep(self) -> Path:
        """Keep the old files under ``<store dir>.kept-<UTC time>``; returns that path."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        kept = self.directory.with_name(f"{self.directory.name}{KEPT_INFIX}{stamp}")
        n = 1
        while kept.exists():
            n += 1
            kept = self.directory.with_name(f"{self.directory.name}{KEPT_INFIX}{stamp}-{n}")
        os.rename(self.path, kept)
        fsync_dir(kept.parent)
        return kept


def recover_interrupted_rebuild(directory: Path, *, store: str) -> str | None:
    """Finish what a rebuild killed half-way left (see the module docstring); returns what was
    done, for the log, or None when no rebuild was interrupted."""
    directory = Path(directory)
    path = aside_path(directory)
    if not path.is_dir():
        return None
    aside = SetAside(directory, path, store)
    try:
        complete = directory.is_dir() and read_offset_file(directory) is not None
    except OffsetFileCorruptError:
        complete = False
    if complete:
        aside.discard()
        return (f"a rebuild of {directory} had finished but its set-aside copy {path} was "
                "still there; removed it")
    directory.mkdir(parents=True, exist_ok=True)
    aside.put_back()
    return (f"a rebuild of {directory} was interrupted; removed its partial files and put the "
            f"old files back from {path}")
