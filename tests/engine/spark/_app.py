"""Driving an application's Spark pieces without Spark (as tests/engine/spark/_job.py does for
jobs): the weirlog source's reader plans every batch, each stage's task functions run in this
process, and the shuffle between stages is done here with Spark's own placement of the route
column (``pmod(murmur3(route), N)``, weir.engine.spark.sparkhash)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from weir.engine.spark.appstage import AppStageRunner
from weir.engine.spark.apprunner import plan_app
from weir.engine.spark.jobtask import job_store_specs
from weir.engine.spark.logsource import LogStreamReader
from weir.engine.spark.operator import METRICS_COLUMN, METRICS_DDL, BatchContext
from weir.engine.spark.settings import ProviderSettings
from weir.engine.spark.sparkhash import partition_of
from weir.stores.config import Config

from tests.engine.spark._job import run_batches

COLUMNS = ("system", "stream", "partition", "key", "value", "timestamp", "route", "origin", "seq")


def _schema() -> Any:
    from pyspark.sql.types import (BinaryType, DoubleType, IntegerType, LongType, StringType,
                                   StructField, StructType)

    metrics = StructType([StructField(part.split()[0],
                                      DoubleType() if part.split()[1] == "double" else LongType())
                          for part in METRICS_DDL.split(", ")])
    kinds = {"string": StringType(), "int": IntegerType(), "bigint": LongType(),
             "binary": BinaryType()}
    from weir.engine.spark.appplan import APP_OUTPUT_DDL

    return StructType([StructField(part.split()[0], kinds[part.split()[1]])
                       for part in APP_OUTPUT_DDL.split(", ")]
                      + [StructField(METRICS_COLUMN, metrics)])


class LocalApp:
    """One application, its batches run here; ``outputs[batch]`` the sink's rows of each
    batch. ``shuffle_order``: how a shuffle partition's rows are ordered before a stage reads
    them (Spark fetches upstream blocks in any order)."""

    def __init__(self, config: Config, local: Path, config_dir: str, *,
                 shuffle_order: Callable[[list[tuple]], list[tuple]] = lambda rows: rows):
        from weir.engine.app.planner import plan_application

        plan_application(config).create_streams()
        self.prepared = plan_app(config, config_dir=config_dir, check=True)
        self.app = self.prepared.app
        self.provider = ProviderSettings(provider="rocksdb", snapshot_interval=3,
                                         local_dir=str(local))
        counts = {str(ss): sp.partitions for ss, sp in self.app.execution.streams.items()
                  if sp.kind == "intermediate"}
        self.runners = []
        for k, stage in enumerate(self.app.stages):
            following = self.app.stages[k + 1] if k + 1 < len(self.app.stages) else None
            specs = [s for s in job_store_specs(stage.plan, "rocksdb") if s.name in stage.stores]
            self.runners.append(AppStageRunner(
                stage.plan, self.prepared.settings, self.provider, specs, _schema(), "UTC",
                reads=None if stage.reads_sources else self.app.stage_inputs(k),
                next_reads=None if following is None else self.app.stage_inputs(k + 1),
                next_partitions=following.partitions if following is not None else 1,
                partition_counts=counts))
        self.reader = LogStreamReader(self.app.source.plan)
        self.offsets = self.reader.initialOffset()
        self.shuffle_order = shuffle_order
        self.batch = 0
        self.outputs: dict[int, list[tuple]] = {}
        self.ranges: dict[int, list] = {}

    @contextlib.contextmanager
    def _in_task(self, task: int, batch: int, attempt: int) -> Iterator[None]:
        context = BatchContext(task, batch, "query-1", attempt)
        with mock.patch("weir.engine.spark.jobtask.task_batch", lambda *a: context):
            yield

    def _call(self, runner: Any, task: int, batch: int, rows: Any, attempt: int) -> list[tuple]:
        out = []
        with self._in_task(task, batch, attempt):
            for rb in runner(rows):
                cols = rb.to_pydict()
                out.extend(tuple(cols[n][i] for n in COLUMNS) for i in range(rb.num_rows)
                           if cols[METRICS_COLUMN][i] is None)
        return out

    def shuffle(self, rows: list[tuple], partitions: int) -> list[list[tuple]]:
        """Spark's ``repartition(partitions, route)``."""
        parts: list[list[tuple]] = [[] for _ in range(partitions)]
        for row in rows:
            parts[partition_of([row[6]], ["int"], partitions)].append(row)
        return [self.shuffle_order(p) for p in parts]

    def run_batch(self, batch: int, parts: list, attempt: int = 0) -> list[tuple]:
        import pyarrow as pa

        schema = _schema()
        names = [f.name for f in schema if f.name != METRICS_COLUMN]
        rows: list[tuple] = []
        for part in parts:
            rows.extend(self._call(self.runners[0], part.task, batch, self.reader.read(part),
                                   attempt))
        for k, stage in enumerate(self.app.stages[1:], start=1):
            out: list[tuple] = []
            for p, members in enumerate(self.shuffle(rows, stage.partitions)):
                columns = list(zip(*members)) if members else [[] for _ in names]
                table = pa.table({n: list(c) for n, c in zip(names, columns)})
                batches = [table.cast(pa.schema([
                    (n, {"partition": pa.int32(), "route": pa.int32(), "origin": pa.int32(),
                         "timestamp": pa.int64(), "seq": pa.int64(), "key": pa.binary(),
                         "value": pa.binary()}.get(n, pa.string())) for n in names]))
                    .to_batches()[0]] if members else []
                out.extend(self._call(self.runners[k], p, batch, iter(batches), attempt))
            rows = out
        return [r[:6] for r in rows]

    def step(self, planned: Callable[[], None] | None = None) -> bool:
        """Plan the next batch and run it (``planned``: called in between, as something
        happening while Spark runs the batch)."""
        end = self.reader.latestOffset(self.offsets, None)
        if end == self.offsets:
            return False
        parts = self.reader.partitions(self.offsets, end)
        if planned is not None:
            planned()
        self.ranges[self.batch] = parts
        self.outputs[self.batch] = self.run_batch(self.batch, parts)
        self.offsets = end
        self.batch += 1
        return True

    def replay(self, batch: int) -> list[tuple]:
        """Run ``batch`` again, every task of every stage (Spark after a crash before its
        commit)."""
        return self.run_batch(batch, self.ranges[batch], attempt=1)

    def run(self, limit: int = 1000) -> int:
        return run_batches(self, limit)

    def rows(self) -> list[tuple]:
        return [r for b in sorted(self.outputs) for r in self.outputs[b]]
