"""A Weir task inside a Spark micro-batch: the run loop over the batch's input, stores through
the state provider, outputs recorded with the version.

Each Spark partition of a job's query is one Weir task (its index in the job model). For
micro-batch ``b`` the task function (:class:`JobTaskRunner`):

1. opens the task's state partition at version ``b - 1`` (:class:`PartitionState`; every store
   of the job, whatever its ``stores.<s>.factory``, kept by the provider); if version ``b`` is
   published already (a retry, a speculative copy, a replay), emits the outputs recorded with it
   and stops;
2. takes the task's bookkeeping from version ``b - 1``: the next offset of each input partition,
   the partitions that ended, whether the task finished, the time of its last window;
3. checks the batch's admitted ranges against it: input admitted earlier but not processed
   (a task asked its container to stop, ``shutdown(ALL_TASKS_IN_CONTAINER)``, in the middle of
   a batch) is read again from the file log and comes first (the source runs a batch for it
   even when no new input came); input that would be processed twice is an
   :class:`InputPositionError`;
4. runs the task instance with the job's run loop over the batch (:class:`RunLoop`:
   ``process``, ``window`` when ``task.window.ms`` has passed since the last window, commits,
   end-of-stream) through ``SystemConsumers`` and the job's chooser, until everything admitted
   is processed (``StopReason.SOURCE_EXHAUSTED``) or the task is done. A task's vote to stop
   (``shutdown(CURRENT_TASK)``) takes effect at the end of the batch: the driver stops the query
   once every task has voted or finished;
5. publishes version ``b``: the stores' changes, the new bookkeeping, and every message the task
   sent (the ``@output`` section); then emits those messages to the ``weirlog`` sink.

The task object and its stores (with their object caches) stay in the Python worker while the
partition's replica continues from the task's own last version: the next batch of that
partition on the same worker calls no ``init``. Otherwise -- another worker, a rebuilt replica,
an attempt that lost its publish -- a new task object is made and initialised, as after a
container restart in Samza; ``close`` is called on the object it replaces.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgpack

from weir.recovery.checkpoint import Checkpoint
from weir.stores.api import FlushScope
from weir.stores.builder import compose_store
from weir.stores.config import Config
from weir.stores.engines._base import BytesEngineBase

from weir.engine.model import IncomingMessageEnvelope, OutgoingMessageEnvelope, SystemStreamPartition
from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta
from weir.engine.spark.errors import InputPositionError, SparkError, StatePartitioningError
from weir.engine.spark.faultpoint import FaultPoint, hold_at
from weir.engine.spark.jobplan import JobPlan, TaskPlan, parse_ssp_key, ssp_key
from weir.engine.spark.logsource import (KIND_END_OF_STREAM, KIND_RANGE,
                                         _registry, read_task_range)
from weir.engine.spark.operator import (METRICS_COLUMN, _arrow_schema, _metrics_row, task_batch)
from weir.engine.spark.partition import PartitionState
from weir.engine.spark.providers import StateStoreSpec
from weir.engine.spark.settings import ProviderSettings
from weir.engine.runloop.source import EnvelopeSource
from weir.engine.systems.api import PartitionMetadata

if TYPE_CHECKING:
    from weir.engine.consumers.consumers import SystemConsumers

__all__ = ["JobTaskRunner", "job_store_specs", "OUTPUT_DDL", "decode_outputs"]

log = logging.getLogger("weir.spark.job")

OUTPUT_DDL = ("system string, stream string, partition int, key binary, value binary, "
              "timestamp bigint")
_SLOTS: dict[tuple[str, str, int], "_TaskSlot"] = {}


def job_store_specs(plan: JobPlan, default_provider: str) -> list[StateStoreSpec]:
    """Every store of the job as a state store of the provider: its engine from
    ``stores.<s>.factory`` (changelog settings are not used: the checkpoint is the log)."""
    from weir.stores.spec import stores_in

    from weir.engine.spark.providers import store_specs

    config = Config(plan.config, origins=plan.origins)
    return store_specs(stores_in(config), config, default_provider)


def decode_outputs(values: Iterable[bytes | None]) -> list[tuple]:
    """The ``@output`` records of a job version: ``(system, stream, partition, key, value,
    timestamp)``."""
    return [tuple(msgpack.unpackb(v)) for v in values if v is not None]


# -- what the run loop reads from ---------------------------------------------------------------

class _BatchConsumer:
    """A SystemConsumer over the envelopes of one batch (every one returned by one poll)."""

    def __init__(self, envelopes: Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]]):
        self._envelopes = {ssp: list(envs) for ssp, envs in envelopes.items()}
        self._given: set[SystemStreamPartition] = set()

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        self._envelopes.setdefault(ssp, [])

    def start(self) -> None:
        pass

    def poll(self, ssps, timeout: float) -> dict[SystemStreamPartition, list]:
        out = {}
        for ssp in ssps:
            if ssp not in self._given:
                self._given.add(ssp)
                envs = self._envelopes.get(ssp)
                if envs:
                    out[ssp] = envs
        return out

    @property
    def drained(self) -> bool:
        return all(ssp in self._given or not envs for ssp, envs in self._envelopes.items())

    def stop(self) -> None:
        pass


class _BatchAdmin:
    """The metadata SystemConsumers asks for its bootstrap heads: a bootstrap partition's head
    is the last offset of this batch, so no gating outlives the batch (admission put every
    bootstrap record before the others)."""

    def __init__(self, envelopes: Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]],
                 starts: Mapping[SystemStreamPartition, int]):
        self._envelopes, self._starts = envelopes, starts

    def metadata(self, ssps) -> dict[SystemStreamPartition, PartitionMetadata]:
        out = {}
        for ssp in ssps:
            messages = [e for e in self._envelopes.get(ssp, []) if not e.is_end_of_stream]
            start = self._starts.get(ssp, 0)
            if messages:
                out[ssp] = PartitionMetadata(messages[0].offset, messages[-1].offset,
                                             messages[-1].offset + 1)
            else:
                out[ssp] = PartitionMetadata(start, start - 1, start)
        return out


class _BatchSource(EnvelopeSource):
    """The run loop's source: the job's SystemConsumers over the batch, exhausted when every
    envelope of the batch was handed out."""

    def __init__(self, consumers: SystemConsumers, batch: _BatchConsumer):
        self.consumers = consumers
        self.batch = batch
        self.counters = consumers.counters

    def choose(self, timeout: float) -> IncomingMessageEnvelope | None:
        return self.consumers.choose(0.0)

    def choose_run(self, limit: int) -> Sequence[IncomingMessageEnvelope]:
        """The consumers' runs (their fast lane never polls, like ``choose(0.0)``): the inline
        loop takes up to ``limit`` envelopes per call instead of one ``choose`` each."""
        return self.consumers.choose_run(limit)

    def metrics(self) -> Callable[[], Mapping[str, Any]]:
        return self.counters.snapshot

    def exhausted(self) -> bool:
        if not self.batch.drained or self.consumers.counters.buffered:
            return False
        if self.consumers.bootstrap.active:
            raise InputPositionError(
                "InputPositionError: a bootstrap stream of this task still lags at the end of "
                "the micro-batch while other streams' messages wait: the admission broke the "
                "bootstrap order (a bug; nothing was published)")
        return True


# -- what the task writes to ---------------------------------------------------------------------

class _CapturingProducer:
    """A SystemProducer that keeps what the task sent, in order, for the version."""

    def __init__(self, system: str):
        self.system = system
        self.records: list[tuple] = []

    def register(self, source: str) -> None:
        pass

    def start(self) -> None:
        pass

    def send(self, source: str, envelope: OutgoingMessageEnvelope) -> None:
        ss = envelope.system_stream
        self.records.append((ss.system, ss.stream, envelope.partition, envelope.key,
                             envelope.message, envelope.timestamp))

    def flush(self, source: str) -> None:
        pass

    def stop(self) -> None:
        pass


class _SwitchedEngine(BytesEngineBase):
    """A bytes engine that forwards to the current batch's staged view of the replica, so a
    task's typed stores (and their object caches) outlive one batch."""

    def __init__(self, name: str):
        self.name = name
        self.target: Any = None

    @property
    def key_size_limits(self) -> Any:
        return self.target.key_size_limits if self.target is not None else None

    def __getattr__(self, item: str) -> Any:
        if self.target is None:
            raise SparkError(f"store '{self.name}' used outside a micro-batch")
        return getattr(self.target, item)

    def get(self, key):
        return self.target.get(key)

    def get_all(self, keys):
        return self.target.get_all(keys)

    def put(self, key, value):
        self.target.put(key, value)

    def delete(self, key):
        self.target.delete(key)

    def put_all(self, items):
        self.target.put_all(items)

    def delete_all(self, keys):
        self.target.delete_all(keys)

    def write_batch(self, items):
        self.target.write_batch(items)

    def write_columns(self, keys, values, *, deletes=True):
        self.target.write_columns(keys, values, deletes=deletes)

    def range(self, lo, hi):
        return self.target.range(lo, hi)

    def snapshot(self, lo, hi):
        return self.target.snapshot(lo, hi)

    def flush(self, scope: FlushScope = FlushScope.ENGINE):
        if self.target is not None:
            self.target.flush(scope)

    def close(self):
        self.target = None

    @property
    def closed(self) -> bool:
        return False


class _Storage:
    """The TaskStorage of a task on Spark: typed stores over switched engines."""

    def __init__(self, stores: Mapping[str, Any]):
        self._stores = dict(stores)

    def stores(self) -> Mapping[str, Any]:
        return self._stores

    def flush(self) -> Mapping[str, int]:
        for store in self._stores.values():
            store.flush()
        return {}

    def unsettled(self) -> bool:
        """Never: every flush is durable (the batch's state files are Spark's copy)."""
        return False

    def close(self) -> None:
        for store in self._stores.values():
            try:
                store.close()
            except Exception:  # noqa: BLE001 - a task's close must go on
                log.exception("closing store %s failed", store)


class _CapturingCheckpoints:
    """The checkpoint manager of a task on Spark: its checkpoints become version metadata."""

    def __init__(self):
        self.last: Checkpoint | None = None

    def register(self, task_name: str) -> None:
        pass

    def start(self) -> None:
        pass

    def read_last(self, task_name: str) -> Checkpoint | None:
        return self.last

    def write(self, task_name: str, checkpoint: Checkpoint) -> None:
        self.last = checkpoint

    def stop(self) -> None:
        pass


class _TaskSlot:
    """A task object and what it needs across batches, kept in the Python worker."""

    def __init__(self, instance: Any, engines: dict[str, _SwitchedEngine],
                 producers: dict[str, _CapturingProducer], checkpoints: _CapturingCheckpoints,
                 replica: Any):
        self.instance, self.engines, self.producers = instance, engines, producers
        self.checkpoints, self.replica = checkpoints, replica
        self.version: int | None = None

    def close(self) -> None:
        from weir.engine.runloop.instance import StoreDisposal

        try:
            self.instance.close(StoreDisposal.CLOSE)
        except Exception:  # noqa: BLE001 - replacing a task must not fail on its close
            log.exception("closing task '%s' failed", self.instance.task_name)


def _ssp(key: str) -> SystemStreamPartition:
    return SystemStreamPartition(*parse_ssp_key(key))


class JobTaskRunner:
    """The ``mapInArrow`` function of a job's query (see the module docstring)."""

    def __init__(self, plan: JobPlan, settings: Any, provider: ProviderSettings,
                 specs: list[StateStoreSpec], schema: Any, timezone: str | None):
        self.plan, self.settings, self.provider = plan, settings, provider
        self.specs, self.schema, self.timezone = specs, schema, timezone

    # -- the task function ---------------------------------------------------------------------
    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        started = time.perf_counter()
        self._import_path()
        where = task_batch()
        if not 0 <= where.partition < len(self.plan.tasks):
            raise StatePartitioningError(f"StatePartitioningError: Spark partition "
                                         f"{where.partition} is not a task of job "
                                         f"'{self.plan.job}' ({len(self.plan.tasks)} tasks)")
        task = self.plan.tasks[where.partition]
        arrow_schema = _arrow_schema(self.schema, self.timezone)
        checkpoint = OperatorCheckpoint(self.plan.checkpoint, self.plan.operator)
        meta = checkpoint.ensure_meta(OperatorMeta(
            self.plan.operator, "job", len(self.plan.tasks),
            {s.name: s.describe() for s in self.specs}, where.query_id, where.batch,
            {"job": self.plan.job, "tasks": [t.name for t in self.plan.tasks]}))
        state = PartitionState(checkpoint, meta, where.partition, where.batch, self.specs,
                               self.provider)
        rows_in = 0
        state.open()
        try:
            if state.published is None:
                rows = list(batches)
                rows_in = sum(b.num_rows for b in rows)
                self._run(task, state, rows, where.batch)
            else:
                _SLOTS.pop((self.plan.checkpoint, self.plan.operator, task.index), None)
        except BaseException:
            slot = _SLOTS.pop((self.plan.checkpoint, self.plan.operator, task.index), None)
            if slot is not None:
                slot.close()
            raise
        finally:
            state.close()
        _, values = state.outputs()
        records = decode_outputs(values)
        rows_out = 0
        for out in self._output_batches(task, records, arrow_schema):
            rows_out += out.num_rows
            yield out
        yield _metrics_row(arrow_schema, state.metrics, rows_in, rows_out,
                           (time.perf_counter() - started) * 1000)

    def _output_batches(self, task: TaskPlan, records: list[tuple],
                        arrow_schema: Any) -> Iterator[Any]:
        """The Arrow rows of what the task sent in the batch (the sink's columns)."""
        import pyarrow as pa

        if records:
            columns = list(zip(*records))
            yield pa.RecordBatch.from_arrays(
                [pa.array(columns[0], pa.string()), pa.array(columns[1], pa.string()),
                 pa.array(columns[2], pa.int32()), pa.array(columns[3], pa.binary()),
                 pa.array(columns[4], pa.binary()), pa.array(columns[5], pa.int64()),
                 pa.nulls(len(records), arrow_schema.field(METRICS_COLUMN).type)],
                schema=arrow_schema)

    def _import_path(self) -> None:
        import sys

        if self.plan.config_dir and self.plan.config_dir not in sys.path:
            sys.path.insert(0, self.plan.config_dir)  # task modules beside the job config

    # -- one batch of one task --------------------------------------------------------------------
    def _run(self, task: TaskPlan, state: PartitionState, rows: list[Any], batch: int) -> None:
        previous = dict(state.replica.meta) if state.replica is not None else {}
        nexts = {k: int(v) for k, v in (previous.get("next") or {}).items()}
        envelopes, ranges = self._batch_envelopes(task, rows, nexts)
        ended = set(previous.get("ended") or [])
        self._carry_over(task, nexts, ranges, envelopes)
        if previous.get("complete"):
            state.commit(meta={**_carried(previous), "task": task.name})
            return
        slot = self._slot(task, state, previous, batch)
        inst = slot.instance
        for name, engine in slot.engines.items():
            engine.target = state.staged(name)
        for producer in slot.producers.values():
            producer.records.clear()
        for key in self._reannounced_ends(ended):  # the run loop hears them again
            ssp = _ssp(key)
            envelopes.setdefault(ssp, []).append(
                IncomingMessageEnvelope.end_of_stream(ssp, nexts.get(key, 1) - 1))
        windows_before = inst.metrics.windows.count
        summary, voted, consumers, now = self._loop(inst, task, envelopes, ranges, previous)
        self._end_of_batch(inst)
        hold_at(FaultPoint.BEFORE_PUBLISH, self.plan.operator, batch)
        checkpoint = slot.checkpoints.last
        done = dict(checkpoint.input_offsets) if checkpoint is not None else {}
        new_next = dict(nexts)
        counts: dict[str, int] = {}
        for ssp in (SystemStreamPartition(*s) for s in task.ssps):
            key = ssp_key(ssp)
            start = nexts.get(key, ranges.get(key, (0, 0))[0])
            last = done.get(ssp)
            if last is not None and last + 1 > start:
                new_next[key] = last + 1
                name = f"{ssp.system}.{ssp.stream}"
                counts[name] = counts.get(name, 0) + sum(
                    1 for e in envelopes.get(ssp, ()) if not e.is_end_of_stream
                    and start <= e.offset <= last)
            elif key not in new_next:
                new_next[key] = start
            if consumers.is_end_of_stream(ssp):
                ended.add(key)
                eos = next((e.offset for e in envelopes.get(ssp, ()) if e.is_end_of_stream),
                           None)
                if eos is not None:
                    new_next[key] = eos + 1
        self._settle_next(task, new_next, ranges)
        last_window = previous.get("last_window_ms")
        if last_window is None or inst.metrics.windows.count != windows_before:
            last_window = now   # a window ran (or the first batch: the window clock starts)
        outputs = [rec for p in slot.producers.values() for rec in p.records]
        sent: dict[str, int] = {}
        for rec in outputs:
            sent[f"{rec[0]}.{rec[1]}"] = sent.get(f"{rec[0]}.{rec[1]}", 0) + 1
        reason = summary.reason.value
        meta = {"task": task.name, "next": new_next, "ended": sorted(ended),
                "complete": reason == "end-of-stream", "voted": voted,
                "stop_all": reason == "shutdown-requested",
                "last_window_ms": last_window,
                "extras": self._extras(inst, checkpoint),
                "in": counts, "out": sent}
        encoded = [(b"%012d" % i, msgpack.packb(list(rec))) for i, rec in enumerate(outputs)]
        outcome = state.commit(outputs=encoded, meta=meta)
        if outcome == "published":
            slot.version = batch
            hold_at(FaultPoint.AFTER_PUBLISH, self.plan.operator, batch)
        else:  # another attempt's version holds: this object's memory is not it
            _SLOTS.pop((self.plan.checkpoint, self.plan.operator, task.index), None)
            slot.close()

    # -- seams of an application's stages (weir.engine.spark.appstage) ---------------------
    def _batch_envelopes(self, task: TaskPlan, rows: list[Any], nexts: Mapping[str, int]
                         ) -> tuple[dict[SystemStreamPartition, list[IncomingMessageEnvelope]],
                                    dict[str, tuple[int, int]]]:
        """The batch's envelopes per input partition and the admitted ranges (``nexts``: the
        next offset of each input partition, from the previous version)."""
        return self._envelopes(task, rows)

    def _task_control(self, task: TaskPlan, task_object: Any,
                      previous: Mapping[str, Any]) -> Any:
        """The task's control bookkeeping (None: a job's task has none)."""
        return None

    def _settle_next(self, task: TaskPlan, new_next: dict[str, int],
                     ranges: Mapping[str, tuple[int, int]]) -> None:
        """Adjust the next offsets the version records (a job's come from its checkpoint)."""

    def _reannounced_ends(self, ended: set[str]) -> Iterable[str]:
        """The ended input partitions whose end-of-stream the run loop hears again (a job's
        task keeps no record of them but its run loop's)."""
        return ended

    def _end_of_batch(self, inst: Any) -> None:
        """Called once the run loop processed the batch, before the version is published."""

    def _extras(self, inst: Any, checkpoint: Checkpoint | None) -> dict[str, Any]:
        """The checkpoint extras the version keeps (a new task object is restored from them)."""
        return dict(checkpoint.extras) if checkpoint is not None else {}

    def _partition_count(self, ss: Any) -> int:
        """The partition count of a stream the task writes."""
        return _registry(self.plan).partition_counts([ss])[ss]

    def _envelopes(self, task: TaskPlan, rows: list[Any]
                   ) -> tuple[dict[SystemStreamPartition, list[IncomingMessageEnvelope]],
                              dict[str, tuple[int, int]]]:
        envelopes: dict[SystemStreamPartition, list[IncomingMessageEnvelope]] = {}
        ranges: dict[str, tuple[int, int]] = {}
        for batch in rows:
            cols = batch.to_pydict()
            for i in range(batch.num_rows):
                if cols["task"][i] != task.index:
                    raise StatePartitioningError(
                        f"StatePartitioningError: the task of Spark partition {task.index} "
                        f"got input of task {cols['task'][i]}: the source's partitions were "
                        f"reordered or coalesced; nothing was published")
                ssp = SystemStreamPartition(cols["system"][i], cols["stream"][i],
                                            cols["partition"][i])
                kind = cols["kind"][i]
                if kind == KIND_RANGE:
                    ranges[ssp_key(ssp)] = (cols["offset"][i], cols["timestamp"][i])
                elif kind == KIND_END_OF_STREAM:
                    envelopes.setdefault(ssp, []).append(
                        IncomingMessageEnvelope.end_of_stream(ssp, cols["offset"][i]))
                else:
                    key, value = cols["key"][i], cols["value"][i]
                    envelopes.setdefault(ssp, []).append(IncomingMessageEnvelope(
                        ssp, cols["offset"][i], key, value, cols["timestamp"][i],
                        (len(key) if key else 0) + (len(value) if value else 0)))
        return envelopes, ranges

    def _carry_over(self, task: TaskPlan, nexts: dict[str, int],
                    ranges: dict[str, tuple[int, int]],
                    envelopes: dict[SystemStreamPartition, list[IncomingMessageEnvelope]]) -> None:
        """Input admitted by earlier batches and not processed comes first; input processed
        already must not come again."""
        gaps = {}
        for key, (lo, hi) in ranges.items():
            expected = nexts.get(key)
            if expected is None or expected == lo:
                continue
            if expected > lo:
                raise InputPositionError(
                    f"InputPositionError: task '{task.name}' has processed {key} up to offset "
                    f"{expected - 1}, but this micro-batch starts it at {lo}: Spark's offsets "
                    f"and the task's state disagree (was the Spark checkpoint replaced or "
                    f"rolled back?). Nothing was published")
            gaps[key] = (expected, lo)
        if not gaps:
            return
        carried: dict[SystemStreamPartition, list[IncomingMessageEnvelope]] = {}
        for batch in read_task_range(self.plan, task.index, gaps, with_ranges=False):
            found, _ = self._envelopes(task, [batch])
            for ssp, envs in found.items():
                carried.setdefault(ssp, []).extend(envs)
        for ssp, envs in carried.items():
            envelopes[ssp] = envs + envelopes.get(ssp, [])
        for key, (expected, _lo) in gaps.items():
            lo, hi = ranges[key]
            ranges[key] = (expected, hi)

    def _slot(self, task: TaskPlan, state: PartitionState, previous: Mapping[str, Any],
              batch: int) -> _TaskSlot:
        key = (self.plan.checkpoint, self.plan.operator, task.index)
        slot = _SLOTS.get(key)
        if (slot is not None and slot.version == batch - 1 and slot.replica is state.replica
                and state.metrics.replica == "reused"):
            return slot
        if slot is not None:
            slot.close()
            _SLOTS.pop(key, None)
        slot = self._new_slot(task, state, previous)
        _SLOTS[key] = slot
        return slot

    def _new_slot(self, task: TaskPlan, state: PartitionState,
                  previous: Mapping[str, Any]) -> _TaskSlot:
        from weir.engine.runloop.instance import ProducerCollector, TaskInstance
        from weir.engine.task import load_task_factory

        config = Config(self.plan.config, origins=self.plan.origins)
        registry = _registry(self.plan)
        engines = {s.name: _SwitchedEngine(s.name) for s in self.specs}
        stores = {s.name: compose_store(s.spec, engines[s.name], changelog=None, config=config)
                  for s in self.specs}
        producers = {system: _CapturingProducer(system) for system in self.settings.systems}
        checkpoints = _CapturingCheckpoints()
        last = {_ssp(k): int(v) - 1 for k, v in (previous.get("next") or {}).items()
                if int(v) > 0}
        for k in previous.get("ended") or []:
            last.pop(_ssp(k), None)
        collector = ProducerCollector(task.name, producers, registry.serdes,
                                      self._partition_count)
        task_object = load_task_factory(config)()
        inst = TaskInstance(task.name, task_object,
                            [SystemStreamPartition(*s) for s in task.ssps], config,
                            storage=_Storage(stores), checkpoints=checkpoints,
                            collector=collector, last_processed=last,
                            run_loop=self.settings.run_loop, ignored=self.settings.ignored,
                            control=self._task_control(task, task_object, previous))
        for name, engine in engines.items():
            engine.target = state.staged(name)
        inst.init()
        return _TaskSlot(inst, engines, producers, checkpoints, state.replica)

    def _loop(self, inst: Any, task: TaskPlan,
              envelopes: dict[SystemStreamPartition, list[IncomingMessageEnvelope]],
              ranges: Mapping[str, tuple[int, int]], previous: Mapping[str, Any]
              ) -> tuple[Any, bool, Any, int]:
        from weir.engine.chooser import DefaultChooser
        from weir.engine.consumers.consumers import SystemConsumers
        from weir.engine.runloop.loop import RunLoop

        config = Config(self.plan.config, origins=self.plan.origins)
        registry = _registry(self.plan)
        for envs in envelopes.values():
            envs.sort(key=lambda e: (e.offset, e.is_end_of_stream))
        batch = _BatchConsumer(envelopes)
        starts = {_ssp(k): lo for k, (lo, _hi) in ranges.items()}
        systems = sorted({ssp.system for ssp in inst.ssps})
        consumers = SystemConsumers(DefaultChooser(self.settings.chooser, config=config),
                                    {s: batch for s in systems},
                                    {s: _BatchAdmin(envelopes, starts) for s in systems},
                                    registry.serdes, self.settings.consumers)
        for ssp in inst.ssps:
            first = starts.get(ssp)
            if first is None:
                envs = envelopes.get(ssp)
                first = envs[0].offset if envs else 0
            consumers.register(ssp, first)
        consumers.start()
        now = time.time_ns() // 1_000_000
        window_ms = self.settings.run_loop.window_ms
        last_window = previous.get("last_window_ms")
        due = (window_ms > 0 and inst.shape.windowable and last_window is not None
               and now - last_window >= window_ms)
        loop = RunLoop([inst], _BatchSource(consumers, batch), self.settings.run_loop,
                       name=f"spark-{task.name}", metrics=self.settings.metrics, window_due=due,
                       stop_on_votes=False)
        try:
            summary = loop.run()
        finally:
            consumers.stop()
        return summary, bool(loop.voted_tasks), consumers, time.time_ns() // 1_000_000


def _carried(previous: Mapping[str, Any]) -> dict[str, Any]:
    """What a finished task's next version keeps of the previous one."""
    keep = ("next", "ended", "complete", "last_window_ms", "extras")
    return {k: previous[k] for k in keep if k in previous}
