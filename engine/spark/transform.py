"""``transform_with_state``: an unchanged PySpark ``StatefulProcessor`` on Weir stores.

::

    from weir.spark import transform_with_state

    out = transform_with_state(events.groupBy("key"), MyProcessor(), "key string, count long",
                               time_mode="EventTime", checkpoint_location=ckpt)
    out.writeStream.format(...).option("checkpointLocation", ckpt).outputMode("append").start()

It is the drop-in for ``events.groupBy("key").transformWithStateInPandas(MyProcessor(), schema,
"Append", "EventTime")`` (``flavour="rows"`` for ``transformWithState``): the same processor
class, the same calls in the same order, its state in a Weir store of the partition instead of
Spark's RocksDB provider behind a socket. Underneath it is a :class:`StateOperator` (one store,
``tws``), so versions, replicas, retries, replays, recorded outputs and metrics are the state
provider's (docs/SPARK.md).

**Time** (the rules are in :mod:`weir.engine.spark.processor`): the first task of each batch
publishes the batch's clock next to the operator's versions (``_batches/<b>.json``): the batch
timestamp and, in EventTime mode, the watermark computed from the maximum event time every
partition recorded with its previous version -- one clock per batch, the same for every task
and every attempt. EventTime mode takes the watermark column and delay from the input's
``withWatermark`` (or ``watermark_column`` / ``watermark_delay``), and adds to the plan a tiny
Spark aggregation over that column whose output is always empty: Spark's micro-batch engine then
runs a batch without data whenever the watermark advances, exactly when it would for its own
``transformWithState``, so the timers Spark fires in its final no-data batch fire here too. The
cost is a second read of each batch's input (the aggregation's branch) and a one-row Spark state.

**Initial state**: when ``initial_state`` is given and the operator has no state yet, its rows
are partitioned like the input and written to ``_initial/`` by a batch job when the plan is
built; the operator's first batch calls ``handleInitialState`` with them, as Spark does.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import Enum
from typing import Any

from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta
from weir.engine.spark.errors import SparkError
from weir.engine.spark.handover import HandOver, pandas_groups, row_groups
from weir.engine.spark.locations import parse_location
from weir.engine.spark.operator import (PARTITION_COLUMN, BatchContext, Placement,
                                        StateOperator, _arrow_schema, _metrics_row,
                                        _received_table, _TaskRunner, _with_metrics_column,
                                        check_replayed_input, decode_batches, encode_batches,
                                        internal_schema,
                                        key_types, plan_operator, task_batch,
                                        user_arrow_schema)
from weir.engine.spark.partition import PartitionState
from weir.engine.spark.providers import StateStoreSpec
from weir.engine.spark.settings import ProviderSettings
from weir.engine.spark.statefile import VersionKind
from weir.engine.spark.storage import StorageOptions, open_storage

__all__ = ["transform_with_state", "TransformWithState", "StateLifetime", "batch_time",
           "parse_delay_ms", "grouping_columns", "default_name"]

_UNITS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000,
          "second": 1000, "seconds": 1000, "m": 60_000, "min": 60_000, "minute": 60_000,
          "minutes": 60_000, "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
          "d": 86_400_000, "day": 86_400_000, "days": 86_400_000, "week": 604_800_000,
          "weeks": 604_800_000}
_WATERMARK = re.compile(r"EventTimeWatermark [0-9a-f-]+, '?`?([^#,`]+)`?(?:#\d+)?(?:: \w+)?, (.+)$")
_INITIAL = "_initial"
_INITIAL_COMPLETE = "_COMPLETE"
_LEGACY_DEFAULT_NAME = "transformWithState"
_NO_LATE_ROWS = -(2**62)
_WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"   # Spark's mark of an event-time column


class StateLifetime(Enum):
    """How long an operator's state lives: ``DURABLE`` in the query's checkpoint (a streaming
    query), ``TASK`` for one task of a batch query (Spark gives each partition a fresh
    temporary store and drops it at the task's end)."""

    DURABLE = "durable"
    TASK = "task"


def default_name(processor: Any, key: Sequence[str], checkpoint_location: str | None,
                 options: StorageOptions | None = None) -> str:
    """The operator name when none is given: stable across restarts and different for
    different processors or grouping keys (two operators of one query need distinct names, as
    their state and metrics are kept by name). A checkpoint written with the old fixed default
    (``transformWithState``) keeps that name."""
    import hashlib

    if checkpoint_location is not None and OperatorCheckpoint(
            checkpoint_location, _LEGACY_DEFAULT_NAME, options).read_meta() is not None:
        return _LEGACY_DEFAULT_NAME
    cls = type(processor)
    signature = f"{cls.__module__}.{cls.__qualname__}|{'|'.join(key)}"
    return f"tws-{cls.__name__}-{hashlib.sha1(signature.encode()).hexdigest()[:8]}"


def _check_output_event_time(output: Any, column: str, bt: Any, operator: str) -> None:
    """Spark's rule for ``eventTimeColumnName``: no output row older than the watermark the
    batch filters late rows with (``EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if output.num_rows == 0 or bt.late_watermark_ms == _NO_LATE_ROWS:
        return
    micros = pc.cast(pc.cast(output.column(column), pa.timestamp("us")), pa.int64())
    oldest = pc.min(micros).as_py()
    if oldest is not None and oldest < bt.late_watermark_ms * 1000:
        raise SparkError(
            f"EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED: operator '{operator}' emitted a "
            f"row whose event time column '{column}' is {oldest} (microseconds), older than the "
            f"current watermark {bt.late_watermark_ms} (milliseconds); a processor with "
            f"eventTimeColumnName must not emit rows behind the watermark (as in Spark)")


def parse_delay_ms(delay: str | int) -> int:
    """A watermark delay as Spark writes it (``"10 seconds"``, ``"1 minute 30 seconds"``,
    ``"interval 2 hours"``) in milliseconds.

    >>> parse_delay_ms("10 seconds"), parse_delay_ms("1 minute 30 seconds"), parse_delay_ms(250)
    (10000, 90000, 250)
    """
    if isinstance(delay, int):
        return delay
    text = delay.strip().lower().removeprefix("interval").strip()
    parts = re.findall(r"(-?\d+(?:\.\d+)?)\s*([a-z]+)", text)
    if not parts or re.sub(r"(-?\d+(?:\.\d+)?)\s*([a-z]+)", "", text).strip():
        raise SparkError(f"cannot read the watermark delay {delay!r}: write it as Spark does, "
                         f"e.g. '10 seconds' or '1 minute'")
    total = 0.0
    for number, unit in parts:
        if unit not in _UNITS:
            raise SparkError(f"watermark delay {delay!r}: unit {unit!r} is not one of "
                             f"milliseconds, seconds, minutes, hours, days, weeks")
        total += float(number) * _UNITS[unit]
    return int(total)


def _is_connect(df: Any) -> bool:
    """A Spark Connect DataFrame (no JVM on this side: the plan is read from its protobuf
    builder instead of through py4j)."""
    return type(df).__module__.startswith("pyspark.sql.connect.")


def grouping_columns(grouped: Any) -> list[str]:
    """The column names ``df.groupBy(...)`` grouped by (classic or Spark Connect)."""
    df = grouped._df
    if _is_connect(df):
        from pyspark.sql.connect.expressions import ColumnReference

        names = []
        for column in grouped._grouping_cols:
            expr = column._expr
            if not isinstance(expr, ColumnReference):
                raise SparkError(f"transform_with_state groups by columns; {expr} is an "
                                 f"expression: add it as a column first (withColumn) and group "
                                 f"by its name")
            names.append(expr._unparsed_identifier.strip("`"))
        return names
    exprs = grouped._jgd.groupingExprs()
    names = []
    for i in range(exprs.size()):
        sql = exprs.apply(i).sql()
        name = sql.strip("`")
        if name not in df.columns:
            raise SparkError(f"transform_with_state groups by columns; {sql} is an expression: "
                             f"add it as a column first (withColumn) and group by its name")
        names.append(name)
    return names


def _watermark(df: Any) -> tuple[str, int] | None:
    """The input's watermark column and delay, from the plan ``withWatermark`` made (the
    innermost one)."""
    if _is_connect(df):
        from pyspark.sql.connect.plan import WithWatermark

        found = None
        node = df._plan
        while node is not None:
            if isinstance(node, WithWatermark):
                found = (node._event_time, parse_delay_ms(node._delay_threshold))
            node = node._child
        return found
    plan = df._jdf.queryExecution().logical().toString()
    found = None
    for line in plan.splitlines():
        m = _WATERMARK.search(line.strip().lstrip("+-: "))
        if m:
            found = (m.group(1).strip(), parse_delay_ms(m.group(2)))
    return found


def batch_time(checkpoint: OperatorCheckpoint, meta: OperatorMeta, batch: int, mode: str,
               delay_ms: int, now_ms: Callable[[], int]) -> dict[str, Any]:
    """The clock of ``batch`` (published once, then read by every task and attempt): the batch
    timestamp and, in EventTime mode, Spark's watermark rules applied to the maximum event time
    every partition recorded with its previous version."""
    clock = checkpoint.read_batch_clock(batch)
    if clock is not None:
        return clock
    first = meta.created_at_version
    previous = checkpoint.read_batch_clock(batch - 1) if batch > first else None
    if batch > first and previous is None:
        previous = batch_time(checkpoint, meta, batch - 1, mode, delay_ms, now_ms)
    max_event = previous.get("max_event_ms") if previous else None
    late = previous.get("watermark_ms", 0) if previous else 0
    watermark = late
    if mode == "eventtime" and batch > first:
        for p in range(meta.partitions):
            files = checkpoint.partition(p)
            try:
                header = files.read(batch - 1, VersionKind.CHANGELOG, sections=[])
            except FileNotFoundError:
                raise SparkError(f"operator '{checkpoint.operator}': partition {p} never "
                                 f"published version {batch - 1}, so the watermark of batch "
                                 f"{batch} cannot be computed ({files.directory})") from None
            seen = header.meta.get("max_event_ms")
            if seen is not None and (max_event is None or seen > max_event):
                max_event = seen
        if max_event is not None:
            watermark = max(late, max_event - delay_ms)
    body = {"batch": batch, "processing_ms": int(now_ms()), "watermark_ms": watermark,
            "late_watermark_ms": late if batch > first else 0, "max_event_ms": max_event}
    clock = checkpoint.publish_batch_clock(batch, body)
    checkpoint.retain_batch_clocks(batch - 10)
    return clock


class TransformWithState(StateOperator):
    """The operator behind :func:`transform_with_state`."""

    kind = "transform-with-state"

    def __init__(self, name: str, *, checkpoint_location: str, key: Sequence[str], processor: Any,
                 time_mode: str, flavour: str, partitions: int | None,
                 settings: ProviderSettings | None, clock: Callable[[], int] | None,
                 watermark: tuple[str, int] | None, initial_keys: Sequence[str] | None):
        super().__init__(name, checkpoint_location=checkpoint_location, key=key,
                         stores={"tws": {"key.serde": "bytes", "msg.serde": "bytes"}},
                         partitions=partitions, settings=settings)
        from weir.engine.spark.processor import TimeMode

        self.processor = processor
        self.mode = TimeMode.parse(time_mode)
        if flavour not in ("pandas", "rows"):
            raise ValueError(f"flavour {flavour!r}: 'pandas' (transformWithStateInPandas) or "
                             f"'rows' (transformWithState)")
        self.flavour = flavour
        self.clock = clock
        self.watermark = watermark
        self.initial_keys = initial_keys
        self.timezone: str | None = None
        self.handover = HandOver()
        self.key_types: list[str] = []
        self.lifetime = StateLifetime.DURABLE
        self.event_time_column: str | None = None

    def runner(self, partitions: int, settings: ProviderSettings, specs: list[StateStoreSpec],
               internal: Any, input_schema: Any, schemas: dict[str, Any],
               has_initial: bool) -> "_TwsRunner":
        return _TwsRunner(str(self.checkpoint.checkpoint), self.name, self.kind, partitions,
                          specs, settings, {}, None, internal,
                          0 if self.lifetime is StateLifetime.TASK else None, input_schema,
                          self.timezone, self.key_types,
                          processor=self.processor, mode=self.mode.value, flavour=self.flavour,
                          clock=self.clock, watermark=self.watermark, schemas=schemas,
                          has_initial=has_initial, key=list(self.key),
                          initial_key=list(self.initial_keys or self.key),
                          handover=self.handover, lifetime=self.lifetime,
                          event_time_column=self.event_time_column)


def _pre_init(processor: Any, spark: Any, mode: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Run ``init`` on the driver, as PySpark does, to learn every state variable's schema
    (parsed here: a Python worker has no JVM to parse DDL); then ``close``."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
    from pyspark.sql.types import StructType

    def parse(schema: Any) -> Any:
        if isinstance(schema, StructType) or schema is None:
            return schema
        parsed = spark._parse_ddl(schema) if hasattr(spark, "_parse_ddl") else \
            StructType.fromDDL(schema)
        if not isinstance(parsed, StructType):
            parsed = StructType().add("value", parsed)
        return parsed

    schemas: dict[str, Any] = {}
    kinds: dict[str, str] = {}

    class _Recorder(StatefulProcessorHandle):
        def __init__(self):  # noqa: D401 - no JVM client
            pass

        def getValueState(self, stateName, schema, ttlDurationMs=None):
            schemas[stateName] = parse(schema)
            kinds[stateName] = "value"

        def getListState(self, stateName, schema, ttlDurationMs=None):
            schemas[stateName] = parse(schema)
            kinds[stateName] = "list"

        def getMapState(self, stateName, userKeySchema, valueSchema, ttlDurationMs=None):
            schemas[stateName] = parse(valueSchema)
            schemas[stateName + "#key"] = parse(userKeySchema)
            kinds[stateName] = "map"

        def registerTimer(self, expiryTimestampMs):
            pass

        def deleteTimer(self, expiryTimestampMs):
            pass

        def listTimers(self):
            return iter(())

        def deleteIfExists(self, stateName):
            pass

    processor.init(_Recorder())
    processor.close()
    return schemas, kinds


def state_variables(schemas: dict[str, Any], kinds: dict[str, str]) -> dict[str, Any]:
    """What the operator records about its state variables (``weirstate`` reads them typed with
    it): kind and row schemas as Spark's JSON."""
    out = {}
    for name, kind in kinds.items():
        schema = schemas.get(name)
        key = schemas.get(name + "#key")
        out[name] = {"kind": kind, "schema": schema.json() if schema is not None else None,
                     "key_schema": key.json() if key is not None else None}
    return out


def transform_with_state(grouped: Any, processor: Any, output_schema: Any, *,
                         checkpoint_location: str | None = None, time_mode: str = "None",
                         output_mode: str = "Update", initial_state: Any = None,
                         name: str | None = None, flavour: str = "pandas",
                         event_time_column_name: str | None = None,
                         partitions: int | None = None, settings: ProviderSettings | None = None,
                         watermark_column: str | None = None,
                         watermark_delay: str | int | None = None,
                         placement: Placement | str = Placement.OWN_STAGE,
                         clock: Callable[[], int] | None = None) -> Any:
    """Run ``processor`` (a PySpark ``StatefulProcessor``) per key of ``grouped``
    (``df.groupBy(cols)``) on Weir stores; returns the output DataFrame of ``output_schema``.

    ``time_mode``: ``"None"``, ``"ProcessingTime"`` or ``"EventTime"`` (Spark's names).
    ``output_mode``: ``"Append"`` or ``"Update"``, as given to Spark's operator (the query's
    sink decides; with EventTime mode the query must use append or update output mode).
    ``initial_state``: ``init_df.groupBy(cols)``, used in the operator's first batch.
    ``checkpoint_location``: the query's checkpoint location (the state goes to
    ``<it>/weir/<name>``); not needed for a batch DataFrame, whose state lives for one task as
    in Spark. ``name``: the operator's name in the checkpoint and in the metrics (default: one
    derived from the processor class and the grouping columns, see :func:`default_name`).
    ``flavour``: ``"pandas"`` (``transformWithStateInPandas``: rows as pandas DataFrames) or
    ``"rows"`` (``transformWithState``: Row objects). ``event_time_column_name``: Spark's
    ``eventTimeColumnName``, the output's event-time column (downstream event-time operators use
    the query's watermark on it; the processor must not emit rows behind the watermark).
    ``placement``: see :class:`~weir.engine.spark.operator.Placement`. ``clock`` (tests):
    milliseconds of the batch timestamp. See the module docstring for time and initial state.
    """
    from pyspark import cloudpickle
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if output_mode.lower() not in ("append", "update"):
        raise SparkError(f"output_mode {output_mode!r}: transform_with_state emits rows as they "
                         f"come: 'Append' or 'Update'")
    import tempfile

    df = grouped._df
    spark = df.sparkSession
    key = grouping_columns(grouped)
    from weir.engine.spark.processor import TimeMode

    mode = TimeMode.parse(time_mode)
    lifetime = StateLifetime.DURABLE if df.isStreaming else StateLifetime.TASK
    if lifetime is StateLifetime.DURABLE and checkpoint_location is None:
        raise SparkError("transform_with_state on a streaming DataFrame needs "
                         "checkpoint_location=<the query's checkpoint location>: the operator's "
                         "state is versioned there")
    if lifetime is StateLifetime.TASK:
        if initial_state is not None:
            raise SparkError("transform_with_state on a batch DataFrame does not take "
                             "initial_state (its state lives for one task); run the query as a "
                             "stream (for example trigger(availableNow=True)) to seed it")
        checkpoint_location = tempfile.gettempdir()   # nothing is written there
    name = name or default_name(processor, key, checkpoint_location,
                                (settings or ProviderSettings.from_spark(spark)).storage)
    watermark = None
    found = _watermark(df) if (mode is TimeMode.EVENT_TIME or event_time_column_name) else None
    if event_time_column_name is not None and found is None:
        raise SparkError(f"event_time_column_name={event_time_column_name!r} needs a watermark "
                         f"on the input (df.withWatermark(...) before groupBy), as in Spark")
    if mode is TimeMode.EVENT_TIME and lifetime is StateLifetime.DURABLE:
        column = watermark_column or (found[0] if found else None)
        delay = parse_delay_ms(watermark_delay) if watermark_delay is not None else (
            found[1] if found else None)
        if column is None or delay is None:
            raise SparkError("time_mode='EventTime' needs a watermark on the input, as Spark's "
                             "transformWithState does: df.withWatermark('<event time column>', "
                             "'<delay>') before groupBy (or watermark_column= and "
                             "watermark_delay=)")
        if found is None:
            df = df.withWatermark(column, f"{delay} milliseconds")
        watermark = (column, delay)
    initial_keys = grouping_columns(initial_state) if initial_state is not None else None
    op = TransformWithState(name, checkpoint_location=checkpoint_location, key=key,
                            processor=processor, time_mode=time_mode, flavour=flavour,
                            partitions=partitions, settings=settings, clock=clock,
                            watermark=watermark, initial_keys=initial_keys)
    op.placement = Placement.parse(placement)
    op.lifetime = lifetime

    parts, provider_settings, specs = op._resolve(spark)
    op.timezone = spark.conf.get("spark.sql.session.timeZone", None)
    op.handover = HandOver.from_spark(spark)
    op.key_types = key_types(df.schema, key)
    copy = cloudpickle.loads(cloudpickle.dumps(processor))
    schemas, kinds = _pre_init(copy, spark, mode.value)
    out_schema = output_schema if isinstance(output_schema, StructType) else spark._parse_ddl(
        output_schema)
    if event_time_column_name is not None:
        out_schema = _mark_event_time(out_schema, event_time_column_name, found[1])
        op.event_time_column = event_time_column_name
    has_initial = False
    if initial_state is not None:
        has_initial = _write_initial_state(op, initial_state, parts)
    internal = internal_schema(out_schema)
    run = op.runner(parts, provider_settings, specs, internal, None, schemas, has_initial)
    run.extra.update({"state_variables": state_variables(schemas, kinds),
                      "grouping_schema": StructType([df.schema[k] for k in key]).json()})
    out = plan_operator(df, key, parts, run, internal, name, op.placement)
    if watermark is not None and lifetime is StateLifetime.DURABLE:
        column = watermark[0]
        # Spark runs a batch without data only for plans with a stateful operator that waits
        # for the watermark: this empty aggregation is one (see the module docstring).
        tick = (df.select(F.col(column)).groupBy(F.window(F.col(column), "36500 days"))
                .agg(F.count(F.lit(1)).alias("__weir_n")).where(F.col("__weir_n") < 0))
        empty = tick.select(*[F.lit(None).cast(f.dataType).alias(f.name)
                              for f in out.schema.fields])
        out = out.unionByName(empty)
    return out


def _mark_event_time(schema: Any, column: str, delay_ms: int) -> Any:
    """``schema`` with ``column`` marked as an event-time column the way Spark marks the column
    of ``withWatermark`` (its metadata carries the delay), so the operators after this one see
    the query's watermark on it."""
    from pyspark.sql.types import StructField, StructType, TimestampNTZType, TimestampType

    if column not in schema.names:
        raise SparkError(f"event_time_column_name={column!r} is not a column of the output "
                         f"schema ({', '.join(schema.names)})")
    fields = []
    for f in schema.fields:
        if f.name == column:
            if not isinstance(f.dataType, (TimestampType, TimestampNTZType)):
                raise SparkError(f"event_time_column_name={column!r}: the column is "
                                 f"{f.dataType.simpleString()}; an event-time column is a "
                                 f"timestamp")
            f = StructField(f.name, f.dataType, f.nullable,
                            {**(f.metadata or {}), _WATERMARK_DELAY_KEY: delay_ms})
        fields.append(f)
    return StructType(fields)


def _write_initial_state(op: TransformWithState, initial_state: Any, partitions: int) -> bool:
    """Partition the initial state like the input and keep it in ``_initial/`` for the first
    batch (only while the operator has no state). True when the first batch must use it."""
    from pyspark.sql import functions as F

    meta = op.checkpoint.read_meta()
    storage = op.checkpoint.storage
    folder = op.checkpoint.root / _INITIAL
    if meta is not None:
        return storage.exists(folder / _INITIAL_COMPLETE)
    if storage.exists(folder / _INITIAL_COMPLETE):
        return True
    storage.make_directory(folder)
    df = initial_state._df
    keys = grouping_columns(initial_state)
    cols = ", ".join(f"`{k}`" for k in keys)
    shuffled = (df.repartition(partitions, *keys)
                .withColumn(PARTITION_COLUMN, F.expr(f"pmod(hash({cols}), {partitions})")))
    write = _InitialWriter(str(folder), op.name, partitions, shuffled.schema, op.timezone,
                           op.checkpoint.options)
    shuffled.mapInArrow(write, "written long").collect()
    storage.create(folder / _INITIAL_COMPLETE, b'{"partitions": %d}' % partitions)
    return True


class _InitialWriter:
    def __init__(self, folder: str, operator: str, partitions: int, schema: Any,
                 timezone: str | None, options: StorageOptions | None):
        self.folder, self.operator, self.partitions, self.schema = folder, operator, partitions, schema
        self.timezone = timezone
        self.options = options

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        where = task_batch(batch_override=0)
        table, _ = _received_table(batches, self.schema, self.timezone, where.partition,
                                   self.operator, self.partitions)
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        folder = parse_location(self.folder)
        open_storage(folder, self.options).create(folder / f"{where.partition}.arrow",
                                                  sink.getvalue())
        yield pa.RecordBatch.from_pydict({"written": [table.num_rows]})


class _TwsRunner(_TaskRunner):
    """A :class:`_TaskRunner` whose function is the processor driver."""

    def __init__(self, *args: Any, processor: Any, mode: str, flavour: str,
                 clock: Callable[[], int] | None, watermark: tuple[str, int] | None,
                 schemas: dict[str, Any], has_initial: bool, key: list[str],
                 initial_key: list[str], handover: HandOver, lifetime: "StateLifetime",
                 event_time_column: str | None):
        super().__init__(*args)
        self.handover = handover
        self.lifetime = lifetime
        self.event_time_column = event_time_column
        self.processor, self.mode, self.flavour = processor, mode, flavour
        self.clock, self.watermark, self.schemas = clock, watermark, schemas
        self.has_initial, self.key, self.initial_key = has_initial, key, initial_key

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        if self.lifetime is StateLifetime.DURABLE:
            yield from self._run(batches, self.checkpoint)
            return
        # a batch query: a fresh state per task, dropped at its end (as Spark does)
        import shutil
        import tempfile

        from weir.engine.spark.replica import discard_replicas

        root = tempfile.mkdtemp(prefix="weir-tws-batch-")
        try:
            yield from self._run(batches, root)
        finally:
            discard_replicas(OperatorCheckpoint(root, self.operator).root)
            shutil.rmtree(root, ignore_errors=True)

    def _run(self, batches: Iterable[Any], location: str) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        from weir.engine.spark.processor import (TWS_STORE, BatchTime, ProcessorDriver,
                                                 TimeMode, WeirProcessorHandle)

        started = time.perf_counter()
        where = task_batch(self.batch_override)
        arrow_schema = _arrow_schema(self.schema, self.timezone)
        user_schema = user_arrow_schema(arrow_schema)
        checkpoint = OperatorCheckpoint(location, self.operator, self.settings.storage)
        meta = checkpoint.ensure_meta(OperatorMeta(
            self.operator, self.kind, self.partitions, {s.name: s.describe() for s in self.specs},
            where.query_id, where.batch,
            {"time_mode": self.mode, "flavour": self.flavour, **self.extra}))
        mode = TimeMode(self.mode)
        clock = self.clock or (lambda: time.time_ns() // 1_000_000)
        if mode is TimeMode.NONE:
            bt = BatchTime(mode)
        else:
            c = batch_time(checkpoint, meta, where.batch, self.mode,
                           self.watermark[1] if self.watermark else 0, clock)
            late = (c["late_watermark_ms"] if self.lifetime is StateLifetime.DURABLE
                    else _NO_LATE_ROWS)                     # a batch query has no late rows
            bt = BatchTime(mode, c["processing_ms"], c["watermark_ms"] if mode is
                           TimeMode.EVENT_TIME else -1, late)
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
                max_event = None
                if mode is TimeMode.EVENT_TIME and self.watermark is not None and rows_in:
                    column = self.watermark[0]
                    event_ms = pc.cast(pc.cast(table.column(column), pa.timestamp("ms")), pa.int64())
                    max_event = pc.max(event_ms).as_py()
                    table = table.filter(pc.greater(event_ms, bt.late_watermark_ms))
                outputs: list[Any] = []
                handle = WeirProcessorHandle(state.staged(TWS_STORE), bt, self.schemas)
                driver = ProcessorDriver(self.processor, handle, outputs.append)
                driver.start()
                if self.has_initial and where.batch == meta.created_at_version:
                    self._initial(checkpoint, where, driver)
                self._data(table, driver)
                driver.timers()
                driver.finish()
                output = _outputs_table(outputs, user_schema, self.flavour)
                if self.event_time_column is not None:
                    _check_output_event_time(output, self.event_time_column, bt, self.operator)
                state.commit(outputs=encode_batches(output),
                             meta={"rows_in": rows_in, "max_event_ms": max_event,
                                   **{f"tws_{k}": v for k, v in driver.counts.items()}})
        finally:
            state.close()
        _, values = state.outputs()
        rows_out = 0
        for batch in decode_batches(values):
            rows_out += batch.num_rows
            yield _with_metrics_column(batch, arrow_schema, where.partition)
        yield _metrics_row(arrow_schema, state.metrics, rows_in, rows_out,
                           (time.perf_counter() - started) * 1000)

    def _groups(self, table: Any, key: list[str]) -> Iterator[tuple[tuple, list[Any]]]:
        """``(key tuple, that key's rows)`` in key order, as Spark hands them to the processor:
        a list of pandas DataFrames or of Rows (:mod:`weir.engine.spark.handover`)."""
        if self.flavour == "pandas":
            return pandas_groups(table, key, self.handover)
        return row_groups(table, key)

    def _data(self, table: Any, driver: Any) -> None:
        for key, group in self._groups(table, self.key):
            driver.rows(key, iter(group))

    def _initial(self, checkpoint: OperatorCheckpoint, where: BatchContext, driver: Any) -> None:
        import pyarrow as pa

        path = checkpoint.root / _INITIAL / f"{where.partition}.arrow"
        try:
            data = checkpoint.storage.read(path)
        except FileNotFoundError:
            raise SparkError(f"operator '{self.operator}': the initial state of partition "
                             f"{where.partition} is missing ({path})") from None
        table = pa.ipc.open_stream(data).read_all()
        for key, group in self._groups(table, self.initial_key):
            driver.initial(key, iter(group))


def _outputs_table(outputs: list[Any], schema: Any, flavour: str) -> Any:
    import pyarrow as pa

    if not outputs:
        return schema.empty_table()
    if flavour == "pandas":
        import pandas as pd

        frames = [f for f in outputs if f is not None and len(f)]
        if not frames:
            return schema.empty_table()
        fast = _frames_table(frames, schema)
        if fast is not None:
            return fast
        frame = pd.concat(frames, ignore_index=True)
        missing = [n for n in schema.names if n not in frame.columns]
        if missing:
            raise SparkError(f"the processor's output lacks column(s) {missing} of the output "
                             f"schema {schema.names}")
        return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
    columns = {n: [] for n in schema.names}
    for row in outputs:
        values = row.asDict() if hasattr(row, "asDict") else dict(zip(schema.names, row))
        for n in schema.names:
            columns[n].append(values.get(n))
    return pa.table(columns, schema=schema)



def _simple_type(t: Any) -> bool:
    import pyarrow as pa

    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t))


def _frames_table(frames: list[Any], schema: Any) -> Any:
    """The processor's output frames as one Arrow table without ``pd.concat`` (which costs
    ~0.1-0.5 ms per one-row frame): each frame's cells as an object block, stacked, one Arrow
    array per column, converted as ``Table.from_pandas`` converts (NaN and None are null).
    None -- use ``pd.concat`` -- when a column type is not a plain scalar (timestamps, nested),
    a frame lacks a column or repeats one, or a value does not convert."""
    import numpy as np
    import pyarrow as pa

    if not all(_simple_type(f.type) for f in schema):
        return None
    blocks = []
    for frame in frames:
        columns = frame.columns
        if not columns.is_unique:
            return None
        try:
            positions = [columns.get_loc(n) for n in schema.names]
        except KeyError:
            return None
        blocks.append(frame.to_numpy(dtype=object)[:, positions])
    block = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
    try:
        return pa.table([pa.array(block[:, i], type=f.type, from_pandas=True)
                         for i, f in enumerate(schema)], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None
