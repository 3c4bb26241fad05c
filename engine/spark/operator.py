"""The Weir state provider as an operator in a Spark streaming plan.

::

    from weir.spark import StateOperator

    def running_count(state, table):                      # pyarrow.Table in, pyarrow.Table out
        counts = state.store("counts")
        grouped = table.group_by("key").aggregate([("key", "count")])
        keys = grouped.column("key").to_pylist()
        old = counts.get_all(keys)
        new = [old.get(k, 0) + n for k, n in zip(keys, grouped.column("key_count").to_pylist())]
        counts.put_all(zip(keys, new))
        return pa.table({"key": keys, "count": new})

    op = StateOperator("counts", checkpoint_location=ckpt, key="key",
                       stores={"counts": {"key.serde": "string", "msg.serde": "int64"}})
    out = op.apply(events, running_count, "key string, count long")
    out.writeStream.format(...).option("checkpointLocation", ckpt).start()   # any sink

``apply`` places ``repartition(P, key)`` + ``mapInArrow`` in the plan. Each of the ``P`` tasks of a
micro-batch reads the batch id from its task's local properties (``streaming.sql.batchId``, set by
Spark's micro-batch engine on every job of the batch), opens its partition's state at version
``batch - 1`` (:class:`~weir.engine.spark.partition.PartitionState`), runs ``fn`` over its rows,
and publishes version ``batch`` (the changes of every store and the rows it emitted) to
``<checkpoint_location>/weir/<operator>/<partition>/``. A retried, speculative or replayed task of
a batch whose version is published emits the published rows without running ``fn``: the output
of a batch is the output recorded with its version, whichever attempt produced it.

:meth:`StateOperator.foreach_batch` is the same operator for ``foreachBatch`` (the batch id comes
from Spark's callback instead of the local property).

**Metrics** of every batch (state rows and bytes, restore and publish times, versions published,
adopted and replayed, replicas rebuilt) are observed metrics of the query, ``weir.<operator>`` in
``query.lastProgress["observedMetrics"]``; :class:`~weir.engine.spark.metrics.MetricsListener`
forwards them to Weir's metrics reporter.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from weir.stores.api import KeyValueStore
from weir.stores.config import Config

from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta
from weir.engine.spark.errors import SparkError, StatePartitioningError
from weir.engine.spark.partition import PartitionMetrics, PartitionState
from weir.engine.spark.providers import StateStoreSpec, store_specs
from weir.engine.spark.settings import ProviderSettings, default_partitions
from weir.engine.spark.statefile import VersionKind

__all__ = ["StateOperator", "OperatorState", "BatchContext", "Placement", "task_batch",
           "key_types", "plan_operator", "METRICS_COLUMN", "PARTITION_COLUMN"]

PARTITION_COLUMN = "__weir_partition"
METRICS_COLUMN = "__weir_metrics"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
_METRIC_FIELDS = (
    ("tasks", "long"), ("rows_in", "long"), ("rows_out", "long"), ("changes", "long"),
    ("state_rows", "long"), ("state_bytes", "long"), ("version_bytes", "long"),
    ("published", "long"), ("adopted", "long"), ("replayed", "long"),
    ("replicas_reused", "long"), ("replicas_adopted", "long"), ("replicas_rebuilt", "long"),
    ("changelogs_replayed", "long"), ("snapshots_rewritten", "long"),
    ("restore_ms", "double"), ("publish_ms", "double"), ("snapshot_ms", "double"),
    ("task_ms", "double"))
METRICS_DDL = ", ".join(f"{n} {t}" for n, t in _METRIC_FIELDS)


class Placement(Enum):
    """Where an operator's tasks run in the Spark plan.

    ``OWN_STAGE`` (default): the operator's output goes through one more exchange, so its tasks
    are a stage of their own whose task numbers are the state partitions, whatever the plan
    does with the output (a ``union`` renumbers the partitions of its later children, so a task
    could not tell its state partition when it got no rows). Costs one shuffle of the output
    rows. ``IN_STAGE``: no exchange; the operator's tasks run in the stage of whatever consumes
    the output, which is faster and right as long as nothing renumbers partitions (no ``union``
    after it); a task that sees it was renumbered stops with ``StatePartitioningError``.
    """

    OWN_STAGE = "own-stage"
    IN_STAGE = "in-stage"

    @classmethod
    def parse(cls, raw: "Placement | str") -> "Placement":
        if isinstance(raw, Placement):
            return raw
        try:
            return cls(str(raw).lower().replace("_", "-"))
        except ValueError:
            raise SparkError(f"placement {raw!r}: 'own-stage' (default) or 'in-stage'") from None


@dataclass(frozen=True)
class BatchContext:
    """Where a task is: its partition, batch id and query id."""

    partition: int
    batch: int
    query_id: str | None
    attempt: int


def task_batch(batch_override: int | None = None) -> BatchContext:
    """The partition, batch id and query of the running Spark task (the batch id from the
    task's local property ``streaming.sql.batchId`` unless ``batch_override`` is given)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise SparkError("a Weir state operator ran outside a Spark task")
    batch = batch_override
    if batch is None:
        raw = ctx.getLocalProperty(BATCH_ID_PROPERTY)
        if raw is None:
            raise SparkError(
                "this task belongs to no streaming micro-batch (its local property "
                f"{BATCH_ID_PROPERTY} is not set): a Weir state operator runs in a streaming "
                "query (writeStream) or through StateOperator.foreach_batch, which passes the "
                "batch id; a batch DataFrame has no versions to publish")
        batch = int(raw)
    return BatchContext(ctx.partitionId(), batch, ctx.getLocalProperty(QUERY_ID_PROPERTY),
                        ctx.attemptNumber())


class OperatorState:
    """What ``fn`` gets: the partition's stores for this batch."""

    def __init__(self, state: PartitionState, config: Config):
        self._state = state
        self._config = config
        self._stores: dict[str, KeyValueStore] = {}

    @property
    def partition(self) -> int:
        return self._state.partition

    @property
    def batch_id(self) -> int:
        return self._state.batch

    def store(self, name: str) -> KeyValueStore:
        """The typed store ``name`` (its serdes from ``stores.<name>.*``)."""
        store = self._stores.get(name)
        if store is None:
            if name not in {s.name for s in self._state.stores}:
                raise SparkError(f"operator '{self._state.meta.operator}' has no store "
                                 f"'{name}' (its stores: "
                                 f"{', '.join(s.name for s in self._state.stores)})")
            store = self._stores[name] = self._state.store(name, self._config)
        return store

    @property
    def stores(self) -> Mapping[str, KeyValueStore]:
        return {s.name: self.store(s.name) for s in self._state.stores}


_TYPE_NAMES = {"bigint": "long", "smallint": "short", "tinyint": "byte"}


def key_types(schema: Any, columns: Sequence[str]) -> list[str]:
    """The Spark types of the key columns, as :mod:`weir.engine.spark.sparkhash` names them
    (recorded with the state, so ``weir spark repartition`` can place keys offline)."""
    out = []
    for column in columns:
        name = schema[column].dataType.simpleString()
        out.append(_TYPE_NAMES.get(name, name))
    return out


def _arrow_schema(schema: Any, timezone: str | None = None):
    """A pyarrow schema from a Spark StructType (timestamps in ``timezone``, the session's,
    as Spark sends them to Arrow UDFs)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone=timezone or "UTC")


def encode_batches(table) -> list[tuple[bytes, bytes]]:
    """A pyarrow Table as ``@output`` records: one Arrow IPC stream per record batch."""
    import pyarrow as pa

    out = []
    for i, batch in enumerate(table.to_batches(max_chunksize=50_000)):
        if batch.num_rows == 0:
            continue
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        out.append((b"%012d" % i, sink.getvalue()))
    return out


def decode_batches(values: Sequence[bytes | None]) -> Iterator[Any]:
    import pyarrow as pa

    for raw in values:
        if raw:
            yield from pa.ipc.open_stream(raw)


def _to_table(result: Any, schema: Any):
    """``fn``'s result as a pyarrow Table of ``schema`` (None: no rows)."""
    import pyarrow as pa

    if result is None:
        return schema.empty_table()
    if isinstance(result, pa.RecordBatch):
        result = pa.Table.from_batches([result])
    elif not isinstance(result, pa.Table):
        batches = list(result)
        result = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
    if result.schema.names != schema.names:
        raise SparkError(f"the operator function returned columns {result.schema.names}, the "
                         f"output schema has {schema.names}")
    return result.cast(schema) if result.schema != schema else result


class StateOperator:
    """A keyed stateful operator whose state is kept by Weir stores (see the module docstring).

    ``name`` names the operator's state in the checkpoint; ``key`` the column(s) rows are
    partitioned by; ``stores`` the stores every partition has (``{name: {"key.serde": ...,
    "msg.serde": ..., "factory": ...}}`` as the ``stores.<name>.*`` keys of a job, or a list of
    names for bytes stores); ``partitions`` the state partition count, fixed for the life of the
    checkpoint (default: the session's ``spark.sql.shuffle.partitions``). Provider settings come
    from the session's ``spark.weir.*`` conf unless ``settings`` is given.
    """

    kind = "state-operator"

    def __init__(self, name: str, *, checkpoint_location: str, key: str | Sequence[str],
                 stores: Mapping[str, Mapping[str, str]] | Sequence[str],
                 partitions: int | None = None, settings: ProviderSettings | None = None,
                 placement: Placement | str = Placement.OWN_STAGE):
        self.name = name
        self.placement = Placement.parse(placement)
        self.checkpoint = OperatorCheckpoint(checkpoint_location, name)
        self.key = [key] if isinstance(key, str) else list(key)
        if not self.key:
            raise ValueError("StateOperator needs at least one key column")
        if isinstance(stores, Mapping):
            self._store_config = Config({f"stores.{s}.{k}": v for s, keys in stores.items()
                                         for k, v in keys.items()})
            self._store_names = list(stores)
        else:
            self._store_config = Config({})
            self._store_names = list(stores)
        self.partitions = partitions
        self.settings = settings

    def __repr__(self) -> str:
        return f"StateOperator({self.name!r}, {self.checkpoint.root})"

    # -- planning (driver) ------------------------------------------------------------------
    def _resolve(self, spark: Any) -> tuple[int, ProviderSettings, list[StateStoreSpec]]:
        settings = self.settings or ProviderSettings.from_spark(spark)
        self.checkpoint = OperatorCheckpoint(self.checkpoint.checkpoint, self.name,
                                             settings.storage)
        partitions = self.partitions or default_partitions(spark)
        specs = store_specs(self._store_names, self._store_config, settings.provider)
        recorded = self.checkpoint.read_meta()
        if recorded is not None:  # fail on the driver, before any task runs
            self.checkpoint.check(recorded, self._meta(partitions, specs, None, 0),
                                  check_query=False)
        return partitions, settings, specs

    def _meta(self, partitions: int, specs: Sequence[StateStoreSpec], query: str | None,
              created: int) -> OperatorMeta:
        return OperatorMeta(self.name, self.kind, partitions,
                            {s.name: s.describe() for s in specs}, query, created)

    def apply(self, df: Any, fn: Callable[[OperatorState, Any], Any], schema: Any, *,
              batch_id: int | None = None) -> Any:
        """``df`` repartitioned by key and mapped through ``fn`` with its state; returns the
        output DataFrame (``schema``: a DDL string or StructType). ``batch_id`` is for
        foreachBatch (see :meth:`foreach_batch`)."""
        from pyspark.sql.types import StructType

        spark = df.sparkSession
        partitions, settings, specs = self._resolve(spark)
        out_schema = schema if isinstance(schema, StructType) else spark._parse_ddl(schema) \
            if hasattr(spark, "_parse_ddl") else StructType.fromDDL(schema)
        for field in out_schema.fields:
            if field.name.startswith("__weir"):
                raise ValueError(f"output column {field.name!r}: names starting with __weir "
                                 f"are Weir's own")
        internal = internal_schema(out_schema)
        run = _TaskRunner(str(self.checkpoint.checkpoint), self.name, self.kind, partitions,
                          specs, settings, dict(self._store_config), fn, internal, batch_id,
                          None, spark.conf.get("spark.sql.session.timeZone", None),
                          key_types(df.schema, self.key))
        return plan_operator(df, self.key, partitions, run, internal, self.name,
                             self.placement)

    def foreach_batch(self, fn: Callable[[OperatorState, Any], Any], schema: Any,
                      sink: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """A ``foreachBatch`` function: applies the operator to each batch DataFrame (the batch
        id from Spark's callback) and hands the output to ``sink(output_df, batch_id)``, which
        must read all of it in one action (every partition's version is published by that
        action; trap: a second action on it runs the operator again, harmlessly but twice)."""

        def each_batch(batch_df: Any, batch_id: int) -> None:
            sink(self.apply(batch_df, fn, schema, batch_id=batch_id), batch_id)

        return each_batch


def internal_schema(out_schema: Any) -> Any:
    """The schema ``mapInArrow`` emits: the output columns, the state partition of each row,
    and the metrics row of each task."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    return StructType([StructField(f.name, f.dataType, True, f.metadata)
                       for f in out_schema.fields]
                      + [StructField(PARTITION_COLUMN, IntegerType(), True),
                         StructField(METRICS_COLUMN, StructType.fromDDL(METRICS_DDL), True)])


def plan_operator(df: Any, key: Sequence[str], partitions: int, run: Callable, internal: Any,
                  name: str, placement: Placement) -> Any:
    """``df`` repartitioned by ``key`` into ``partitions``, each partition's rows tagged with
    their state partition, mapped through ``run``; the metrics rows observed as ``weir.<name>``
    and dropped; with ``Placement.OWN_STAGE`` one more exchange after it (see
    :class:`Placement`)."""
    from pyspark.sql import functions as F

    keys = ", ".join(f"`{k}`" for k in key)
    shuffled = (df.repartition(partitions, *key)
                .withColumn(PARTITION_COLUMN, F.expr(f"pmod(hash({keys}), {partitions})")))
    run.input_schema = shuffled.schema
    mapped = shuffled.mapInArrow(run, internal)
    observed = mapped.observe(
        f"weir.{name}",
        *[(F.max if n.endswith("_ms") and n != "task_ms" else F.sum)(
            F.col(f"{METRICS_COLUMN}.{n}")).alias(n) for n, _ in _METRIC_FIELDS])
    out = observed.where(F.col(METRICS_COLUMN).isNull()).drop(METRICS_COLUMN)
    if placement is Placement.OWN_STAGE:
        out = out.repartition(partitions, F.col(PARTITION_COLUMN))
    return out.drop(PARTITION_COLUMN)


def user_arrow_schema(arrow_schema: Any) -> Any:
    import pyarrow as pa

    return pa.schema([f for f in arrow_schema if f.name not in (METRICS_COLUMN, PARTITION_COLUMN)])


class _TaskRunner:
    """The function ``mapInArrow`` runs in each task (pickled with what it needs)."""

    def __init__(self, checkpoint: str, operator: str, kind: str, partitions: int,
                 specs: list[StateStoreSpec], settings: ProviderSettings,
                 config: dict[str, str], fn: Callable, schema: Any, batch_override: int | None,
                 input_schema: Any, timezone: str | None = None,
                 key_types: list[str] | None = None):
        self.checkpoint, self.operator, self.kind = checkpoint, operator, kind
        self.input_schema = input_schema
        self.timezone = timezone
        self.extra = {"key_types": list(key_types or [])}
        self.partitions, self.specs, self.settings = partitions, specs, settings
        self.config, self.fn, self.schema = config, fn, schema
        self.batch_override = batch_override

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import time


        started = time.perf_counter()
        where = task_batch(self.batch_override)
        arrow_schema = _arrow_schema(self.schema, self.timezone)
        user_schema = user_arrow_schema(arrow_schema)
        checkpoint = OperatorCheckpoint(self.checkpoint, self.operator, self.settings.storage)
        meta = checkpoint.ensure_meta(OperatorMeta(
            self.operator, self.kind, self.partitions, {s.name: s.describe() for s in self.specs},
            where.query_id, where.batch, self.extra))
        state = PartitionState(checkpoint, meta, where.partition, where.batch, self.specs,
                               self.settings)
        rows_in = 0
        state.open()
        try:
            if state.published is not None:
                check_replayed_input(state, batches, self.operator)
            else:
                table, rows_in = _received_table(batches, self.input_schema, self.timezone,
                                                 where.partition, self.operator, self.partitions)
                result = self.fn(OperatorState(state, Config(self.config)), table)
                output = _to_table(result, user_schema)
                state.commit(outputs=encode_batches(output), meta={"rows_in": rows_in})
        finally:
            state.close()
        _, values = state.outputs()
        rows_out = 0
        for batch in decode_batches(values):
            rows_out += batch.num_rows
            yield _with_metrics_column(batch, arrow_schema, where.partition)
        yield _metrics_row(arrow_schema, state.metrics, rows_in, rows_out,
                           (time.perf_counter() - started) * 1000)


def check_replayed_input(state: PartitionState, batches: Iterable[Any], operator: str) -> None:
    """A task whose version is already published emits the recorded rows; but if that version
    was published by an attempt that got no rows while this one has rows, the two attempts did
    not see the same partition (a renumbered in-stage plan): stop instead of dropping them."""
    if state.version_meta().get("rows_in", 0):
        return
    if any(batch.num_rows for batch in batches):
        raise StatePartitioningError(
            f"StatePartitioningError: operator '{operator}' partition {state.partition}: "
            f"version {state.batch} was published by an attempt that received no rows, and "
            f"this attempt received rows: the plan renumbers the operator's tasks (a union "
            f"after an operator with placement='in-stage'). Use placement='own-stage', and "
            f"delete {state.files.path(state.batch, VersionKind.CHANGELOG)} (and the same "
            f"version of the other partitions that published no rows) before it runs again")


def _received_table(batches: Iterable[Any], schema: Any, timezone: str | None, partition: int,
                    operator: str, partitions: int) -> tuple[Any, int]:
    """The Arrow batches a task received as one table without the partition column, checked
    to belong to ``partition``; and its row count."""
    import pyarrow as pa

    received = list(batches)
    table = (pa.Table.from_batches(received) if received
             else _arrow_schema(schema, timezone).empty_table())
    rows = table.num_rows
    if rows:
        _check_partition(table, partition, operator, partitions)
    return table.drop_columns([PARTITION_COLUMN]), rows


def _check_partition(table: Any, partition: int, operator: str, partitions: int) -> None:
    import pyarrow.compute as pc

    column = table.column(PARTITION_COLUMN)
    low, high = pc.min(column).as_py(), pc.max(column).as_py()
    if low != partition or high != partition:
        raise StatePartitioningError(
            f"StatePartitioningError: operator '{operator}' task of partition {partition} got "
            f"rows of state partitions {low}..{high}: the rows were not partitioned by "
            f"pmod(hash(key), {partitions}) between repartition() and the operator (adaptive "
            f"query execution coalescing, or a plan change); nothing was published")


def _with_metrics_column(batch: Any, schema: Any, partition: int) -> Any:
    """An output batch with the internal columns: its state partition, no metrics."""
    import pyarrow as pa

    columns = list(batch.columns) + [
        pa.array([partition] * batch.num_rows, pa.int32()),
        pa.nulls(batch.num_rows, schema.field(METRICS_COLUMN).type)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _metrics_row(schema: Any, m: PartitionMetrics, rows_in: int, rows_out: int,
                 task_ms: float) -> Any:
    import pyarrow as pa

    values = {
        "tasks": 1, "rows_in": rows_in, "rows_out": rows_out, "changes": m.changes,
        "state_rows": m.state_rows, "state_bytes": m.state_bytes,
        "version_bytes": m.version_bytes,
        "published": int(m.outcome == "published"), "adopted": int(m.outcome == "adopted"),
        "replayed": int(m.outcome == "replayed"),
        "replicas_reused": int(m.replica in ("reused", "adopted")),
        "replicas_adopted": int(m.replica == "adopted"),
        "replicas_rebuilt": int(m.replica in ("rebuilt", "new")),
        "changelogs_replayed": m.changelogs_replayed,
        "snapshots_rewritten": len(m.snapshots_rewritten),
        "restore_ms": m.restore_ms, "publish_ms": m.publish_ms, "snapshot_ms": m.snapshot_ms,
        "task_ms": round(task_ms, 3),
    }
    mtype = schema.field(METRICS_COLUMN).type
    columns = [pa.nulls(1, f.type) for f in schema if f.name != METRICS_COLUMN]
    columns.append(pa.array([values], type=mtype))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
