"""``weir spark repartition``: rewrite an operator's state for another partition count, offline.

A key's state partition is ``pmod(hash(key), P)`` (what ``repartition(P, key)`` computes), so
an operator's state cannot follow a changed ``P``; the query refuses it
(:class:`~weir.engine.spark.errors.PartitionCountChangedError`). With the query stopped, this
command:

1. takes the newest version ``V`` every partition published and Spark committed (the query's
   ``commits/`` log, when the checkpoint has one: a batch published but not committed is
   replayed by Spark after the restart, and runs again on the new partitions; adopting its
   rewritten version instead would emit none of its rows);
2. reads each partition's state at ``V`` straight from the checkpoint (snapshot + changelogs);
3. places every entry in its new partition with Spark's hash (:mod:`~weir.engine.spark.sparkhash`)
   of its grouping key: for ``transform_with_state`` the key is part of every entry; for a
   :class:`~weir.engine.spark.operator.StateOperator` each store key must be the operator's key
   column, encoded by the store's key serde (as in a running count), else the command refuses;
   the key column types come from the operator's metadata (or ``--key-types``);
4. writes the new state beside the old one -- version ``V`` of every new partition as a
   changelog of puts and a snapshot, a new ``_meta.json`` (another *incarnation*: replicas of
   the old state are never adopted), the batch clocks of ``transform_with_state`` -- then
   swaps the directories, keeping the old one as ``.<operator>.before-repartition-<time>``.

The next batch ``V + 1`` of the restarted query (with the new partition count) continues from
there. Jobs (``weir run --runner spark``) cannot be repartitioned: a task's stores hold the keys
of its own input partitions, which only the job's code knows.
"""

from __future__ import annotations

import os
import shutil
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from weir.stores.config import Config
from weir.stores.serdes import serde_from_name

from weir.engine.spark.durable import META_FILE, OperatorCheckpoint, OperatorMeta
from weir.engine.spark.errors import CheckpointLocationError, SparkError
from weir.engine.spark.partition import load_version
from weir.engine.spark.sparkhash import SUPPORTED_TYPES, partition_of
from weir.engine.spark.statefile import VersionKind, encode_version
from weir.engine.spark.storage import publish_bytes

__all__ = ["RepartitionResult", "repartition", "spark_committed_batch"]

_U32 = struct.Struct(">I")


@dataclass(frozen=True)
class RepartitionResult:
    operator: str
    version: int
    before: tuple[int, ...]
    """Keys per old partition."""
    after: tuple[int, ...]
    """Keys per new partition."""
    kept: Path | None
    """Where the old state was kept (None when nothing changed)."""
    seconds: float


def spark_committed_batch(checkpoint: str | os.PathLike[str]) -> int | None:
    """The newest batch id in the query's ``commits/`` log (None without one, or when it is
    empty: nothing committed)."""
    commits = Path(checkpoint) / "commits"
    if not commits.is_dir():
        return None
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    return max(ids) if ids else -1


def _tws_key(store_key: bytes) -> bytes:
    """The grouping key bytes inside a transform_with_state entry (see processor.py)."""
    tag = store_key[:1]
    if tag in (b"v", b"l", b"L", b"m"):
        rest = store_key[store_key.index(b"\0", 2) + 1:]
    elif tag == b"t":
        rest = store_key[2:]
    elif tag == b"T":
        rest = store_key[10:]
    elif tag == b"x":
        return _tws_key(store_key[10:])
    else:
        raise SparkError(f"unexpected transform_with_state entry {store_key[:16]!r}")
    (length,) = _U32.unpack_from(rest, 0)
    return rest[:4 + length]


def _placer(meta: OperatorMeta, key_types: Sequence[str] | None,
            partitions: int) -> Callable[[str, bytes], int]:
    import pickle

    types = list(key_types or (meta.extra or {}).get("key_types") or [])
    if not types:
        raise SparkError(f"operator '{meta.operator}' does not record its key column types; "
                         f"give them with --key-types (e.g. --key-types string or long,string)")
    for kind in types:
        if kind not in SUPPORTED_TYPES:
            raise SparkError(f"key type {kind!r} cannot be hashed offline (supported: "
                             f"{', '.join(SUPPORTED_TYPES)})")
    if meta.kind == "transform-with-state":
        def place(store: str, key: bytes) -> int:
            kb = _tws_key(key)
            values = pickle.loads(kb[4:])
            return partition_of(list(values), types, partitions)
        return place
    if meta.kind == "state-operator":
        if len(types) != 1:
            raise SparkError(f"operator '{meta.operator}' is keyed by {len(types)} columns; "
                             f"its store keys cannot be mapped back to them: not repartitionable "
                             f"offline")
        serdes = {name: serde_from_name(spec["key.serde"], Config({}))
                  for name, spec in meta.stores.items()}

        def place(store: str, key: bytes) -> int:
            try:
                value = serdes[store].from_bytes(key)
            except Exception as exc:
                raise SparkError(f"store '{store}' key {key[:32]!r} does not decode with its "
                                 f"key serde ({exc}); its keys are not the operator's key "
                                 f"column, so it cannot be repartitioned offline") from exc
            return partition_of([value], types, partitions)
        return place
    raise SparkError(f"operator '{meta.operator}' is a {meta.kind}: "
                     + ("a job's task keeps the keys of its own input partitions, which only "
                        "the job's code knows; a job cannot be repartitioned"
                        if meta.kind == "job" else "this kind cannot be repartitioned"))


def repartition(checkpoint: str | os.PathLike[str], operator: str, partitions: int, *,
                key_types: Sequence[str] | None = None, level: int = 3) -> RepartitionResult:
    """Rewrite ``operator``'s state in ``checkpoint`` for ``partitions`` partitions (see the
    module docstring). The query must be stopped."""
    started = time.perf_counter()
    if partitions < 1:
        raise SparkError(f"--partitions must be at least 1, got {partitions}")
    op = OperatorCheckpoint(checkpoint, operator)
    if not isinstance(op.root, Path):
        raise CheckpointLocationError(
            f"weir spark repartition rewrites a checkpoint on a local or mounted file system (it "
            f"builds the new state beside the old and swaps the directories); {checkpoint} is "
            f"an object store or HDFS location. Copy <checkpoint>/weir/{operator} to a local "
            f"directory, repartition it there and copy it back while the query is stopped")
    meta = op.read_meta()
    if meta is None:
        raise SparkError(f"no operator '{operator}' in {checkpoint} ({op.meta_path} is missing)")
    latest = [op.partition(p).listing().latest for p in range(meta.partitions)]
    version = min(latest)
    committed = spark_committed_batch(checkpoint)
    if committed is not None:
        version = min(version, committed)
    if meta.partitions == partitions:
        return RepartitionResult(operator, version, (), (), None, time.perf_counter() - started)
    place = _placer(meta, key_types, partitions)
    stores = sorted(meta.stores)
    new: list[dict[str, dict[bytes, bytes]]] = [{s: {} for s in stores} for _ in range(partitions)]
    before = []
    max_event = None
    for p in range(meta.partitions):
        state = load_version(op, p, version, stores) if version >= 0 else {s: {} for s in stores}
        before.append(sum(len(v) for v in state.values()))
        if version >= 0 and version >= meta.created_at_version:
            seen = op.partition(p).read(version, VersionKind.CHANGELOG, sections=[]).meta.get(
                "max_event_ms")
            if seen is not None and (max_event is None or seen > max_event):
                max_event = seen
        for store, entries in state.items():
            for key, value in entries.items():
                new[place(store, key)][store][key] = value
    staging = op.root.parent / f".{operator}.repartition-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        fresh = OperatorMeta(operator, meta.kind, partitions, meta.stores, meta.query_id,
                             max(version, meta.created_at_version),
                             {**(meta.extra or {}), "repartitioned_from": meta.partitions})
        publish_bytes(staging / META_FILE, fresh.to_json())
        target = OperatorCheckpoint(checkpoint, operator)
        target.root = staging
        if version >= meta.created_at_version:
            for p in range(partitions):
                files = target.partition(p)
                files.directory.mkdir(parents=True, exist_ok=True)
                sections = []
                for store in stores:
                    keys = sorted(new[p][store])
                    sections.append((store, keys, [new[p][store][k] for k in keys]))
                rows = {store: len(new[p][store]) for store in stores}
                changelog_meta = {"base": version - 1, "rows": rows,
                                  "repartitioned_from": meta.partitions}
                if max_event is not None:
                    changelog_meta["max_event_ms"] = max_event
                files.publish(version, VersionKind.CHANGELOG, encode_version(
                    VersionKind.CHANGELOG, operator, p, version, sections, meta=changelog_meta,
                    level=level))
                files.publish(version, VersionKind.SNAPSHOT, encode_version(
                    VersionKind.SNAPSHOT, operator, p, version, sections,
                    meta={"version_meta": changelog_meta}, level=level))
        clocks = op.root / "_batches"
        if clocks.is_dir():
            shutil.copytree(clocks, staging / "_batches")
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        kept = op.root.parent / f".{operator}.before-repartition-{stamp}"
        os.rename(op.root, kept)
        os.rename(staging, op.root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    after = tuple(sum(len(v) for v in part.values()) for part in new)
    return RepartitionResult(operator, version, tuple(before), after, kept,
                             time.perf_counter() - started)

