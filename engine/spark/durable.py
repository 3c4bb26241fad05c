"""The durable layout of an operator's state in the query's checkpoint directory.

::

    <checkpoint>/weir/<operator>/_meta.json                      partitions, stores, owner query
    <checkpoint>/weir/<operator>/<partition>/<v:020d>.changelog.zst   the changes of version v
    <checkpoint>/weir/<operator>/<partition>/<v:020d>.snapshot.zst    the whole state at v
    <checkpoint>/weir/<operator>/_batches/<b:020d>.json           the clock of batch b (time modes)

Version ``v`` is the state after micro-batch ``v`` (Spark's own providers number the state
after batch ``v`` as ``v + 1``). Every task of a batch publishes its partition's changelog,
empty or not, so a missing file is damage, never "no change".

**Publishing is create-if-absent**: the file is written to a temp name, fsynced, hard-linked to
its final name (``link`` fails when the name exists) and the directory fsynced. Whoever links
first publishes the version; a retried, speculative or replayed attempt finds the name taken,
discards its own file and adopts the published one, so history never forks. This needs a
checkpoint location with POSIX hard links (a local disk, NFS, most cluster file systems);
object stores are refused with an error that says so.

``_meta.json`` is published the same way by the first task of the operator and checked by every
later one (and by the driver when it builds the plan): the partition count and the stores'
serdes may not change, and the query that owns the state may not change.

Retention (:meth:`PartitionFiles.retain`) runs after a snapshot is written: versions from
``latest - min_versions_to_retain + 1`` on stay loadable, and the snapshot before the oldest
one needed stays too, with the changelogs between them, so a damaged snapshot can always be
rebuilt from an older one.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.stores.filesafety import fsync_dir, pid_alive, publish_once, seal_json, unseal_json
import orjson

from weir.engine.spark.errors import (PartitionCountChangedError, SparkError,
                                      StateFileDamagedError, StateOwnershipError)
from weir.engine.spark.statefile import VersionFile, VersionKind, decode_version

__all__ = ["OperatorMeta", "OperatorCheckpoint", "PartitionFiles", "Listing", "publish_bytes",
           "operator_root", "list_operators", "META_FILE"]

META_FILE = "_meta.json"
_BATCHES = "_batches"
_NAME = re.compile(r"^(\d{20})\.(changelog|snapshot)\.zst$")
_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[^.]+)\.(?P<pid>\d+)\.[0-9a-f]{12}\.tmp$")
_META_FORMAT = 1


def operator_root(checkpoint: str | os.PathLike[str], operator: str) -> Path:
    """``<checkpoint>/weir/<operator>``."""
    _check_operator_name(operator)
    return Path(checkpoint) / "weir" / operator


def list_operators(checkpoint: str | os.PathLike[str]) -> list[str]:
    """Names of the operators with state under ``<checkpoint>/weir``."""
    root = Path(checkpoint) / "weir"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if not p.name.startswith((".", "_")) and (p / META_FILE).is_file())


def _check_operator_name(name: str) -> None:
    if not name or name.startswith((".", "_")) or "/" in name or "\\" in name or name != name.strip():
        raise ValueError(f"operator name {name!r}: use a non-empty name without '/', not "
                         f"starting with '.' or '_'")


def _temp_name(final: Path) -> Path:
    host = socket.gethostname().replace(".", "_") or "host"
    return final.with_name(f".{final.name}.{host}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")


def publish_bytes(final: Path, data: bytes) -> bool:
    """Create ``final`` holding ``data`` unless it exists; True when this call created it.

    Temp file, fsync, ``link`` (fails when the name exists), fsync of the directory: readers
    never see a partial file and two writers can never both win."""
    try:
        return publish_once(final, data, temp=_temp_name(final))
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise SparkError(
                f"cannot publish {final}: the checkpoint location does not support hard links "
                f"({exc.strerror}). The Weir state provider publishes every version with "
                f"create-if-absent (link); use a local disk, NFS or a cluster file system that "
                f"supports hard links for the checkpoint location") from exc
        raise


@dataclass(frozen=True)
class OperatorMeta:
    """What ``_meta.json`` records about an operator's state."""

    operator: str
    kind: str
    partitions: int
    stores: Mapping[str, Mapping[str, str]]
    """store -> {"key.serde", "msg.serde", "provider"} (the provider at creation)."""
    query_id: str | None = None
    created_at_version: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    incarnation: str = ""
    """A random id given when the state is created (or rewritten by ``weir spark
    repartition``): replicas of another incarnation are never adopted."""

    def to_json(self) -> bytes:
        body = {"format": _META_FORMAT, "operator": self.operator, "kind": self.kind,
                "partitions": self.partitions,
                "stores": {k: dict(v) for k, v in sorted(self.stores.items())},
                "query_id": self.query_id, "created_at_version": self.created_at_version,
                "created_ms": time.time_ns() // 1_000_000, "extra": dict(self.extra),
                "incarnation": self.incarnation or uuid.uuid4().hex}
        return orjson.dumps(seal_json(body), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes, path: Path) -> "OperatorMeta":
        try:
            obj = unseal_json(orjson.loads(data))
            if obj.get("format") != _META_FORMAT:
                raise ValueError(f"format {obj.get('format')} (this Weir reads {_META_FORMAT})")
            return cls(obj["operator"], obj["kind"], int(obj["partitions"]),
                       {k: dict(v) for k, v in obj["stores"].items()}, obj.get("query_id"),
                       int(obj.get("created_at_version", 0)), obj.get("extra") or {},
                       obj.get("incarnation") or "")
        except (ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
            raise StateFileDamagedError(
                f"{exc}", path=path, operator=path.parent.name, partition=-1, version=-1,
                kind="operator metadata",
                advice="put the file back from a backup; it records the partition count and "
                       "the stores the versions were written with") from exc


class OperatorCheckpoint:
    """The state of one operator in one checkpoint location."""

    def __init__(self, checkpoint: str | os.PathLike[str], operator: str):
        self.checkpoint = Path(checkpoint)
        self.operator = operator
        self.root = operator_root(checkpoint, operator)
        self.meta_path = self.root / META_FILE

    def __repr__(self) -> str:
        return f"OperatorCheckpoint({str(self.checkpoint)!r}, {self.operator!r})"

    def read_meta(self) -> OperatorMeta | None:
        try:
            data = self.meta_path.read_bytes()
        except FileNotFoundError:
            return None
        return OperatorMeta.from_json(data, self.meta_path)

    def ensure_meta(self, wanted: OperatorMeta, *, check_query: bool = True) -> OperatorMeta:
        """Publish ``wanted`` when the operator has no metadata yet, else check that the
        recorded metadata allows it (partitions, stores and owner); returns the recorded."""
        meta = self.read_meta()
        if meta is None:
            self.root.mkdir(parents=True, exist_ok=True)
            publish_bytes(self.meta_path, wanted.to_json())
            meta = self.read_meta()
        assert meta is not None
        self.check(meta, wanted, check_query=check_query)
        return meta

    def check(self, meta: OperatorMeta, wanted: OperatorMeta, *, check_query: bool = True) -> None:
        if meta.partitions != wanted.partitions:
            raise PartitionCountChangedError(operator=self.operator, recorded=meta.partitions,
                                             requested=wanted.partitions, meta=self.meta_path)
        for name, spec in wanted.stores.items():
            old = meta.stores.get(name)
            if old is None:
                raise SparkError(
                    f"operator '{self.operator}': store '{name}' is not one of the stores its "
                    f"state was written with ({', '.join(sorted(meta.stores)) or 'none'}; "
                    f"{self.meta_path}); a store cannot be added to running state: use a new "
                    f"operator name, or a new checkpoint location")
            for key in ("key.serde", "msg.serde"):
                if old.get(key) != spec.get(key):
                    raise SparkError(
                        f"operator '{self.operator}': store '{name}' was written with {key}="
                        f"{old.get(key)} ({self.meta_path}) and is now configured with "
                        f"{spec.get(key)}; the stored bytes would be read with the wrong serde. "
                        f"Configure {key}={old.get(key)} again, or use a new checkpoint location")
        missing = set(meta.stores) - set(wanted.stores)
        if missing:
            raise SparkError(
                f"operator '{self.operator}': its state holds store(s) {', '.join(sorted(missing))} "
                f"that the operator no longer names ({self.meta_path}); name them again, or use a "
                f"new checkpoint location")
        if (check_query and meta.query_id and wanted.query_id
                and meta.query_id != wanted.query_id):
            raise StateOwnershipError(
                f"StateOwnershipError: operator '{self.operator}' holds the state of streaming "
                f"query {meta.query_id} ({self.meta_path}), but query {wanted.query_id} runs it. "
                f"Another query, or this query after its Spark checkpoint was deleted, would "
                f"apply its batches to versions another input history made. Give each query its "
                f"own checkpoint location (the state lives in <checkpoint>/weir), or delete the "
                f"whole checkpoint location to start over")

    def partition(self, partition: int) -> "PartitionFiles":
        return PartitionFiles(self.root / str(partition), self.operator, partition)

    def partitions(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(p.name) for p in self.root.iterdir() if p.name.isdigit())

    # -- batch clocks (transform_with_state's time modes) -------------------------------------
    def batch_clock_path(self, batch: int) -> Path:
        return self.root / _BATCHES / f"{batch:020d}.json"

    def read_batch_clock(self, batch: int) -> dict[str, Any] | None:
        path = self.batch_clock_path(batch)
        try:
            obj = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except orjson.JSONDecodeError as exc:
            raise StateFileDamagedError(f"not JSON: {exc}", path=path, operator=self.operator,
                                        partition=-1, version=batch, kind="batch clock") from exc
        try:
            return unseal_json(obj)
        except ValueError as exc:
            raise StateFileDamagedError(str(exc), path=path, operator=self.operator,
                                        partition=-1, version=batch, kind="batch clock") from None

    def publish_batch_clock(self, batch: int, clock: Mapping[str, Any]) -> dict[str, Any]:
        """Publish the clock of ``batch`` unless one is published; return the published one
        (every task and every attempt of the batch sees the same clock)."""
        path = self.batch_clock_path(batch)
        existing = self.read_batch_clock(batch)
        if existing is not None:
            return existing
        path.parent.mkdir(parents=True, exist_ok=True)
        publish_bytes(path, orjson.dumps(seal_json(clock), option=orjson.OPT_SORT_KEYS))
        got = self.read_batch_clock(batch)
        assert got is not None
        return got

    def retain_batch_clocks(self, oldest: int) -> None:
        folder = self.root / _BATCHES
        if not folder.is_dir():
            return
        for entry in folder.iterdir():
            stem = entry.name.split(".")[0]
            if stem.isdigit() and int(stem) < oldest and entry.name.endswith(".json"):
                entry.unlink(missing_ok=True)


@dataclass(frozen=True)
class Listing:
    """The versions published in one partition directory, ascending."""

    changelogs: tuple[int, ...]
    snapshots: tuple[int, ...]

    @property
    def latest(self) -> int:
        """The newest version with a changelog (-1 when none)."""
        return self.changelogs[-1] if self.changelogs else -1


class PartitionFiles:
    """The version files of one partition of one operator."""

    def __init__(self, directory: Path, operator: str, partition: int):
        self.directory = directory
        self.operator = operator
        self.partition = partition

    def __repr__(self) -> str:
        return f"PartitionFiles({str(self.directory)!r})"

    def path(self, version: int, kind: VersionKind) -> Path:
        return self.directory / f"{version:020d}{kind.suffix}"

    def listing(self) -> Listing:
        changelogs, snapshots = [], []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return Listing((), ())
        for name in names:
            m = _NAME.match(name)
            if m is None:
                continue
            (changelogs if m.group(2) == "changelog" else snapshots).append(int(m.group(1)))
        return Listing(tuple(sorted(changelogs)), tuple(sorted(snapshots)))

    def exists(self, version: int, kind: VersionKind) -> bool:
        return self.path(version, kind).exists()

    def read(self, version: int, kind: VersionKind, *,
             sections: list[str] | None = None) -> VersionFile:
        """The decoded file of ``version``; StateFileDamagedError when it fails a check,
        FileNotFoundError when it is not there."""
        path = self.path(version, kind)
        data = path.read_bytes()
        return decode_version(data, path=path, sections=sections,
                              expect=(kind, self.operator, self.partition, version))

    def publish(self, version: int, kind: VersionKind, data: bytes) -> bool:
        self.directory.mkdir(parents=True, exist_ok=True)
        return publish_bytes(self.path(version, kind), data)

    def set_aside_damaged(self, version: int, kind: VersionKind) -> Path | None:
        """Rename a damaged file to ``<name>.damaged-<UTC time>`` (kept for inspection), so
        the version can be published again; None when another task already did."""
        path = self.path(version, kind)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{uuid.uuid4().hex[:6]}")
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return None
        fsync_dir(self.directory)
        return aside

    def retain(self, latest: int, min_versions: int) -> list[Path]:
        """Delete what no loadable version needs; returns the removed files.

        Versions ``>= latest - min_versions + 1`` stay loadable: the newest snapshot at or
        below that floor (the *base*) stays, the snapshot before it (the *fallback*, used when
        the base turns out damaged) stays, and so do the changelogs after the fallback."""
        floor = latest - min_versions + 1
        listing = self.listing()
        below = [s for s in listing.snapshots if s <= floor]
        if len(below) < 2:
            return []
        fallback = below[-2]
        removed = []
        for version in listing.changelogs:
            if version <= fallback:
                removed.append(self.path(version, VersionKind.CHANGELOG))
        for version in listing.snapshots:
            if version < fallback:
                removed.append(self.path(version, VersionKind.SNAPSHOT))
        for path in removed:
            path.unlink(missing_ok=True)
        if removed:
            fsync_dir(self.directory)
        return removed

    def clean_orphans(self, max_age_ms: int) -> list[Path]:
        """Remove temp files of publish attempts that can no longer finish: those of a dead
        process on this host, and any older than ``max_age_ms``."""
        host = socket.gethostname().replace(".", "_") or "host"
        now = time.time()
        removed = []
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return []
        for entry in entries:
            m = _TMP.match(entry.name)
            if m is None:
                continue
            dead = m.group("host") == host and not pid_alive(int(m.group("pid")))
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


