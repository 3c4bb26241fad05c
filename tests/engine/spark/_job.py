"""Driving a job's Spark pieces without Spark: the weirlog source's reader plans every batch,
each task's function runs in this process (the batch id given as Spark's local property would
give it), and the sink's rows are collected per batch (a batch run again replaces its rows, as
the sink keeps one write per batch id)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from weir.engine.spark.jobplan import JobPlan
from weir.engine.spark.jobrunner import plan_job
from weir.engine.spark.jobtask import JobTaskRunner, job_store_specs
from weir.engine.spark.logsource import LogStreamReader
from weir.engine.spark.operator import METRICS_COLUMN, METRICS_DDL, BatchContext
from weir.engine.spark.settings import ProviderSettings
from weir.stores.config import Config


def _schema() -> Any:
    from pyspark.sql.types import (BinaryType, DoubleType, IntegerType, LongType, StringType,
                                   StructField, StructType)

    metrics = StructType([StructField(part.split()[0],
                                      DoubleType() if part.split()[1] == "double" else LongType())
                          for part in METRICS_DDL.split(", ")])
    return StructType([StructField("system", StringType()), StructField("stream", StringType()),
                       StructField("partition", IntegerType()), StructField("key", BinaryType()),
                       StructField("value", BinaryType()), StructField("timestamp", LongType()),
                       StructField(METRICS_COLUMN, metrics)])


class LocalJob:
    """One job, its batches run here; ``outputs[batch]`` the sink's rows of each batch."""

    def __init__(self, config: Config, local: Path, config_dir: str, *, provider: str = "rocksdb",
                 interval: int = 3):
        self.config = config
        self.prepared = plan_job(config, config_dir=config_dir)
        self.plan: JobPlan = self.prepared.plan
        self.provider = ProviderSettings(provider=provider, snapshot_interval=interval,
                                         local_dir=str(local))
        self.specs = job_store_specs(self.plan, provider)
        self.runner = JobTaskRunner(self.plan, self.prepared.settings, self.provider, self.specs,
                                    _schema(), "UTC")
        self.reader = LogStreamReader(self.plan)
        self.offsets = self.reader.initialOffset()
        self.batch = 0
        self.outputs: dict[int, list[tuple]] = {}
        self.metrics: dict[int, list[dict]] = {}
        self.ranges: dict[int, list] = {}

    @contextlib.contextmanager
    def _in_task(self, task: int, batch: int, attempt: int = 0) -> Iterator[None]:
        context = BatchContext(task, batch, "query-1", attempt)
        with mock.patch("weir.engine.spark.jobtask.task_batch", lambda *a: context):
            yield

    def run_task(self, batch: int, part: Any, attempt: int = 0) -> tuple[list[tuple], dict]:
        rows, metrics = [], {}
        with self._in_task(part.task, batch, attempt):
            for rb in self.runner(self.reader.read(part)):
                cols = rb.to_pydict()
                for i in range(rb.num_rows):
                    if cols[METRICS_COLUMN][i] is not None:
                        metrics = cols[METRICS_COLUMN][i]
                    else:
                        rows.append(tuple(cols[n][i] for n in
                                          ("system", "stream", "partition", "key", "value",
                                           "timestamp")))
        return rows, metrics

    def step(self) -> bool:
        """Plan and run the next batch; False when there is nothing to read."""
        end = self.reader.latestOffset(self.offsets, None)
        if end == self.offsets:
            return False
        parts = self.reader.partitions(self.offsets, end)
        self.ranges[self.batch] = parts
        out, metrics = [], []
        for part in parts:
            rows, m = self.run_task(self.batch, part)
            out.extend(rows)
            metrics.append(m)
        self.outputs[self.batch] = out
        self.metrics[self.batch] = metrics
        self.offsets = end
        self.batch += 1
        return True

    def replay(self, batch: int) -> list[tuple]:
        """Run ``batch`` again, every task (as Spark does after a crash before its commit)."""
        out = []
        for part in self.ranges[batch]:
            rows, _ = self.run_task(batch, part, attempt=1)
            out.extend(rows)
        return out

    def run(self, limit: int = 1000) -> int:
        return run_batches(self, limit)

    def rows(self) -> list[tuple]:
        return [r for b in sorted(self.outputs) for r in self.outputs[b]]


def run_batches(local, limit: int = 1000) -> int:
    """Run ``local.step()`` (a :class:`LocalJob` or a ``LocalApp``) until it has nothing to do
    or ``limit`` batches ran; how many ran."""
    steps = 0
    while steps < limit and local.step():
        steps += 1
    return steps
