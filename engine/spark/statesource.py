"""State as a data source: ``spark.read.format("weirstate")`` and ``"weirstate-metadata"``.

Read an operator's state at a version (time travel), or the changes between two versions::

    spark.read.format("weirstate").load(checkpoint)                       # the only operator, newest version
    spark.read.format("weirstate").option("operator", "counts").option("version", 7).load(checkpoint)
    spark.read.format("weirstate").option("operator", "counts").option("partition", 2).load(checkpoint)
    spark.read.format("weirstate").option("operator", "counts")
         .option("readChangeFeed", "true").option("startVersion", 3).option("endVersion", 7).load(checkpoint)
    spark.read.format("weirstate-metadata").load(checkpoint)              # operators, partitions, versions, sizes

Options (the path may also be given as ``option("path", ...)`` or ``checkpointLocation``):

==================  ==============================================================================
``operator``        the operator (``<checkpoint>/weir/<operator>``); optional when there is one
``version``         the version to read (default: the newest version every partition published);
                    Spark's ``batchId`` is accepted too (a version is the state after that batch)
``partition``       read only this partition
``store``           read only this store; its key and value columns are then typed by its serdes
                    (``string`` -> string, ``int64`` -> long, ``json``/``msgpack`` -> JSON text,
                    ``bytes`` -> binary); over several stores they are text
``stateVarName``    one state variable of a ``transform_with_state`` operator, typed as Spark's
                    ``statestore`` reader types it: ``key`` (struct of the grouping columns),
                    ``value`` (one row per value or list element) or ``user_map_key`` and
                    ``user_map_value`` (map state), ``partition_id``
``readChangeFeed``  ``true``: the changes of versions ``startVersion`` (required) to
                    ``endVersion`` (default: newest), one row per put or delete, straight from
                    the changelogs; Spark's ``changeStartBatchId`` / ``changeEndBatchId`` work too
==================  ==============================================================================

State rows: ``partition int, store string, key, value, key_bytes binary, value_bytes binary``.
Change rows: ``version long, partition int, store string, change_type string ("put" |
"delete"), key, value, key_bytes binary, value_bytes binary`` (value null for deletes).
Metadata rows: ``operator, kind, partitions, stores, partition, first_version, latest_version,
changelogs, snapshots, latest_snapshot, bytes``.

Every partition is read by one Spark task straight from the checkpoint's files (the newest
readable snapshot at or below the version plus the changelogs after it), so reading never
touches a running query's replicas.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from weir.stores.config import Config
from weir.stores.serdes import serde_from_name

from weir.engine.spark.durable import OperatorCheckpoint, list_operators
from weir.engine.spark.errors import SparkError, StateHistoryError
from weir.engine.spark.locations import Location, parse_location
from weir.engine.spark.partition import load_version
from weir.engine.spark.statefile import VersionKind
from weir.engine.spark.storage import StorageOptions

__all__ = ["WeirStateDataSource", "WeirStateMetadataDataSource", "state_versions"]

_TYPED = {"string": "string", "str": "string", "utf8": "string", "int64": "long",
          "long": "long", "integer": "long", "int": "long", "bytes": "binary",
          "byte": "binary", "bytebuffer": "binary"}


def _checkpoint(options: Mapping[str, str]) -> Location:
    path = options.get("path") or options.get("checkpointLocation") \
        or options.get("checkpointlocation")
    if not path:
        raise SparkError("weirstate: give the query's checkpoint location: "
                         "spark.read.format('weirstate').load(<checkpoint>)")
    return parse_location(path)


def _storage_options(options: Mapping[str, str]) -> StorageOptions:
    """How to reach an object store checkpoint: the reader's options named as Hadoop's keys
    (``fs.s3a.endpoint`` ..., with or without ``spark.hadoop.``), else the clients' defaults."""
    return StorageOptions.from_mapping(options)


def _operator(options: Mapping[str, str], checkpoint: Location) -> OperatorCheckpoint:
    name = options.get("operator")
    storage = _storage_options(options)
    if not name:
        names = list_operators(checkpoint, storage)
        if len(names) != 1:
            raise SparkError(f"weirstate: {checkpoint} holds the state of "
                             f"{len(names)} operators ({', '.join(names) or 'none'}); choose one "
                             f"with option('operator', name)")
        name = names[0]
    op = OperatorCheckpoint(checkpoint, name, storage)
    if op.read_meta() is None:
        raise SparkError(f"weirstate: no operator '{name}' in {checkpoint} (operators there: "
                         f"{', '.join(list_operators(checkpoint, storage)) or 'none'})")
    return op


def _either(options: Mapping[str, str], weir: str, spark: str) -> int | None:
    """An integer option under Weir's name or Spark's ``statestore`` name (either case; a
    version of a Weir operator is the state after that batch id, as Spark's ``batchId``)."""
    found = {}
    for name in (weir, spark):
        for spelled in (name, name.lower()):
            if spelled in options:
                found[name] = _int(options, spelled)
                break
    if len(found) == 2 and found[weir] != found[spark]:
        raise SparkError(f"weirstate: options {weir}={found[weir]} and {spark}={found[spark]} "
                         f"name the same thing; give one")
    return found.get(weir, found.get(spark))


def _int(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise SparkError(f"weirstate: option {key}={raw!r} is not an integer") from None


def state_versions(op: OperatorCheckpoint) -> dict[int, tuple[int, ...]]:
    """partition -> the versions whose changelog is published."""
    meta = op.read_meta()
    assert meta is not None
    return {p: op.partition(p).listing().changelogs for p in range(meta.partitions)}


def _newest_common(op: OperatorCheckpoint) -> int:
    versions = state_versions(op)
    latest = [v[-1] if v else -1 for v in versions.values()]
    return min(latest) if latest else -1


class _Decoder:
    """Bytes of one store to the reader's column values."""

    def __init__(self, serde_name: str, typed: bool):
        self.serde = serde_from_name(serde_name, Config({}))
        low = serde_name.lower()
        self.kind = _TYPED.get(low, "text") if typed else "text"
        self.name = low

    def __call__(self, raw: bytes | None) -> Any:
        if raw is None:
            return None
        if self.kind == "binary":
            return raw
        value = self.serde.from_bytes(raw)
        if self.kind in ("string", "long"):
            return value
        if isinstance(value, (bytes, bytearray)):
            return bytes(value).hex()
        if isinstance(value, str):
            return value
        return orjson.dumps(value, default=str).decode()


def _column_type(decoder_kind: str) -> str:
    return {"string": "string", "long": "bigint", "binary": "binary"}.get(decoder_kind, "string")


class _Plan:
    """The options of one read, resolved on the driver."""

    def __init__(self, options: Mapping[str, str]):
        self.checkpoint = _checkpoint(options)
        self.op = _operator(options, self.checkpoint)
        self.meta = self.op.read_meta()
        assert self.meta is not None
        stores = sorted(self.meta.stores)
        store = options.get("store")
        if store:
            if store not in self.meta.stores:
                raise SparkError(f"weirstate: operator '{self.op.operator}' has no store "
                                 f"'{store}' (its stores: {', '.join(stores)})")
            stores = [store]
        self.stores = stores
        typed = len(stores) == 1
        self.key_kind = "text"
        self.value_kind = "text"
        if typed:
            s = self.meta.stores[stores[0]]
            self.key_kind = _Decoder(s["key.serde"], True).kind
            self.value_kind = _Decoder(s["msg.serde"], True).kind
        self.variable = options.get("stateVarName") or options.get("statevarname")
        self.variable_info: dict[str, Any] | None = None
        if self.variable:
            self.variable_info = _variable_info(self.op, self.meta, self.variable)
        self.partition = _int(options, "partition")
        if self.partition is not None and not 0 <= self.partition < self.meta.partitions:
            raise SparkError(f"weirstate: partition {self.partition} is outside 0.."
                             f"{self.meta.partitions - 1}")
        self.change_feed = (options.get("readChangeFeed") or options.get("readchangefeed")
                            or "false").lower() == "true"
        self.version = _either(options, "version", "batchId")
        self.start = _either(options, "startVersion", "changeStartBatchId")
        self.end = _either(options, "endVersion", "changeEndBatchId")
        newest = _newest_common(self.op)
        if self.change_feed:
            if self.start is None:
                raise SparkError("weirstate: readChangeFeed needs option('startVersion', N)")
            if self.end is None:
                self.end = newest
            if self.end < self.start:
                raise SparkError(f"weirstate: endVersion {self.end} is before startVersion "
                                 f"{self.start}")
        elif self.version is None:
            self.version = newest
        if self.variable and self.change_feed:
            raise SparkError("weirstate: stateVarName reads the state of a version; the change "
                             "feed of a transform_with_state operator is read without it")

    def schema(self) -> Any:
        if self.variable_info is not None:
            return _variable_schema(self.variable_info)
        key, value = _column_type(self.key_kind), _column_type(self.value_kind)
        tail = f"key {key}, value {value}, key_bytes binary, value_bytes binary"
        if self.change_feed:
            return f"version bigint, partition int, store string, change_type string, {tail}"
        return f"partition int, store string, {tail}"

    def partitions(self) -> list[int]:
        return [self.partition] if self.partition is not None else list(range(self.meta.partitions))


def _read_state(checkpoint: str, operator: str, partition: int, version: int,
                stores: list[str], serdes: dict[str, tuple[str, str]], typed: bool,
                options: StorageOptions | None = None) -> Iterator[tuple]:
    op = OperatorCheckpoint(checkpoint, operator, options)
    state = load_version(op, partition, version, stores)
    for store in stores:
        kdec = _Decoder(serdes[store][0], typed)
        vdec = _Decoder(serdes[store][1], typed)
        for k, v in sorted(state[store].items()):
            yield (partition, store, kdec(k), vdec(v), k, v)


def _read_changes(checkpoint: str, operator: str, partition: int, start: int, end: int,
                  stores: list[str], serdes: dict[str, tuple[str, str]], typed: bool,
                  options: StorageOptions | None = None) -> Iterator[tuple]:
    op = OperatorCheckpoint(checkpoint, operator, options)
    files = op.partition(partition)
    listing = files.listing()
    meta = op.read_meta()
    first = meta.created_at_version if meta is not None else 0
    for version in range(max(start, first), end + 1):
        if version not in listing.changelogs:
            raise StateHistoryError(
                f"the changelog of version {version} is not there (retired by retention: "
                f"spark.weir.state.min.versions.to.retain keeps the newest versions only)",
                operator=operator, partition=partition, version=version,
                directory=files.directory)
        changelog = files.read(version, VersionKind.CHANGELOG, sections=stores)
        for store in stores:
            kdec = _Decoder(serdes[store][0], typed)
            vdec = _Decoder(serdes[store][1], typed)
            keys, values = changelog.section(store)
            for k, v in zip(keys, values):
                yield (version, partition, store, "delete" if v is None else "put", kdec(k),
                       vdec(v), k, v)


def _variable_info(op: OperatorCheckpoint, meta: Any, name: str) -> dict[str, Any]:
    if meta.kind != "transform-with-state":
        raise SparkError(f"weirstate: stateVarName={name!r}: operator '{op.operator}' is a "
                         f"{meta.kind}; state variables belong to transform_with_state operators "
                         f"(read a StateOperator's stores with option('store', ...))")
    variables = meta.extra.get("state_variables")
    if variables is None:
        raise SparkError(f"weirstate: operator '{op.operator}' was created by a Weir that did not "
                         f"record its state variables ({op.meta_path}); read its 'tws' store "
                         f"as bytes with option('store', 'tws')")
    if name not in variables:
        raise SparkError(f"weirstate: operator '{op.operator}' has no state variable {name!r} "
                         f"(its variables: {', '.join(sorted(variables)) or 'none'})")
    return {**variables[name], "name": name, "grouping_schema": meta.extra["grouping_schema"]}


def _struct(raw_json: str | None) -> Any:
    import json

    from pyspark.sql.types import StructType

    if raw_json is None:
        raise SparkError("weirstate: the state variable's schema was not recorded (a "
                         "StructType or DDL string given to getValueState/getListState/"
                         "getMapState is needed for a typed view)")
    return StructType.fromJson(json.loads(raw_json))


def _variable_schema(info: dict[str, Any]) -> Any:
    """Spark's ``statestore`` reader columns for one state variable (collections flattened,
    as with its default ``flattenCollectionTypes``)."""
    from pyspark.sql.types import IntegerType, StructType

    schema = StructType().add("key", _struct(info["grouping_schema"]))
    if info["kind"] == "map":
        schema = schema.add("user_map_key", _struct(info["key_schema"])) \
            .add("user_map_value", _struct(info["schema"]))
    else:
        schema = schema.add("value", _struct(info["schema"]))
    return schema.add("partition_id", IntegerType())


def _read_variable(checkpoint: str, operator: str, partition: int, version: int,
                   info: dict[str, Any], options: StorageOptions | None = None
                   ) -> Iterator[tuple]:
    """One state variable's rows of one partition at ``version``, decoded as the processor
    handle stores them (``weir/engine/spark/processor.py``)."""
    import pickle

    from weir.engine.spark.processor import TWS_STORE, decode_key

    op = OperatorCheckpoint(checkpoint, operator, options)
    entries = load_version(op, partition, version, [TWS_STORE])[TWS_STORE]
    tag = {"value": b"v", "list": b"l", "map": b"m"}[info["kind"]]
    prefix = tag + b"\0" + info["name"].encode() + b"\0"
    value_schema = _struct(info["schema"])
    user_key_schema = _struct(info["key_schema"]) if info["kind"] == "map" else None
    for k in sorted(entries):
        if not k.startswith(prefix):
            continue
        key, pos = decode_key(k, len(prefix))
        value = value_schema.fromInternal(pickle.loads(entries[k][8:]))
        if user_key_schema is not None:
            user_key = user_key_schema.fromInternal(pickle.loads(k[pos:]))
            yield (tuple(key), tuple(user_key), tuple(value), partition)
        else:
            yield (tuple(key), tuple(value), partition)


class StatePartition(InputPartition):
    def __init__(self, partition: int):
        super().__init__(partition)
        self.partition = partition


class StateReader(DataSourceReader):
    def __init__(self, plan: _Plan):
        self.checkpoint = str(plan.checkpoint)
        self.operator = plan.op.operator
        self.stores = plan.stores
        self.serdes = {s: (plan.meta.stores[s]["key.serde"], plan.meta.stores[s]["msg.serde"])
                       for s in plan.stores}
        self.typed = len(plan.stores) == 1
        self.change_feed = plan.change_feed
        self.version, self.start, self.end = plan.version, plan.start, plan.end
        self.parts = plan.partitions()
        self.variable_info = plan.variable_info
        self.options = plan.op.options

    def partitions(self):
        return [StatePartition(p) for p in self.parts]

    def read(self, partition):
        if self.variable_info is not None:
            return _read_variable(self.checkpoint, self.operator, partition.partition,
                                  self.version, self.variable_info, self.options)
        if self.change_feed:
            return _read_changes(self.checkpoint, self.operator, partition.partition,
                                 self.start, self.end, self.stores, self.serdes, self.typed,
                                 self.options)
        return _read_state(self.checkpoint, self.operator, partition.partition,
                           self.version, self.stores, self.serdes, self.typed, self.options)


class WeirStateDataSource(DataSource):
    """``spark.read.format("weirstate")``: an operator's state (see the module)."""

    @classmethod
    def name(cls) -> str:
        return "weirstate"

    def schema(self) -> str:
        return _Plan(self.options).schema()

    def reader(self, schema):
        return StateReader(_Plan(self.options))


class MetadataReader(DataSourceReader):
    def __init__(self, checkpoint: Location, operator: str | None, options: StorageOptions):
        self.checkpoint = str(checkpoint)
        self.options = options
        self.operators = [operator] if operator else list_operators(checkpoint, options)

    def partitions(self):
        return [InputPartition(0)]

    def read(self, partition):
        return _metadata_rows(self.checkpoint, self.operators, self.options)


class WeirStateMetadataDataSource(DataSource):
    """``spark.read.format("weirstate-metadata")``: operators, partitions, versions, sizes."""

    @classmethod
    def name(cls) -> str:
        return "weirstate-metadata"

    def schema(self) -> str:
        return ("operator string, kind string, partitions int, stores string, partition int, "
                "first_version bigint, latest_version bigint, changelogs int, snapshots int, "
                "latest_snapshot bigint, bytes bigint")

    def reader(self, schema):
        return MetadataReader(_checkpoint(self.options), self.options.get("operator"),
                              _storage_options(self.options))


def _metadata_rows(checkpoint: str, operators: list[str],
                   options: StorageOptions | None = None) -> Iterator[tuple]:
    for name in operators:
        op = OperatorCheckpoint(checkpoint, name, options)
        meta = op.read_meta()
        if meta is None:
            continue
        stores = ",".join(f"{s}({d.get('provider')})" for s, d in sorted(meta.stores.items()))
        for p in range(meta.partitions):
            files = op.partition(p)
            listing = files.listing()
            size = sum(e.size for e in files.storage.entries(files.directory)
                       if e.name.endswith(".zst"))
            yield (name, meta.kind, meta.partitions, stores, p,
                   listing.changelogs[0] if listing.changelogs else None,
                   listing.changelogs[-1] if listing.changelogs else None,
                   len(listing.changelogs), len(listing.snapshots),
                   listing.snapshots[-1] if listing.snapshots else None, size)
