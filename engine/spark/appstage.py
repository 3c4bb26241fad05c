"""One stage of an application inside a Spark micro-batch (the ``mapInArrow`` function).

:class:`AppStageRunner` is a :class:`~weir.engine.spark.jobtask.JobTaskRunner` whose task is
the application's :class:`~weir.engine.app.task.ApplicationTask` for one stage
(``app.stage=k``), with what a stage needs beyond a job's task:

* **control bookkeeping** (:class:`~weir.engine.control.task_control.TaskControl`), restored
  from the previous version's checkpoint extras, so source watermarks are generated,
  ``partition_by`` sends watermarks / end-of-stream / idleness in-band, and a downstream task
  reconciles them over its upstream tasks, as embedded;
* **input from the shuffle** (stages after the first): the rows of Spark partition ``p`` are
  the intermediate records of Weir partition ``p``, ordered by sending task and send order (so
  each upstream task's control messages stay in order with its records) and numbered from the
  partition's next offset in the previous version; rows of streams a later stage reads pass
  through unchanged (re-routed for the next shuffle);
* **no drain**: the control bookkeeping has no drain monitor, so a drain request file is not
  acted on (``weir drain`` refuses a Spark run);
* **a watermark tick at the end of the batch**: a watermark advance ``partition_by`` held back
  for ``task.watermark.interval.ms`` goes out with this batch instead of waiting for the next;
* **rows out** carry the route of the next shuffle (:func:`~weir.engine.spark.appplan.route_keys`),
  the sending task and the send order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from weir.recovery.checkpoint import Checkpoint
from weir.stores.config import Config

from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
from weir.engine.spark.appplan import route_keys
from weir.engine.spark.errors import StatePartitioningError
from weir.engine.spark.jobplan import TaskPlan, ssp_key
from weir.engine.spark.jobtask import JobTaskRunner
from weir.engine.spark.operator import METRICS_COLUMN

__all__ = ["AppStageRunner"]


class AppStageRunner(JobTaskRunner):
    """The ``mapInArrow`` function of one application stage (see the module docstring).
    ``reads``: the ``system.stream`` names the stage reads (None: the source stage, whose
    rows all come from the ``weirlog`` source); ``next_reads``/``next_partitions``: those of
    the next stage (None: the last stage, whose rows go to the sink); ``partition_counts``:
    the partition count of every intermediate stream."""

    def __init__(self, plan: Any, settings: Any, provider: Any, specs: list, schema: Any,
                 timezone: str | None, *, reads: frozenset[str] | None,
                 next_reads: frozenset[str] | None, next_partitions: int,
                 partition_counts: Mapping[str, int]):
        super().__init__(plan, settings, provider, specs, schema, timezone)
        self.reads, self.next_reads = reads, next_reads
        self.next_partitions = next_partitions
        self.partition_counts = dict(partition_counts)

    # -- the mapInArrow function ----------------------------------------------------------------
    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        if self.reads is None:
            yield from super().__call__(batches)
            return
        import pyarrow as pa
        import pyarrow.compute as pc

        own, passing = [], []
        wanted = pa.array(sorted(self.reads), pa.string())
        for batch in batches:
            if batch.num_rows == 0:
                continue
            names = pc.binary_join_element_wise(batch.column("system"), batch.column("stream"),
                                                ".")
            mine = pc.is_in(names, value_set=wanted)
            own.append(batch.filter(mine))
            passing.append(batch.filter(pc.invert(mine)))
        yield from super().__call__(iter(own))
        for batch in passing:
            if batch.num_rows:
                yield self._rerouted(batch)

    def _rerouted(self, batch: Any) -> Any:
        """A passing row with the route of the next shuffle."""
        import pyarrow as pa

        from weir.engine.spark.operator import _arrow_schema

        schema = _arrow_schema(self.schema, self.timezone)
        cols = batch.to_pydict()
        routes = [self._route(s, st, p) for s, st, p in
                  zip(cols["system"], cols["stream"], cols["partition"])]
        arrays = [batch.column(f.name) if f.name not in (METRICS_COLUMN, "route")
                  else (pa.array(routes, pa.int32()) if f.name == "route"
                        else pa.nulls(batch.num_rows, f.type))
                  for f in schema]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _route(self, system: str, stream: str, partition: int) -> int:
        if self.next_reads is None:
            return 0
        keys = route_keys(self.next_partitions)
        if f"{system}.{stream}" in self.next_reads:
            return keys[partition]
        return keys[partition % self.next_partitions]   # passes the next stage: anywhere

    def _output_batches(self, task: TaskPlan, records: list[tuple],
                        arrow_schema: Any) -> Iterator[Any]:
        import pyarrow as pa

        if not records:
            return
        columns = list(zip(*records))
        n = len(records)
        routes = [self._route(s, st, p) for s, st, p in zip(columns[0], columns[1], columns[2])]
        yield pa.RecordBatch.from_arrays(
            [pa.array(columns[0], pa.string()), pa.array(columns[1], pa.string()),
             pa.array(columns[2], pa.int32()), pa.array(columns[3], pa.binary()),
             pa.array(columns[4], pa.binary()), pa.array(columns[5], pa.int64()),
             pa.array(routes, pa.int32()), pa.array([task.index] * n, pa.int32()),
             pa.array(range(n), pa.int64()),
             pa.nulls(n, arrow_schema.field(METRICS_COLUMN).type)],
            schema=arrow_schema)

    # -- the task's input -------------------------------------------------------------------------
    def _batch_envelopes(self, task: TaskPlan, rows: list[Any], nexts: Mapping[str, int]
                         ) -> tuple[dict[SystemStreamPartition, list[IncomingMessageEnvelope]],
                                    dict[str, tuple[int, int]]]:
        if self.reads is None:
            return super()._batch_envelopes(task, rows, nexts)
        found: dict[SystemStreamPartition, list[tuple]] = {}
        for batch in rows:
            cols = batch.to_pydict()
            for i in range(batch.num_rows):
                partition = cols["partition"][i]
                if partition != task.index:
                    raise StatePartitioningError(
                        f"StatePartitioningError: task '{task.name}' of stage operator "
                        f"'{self.plan.operator}' (Spark partition {task.index}) got a record "
                        f"of {cols['system'][i]}.{cols['stream'][i]} partition {partition}: "
                        f"the shuffle did not route by Weir partition; nothing was published")
                ssp = SystemStreamPartition(cols["system"][i], cols["stream"][i], partition)
                found.setdefault(ssp, []).append(
                    (cols["origin"][i], cols["seq"][i], cols["key"][i], cols["value"][i],
                     cols["timestamp"][i]))
        envelopes: dict[SystemStreamPartition, list[IncomingMessageEnvelope]] = {}
        ranges: dict[str, tuple[int, int]] = {}
        for raw in task.ssps:
            ssp = SystemStreamPartition(*raw)
            key = ssp_key(ssp)
            base = nexts.get(key, 0)
            items = sorted(found.get(ssp, ()), key=lambda r: (r[0], r[1]))
            envelopes[ssp] = [
                IncomingMessageEnvelope(ssp, base + i, k, v, ts,
                                        (len(k) if k else 0) + (len(v) if v else 0))
                for i, (_o, _s, k, v, ts) in enumerate(items)]
            ranges[key] = (base, base + len(items))
        return envelopes, ranges

    def _settle_next(self, task: TaskPlan, new_next: dict[str, int],
                     ranges: Mapping[str, tuple[int, int]]) -> None:
        if self.reads is None:
            return
        for key, (_lo, hi) in ranges.items():   # every record of the batch was handed out
            new_next[key] = max(new_next.get(key, 0), hi)

    # -- control -------------------------------------------------------------------------------
    def _task_control(self, task: TaskPlan, task_object: Any,
                      previous: Mapping[str, Any]) -> Any:
        from weir.engine.control.plane import ControlPlane

        config = Config(self.plan.config, origins=self.plan.origins)
        # No drain monitor: a stage's tasks never act on a drain request file on Spark. The
        # driver can neither end a drain nor resume after it, and a drained task would count
        # as finished in every later run (docs/SPARK.md, "Applications on Spark").
        settings = dataclasses.replace(self.settings.control, drain_path=None)
        plane = ControlPlane(config, settings=settings)
        return plane.task_control(task.name, [SystemStreamPartition(*s) for s in task.ssps],
                                  task=task_object, extras=previous.get("extras") or {})

    def _reannounced_ends(self, ended: set[str]) -> Iterable[str]:
        # an intermediate partition's end is the control's (its checkpoint keeps who ended)
        return [k for k in ended if k.rsplit("/", 1)[0].replace("/", ".", 1)
                not in self.partition_counts]

    def _end_of_batch(self, inst: Any) -> None:
        control = inst.control
        if control is None or control.ended_ssps() >= inst.ssps:
            return
        inst.control_tick(inst.coordinator)

    def _extras(self, inst: Any, checkpoint: Checkpoint | None) -> dict[str, Any]:
        from weir.engine.control.task_control import CHECKPOINT_KEY

        extras = super()._extras(inst, checkpoint)
        if inst.control is not None:
            extras[CHECKPOINT_KEY] = inst.control.checkpoint()
        return extras

    def _partition_count(self, ss: Any) -> int:
        count = self.partition_counts.get(str(ss))
        return count if count is not None else super()._partition_count(ss)
