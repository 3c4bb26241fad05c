"""A stream's directory and its ``stream.json``.

``<root>/<stream>/stream.json`` is written once, atomically, when the stream is created, after
its partition directories exist: a stream exists exactly when this file does. It holds::

    {"format": 1, "name": "clicks", "partitions": 4, "cleanup_policy": "delete",
     "bounded": false, "compression": "none", "config": {"segment.bytes": "1048576"},
     "created_ms": 1700000000000, "incarnation": "5f0c9a1e2b3d4c6e8f7a6b5c4d3e2f1a"}

``incarnation`` is a random id chosen when the stream is created: the *identity* of the
stream's partitions (``PartitionMetadata.identity``). A stream deleted and created again under
the same name gets a new one, so a checkpoint that recorded the old identity is refused
instead of resuming at offsets that now name other records. Streams created before
identities existed have none (``""``: unknown); readers of format 1 ignore the field.

``config`` is the ``StreamSpec.config`` given at creation (per-stream storage settings, see
``settings.py``); ``compression`` is the compression in force when the stream was created
(informational: readers recognise compressed segments by their file names).

``format`` is 1 for a stream created by this Weir; it becomes 2 (:func:`mark_transactional`)
before the first transactional batch is written to it, so a Weir that reads only format 1
refuses the stream ("upgrade Weir") instead of meeting frames it does not know.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field, replace

from weir.stores.filesafety import atomic_write, publish_once
from weir.engine.errors import StreamNotFoundError, SystemError_

from weir.engine.systems.api import CleanupPolicy, StreamSpec
from weir.engine.systems.filelog._files import END_MARKER, LOCK_FILES, STREAM_META
from weir.engine.systems.filelog.errors import StreamConflictError, StreamMetaMissingError

__all__ = [
    "FORMAT_VERSION",
    "StreamMeta",
    "stream_dir",
    "partition_dir",
    "load_meta",
    "create_stream",
    "list_streams",
    "read_end_marker",
    "mark_transactional",
    "PLAIN_FORMAT",
    "TRANSACTIONAL_FORMAT",
]

PLAIN_FORMAT = 1
"""The format of a stream that holds plain records only (what a new stream is created with)."""
TRANSACTIONAL_FORMAT = 2
"""The format of a stream that may hold transactional batches and markers."""
FORMAT_VERSION = TRANSACTIONAL_FORMAT
"""The newest stream format this Weir reads."""


@dataclass(frozen=True)
class StreamMeta:
    name: str
    partitions: int
    cleanup_policy: CleanupPolicy = CleanupPolicy.DELETE
    bounded: bool = False
    compression: str = "none"
    config: dict[str, str] = field(default_factory=dict)
    created_ms: int = 0
    format: int = PLAIN_FORMAT
    incarnation: str = ""
    """Random id of this creation of the stream (its partitions' identity); "" = unknown."""

    @property
    def identity(self) -> str | None:
        """The identity of every partition of this stream, or None when unknown."""
        return self.incarnation or None

    def to_json(self) -> bytes:
        doc = {"format": self.format, "name": self.name, "partitions": self.partitions,
               "cleanup_policy": self.cleanup_policy.value, "bounded": self.bounded,
               "compression": self.compression, "config": dict(self.config),
               "created_ms": self.created_ms}
        if self.incarnation:
            doc["incarnation"] = self.incarnation
        return json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n"

    @classmethod
    def from_json(cls, data: bytes, path: str) -> "StreamMeta":
        try:
            raw = json.loads(data)
            meta = cls(str(raw["name"]), int(raw["partitions"]),
                       CleanupPolicy(raw.get("cleanup_policy", "delete")),
                       bool(raw.get("bounded", False)), str(raw.get("compression", "none")),
                       {str(k): str(v) for k, v in (raw.get("config") or {}).items()},
                       int(raw.get("created_ms", 0)), int(raw.get("format", 1)),
                       str(raw.get("incarnation") or ""))
        except (ValueError, KeyError, TypeError) as exc:
            raise SystemError_(f"{path} is not a valid stream description ({exc}); restore it "
                               f"or recreate the stream") from None
        if meta.format > FORMAT_VERSION:
            raise SystemError_(f"{path} has format {meta.format}, this Weir reads up to "
                               f"{FORMAT_VERSION}; upgrade Weir")
        return meta


def _check_name(stream: str) -> str:
    if (not stream or stream in (".", "..") or stream.startswith(".") or "/" in stream
            or "\\" in stream or "\0" in stream):
        raise SystemError_(f"'{stream}' is not a valid file log stream name: use letters, "
                           f"digits, '-', '_' and '.', not starting with '.'")
    return stream


def stream_dir(root: str, stream: str) -> str:
    return os.path.join(root, _check_name(stream))


def partition_dir(root: str, stream: str, partition: int) -> str:
    return os.path.join(root, _check_name(stream), str(partition))


def load_meta(root: str, stream: str, system: str) -> StreamMeta:
    """The stream's description; StreamNotFoundError if it was never created."""
    path = os.path.join(stream_dir(root, stream), STREAM_META)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        orphans = _partitions_with_records(stream_dir(root, stream))
        if orphans:
            raise StreamNotFoundError(system, stream, (
                f"no {path}, but the stream's directory still holds records (partition(s) "
                f"{', '.join(orphans)}): its stream.json was lost. Put it back from a backup; "
                f"creating the stream again is refused while those records are there")) from None
        raise StreamNotFoundError(system, stream, f"no {path}; create it with `weir log create "
                                  f"{stream}` or create_stream()") from None
    return StreamMeta.from_json(data, path)


def _partitions_with_records(directory: str) -> list[str]:
    """The partition directories under a stream directory that hold anything but locks."""
    try:
        names = sorted((n for n in os.listdir(directory) if n.isdigit()), key=int)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        try:
            files = os.listdir(os.path.join(directory, name))
        except (FileNotFoundError, NotADirectoryError):
            continue
        if any(f not in LOCK_FILES for f in files):
            found.append(name)
    return found


def create_stream(root: str, spec: StreamSpec, system: str, compression: str) -> bool:
    """Create the stream's directories and stream.json. False when it already exists with the
    same partition count; StreamConflictError when the count differs. Safe against a
    concurrent create of the same stream (the first stream.json wins)."""
    if spec.partitions <= 0:
        raise SystemError_(f"stream '{spec.name}' needs at least one partition, got "
                           f"{spec.partitions}")
    directory = stream_dir(root, spec.name)
    meta_path = os.path.join(directory, STREAM_META)
    if os.path.exists(meta_path):
        return _same_or_conflict(root, spec, system, meta_path)
    orphans = _partitions_with_records(directory)
    if orphans:
        raise StreamMetaMissingError(spec.name, meta_path, orphans)
    for partition in range(spec.partitions):
        os.makedirs(os.path.join(directory, str(partition)), exist_ok=True)
    meta = StreamMeta(spec.name, spec.partitions, spec.cleanup_policy, spec.bounded,
                      str(spec.config.get("compression", compression)),
                      {str(k): str(v) for k, v in spec.config.items()},
                      time.time_ns() // 1_000_000, incarnation=uuid.uuid4().hex)
    if publish_once(meta_path, meta.to_json()):
        return True
    return _same_or_conflict(root, spec, system, meta_path)


def _same_or_conflict(root: str, spec: StreamSpec, system: str, meta_path: str) -> bool:
    existing = load_meta(root, spec.name, system)
    if existing.partitions != spec.partitions:
        raise StreamConflictError(spec.name, existing.partitions, spec.partitions, meta_path)
    return False


def list_streams(root: str) -> list[str]:
    """Names of the streams under ``root``, sorted."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if os.path.isfile(os.path.join(root, n, STREAM_META)))


def mark_transactional(root: str, stream: str, system: str) -> StreamMeta:
    """Make sure ``stream.json`` says format 2 before a transactional batch is written to the
    stream (rewritten atomically; idempotent, and two processes doing it at once write the same
    bytes). Returns the stream's description."""
    meta = load_meta(root, stream, system)
    if meta.format >= TRANSACTIONAL_FORMAT:
        return meta
    updated = replace(meta, format=TRANSACTIONAL_FORMAT)
    atomic_write(os.path.join(stream_dir(root, stream), STREAM_META), updated.to_json())
    return updated


def read_end_marker(partition_directory: str) -> int | None:
    """The upcoming offset recorded by a partition's end-of-stream marker, or None."""
    try:
        with open(os.path.join(partition_directory, END_MARKER), "rb") as f:
            return int(json.loads(f.read())["upcoming"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemError_(f"{partition_directory}/{END_MARKER} is damaged ({exc}); rewrite it "
                           f"with end_stream or delete it") from None
