"""The durable layout of an operator's state in the query's checkpoint directory.

::

    <checkpoint>/weir/<operator>/_meta.json                      partitions, stores, owner query
    <checkpoint>/weir/<operator>/<partition>/<v:020d>.changelog.zst   the changes of version v
    <checkpoint>/weir/<operator>/<partition>/<v:020d>.snapshot.zst    the whole state at v
    <checkpoint>/weir/<operator>/_batches/<b:020d>.json           the clock of batch b (time modes)

Version ``v`` is the state after micro-batch ``v`` (Spark's own providers number the state
after batch ``v`` as ``v + 1``). Every task of a batch publishes its partition's changelog,
empty or not, so a missing file is damage, never "no change".

**Publishing is create-if-absent** through the checkpoint's storage
(:mod:`weir.engine.spark.storage`): on a file system the file is written to a temp name,
fsynced, hard-linked to its final name (``link`` fails when the name exists) and the directory
fsynced; on an object store it is one conditional write (S3 and ADLS ``If-None-Match: *``, GCS
``ifGenerationMatch=0``). Whoever creates the name first publishes the version; a retried,
speculative or replayed attempt finds the name taken, discards its own file and adopts the
published one, so history never forks.

``_meta.json`` is published the same way by the first task of the operator and checked by every
later one (and by the driver when it builds the plan): the partition count and the stores'
serdes may not change, and the query that owns the state may not change.

Retention (:meth:`PartitionFiles.retain`) runs after a snapshot is written: versions from
``latest - min_versions_to_retain + 1`` on stay loadable, and the snapshot before the oldest
one needed stays too, with the changelogs between them, so a damaged snapshot can always be
rebuilt from an older one.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from weir.stores.filesafety import seal_json, unseal_json
import orjson

from weir.engine.spark.errors import (PartitionCountChangedError, SparkError,
                                      StateFileDamagedError, StateOwnershipError)
from weir.engine.spark.locations import Location, parse_location
from weir.engine.spark.statefile import VersionFile, VersionKind, decode_version
from weir.engine.spark.storage import CheckpointStorage, StorageOptions, open_storage

__all__ = ["OperatorMeta", "OperatorCheckpoint", "PartitionFiles", "Listing",
           "operator_root", "list_operators", "META_FILE"]

META_FILE = "_meta.json"
_BATCHES = "_batches"
_NAME = re.compile(r"^(\d{20})\.(changelog|snapshot)\.zst$")
_META_FORMAT = 1


def operator_root(checkpoint: str | os.PathLike[str] | Location, operator: str) -> Location:
    """``<checkpoint>/weir/<operator>``."""
    _check_operator_name(operator)
    return parse_location(checkpoint) / "weir" / operator


def list_operators(checkpoint: str | os.PathLike[str] | Location,
                   options: StorageOptions | None = None) -> list[str]:
    """Names of the operators with state under ``<checkpoint>/weir``."""
    root = parse_location(checkpoint) / "weir"
    storage = open_storage(root, options)
    return sorted(name for name in storage.directories(root)
                  if not name.startswith((".", "_")) and storage.exists(root / name / META_FILE))


def _check_operator_name(name: str) -> None:
    if not name or name.startswith((".", "_")) or "/" in name or "\\" in name or name != name.strip():
        raise ValueError(f"operator name {name!r}: use a non-empty name without '/', not "
                         f"starting with '.' or '_'")


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
    def from_json(cls, data: bytes, path: Location) -> "OperatorMeta":
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
    """The state of one operator in one checkpoint location (a path, or an object store URI
    reached with ``options``; ``storage`` replaces the client :func:`open_storage` would
    choose, as benchmarks and tests do)."""

    def __init__(self, checkpoint: str | os.PathLike[str] | Location, operator: str,
                 options: StorageOptions | None = None, *,
                 storage: CheckpointStorage | None = None):
        self.checkpoint = parse_location(checkpoint)
        self.operator = operator
        self.options = options
        self.root = operator_root(self.checkpoint, operator)
        if storage is not None:
            self.__dict__["storage"] = storage

    @property
    def meta_path(self) -> Location:
        return self.root / META_FILE

    @cached_property
    def storage(self) -> CheckpointStorage:
        """The store the checkpoint lives in (opened on first use)."""
        return open_storage(self.checkpoint, self.options)

    def __repr__(self) -> str:
        return f"OperatorCheckpoint({str(self.checkpoint)!r}, {self.operator!r})"

    def read_meta(self) -> OperatorMeta | None:
        try:
            data = self.storage.read(self.meta_path)
        except FileNotFoundError:
            return None
        return OperatorMeta.from_json(data, self.meta_path)

    def ensure_meta(self, wanted: OperatorMeta, *, check_query: bool = True) -> OperatorMeta:
        """Publish ``wanted`` when the operator has no metadata yet, else check that the
        recorded metadata allows it (partitions, stores and owner); returns the recorded."""
        meta = self.read_meta()
        if meta is None:
            self.storage.make_directory(self.root)
            self.storage.create(self.meta_path, wanted.to_json())
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
        return PartitionFiles(self.root / str(partition), self.operator, partition,
                              self.storage)

    def partitions(self) -> list[int]:
        return sorted(int(name) for name in self.storage.directories(self.root)
                      if name.isdigit())

    # -- batch clocks (transform_with_state's time modes) -------------------------------------
    def batch_clock_path(self, batch: int) -> Location:
        return self.root / _BATCHES / f"{batch:020d}.json"

    def read_batch_clock(self, batch: int) -> dict[str, Any] | None:
        path = self.batch_clock_path(batch)
        try:
            obj = orjson.loads(self.storage.read(path))
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
        self.storage.make_directory(path.parent)
        self.storage.create(path, orjson.dumps(seal_json(dict(clock)),
                                               option=orjson.OPT_SORT_KEYS))
        got = self.read_batch_clock(batch)
        assert got is not None
        return got

    def retain_batch_clocks(self, oldest: int) -> None:
        folder = self.root / _BATCHES
        old = [folder / name for name in self.storage.names(folder)
               if name.endswith(".json") and name.split(".")[0].isdigit()
               and int(name.split(".")[0]) < oldest]
        if old:
            self.storage.delete(old)


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

    def __init__(self, directory: Location, operator: str, partition: int,
                 storage: CheckpointStorage | None = None):
        self.directory = directory
        self.operator = operator
        self.partition = partition
        self.storage = storage or open_storage(directory)

    def __repr__(self) -> str:
        return f"PartitionFiles({str(self.directory)!r})"

    def path(self, version: int, kind: VersionKind) -> Location:
        return self.directory / f"{version:020d}{kind.suffix}"

    def listing(self) -> Listing:
        changelogs, snapshots = [], []
        for name in self.storage.names(self.directory):
            m = _NAME.match(name)
            if m is None:
                continue
            (changelogs if m.group(2) == "changelog" else snapshots).append(int(m.group(1)))
        return Listing(tuple(sorted(changelogs)), tuple(sorted(snapshots)))

    def exists(self, version: int, kind: VersionKind) -> bool:
        return self.storage.exists(self.path(version, kind))

    def read(self, version: int, kind: VersionKind, *,
             sections: list[str] | None = None) -> VersionFile:
        """The decoded file of ``version``; StateFileDamagedError when it fails a check,
        FileNotFoundError when it is not there."""
        path = self.path(version, kind)
        data = self.storage.read(path)
        return decode_version(data, path=path, sections=sections,
                              expect=(kind, self.operator, self.partition, version))

    def publish(self, version: int, kind: VersionKind, data: bytes) -> bool:
        self.storage.make_directory(self.directory)
        return self.storage.create(self.path(version, kind), data)

    def set_aside_damaged(self, version: int, kind: VersionKind) -> Location | None:
        """Move a damaged file to ``<name>.damaged-<UTC time>`` (kept for inspection), so
        the version can be published again; None when another task already did."""
        path = self.path(version, kind)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{uuid.uuid4().hex[:6]}")
        return aside if self.storage.set_aside(path, aside) else None

    def retain(self, latest: int, min_versions: int) -> list[Location]:
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
        if removed:
            self.storage.delete(removed)
        return removed

    def clean_orphans(self, max_age_ms: int) -> list[Location]:
        """Remove what publish attempts that can no longer finish left behind (temp files on a
        file system, unfinished multipart uploads on S3)."""
        return self.storage.clean_orphans(self.directory, max_age_ms)
