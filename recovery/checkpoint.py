"""Task checkpoints: what a task has processed and which changelog state goes with it.

A :class:`Checkpoint` holds, per task:

* ``input_offsets``: the last **processed** offset per input ``(system, stream, partition)``
  (the task resumes at that offset + 1);
* ``changelog_offsets``: per logged store, the newest changelog offset the committed state
  covers (:data:`~weir.stores.changelog.NO_OFFSET` when the changelog was empty). Restore rebuilds
  each store from its changelog up to exactly this offset and reverts later records;
* ``extras``: JSON-compatible bookkeeping (control messages, adjunct versions).

The commit path writes a checkpoint only after stores and changelogs are flushed.

On disk (:class:`FileCheckpointManager`) a checkpoint is one JSON file per task::

    {"format": 1, "crc32c": "5d1c0e2a",
     "checkpoint": {"task": "Partition 0", "written_at_ms": 1700000000000,
                    "input_offsets": [{"system": "filelog", "stream": "clicks",
                                       "partition": 0, "offset": 41}],
                    "changelog_offsets": {"counts": 17}, "extras": {}}}

``crc32c`` is the CRC-32C of the ``checkpoint`` object serialized compactly with sorted keys,
so the file may be pretty-printed or re-indented without breaking it.

Example::

    >>> import tempfile
    >>> cp = Checkpoint({("filelog", "clicks", 0): 41}, {"counts": 17})
    >>> mgr = FileCheckpointManager(tempfile.mkdtemp())
    >>> mgr.register("Partition 0"); mgr.start()
    >>> mgr.write("Partition 0", cp)
    >>> mgr.read_last("Partition 0") == cp
    True
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

import crc32c
import orjson

from weir.stores.changelog import NO_OFFSET

from weir.recovery._atomic import atomic_write, remove_stray_temps
from weir.recovery.errors import CheckpointCorruptError, RecoveryError

__all__ = [
    "CHECKPOINT_FORMAT",
    "Checkpoint",
    "CheckpointManager",
    "CorruptCheckpointPolicy",
    "FileCheckpointManager",
    "MemoryCheckpointManager",
    "decode_checkpoint",
    "encode_checkpoint",
]

_log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 1
"""The checkpoint file format this version writes and the newest it reads."""

SSPKey = tuple[str, str, int]


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Checkpoint:
    """One task's committed position. Immutable; build a new one for every commit.

    Keys of ``input_offsets`` may be ``SystemStreamPartition`` tuples; they are stored as plain
    ``(system, stream, partition)`` tuples, which compare and hash equal to them.
    """

    input_offsets: Mapping[SSPKey, int] = field(default_factory=dict)
    changelog_offsets: Mapping[str, int] = field(default_factory=dict)
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        inputs = {}
        for key, offset in self.input_offsets.items():
            try:
                system, stream, partition = key
            except (TypeError, ValueError):
                raise RecoveryError(
                    f"checkpoint input key {key!r} is not a (system, stream, partition) "
                    "tuple") from None
            _check_offset(offset, f"input {system}.{stream}#{partition}", minimum=0)
            inputs[(str(system), str(stream), int(partition))] = offset
        for store, offset in self.changelog_offsets.items():
            _check_offset(offset, f"changelog offset of store '{store}'", minimum=NO_OFFSET)
        try:
            orjson.dumps(dict(self.extras))
        except TypeError as exc:
            raise RecoveryError(
                f"checkpoint extras must be JSON-compatible with string keys: {exc}") from None
        object.__setattr__(self, "input_offsets", _frozen(inputs))
        object.__setattr__(self, "changelog_offsets", _frozen(self.changelog_offsets))
        object.__setattr__(self, "extras", _frozen(self.extras))

    def __reduce__(self):  # MappingProxyType does not pickle; Spark and processes need this
        return (Checkpoint, (dict(self.input_offsets), dict(self.changelog_offsets),
                             dict(self.extras)))

    def to_json_body(self, task_name: str, *, written_at_ms: int) -> dict[str, Any]:
        """The ``checkpoint`` object of the file format (see the module docstring)."""
        return {
            "task": str(task_name),
            "written_at_ms": int(written_at_ms),
            "input_offsets": [
                {"system": s, "stream": t, "partition": p, "offset": o}
                for (s, t, p), o in sorted(self.input_offsets.items())
            ],
            "changelog_offsets": dict(sorted(self.changelog_offsets.items())),
            "extras": dict(self.extras),
        }

    @classmethod
    def from_json_body(cls, body: Mapping[str, Any]) -> "Checkpoint":
        """Inverse of :meth:`to_json_body`. Raises ``KeyError``/``TypeError``/``ValueError``
        (or :class:`RecoveryError`) on malformed input."""
        inputs = {(e["system"], e["stream"], e["partition"]): e["offset"]
                  for e in body["input_offsets"]}
        return cls(inputs, dict(body["changelog_offsets"]), dict(body.get("extras") or {}))


def _check_offset(offset: object, what: str, *, minimum: int) -> None:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < minimum:
        raise RecoveryError(f"checkpoint {what} must be an integer >= {minimum}, got {offset!r}")


def _checksum(body: Mapping[str, Any]) -> str:
    return f"{crc32c.crc32c(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)):08x}"


def encode_checkpoint(task_name: str, checkpoint: Checkpoint, *,
                      written_at_ms: int | None = None) -> bytes:
    """The bytes of a checkpoint file for ``task_name``."""
    if written_at_ms is None:
        written_at_ms = time.time_ns() // 1_000_000
    body = checkpoint.to_json_body(task_name, written_at_ms=written_at_ms)
    doc = {"format": CHECKPOINT_FORMAT, "crc32c": _checksum(body), "checkpoint": body}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"


def decode_checkpoint(data: bytes, *, source: str) -> tuple[str, Checkpoint]:
    """Parse checkpoint file bytes into ``(task_name, checkpoint)``.

    Raises :class:`CheckpointCorruptError` naming ``source`` when the bytes do not parse or
    fail their checksum, and :class:`RecoveryError` when the format is newer than this Weir.
    """
    try:
        doc = orjson.loads(data)
        version = doc["format"]
        body = doc["checkpoint"]
        stored_crc = doc["crc32c"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointCorruptError(
            f"checkpoint file {source} is not a valid checkpoint ({exc.__class__.__name__}: "
            f"{exc}); {_CORRUPT_ADVICE}") from None
    if not isinstance(version, int) or version > CHECKPOINT_FORMAT:
        raise RecoveryError(
            f"checkpoint file {source} has format {version!r}, newer than the format "
            f"{CHECKPOINT_FORMAT} this Weir reads; run a newer Weir to read it")
    actual = _checksum(body)
    if actual != stored_crc:
        raise CheckpointCorruptError(
            f"checkpoint file {source} fails its checksum (stored {stored_crc}, computed "
            f"{actual}); {_CORRUPT_ADVICE}")
    try:
        return str(body["task"]), Checkpoint.from_json_body(body)
    except (KeyError, TypeError, ValueError, RecoveryError) as exc:
        raise CheckpointCorruptError(
            f"checkpoint file {source} has a malformed body ({exc.__class__.__name__}: {exc}); "
            f"{_CORRUPT_ADVICE}") from None


_CORRUPT_ADVICE = (
    "to recover, restore the file from a backup, or copy its '.prev' file (the checkpoint "
    "before it) over it, or delete it to restart the task from its default input offsets "
    "(stores then restore their whole changelog)")


@runtime_checkable
class CheckpointManager(Protocol):
    """Reads and writes the checkpoints of a set of tasks.

    Call order: ``register`` each task, ``start()``, then any ``read_last``/``write``, then
    ``stop()``. ``write`` is durable when it returns.
    """

    def register(self, task_name: str) -> None: ...
    def start(self) -> None: ...
    def read_last(self, task_name: str) -> Checkpoint | None: ...
    def write(self, task_name: str, checkpoint: Checkpoint) -> None: ...
    def stop(self) -> None: ...


class CorruptCheckpointPolicy(Enum):
    """What :meth:`FileCheckpointManager.read_last` does with a corrupt checkpoint file."""

    RAISE = "raise"
    """Raise :class:`CheckpointCorruptError` (default): an operator decides."""
    USE_PREVIOUS = "use-previous"
    """Log a warning and return the checkpoint before it (the ``.prev`` file), if intact.
    The task then reprocesses more input: state stays exact, outputs may repeat."""


class FileCheckpointManager:
    """Checkpoints as one JSON file per task in ``directory``, written atomically.

    Files are named ``<task name, percent-encoded>.json``; each write keeps the checkpoint it
    replaces as ``<file>.prev``. A crash at any moment of a write leaves the last complete
    checkpoint readable (stray ``*.tmp`` files are ignored and removed by :meth:`start`).
    """

    def __init__(self, directory: Path | str, *,
                 on_corrupt: CorruptCheckpointPolicy = CorruptCheckpointPolicy.RAISE):
        self.directory = Path(directory)
        self.on_corrupt = on_corrupt
        self._tasks: set[str] = set()
        self._stopped = False

    # -- lifecycle -----------------------------------------------------------------------
    def register(self, task_name: str) -> None:
        self._tasks.add(str(task_name))

    def start(self) -> None:
        """Create the directory and remove temp files left by a crashed write."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for task in sorted(self._tasks):
            for stray in remove_stray_temps(self.directory, self.path_for(task).name):
                _log.info("removed %s, left by an interrupted checkpoint write", stray)

    def stop(self) -> None:
        self._stopped = True

    # -- reading and writing -------------------------------------------------------------
    def path_for(self, task_name: str) -> Path:
        """The checkpoint file of ``task_name``."""
        return self.directory / f"{quote(str(task_name), safe='')}.json"

    def previous_path_for(self, task_name: str) -> Path:
        return self.path_for(task_name).with_name(self.path_for(task_name).name + ".prev")

    def read_last(self, task_name: str) -> Checkpoint | None:
        """The last checkpoint of ``task_name``, or None if it never wrote one."""
        self._check_open()
        path = self.path_for(task_name)
        try:
            return self._read(path, task_name)
        except CheckpointCorruptError as exc:
            if self.on_corrupt is not CorruptCheckpointPolicy.USE_PREVIOUS:
                raise
            previous = self.read_previous(task_name)
            if previous is None:
                raise CheckpointCorruptError(
                    f"{exc}; no previous checkpoint ({self.previous_path_for(task_name)}) "
                    "to fall back to") from None
            _log.warning("%s; using the previous checkpoint %s instead (input is reprocessed "
                         "from there)", exc, self.previous_path_for(task_name))
            return previous

    def read_previous(self, task_name: str) -> Checkpoint | None:
        """The checkpoint before the last one (the ``.prev`` file), or None."""
        self._check_open()
        return self._read(self.previous_path_for(task_name), task_name)

    def write(self, task_name: str, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` as the last one of ``task_name``; durable on return."""
        self._check_open()
        self.directory.mkdir(parents=True, exist_ok=True)
        data = encode_checkpoint(task_name, checkpoint)
        atomic_write(self.path_for(task_name), data,
                     previous=self.previous_path_for(task_name))

    def list_tasks(self) -> list[str]:
        """Names of the tasks with a checkpoint file here (read from the files)."""
        tasks = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                tasks.append(decode_checkpoint(path.read_bytes(), source=str(path))[0])
            except CheckpointCorruptError:
                _log.warning("skipping corrupt checkpoint file %s", path)
        return tasks

    def _read(self, path: Path, task_name: str) -> Checkpoint | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        stored_task, checkpoint = decode_checkpoint(data, source=str(path))
        if stored_task != str(task_name):
            raise CheckpointCorruptError(
                f"checkpoint file {path} belongs to task {stored_task!r}, not {task_name!r}; "
                f"{_CORRUPT_ADVICE}")
        return checkpoint

    def _check_open(self) -> None:
        if self._stopped:
            raise RecoveryError(
                f"checkpoint manager for {self.directory} is stopped; create a new one")


class MemoryCheckpointManager:
    """Checkpoints kept in a dict: for tests and for jobs that must not persist anything."""

    def __init__(self) -> None:
        self._checkpoints: dict[str, Checkpoint] = {}
        self._tasks: set[str] = set()
        self.writes = 0

    def register(self, task_name: str) -> None:
        self._tasks.add(str(task_name))

    def start(self) -> None:
        return None

    def read_last(self, task_name: str) -> Checkpoint | None:
        return self._checkpoints.get(str(task_name))

    def write(self, task_name: str, checkpoint: Checkpoint) -> None:
        self._checkpoints[str(task_name)] = checkpoint
        self.writes += 1

    def stop(self) -> None:
        return None
