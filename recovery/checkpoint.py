"""Task checkpoints: what a task has processed and which changelog state goes with it.

A :class:`Checkpoint` holds, per task:

* ``input_offsets``: the last **processed** offset per input ``(system, stream, partition)``
  (the task resumes at that offset + 1);
* ``changelog_offsets``: per logged store, the newest changelog offset the committed state
  covers (:data:`~weir.stores.changelog.NO_OFFSET` when the changelog was empty). Restore rebuilds
  each store from its changelog up to exactly this offset and reverts later records;
* ``extras``: JSON-compatible bookkeeping (control messages, adjunct versions);
* ``input_identities`` / ``changelog_identities``: the *identity* of each input partition
  and of each store's changelog partition when the offsets were recorded (a stream's identity
  changes when it is deleted and created again, so an offset can only be trusted against the
  same identity). Absent entries mean "unknown" (a checkpoint written before identities
  existed, or a system without them);
* ``changelog_partitions``: per logged store, the changelog partition ``(system, stream,
  partition)`` its offset is in: the coordinator stream assigns each task its changelog
  partition, and a start whose assignment says another one (a coordinator stream restored
  from another backup, or written by hand) would restore another task's state. Absent:
  unknown (a checkpoint written before the field existed; the next commit records it).

The commit path writes a checkpoint only after stores and changelogs are flushed. A checkpoint
never moves an input offset backwards on its own: :meth:`FileCheckpointManager.write` refuses
(:class:`~weir.recovery.errors.CheckpointRegressionError`) unless the caller said that SSP was
reset on purpose (:meth:`FileCheckpointManager.allow_rewind`).

On disk (:class:`FileCheckpointManager`) a checkpoint is one JSON file per task (format 2)::

    {"format": 2, "crc32c": "5d1c0e2a",
     "checkpoint": {"task": "Partition 0", "written_at_ms": 1700000000000,
                    "input_offsets": [{"system": "filelog", "stream": "clicks",
                                       "partition": 0, "offset": 41,
                                       "identity": "3f2a..."}],
                    "changelog_offsets": {"counts": 17},
                    "changelog_identities": {"counts": "9b1c..."},
                    "changelog_partitions": {"counts": {"system": "filelog",
                                                        "stream": "counts-changelog",
                                                        "partition": 0}},
                    "extras": {}}}

``crc32c`` is the CRC-32C of ``{"checkpoint": ..., "format": 2}`` serialized compactly with
sorted keys, so the file may be pretty-printed or re-indented without breaking it, and a
damaged ``format`` field fails the checksum instead of reading as "made by a newer Weir".
Every later format keeps this rule. Format 1 files (no identities; the checksum covers the
``checkpoint`` object only) are still read. ``changelog_partitions`` was added within format 2
(older readers ignore it; files without it read as "unknown").

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
import os
import shutil
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import quote

import orjson

from weir.stores.changelog import NO_OFFSET

from weir.stores.filesafety import atomic_write, fsync_dir, json_checksum
from weir.recovery.errors import CheckpointCorruptError, CheckpointRegressionError, RecoveryError

if TYPE_CHECKING:
    from weir.recovery.job_lock import JobLock

__all__ = [
    "CHECKPOINT_FORMAT",
    "Checkpoint",
    "CheckpointEntry",
    "CheckpointFile",
    "CheckpointManager",
    "CorruptCheckpointPolicy",
    "FileCheckpointManager",
    "MemoryCheckpointManager",
    "decode_checkpoint",
    "decode_checkpoint_file",
    "encode_checkpoint",
    "aside_suffix",
    "check_forward",
    "corrupt_advice",
]

_log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 2
"""The checkpoint file format this version writes and the newest it reads."""

SSPKey = tuple[str, str, int]


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


def _ssp_key(key: object) -> SSPKey:
    try:
        system, stream, partition = key  # type: ignore[misc]
    except (TypeError, ValueError):
        raise RecoveryError(
            f"checkpoint input key {key!r} is not a (system, stream, partition) tuple") from None
    return (str(system), str(stream), int(partition))


def _check_identity(identity: object, what: str) -> str:
    if not isinstance(identity, str) or not identity:
        raise RecoveryError(f"checkpoint identity of {what} must be a non-empty string, "
                            f"got {identity!r}")
    return identity


@dataclass(frozen=True)
class Checkpoint:
    """One task's committed position. Immutable; build a new one for every commit.

    Keys of ``input_offsets`` may be ``SystemStreamPartition`` tuples; they are stored as plain
    ``(system, stream, partition)`` tuples, which compare and hash equal to them. Identities
    are optional and only kept for keys that have an offset.
    """

    input_offsets: Mapping[SSPKey, int] = field(default_factory=dict)
    changelog_offsets: Mapping[str, int] = field(default_factory=dict)
    extras: Mapping[str, Any] = field(default_factory=dict)
    input_identities: Mapping[SSPKey, str] = field(default_factory=dict)
    changelog_identities: Mapping[str, str] = field(default_factory=dict)
    written_at_ms: int | None = field(default=None, compare=False)
    """When the checkpoint was written (milliseconds since the epoch), as read back from its
    file or stream; None for a checkpoint built in code (the writer stamps the time). Restore's
    compaction-lag rule uses it. Not part of equality."""
    changelog_partitions: Mapping[str, SSPKey] = field(default_factory=dict)
    """Per logged store, the changelog partition ``(system, stream, partition)`` its offset
    is in (absent: unknown); only kept for stores that have an offset."""

    def __post_init__(self) -> None:
        inputs = {}
        for key, offset in self.input_offsets.items():
            ssp = _ssp_key(key)
            _check_offset(offset, f"input {ssp[0]}.{ssp[1]}#{ssp[2]}", minimum=0)
            inputs[ssp] = offset
        for store, offset in self.changelog_offsets.items():
            _check_offset(offset, f"changelog offset of store '{store}'", minimum=NO_OFFSET)
        identities = {}
        for key, identity in self.input_identities.items():
            ssp = _ssp_key(key)
            if ssp in inputs:
                identities[ssp] = _check_identity(identity, f"input {ssp[0]}.{ssp[1]}#{ssp[2]}")
        changelog_ids = {store: _check_identity(identity, f"the changelog of store '{store}'")
                         for store, identity in self.changelog_identities.items()
                         if store in self.changelog_offsets}
        partitions = {store: _ssp_key(ssp) for store, ssp in self.changelog_partitions.items()
                      if store in self.changelog_offsets}
        try:
            orjson.dumps(dict(self.extras))
        except TypeError as exc:
            raise RecoveryError(
                f"checkpoint extras must be JSON-compatible with string keys: {exc}") from None
        object.__setattr__(self, "input_offsets", _frozen(inputs))
        object.__setattr__(self, "changelog_offsets", _frozen(self.changelog_offsets))
        object.__setattr__(self, "extras", _frozen(self.extras))
        object.__setattr__(self, "input_identities", _frozen(identities))
        object.__setattr__(self, "changelog_identities", _frozen(changelog_ids))
        object.__setattr__(self, "changelog_partitions", _frozen(partitions))

    def __reduce__(self):  # MappingProxyType does not pickle; Spark and processes need this
        return (Checkpoint, (dict(self.input_offsets), dict(self.changelog_offsets),
                             dict(self.extras), dict(self.input_identities),
                             dict(self.changelog_identities), self.written_at_ms,
                             dict(self.changelog_partitions)))

    def with_identities(self, inputs: Mapping[SSPKey, str] | None = None,
                        changelogs: Mapping[str, str] | None = None,
                        partitions: Mapping[str, Any] | None = None) -> "Checkpoint":
        """This checkpoint with identities (and changelog partitions) filled in where it has
        none (its own win)."""
        input_ids = {**{_ssp_key(k): v for k, v in (inputs or {}).items()},
                     **self.input_identities}
        changelog_ids = {**(changelogs or {}), **self.changelog_identities}
        changelog_partitions = {**{k: _ssp_key(v) for k, v in (partitions or {}).items()
                                   if k in self.changelog_offsets},
                                **self.changelog_partitions}
        if input_ids == dict(self.input_identities) and \
                changelog_ids == dict(self.changelog_identities) and \
                changelog_partitions == dict(self.changelog_partitions):
            return self
        return Checkpoint(self.input_offsets, self.changelog_offsets, self.extras, input_ids,
                          changelog_ids, self.written_at_ms, changelog_partitions)

    def to_json_body(self, task_name: str, *, written_at_ms: int) -> dict[str, Any]:
        """The ``checkpoint`` object of the file format (see the module docstring)."""
        inputs = []
        for (s, t, p), o in sorted(self.input_offsets.items()):
            entry: dict[str, Any] = {"system": s, "stream": t, "partition": p, "offset": o}
            identity = self.input_identities.get((s, t, p))
            if identity is not None:
                entry["identity"] = identity
            inputs.append(entry)
        body = {
            "task": str(task_name),
            "written_at_ms": int(written_at_ms),
            "input_offsets": inputs,
            "changelog_offsets": dict(sorted(self.changelog_offsets.items())),
            "changelog_identities": dict(sorted(self.changelog_identities.items())),
            "extras": dict(self.extras),
        }
        if self.changelog_partitions:
            body["changelog_partitions"] = {
                store: {"system": s, "stream": t, "partition": p}
                for store, (s, t, p) in sorted(self.changelog_partitions.items())}
        return body

    @classmethod
    def from_json_body(cls, body: Mapping[str, Any]) -> "Checkpoint":
        """Inverse of :meth:`to_json_body`. Raises ``KeyError``/``TypeError``/``ValueError``
        (or :class:`RecoveryError`) on malformed input."""
        inputs = {(e["system"], e["stream"], e["partition"]): e["offset"]
                  for e in body["input_offsets"]}
        identities = {(e["system"], e["stream"], e["partition"]): e["identity"]
                      for e in body["input_offsets"] if e.get("identity") is not None}
        written = body.get("written_at_ms")
        partitions = {store: (e["system"], e["stream"], e["partition"])
                      for store, e in (body.get("changelog_partitions") or {}).items()}
        return cls(inputs, dict(body["changelog_offsets"]), dict(body.get("extras") or {}),
                   identities, dict(body.get("changelog_identities") or {}),
                   written if isinstance(written, int) and written > 0 else None, partitions)


def _check_offset(offset: object, what: str, *, minimum: int) -> None:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < minimum:
        raise RecoveryError(f"checkpoint {what} must be an integer >= {minimum}, got {offset!r}")


def _checksum(body: Mapping[str, Any], version: int) -> str:
    """Format 1 covers the body only; format 2 and later cover the format number too."""
    return json_checksum(body if version == 1 else {"checkpoint": body, "format": version})


@dataclass(frozen=True)
class CheckpointFile:
    """A decoded checkpoint file: the task it belongs to, the checkpoint, when it was written
    and in which format (what ``weir checkpoint show`` prints)."""

    task: str
    checkpoint: Checkpoint
    written_at_ms: int
    format: int


@dataclass(frozen=True)
class CheckpointEntry:
    """One task's last and previous checkpoint as a manager holds them, or why they could not
    be read (what ``weir checkpoint show`` prints); ``location`` says where they live."""

    task: str
    location: str
    current: CheckpointFile | None
    error: str | None
    previous: CheckpointFile | None
    previous_error: str | None


def encode_checkpoint(task_name: str, checkpoint: Checkpoint, *,
                      written_at_ms: int | None = None) -> bytes:
    """The bytes of a checkpoint file for ``task_name``."""
    if written_at_ms is None:
        written_at_ms = time.time_ns() // 1_000_000
    body = checkpoint.to_json_body(task_name, written_at_ms=written_at_ms)
    doc = {"format": CHECKPOINT_FORMAT, "crc32c": _checksum(body, CHECKPOINT_FORMAT),
           "checkpoint": body}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"


def decode_checkpoint_file(data: bytes, *, source: str, advice: str | None = None
                           ) -> CheckpointFile:
    """Parse checkpoint file bytes (any format up to :data:`CHECKPOINT_FORMAT`).

    Raises :class:`CheckpointCorruptError` naming ``source`` when the bytes do not parse or
    fail their checksum (a damaged ``format`` field included), and :class:`RecoveryError`
    when an intact file has a newer format than this Weir reads. ``advice`` replaces the
    generic way out in the corruption messages.
    """
    advice = advice or corrupt_advice()
    try:
        doc = orjson.loads(data)
        version = doc["format"]
        body = doc["checkpoint"]
        stored_crc = doc["crc32c"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointCorruptError(
            f"checkpoint file {source} is not a valid checkpoint ({exc.__class__.__name__}: "
            f"{exc}); {advice}") from None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointCorruptError(
            f"checkpoint file {source} has no valid format number ({version!r}); {advice}")
    try:
        actual = _checksum(body, version)
    except TypeError as exc:
        raise CheckpointCorruptError(
            f"checkpoint file {source} has a malformed body ({exc}); {advice}") from None
    if actual != stored_crc:
        raise CheckpointCorruptError(
            f"checkpoint file {source} fails its checksum (stored {stored_crc}, computed "
            f"{actual} for format {version}); {advice}")
    if version > CHECKPOINT_FORMAT:
        raise RecoveryError(
            f"checkpoint file {source} has format {version}, newer than the format "
            f"{CHECKPOINT_FORMAT} this Weir reads (its checksum is intact, so a newer Weir "
            f"wrote it); run that newer Weir")
    try:
        return CheckpointFile(str(body["task"]), Checkpoint.from_json_body(body),
                              int(body.get("written_at_ms", 0)), version)
    except (KeyError, TypeError, ValueError, AttributeError, RecoveryError) as exc:
        raise CheckpointCorruptError(
            f"checkpoint file {source} has a malformed body ({exc.__class__.__name__}: {exc}); "
            f"{advice}") from None


def decode_checkpoint(data: bytes, *, source: str) -> tuple[str, Checkpoint]:
    """Parse checkpoint file bytes into ``(task_name, checkpoint)`` (see
    :func:`decode_checkpoint_file`)."""
    decoded = decode_checkpoint_file(data, source=source)
    return decoded.task, decoded.checkpoint


def corrupt_advice(task: str | None = None, job_config: str | None = None) -> str:
    """The way out of a corrupt checkpoint, safe to follow literally: every choice keeps the
    input position and the state together."""
    job = job_config or "<job config>"
    task_arg = f" --task '{task}'" if task else ""
    return (f"nothing was changed. To recover without counting anything twice: go back to "
            f"the checkpoint before it (its '.prev' file) with `weir checkpoint use-previous "
            f"{job}{task_arg}` (the input is read again from there and the stores are restored "
            f"to match), or put back a copy of the file from a backup, or start the job's state "
            f"over with `weir checkpoint reset {job} --yes` (moves checkpoints, local stores and "
            f"changelogs aside). Do not delete the file: the stores would be restored from "
            f"their whole changelog while the input starts over, counting everything twice")


def aside_suffix(kind: str, now: datetime | None = None) -> str:
    """``reset-20250102T030405Z``: the suffix of files and directories moved aside by the
    ``weir checkpoint`` commands (nothing is ever deleted)."""
    now = now or datetime.now(timezone.utc)
    return f"{kind}-{now.strftime('%Y%m%dT%H%M%S')}Z"


def check_forward(task: str, previous: Checkpoint | None, checkpoint: Checkpoint, *,
                  allowed: Collection[SSPKey] = (), path: str | None = None) -> None:
    """Raise :class:`CheckpointRegressionError` when ``checkpoint`` moves an input offset
    of ``previous`` backwards (same SSP, and the same identity where both are known), except
    for the SSPs in ``allowed`` (reset on purpose)."""
    if previous is None:
        return
    for ssp, offset in checkpoint.input_offsets.items():
        before = previous.input_offsets.get(ssp)
        if before is None or offset >= before or ssp in allowed:
            continue
        old_id = previous.input_identities.get(ssp)
        new_id = checkpoint.input_identities.get(ssp)
        if old_id is not None and new_id is not None and old_id != new_id:
            continue  # another incarnation of the stream: its offsets start over
        where = f" ({path})" if path else ""
        raise CheckpointRegressionError(
            f"refusing to write a checkpoint of task '{task}' that moves input "
            f"{ssp[0]}.{ssp[1]} partition {ssp[2]} back from offset {before} to {offset}"
            f"{where}: a checkpoint never moves backwards on its own, so the task must have "
            f"read this input from before its own last checkpoint (damaged or replaced input "
            f"files?). Nothing was written; the last checkpoint stays as it was. Find out why "
            f"the input went back (`weir log describe {ssp[1]}`); to go back on purpose use "
            f"`weir checkpoint use-previous` or `weir checkpoint reset`",
            task=task, ssp=ssp, previous=before, offset=offset, path=path)


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


class _Bindings:
    """Per task: the identities the running job binds its checkpoints to, the SSPs it may
    move backwards once (reset on purpose) and the last checkpoint read or written."""

    def __init__(self) -> None:
        self.inputs: dict[str, dict[SSPKey, str]] = {}
        self.changelogs: dict[str, dict[str, str]] = {}
        self.partitions: dict[str, dict[str, SSPKey]] = {}
        self.rewind: dict[str, set[SSPKey]] = {}
        self.last: dict[str, Checkpoint | None] = {}

    def bind(self, task: str, inputs: Mapping[Any, str] | None,
             changelogs: Mapping[str, str] | None,
             partitions: Mapping[str, Any] | None = None) -> None:
        if inputs:
            self.inputs.setdefault(task, {}).update(
                {_ssp_key(k): v for k, v in inputs.items() if v})
        if changelogs:
            self.changelogs.setdefault(task, {}).update(
                {k: v for k, v in changelogs.items() if v})
        if partitions:
            self.partitions.setdefault(task, {}).update(
                {k: _ssp_key(v) for k, v in partitions.items()})

    def stamp(self, task: str, checkpoint: Checkpoint) -> Checkpoint:
        return checkpoint.with_identities(self.inputs.get(task), self.changelogs.get(task),
                                          self.partitions.get(task))

    def written(self, task: str, checkpoint: Checkpoint) -> None:
        self.last[task] = checkpoint
        allowed = self.rewind.get(task)
        if allowed:
            allowed.difference_update(checkpoint.input_offsets)


class FileCheckpointManager:
    """Checkpoints as one JSON file per task in ``directory``, written atomically.

    Files are named ``<task name, percent-encoded>.json``; each write keeps the checkpoint it
    replaces as ``<file>.prev``. A crash at any moment of a write leaves the last complete
    checkpoint readable (stray ``*.tmp`` files are ignored; :meth:`remove_stray_temps`
    removes them while the job lock is held). ``job_config`` (the job's config file) only
    makes the advice in error messages name the right ``weir checkpoint`` command.
    """

    def __init__(self, directory: Path | str, *,
                 on_corrupt: CorruptCheckpointPolicy = CorruptCheckpointPolicy.RAISE,
                 job_config: str | None = None):
        self.directory = Path(directory)
        self.on_corrupt = on_corrupt
        self.job_config = job_config
        self._tasks: set[str] = set()
        self._stopped = False
        self._bindings = _Bindings()

    # -- lifecycle -----------------------------------------------------------------------
    def register(self, task_name: str) -> None:
        self._tasks.add(str(task_name))

    def start(self) -> None:
        """Create the directory. Temp files of interrupted writes are left alone here: they
        may belong to a live writer (see :meth:`remove_stray_temps`)."""
        self.directory.mkdir(parents=True, exist_ok=True)

    def stop(self) -> None:
        self._stopped = True

    def remove_stray_temps(self, lock: "JobLock") -> list[Path]:
        """Delete the temp files interrupted checkpoint writes left in the directory.

        Only with the job lock of this directory held (``lock``): then no writer of this job
        is alive, so every temp file here is a leftover. Returns the files removed.
        """
        if not lock.held or Path(lock.directory).resolve() != self.directory.resolve():
            raise RecoveryError(
                f"removing temp files of {self.directory} needs the job lock of that directory "
                f"held (got {lock!r}); a live writer's temp file must never be removed")
        removed = []
        for stray in sorted(self.directory.glob("*.json*.tmp")):
            stray.unlink(missing_ok=True)
            removed.append(stray)
            _log.info("removed %s, left by an interrupted checkpoint write", stray)
        if removed:
            fsync_dir(self.directory)
        return removed

    # -- binding the running job -----------------------------------------------------------
    def bind(self, task_name: str, *, inputs: Mapping[Any, str] | None = None,
             changelogs: Mapping[str, str] | None = None,
             changelog_partitions: Mapping[str, Any] | None = None) -> None:
        """Record the identities of the task's input partitions and of its stores' changelog
        partitions, and which changelog partition (``(system, stream, partition)``) each
        store uses, in every checkpoint this manager writes for it (where the checkpoint
        written has none)."""
        self._bindings.bind(str(task_name), inputs, changelogs, changelog_partitions)

    def allow_rewind(self, task_name: str, ssps: Collection[Any]) -> None:
        """Let the next checkpoint of ``task_name`` move these SSPs' offsets backwards once
        (the operator reset them on purpose, e.g. ``samza.reset.offset=true``)."""
        self._bindings.rewind.setdefault(str(task_name), set()).update(
            _ssp_key(s) for s in ssps)

    # -- reading and writing -------------------------------------------------------------
    def path_for(self, task_name: str) -> Path:
        """The checkpoint file of ``task_name``."""
        return self.directory / f"{quote(str(task_name), safe='')}.json"

    def previous_path_for(self, task_name: str) -> Path:
        return self.path_for(task_name).with_name(self.path_for(task_name).name + ".prev")

    def read_last(self, task_name: str) -> Checkpoint | None:
        """The last checkpoint of ``task_name``, or None if it never wrote one."""
        self._check_open()
        task_name = str(task_name)
        path = self.path_for(task_name)
        try:
            checkpoint = self._read(path, task_name)
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
            checkpoint = previous
        self._bindings.last[task_name] = checkpoint
        return checkpoint

    def read_previous(self, task_name: str) -> Checkpoint | None:
        """The checkpoint before the last one (the ``.prev`` file), or None."""
        self._check_open()
        return self._read(self.previous_path_for(task_name), task_name)

    def read_file(self, path: Path | str) -> CheckpointFile | None:
        """Decode one checkpoint file (None if missing); for tools."""
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            return None
        return decode_checkpoint_file(data, source=str(path), advice=self._advice(None))

    def write(self, task_name: str, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` as the last one of ``task_name``; durable on return.

        Raises :class:`CheckpointRegressionError` (and writes nothing) when it would move an
        input offset below the previous checkpoint's (see :func:`check_forward`)."""
        self._check_open()
        task_name = str(task_name)
        checkpoint = self._bindings.stamp(task_name, checkpoint)
        path = self.path_for(task_name)
        check_forward(task_name, self._baseline(task_name), checkpoint,
                      allowed=self._bindings.rewind.get(task_name, ()), path=str(path))
        self.directory.mkdir(parents=True, exist_ok=True)
        data = encode_checkpoint(task_name, checkpoint)
        atomic_write(path, data, previous=self.previous_path_for(task_name))
        self._bindings.written(task_name, checkpoint)

    def _baseline(self, task_name: str) -> Checkpoint | None:
        """The checkpoint a write must not move backwards from: the last one this manager
        read or wrote, else the file's."""
        if task_name in self._bindings.last:
            return self._bindings.last[task_name]
        previous = self._read(self.path_for(task_name), task_name)
        self._bindings.last[task_name] = previous
        return previous

    def list_tasks(self) -> list[str]:
        """Names of the tasks with a checkpoint file here (read from the files)."""
        tasks = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                tasks.append(decode_checkpoint(path.read_bytes(), source=str(path))[0])
            except CheckpointCorruptError:
                _log.warning("skipping corrupt checkpoint file %s", path)
        return tasks

    def location(self, task_name: str) -> str:
        """Where ``task_name``'s checkpoint lives (its file)."""
        return str(self.path_for(task_name))

    def has_previous(self, task_name: str) -> bool:
        return self.previous_path_for(task_name).exists()

    def task_names(self) -> list[str]:
        """Tasks with a checkpoint file or a previous one here (from the file names, so a
        damaged file still counts)."""
        from urllib.parse import unquote

        names = set()
        if self.directory.is_dir():
            for entry in self.directory.iterdir():
                name = entry.name
                if name.endswith(".json"):
                    names.add(unquote(name[:-len(".json")]))
                elif name.endswith(".json.prev"):
                    names.add(unquote(name[:-len(".json.prev")]))
        return sorted(names)

    def read_entry(self, task_name: str) -> CheckpointEntry:
        """The task's checkpoint file and its previous one, as read (or why they could not
        be)."""
        path = self.path_for(task_name)
        current, error = self._entry_part(path)
        previous, previous_error = self._entry_part(self.previous_path_for(task_name))
        return CheckpointEntry(str(task_name), str(path), current, error, previous,
                               previous_error)

    def _entry_part(self, path: Path) -> tuple[CheckpointFile | None, str | None]:
        try:
            return self.read_file(path), None
        except RecoveryError as exc:
            return None, str(exc).split(";")[0]

    def set_last(self, task_name: str, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` as the last one without the never-backwards check (operator
        commands that checked it themselves: ``weir checkpoint set``); the replaced file
        becomes ``.prev``."""
        task_name = str(task_name)
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path_for(task_name), encode_checkpoint(task_name, checkpoint),
                     previous=self.previous_path_for(task_name))
        self._bindings.last[task_name] = checkpoint

    # -- operator commands (``weir checkpoint``; the caller holds the job lock) -------------
    def use_previous(self, task_name: str, *, suffix: str | None = None) -> Path | None:
        """Make the previous checkpoint (``.prev``) the last one of ``task_name``.

        The current file (intact or not) is kept as ``<file>.<suffix>`` (default
        ``replaced-<UTC time>``); the checkpoint file is never missing meanwhile. Returns the
        path the current file was kept as (None when there was none). Raises
        :class:`CheckpointCorruptError` when the previous file is missing, damaged or
        belongs to another task."""
        task_name = str(task_name)
        previous_path = self.previous_path_for(task_name)
        try:
            data = previous_path.read_bytes()
        except FileNotFoundError:
            raise CheckpointCorruptError(
                f"task '{task_name}' has no previous checkpoint ({previous_path} is missing); "
                f"put back the checkpoint directory from a backup, or start the job's state "
                f"over with `weir checkpoint reset {self.job_config or '<job config>'} --yes`"
            ) from None
        decoded = decode_checkpoint_file(
            data, source=str(previous_path),
            advice=(f"it cannot be used; put back the checkpoint directory from a backup, or "
                    f"start the job's state over with `weir checkpoint reset "
                    f"{self.job_config or '<job config>'} --yes`"))
        if decoded.task != task_name:
            raise CheckpointCorruptError(
                f"{previous_path} belongs to task {decoded.task!r}, not {task_name!r}; it "
                f"cannot be used for this task")
        path = self.path_for(task_name)
        kept = None
        if path.exists():
            kept = path.with_name(f"{path.name}.{suffix or aside_suffix('replaced')}")
            _link_or_copy(path, kept)
        atomic_write(path, data)
        self._bindings.last[task_name] = decoded.checkpoint
        return kept

    def move_aside(self, target: Path) -> list[Path]:
        """Move every checkpoint file of this directory (current, ``.prev``, temp and kept
        files) into the new directory ``target``; lock files stay. Returns the moved files'
        new paths."""
        from weir.recovery.job_lock import is_lock_file

        target = Path(target)
        target.mkdir(parents=True, exist_ok=False)
        moved = []
        for path in sorted(self.directory.iterdir()) if self.directory.exists() else []:
            if is_lock_file(path.name) or not path.is_file():
                continue
            destination = target / path.name
            os.replace(path, destination)
            moved.append(destination)
        fsync_dir(target)
        if self.directory.exists():
            fsync_dir(self.directory)
        self._bindings.last.clear()
        return moved

    def _advice(self, task_name: str | None) -> str:
        return corrupt_advice(task_name, self.job_config)

    def _read(self, path: Path, task_name: str) -> Checkpoint | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        decoded = decode_checkpoint_file(data, source=str(path),
                                         advice=self._advice(task_name))
        if decoded.task != str(task_name):
            raise CheckpointCorruptError(
                f"checkpoint file {path} belongs to task {decoded.task!r}, not {task_name!r}; "
                f"{self._advice(task_name)}")
        return decoded.checkpoint

    def _check_open(self) -> None:
        if self._stopped:
            raise RecoveryError(
                f"checkpoint manager for {self.directory} is stopped; create a new one")


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    fsync_dir(target.parent)


class MemoryCheckpointManager:
    """Checkpoints kept in a dict: for tests and for jobs that must not persist anything.
    Like the file manager it never moves an input offset backwards on its own."""

    def __init__(self) -> None:
        self._checkpoints: dict[str, Checkpoint] = {}
        self._tasks: set[str] = set()
        self._bindings = _Bindings()
        self.writes = 0

    def register(self, task_name: str) -> None:
        self._tasks.add(str(task_name))

    def start(self) -> None:
        return None

    def bind(self, task_name: str, *, inputs: Mapping[Any, str] | None = None,
             changelogs: Mapping[str, str] | None = None,
             changelog_partitions: Mapping[str, Any] | None = None) -> None:
        self._bindings.bind(str(task_name), inputs, changelogs, changelog_partitions)

    def allow_rewind(self, task_name: str, ssps: Collection[Any]) -> None:
        self._bindings.rewind.setdefault(str(task_name), set()).update(
            _ssp_key(s) for s in ssps)

    def read_last(self, task_name: str) -> Checkpoint | None:
        return self._checkpoints.get(str(task_name))

    def write(self, task_name: str, checkpoint: Checkpoint) -> None:
        task_name = str(task_name)
        checkpoint = self._bindings.stamp(task_name, checkpoint)
        check_forward(task_name, self._checkpoints.get(task_name), checkpoint,
                      allowed=self._bindings.rewind.get(task_name, ()))
        self._checkpoints[task_name] = checkpoint
        self._bindings.written(task_name, checkpoint)
        self.writes += 1

    def stop(self) -> None:
        return None
