"""The local (or mounted) file system as a checkpoint store, the default: a version is
published with a temp file, fsync and ``link`` (:func:`publish_bytes`), which fails when the
name exists, so of two writers exactly one wins.

Example::

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "00000000000000000007.changelog.zst"
    >>> publish_bytes(path, b"first"), publish_bytes(path, b"second"), path.read_bytes()
    (True, False, b'first')
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable
from pathlib import Path

from weir.stores.filesafety import fsync_dir, publish_once

from weir.engine.spark.errors import CheckpointLocationError
from weir.engine.spark.locations import Location, StorageKind
from weir.engine.spark.storage.base import (CheckpointStorage, Entry, is_publish_temp,
                                            publish_temp_name, writer_gone)

__all__ = ["LocalStorage", "publish_bytes"]

_NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES)


def _not_writable(path: Path, exc: OSError) -> CheckpointLocationError:
    """The error of a write the location refused for good (read-only, no permission)."""
    return CheckpointLocationError(
        f"cannot write {path}: the checkpoint location is not writable ({exc.strerror}: "
        f"{exc.filename}). Spark retrying the task cannot change that; give the Spark "
        f"executors' user write access to it, or choose another checkpoint location "
        f"(docs/SPARK.md)")


def publish_bytes(final: Path, data: bytes) -> bool:
    """Create ``final`` holding ``data`` unless it exists; True when this call created it.

    Temp file, fsync, ``link`` (fails when the name exists), fsync of the directory
    (:func:`weir.stores.filesafety.publish_once`): readers never see a partial file and two
    writers can never both win. The temp file is a publish temp
    (:func:`~weir.engine.spark.storage.base.publish_temp_name`), which
    :meth:`LocalStorage.clean_orphans` recognises."""
    try:
        return publish_once(final, data, temp=final.with_name(publish_temp_name(final.name)))
    except OSError as exc:
        # Only the link names two files (filename2): a failed write of the temp file is not
        # a file system without hard links.
        if exc.errno in _NO_HARD_LINKS and exc.filename2 is not None:
            raise CheckpointLocationError(
                f"cannot publish {final}: the checkpoint location does not support hard links "
                f"({exc.strerror}). The Weir state provider publishes every version with "
                f"create-if-absent (link) on a file system; use a local disk, NFS or a cluster "
                f"file system that supports hard links, or an object store location (s3a://, "
                f"gs://, abfss://; docs/SPARK.md)") from exc
        if exc.errno in _NOT_WRITABLE:
            raise _not_writable(final, exc) from exc
        raise


class LocalStorage(CheckpointStorage):
    """A local or mounted file system with POSIX hard links (the default)."""

    kind = StorageKind.LOCAL

    def read(self, path: Location) -> bytes:
        return Path(path).read_bytes()

    def exists(self, path: Location) -> bool:
        return Path(path).exists()

    def names(self, directory: Location) -> list[str]:
        try:
            return os.listdir(directory)
        except FileNotFoundError:
            return []

    def entries(self, directory: Location) -> list[Entry]:
        out = []
        try:
            scan = list(os.scandir(directory))
        except FileNotFoundError:
            return []
        for entry in scan:
            try:
                if entry.is_file():
                    out.append(Entry(entry.name, entry.stat().st_size))
            except FileNotFoundError:
                continue
        return out

    def directories(self, directory: Location) -> list[str]:
        try:
            return [e.name for e in os.scandir(directory) if e.is_dir()]
        except FileNotFoundError:
            return []

    def create(self, path: Location, data: bytes) -> bool:
        return publish_bytes(Path(path), data)

    def delete(self, paths: Iterable[Location]) -> None:
        parents = set()
        for path in paths:
            Path(path).unlink(missing_ok=True)
            parents.add(Path(path).parent)
        for parent in parents:
            if parent.is_dir():
                fsync_dir(parent)

    def set_aside(self, path: Location, aside: Location) -> bool:
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return False
        fsync_dir(Path(path).parent)
        return True

    def clean_orphans(self, directory: Location, max_age_ms: int) -> list[Location]:
        """Temp files of publish attempts: those of a dead process on this host, and any
        older than ``max_age_ms``."""
        now = time.time()
        removed: list[Location] = []
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return []
        for entry in entries:
            if not is_publish_temp(entry.name):
                continue
            dead = writer_gone(entry.name)
            try:
                old = (now - entry.stat().st_mtime) * 1000 > max_age_ms
            except FileNotFoundError:
                continue
            if dead or old:
                try:
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
                except FileNotFoundError:
                    pass
        return removed

    def make_directory(self, directory: Location) -> None:
        try:
            Path(directory).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in _NOT_WRITABLE:
                raise _not_writable(Path(directory), exc) from exc
            raise
