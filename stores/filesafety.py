"""File safety: atomic writes, durable renames and removals, checksummed JSON, live pids.

Every file Weir replaces in place (checkpoints, OFFSET files, producer states, stream metadata,
segment indexes, drain requests, Spark state metadata, generated docs) is written here, the
one way: a temp file in the target's directory, fsync of the file, rename over the target,
fsync of the directory. A reader sees the old content or the whole new one, never half of
one, whatever moment the writer dies at (SIGKILL or power loss), and a finished write
survives a power cut.

Temp files are named ``<name>.<pid>.<n>.tmp`` in the target's directory (``n`` counts the
writes of this process, so two threads never share one); a crash may leave one behind, and
:func:`remove_stray_temps` deletes them (readers never look at them).

Checksummed JSON documents carry ``"crc32c"``: eight hex digits of the CRC-32C of the
covered object serialised with sorted keys (:func:`json_checksum`). :func:`seal_json` and
:func:`unseal_json` are the flat form (the checksum sits next to the fields it covers).

Example::

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> atomic_write(d / "a", b"one"); atomic_write(d / "a", b"two", previous=d / "a.prev")
    >>> (d / "a").read_bytes(), (d / "a.prev").read_bytes()
    (b'two', b'one')
    >>> publish_once(d / "b", b"first"), publish_once(d / "b", b"second")
    (True, False)
    >>> unseal_json(seal_json({"offset": 7}))
    {'offset': 7}
    >>> pid_alive(os.getpid())
    True
"""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from weir.stores._crc import crc32c

__all__ = ["atomic_file", "atomic_write", "fsync_dir", "json_checksum", "pid_alive",
           "publish_once", "remove_durably", "remove_stray_temps", "seal_json", "temp_path_for",
           "unseal_json"]

_SEQUENCE = itertools.count()
_CHECKSUM_KEY = "crc32c"


def temp_path_for(path: str | os.PathLike[str]) -> Path:
    """A fresh temp file name for ``path`` in its directory, unique in this process."""
    path = Path(path)
    return path.with_name(f"{path.name}.{os.getpid()}.{next(_SEQUENCE)}.tmp")


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make renames, links and unlinks inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: str | os.PathLike[str], *,
                temp: str | os.PathLike[str] | None = None) -> Iterator[BinaryIO]:
    """A binary file to write whose bytes replace ``path`` atomically when the block ends.

    The file is fsynced, renamed over ``path`` and the directory fsynced; when the block
    raises, the temp file is removed and ``path`` is untouched. ``temp`` names the temp file
    (default :func:`temp_path_for`) for callers whose clean-up recognises their own names.
    """
    path = Path(path)
    tmp = Path(temp) if temp is not None else temp_path_for(path)
    f = open(tmp, "wb")
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write(path: str | os.PathLike[str], data: bytes | Iterable[bytes], *,
                 previous: str | os.PathLike[str] | None = None,
                 temp: str | os.PathLike[str] | None = None) -> None:
    """Replace ``path`` with ``data`` (bytes, or chunks of bytes) atomically and durably.

    With ``previous``, the content ``path`` had before this write (if any) is kept at that
    path; ``path`` itself is never missing at any moment, so a crash between the steps leaves
    ``path`` readable (old or new content).
    """
    path = Path(path)
    with atomic_file(path, temp=temp) as f:
        for chunk in _chunks(data):
            f.write(chunk)
        if previous is not None and path.exists():
            _keep_previous(path, Path(previous))


def publish_once(path: str | os.PathLike[str], data: bytes, *,
                 temp: str | os.PathLike[str] | None = None) -> bool:
    """Create ``path`` holding ``data`` unless it exists; True when this call created it.

    Temp file, fsync, hard link (which fails when the name exists), fsync of the directory:
    readers never see a partial file and of two writers exactly one wins. An ``OSError`` of
    the link other than "exists" (a filesystem without hard links) propagates.
    """
    path = Path(path)
    tmp = Path(temp) if temp is not None else temp_path_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return True


def _chunks(data: bytes | Iterable[bytes]) -> Iterable[bytes]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return (data,)
    return data


def _keep_previous(path: Path, previous: Path) -> None:
    """Point ``previous`` at ``path``'s current content without ever removing ``path``."""
    link_tmp = temp_path_for(previous)
    try:
        os.link(path, link_tmp)  # the old inode survives the replace of ``path``
    except OSError:
        # No hard links here (some network or FUSE filesystems): copy the bytes instead.
        atomic_write(previous, path.read_bytes())
        return
    os.replace(link_tmp, previous)


def remove_durably(path: str | os.PathLike[str]) -> bool:
    """Unlink ``path`` (if present) and fsync its directory. True if something was removed."""
    path = Path(path)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def remove_stray_temps(directory: str | os.PathLike[str], name: str) -> list[Path]:
    """Delete temp files a crashed :func:`atomic_write` of ``directory/name`` left behind."""
    removed = []
    for stray in Path(directory).glob(f"{_glob_escape(name)}.*.tmp"):
        stray.unlink(missing_ok=True)
        removed.append(stray)
    return removed


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def json_checksum(covered: Any) -> str:
    """Eight hex digits of the CRC-32C of ``covered`` as JSON with sorted keys."""
    return f"{crc32c(orjson.dumps(covered, option=orjson.OPT_SORT_KEYS)):08x}"


def seal_json(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with its checksum under ``"crc32c"`` (the checksum covers every other field)."""
    return {**body, _CHECKSUM_KEY: json_checksum(dict(body))}


def unseal_json(doc: Any) -> dict[str, Any]:
    """The fields of a :func:`seal_json` document without its checksum.

    Raises ValueError when ``doc`` is not an object, has no checksum or fails it.
    """
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object, found {type(doc).__name__}")
    body = dict(doc)
    stored = body.pop(_CHECKSUM_KEY, None)
    if stored is None:
        raise ValueError("no checksum")
    computed = json_checksum(body)
    if stored != computed:
        raise ValueError(f"checksum mismatch (stored {stored}, computed {computed})")
    return body


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
