"""The ``OFFSET`` file of a persistent logged store: which changelog state the local files hold.

Invariant: while ``<store dir>/OFFSET`` exists and says offset *N*, the store's files on disk
hold exactly the changelog's state at offset *N* (every record up to *N* applied, nothing
after). The storage manager keeps it true:

* ``flush()`` (the commit path) flushes the store and its changelog; when it settles the store
  (no change since the previous commit, the last settle ``SETTLE_MS`` old, or a clean stop:
  :meth:`weir.recovery.storage.TaskStorageManager.flush`) it makes the engine's files durable,
  then writes ``OFFSET`` with the changelog's newest offset;
* the first change after that removes ``OFFSET`` **before** it reaches the engine (the logged
  layer appends to the changelog before writing the engine, and the storage manager's sink
  removes the file on that first append), so a crash between commits leaves no ``OFFSET``;
* restore removes ``OFFSET`` before replaying and writes it when the store is caught up;
* an offset the changelog cannot back is never written: when the changelog reports no newest
  offset (:data:`~weir.stores.changelog.NO_OFFSET`) the file is removed instead, so the next
  start restores (issue 9, point 8).

Content: one JSON object, written atomically (temp, fsync, rename, fsync dir)::

    {"format": 1, "store": "counts", "engine": "rocksdb",
     "changelog": "filelog.counts-changelog", "offset": 1234, "task": "Partition 0",
     "written_at_ms": 1700000000000, "marker": "rocksdb-seq:5120",
     "identity": "9b1c0d2e3f4a5b6c7d8e9f0a1b2c3d4e", "crc32c": "0c1d2e3f"}

``engine`` and ``changelog`` identify what wrote the files: a store whose config now names
another engine or changelog is rebuilt. ``written_at_ms`` dates the file for the staleness rule
(a file copied from a backup keeps its age, unlike its mtime). ``marker`` is the engine's commit
marker when the file was written (RocksDB's last sequence number; LMDB's last transaction id and
entry count): restore reuses the files only when the opened engine still shows it, so an
``OFFSET`` file that outlived or was copied next to other files (a deleted ``data.mdb``, an
``OFFSET`` put back from a backup) vouches for nothing. Files written before the marker existed
have none and are checked without it. ``identity`` is the changelog partition's identity
(its incarnation) when the file was written, where the system reports one: a store written
against a changelog that was later deleted and created again is rebuilt, never caught up from
offsets that now name other records. ``task`` names the task whose store the file vouches for:
a store directory moved or restored into another task's place (its ``OFFSET`` file still
matches its files) proves nothing there. Files without either field are checked without it
(both were added without a format change: older readers ignore them). A file that does not
parse or fails its checksum is
reported with :class:`OffsetFileCorruptError`; restore treats it like a missing file (rebuild).
An offset of -1 (written by older versions for an empty changelog) proves nothing either.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from weir.stores.filesafety import (atomic_write, remove_durably, remove_stray_temps, seal_json,
                                    unseal_json)
from weir.recovery.errors import RecoveryError

__all__ = [
    "OFFSET_FILE_NAME",
    "OffsetFileCorruptError",
    "StoreOffset",
    "read_offset_file",
    "remove_offset_file",
    "write_offset_file",
]

OFFSET_FILE_NAME = "OFFSET"
_FORMAT = 1


class OffsetFileCorruptError(RecoveryError):
    """An ``OFFSET`` file does not parse or fails its checksum (names the file).

    Harmless: the store is rebuilt from its changelog. Nothing for an operator to do unless it
    repeats (then check the disk).
    """


@dataclass(frozen=True)
class StoreOffset:
    """What an ``OFFSET`` file says."""

    store: str
    changelog: str
    offset: int
    written_at_ms: int
    engine: str
    marker: str | None = None
    """The engine's commit marker when the file was written (None in files older than it)."""
    identity: str | None = None
    """The changelog partition's identity when the file was written (None: unknown)."""
    task: str | None = None
    """The task whose store wrote the file (None in files older than it)."""

    def age_ms(self, now_ms: int) -> int:
        return now_ms - self.written_at_ms


def write_offset_file(directory: Path, store: str, changelog: str, offset: int, *,
                      engine: str, now_ms: int | None = None,
                      marker: str | None = None, identity: str | None = None,
                      task: str | None = None) -> StoreOffset:
    """Record that the store in ``directory`` holds ``changelog``'s state at ``offset``
    (``marker``: the engine's commit marker now). ``offset`` must be a real changelog offset:
    ``NO_OFFSET`` vouches for nothing, remove the file instead (:func:`remove_offset_file`)."""
    if int(offset) < 0:
        raise ValueError(f"an OFFSET file vouches for a changelog offset, not {offset}; "
                         f"remove the file when the changelog has no records")
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    body = {"format": _FORMAT, "store": store, "engine": engine, "changelog": changelog,
            "offset": int(offset), "written_at_ms": int(now_ms)}
    if marker is not None:
        body["marker"] = str(marker)
    if identity:
        body["identity"] = str(identity)
    if task is not None:
        body["task"] = str(task)
    atomic_write(Path(directory) / OFFSET_FILE_NAME, orjson.dumps(seal_json(body)) + b"\n")
    return StoreOffset(store, changelog, int(offset), int(now_ms), engine, body.get("marker"),
                       body.get("identity"), body.get("task"))


def read_offset_file(directory: Path) -> StoreOffset | None:
    """The ``OFFSET`` file of the store in ``directory``; None when there is none.

    Raises :class:`OffsetFileCorruptError` when it exists but cannot be trusted.
    """
    path = Path(directory) / OFFSET_FILE_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = unseal_json(orjson.loads(data))
        if doc["format"] > _FORMAT:
            raise ValueError(f"format {doc['format']} is newer than {_FORMAT}")
        marker, identity, task = doc.get("marker"), doc.get("identity"), doc.get("task")
        result = StoreOffset(str(doc["store"]), str(doc["changelog"]), doc["offset"],
                             doc["written_at_ms"], str(doc["engine"]),
                             None if marker is None else str(marker),
                             None if identity is None else str(identity),
                             None if task is None else str(task))
        if not isinstance(result.offset, int) or not isinstance(result.written_at_ms, int):
            raise ValueError("offset and written_at_ms must be integers")
        return result
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise OffsetFileCorruptError(
            f"offset file {path} cannot be trusted ({exc}); the store will be rebuilt from its "
            "changelog") from None


def remove_offset_file(directory: Path) -> bool:
    """Remove the ``OFFSET`` file (durably) and any temp file of it. True if one existed."""
    directory = Path(directory)
    remove_stray_temps(directory, OFFSET_FILE_NAME)
    return remove_durably(directory / OFFSET_FILE_NAME)
