"""``weirlog``: a job's file-log inputs as a Spark streaming source, and the file log as a sink.

Source (``spark.readStream.format("weirlog").option("plan", plan_json).load()``):

* one Spark input partition per Weir task (its index is the task's Spark partition), every
  batch, even when the task has nothing to read (its task still runs: windows, versions);
* offsets: ``{"system/stream/partition": next offset}`` over every input partition of the job;
  an ended partition's end-of-stream is one more offset (see :mod:`weir.engine.spark.jobplan`);
  ``_carry`` counts batches planned without new input because a task left admitted input
  unprocessed (a container-wide stop request): Spark runs a batch only when the offsets move;
* admission: :func:`~weir.engine.spark.jobplan.admit` (bootstrap first, then priority tiers,
  ``spark.weir.max.records.per.batch``); ``Trigger.AvailableNow`` freezes the heads when the
  query starts, so bounded inputs run to their end and the query ends; while the job's drain
  file holds a request for a running run (``weir drain``), nothing more is admitted;
* rows: ``task, system, stream, partition, offset, key, value, timestamp, kind`` (Arrow), read
  in the executors straight from the file log's segment files; ``kind`` 0 is a message, 1 a
  partition's end-of-stream (at its upcoming offset), 2 the admitted range of one input
  partition of the task (``offset`` = start, ``timestamp`` = end), one per partition and batch,
  so a task knows its ranges even when they are empty.

Sink (``df.writeStream.format("weirlog").option("plan", plan_json)``), for rows ``system,
stream, partition, key, value, timestamp``: executors stage each task's rows in a file under
``<checkpoint>/weir/_sink/staging``; the driver's commit of batch ``b`` appends them to the file
log **once per batch id**, with the file log's own primitives (exactly-once transactions of
the file log are not used yet):

1. ``batches/<b>.done`` exists: the batch was written; the staged files are dropped (a replay);
2. otherwise ``batches/<b>.intent.json`` is published create-if-absent (or read, when a commit
   of ``b`` died half-way): the staged files to write, in order, and each output partition's
   upcoming offset before the batch;
3. each output partition gets the records it does not have yet: its upcoming offset minus the
   intent's start says how many it has (none, some after a crash in the middle, or all);
   flushed (fsync);
4. ``batches/<b>.done`` is published, then the staged files and the intent go.

So a batch's rows reach the log exactly once, whatever attempt or crash came before, as long as
the sink is the only writer of its output partitions (a partition whose offset moved otherwise
stops the commit with an error naming it).
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql.datasource import (DataSource, DataSourceStreamArrowWriter,
                                    DataSourceStreamReader, InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from weir.stores.filesafety import atomic_write
from weir.stores.config import Config

from weir.engine.spark.errors import SparkError, SparkJobError
from weir.engine.spark.jobplan import SSP, JobPlan, admit, parse_ssp_key, ssp_key
from weir.engine.spark.storage import publish_bytes

__all__ = ["WeirLogDataSource", "SOURCE_SCHEMA", "SINK_SCHEMA", "LogSink", "sink_directory",
           "read_heads"]

SOURCE_SCHEMA = ("task int, system string, stream string, partition int, offset bigint, "
                 "key binary, value binary, timestamp bigint, kind tinyint")
KIND_MESSAGE, KIND_END_OF_STREAM, KIND_RANGE = 0, 1, 2
_CARRY = "_carry"
SINK_SCHEMA = "system string, stream string, partition int, key binary, value binary, timestamp bigint"
_BATCH_ROWS = 10_000
_REGISTRIES: dict[str, Any] = {}


def _registry(plan: JobPlan) -> Any:
    """A SystemRegistry over the plan's config, one per process and plan."""
    from weir.engine.systems.registry import SystemRegistry

    key = plan.checkpoint + "|" + plan.job
    registry = _REGISTRIES.get(key)
    if registry is None:
        registry = _REGISTRIES[key] = SystemRegistry(Config(plan.config, origins=plan.origins))
    return registry


def _file_log_admin(plan: JobPlan, system: str) -> Any:
    from weir.engine.systems.filelog import FileLogAdmin

    admin = _registry(plan).admin(system)
    if not isinstance(admin, FileLogAdmin):
        raise SparkError(f"system '{system}' is not a file log (systems.{system}.factory); jobs "
                         f"on Spark read and write the file log, which every executor reaches "
                         f"through the file system")
    return admin


def read_heads(plan: JobPlan, ssps: list[SSP]) -> dict[SSP, int]:
    """How far each input partition can be read now: its upcoming offset, plus one when it has
    ended (its end-of-stream)."""
    from weir.engine.model import SystemStreamPartition
    from weir.engine.systems.filelog.stream import partition_dir, read_end_marker

    out: dict[SSP, int] = {}
    by_system: dict[str, list[SSP]] = {}
    for ssp in ssps:
        by_system.setdefault(ssp[0], []).append(ssp)
    for system, members in by_system.items():
        admin = _file_log_admin(plan, system)
        metadata = admin.metadata([SystemStreamPartition(*s) for s in members])
        for ssp in members:
            md = metadata[SystemStreamPartition(*ssp)]
            ended = read_end_marker(partition_dir(admin.settings.root, ssp[1], ssp[2]))
            out[ssp] = md.upcoming + 1 if ended is not None and ended <= md.upcoming else md.upcoming
    return out


@dataclass
class TaskRange(InputPartition):
    """The input of one task in one batch: ``{ssp key: (start, end)}``."""

    task: int
    ranges: dict[str, tuple[int, int]]

    def __post_init__(self) -> None:
        super().__init__(self.task)


class LogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, plan: JobPlan):
        self.plan = plan
        self.ssps = plan.ssps
        self.tiers = {ssp: plan.tier(ssp) for ssp in self.ssps}
        self.target: dict[SSP, int] | None = None
        self._bootstrap_heads: dict[SSP, int] | None = None

    def initialOffset(self) -> dict:
        from weir.engine.consumers.offsets import starting_offsets
        from weir.engine.model import SystemStreamPartition

        config = Config(self.plan.config, origins=self.plan.origins)
        metadata = {}
        by_system: dict[str, list] = {}
        for ssp in self.ssps:
            by_system.setdefault(ssp[0], []).append(SystemStreamPartition(*ssp))
        for system, members in by_system.items():
            metadata.update(_file_log_admin(self.plan, system).metadata(members))
        starts = starting_offsets(config, [SystemStreamPartition(*s) for s in self.ssps], {},
                                  metadata)
        return {ssp_key(ssp): int(off) for ssp, off in starts.items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = read_heads(self.plan, self.ssps)

    def _heads(self) -> dict[SSP, int]:
        heads = read_heads(self.plan, self.ssps)
        if self.target is not None:
            heads = {ssp: min(h, self.target.get(ssp, h)) for ssp, h in heads.items()}
        return heads

    def latestOffset(self, start: dict, limit: Any) -> dict:
        if self.plan.drain_path and _drain_requested(self.plan.drain_path):
            return dict(start)   # a drain: nothing more is admitted (jobrunner.execute)
        heads = self._heads()
        begin = {parse_ssp_key(k): int(v) for k, v in start.items() if not k.startswith("_")}
        for ssp in self.ssps:
            begin.setdefault(ssp, 0)
        if self._bootstrap_heads is None:
            # The heads of the bootstrap partitions when this run of the query started: what
            # must be read before anything else (messages written later do not extend it).
            self._bootstrap_heads = {ssp: heads[ssp] for ssp in self.ssps
                                     if (ssp[0], ssp[1]) in self.plan.bootstrap}
        end = admit(begin, heads, self._bootstrap_heads, self.tiers, self.plan.max_records)
        out: dict[str, int] = {ssp_key(ssp): int(off) for ssp, off in end.items()}
        carry = int(start.get(_CARRY, 0))
        if end == begin and self._unprocessed(begin):
            carry += 1  # a batch for input admitted earlier that a task left unprocessed
        if carry:
            out[_CARRY] = carry
        return out

    def _unprocessed(self, begin: Mapping[SSP, int]) -> bool:
        """Whether a task's newest version stopped before input the batches admitted."""
        from weir.engine.spark.durable import OperatorCheckpoint
        from weir.engine.spark.statefile import VersionKind

        checkpoint = OperatorCheckpoint(self.plan.checkpoint, self.plan.operator)
        for task in self.plan.tasks:
            files = checkpoint.partition(task.index)
            latest = files.listing().latest
            if latest < 0:
                continue
            meta = files.read(latest, VersionKind.CHANGELOG, sections=[]).meta
            if meta.get("complete"):
                continue
            for key, nxt in (meta.get("next") or {}).items():
                if int(nxt) < begin.get(parse_ssp_key(key), 0):
                    return True
        return False

    def partitions(self, start: dict, end: dict) -> list[TaskRange]:
        out = []
        for task in self.plan.tasks:
            ranges: dict[str, tuple[int, int]] = {}
            for ssp in task.ssps:
                key = ssp_key(ssp)
                lo, hi = int(start.get(key, 0)), int(end.get(key, start.get(key, 0)))
                ranges[key] = (lo, hi)
            out.append(TaskRange(task.index, ranges))
        return out

    def read(self, partition: TaskRange) -> Iterator[Any]:
        return read_task_range(self.plan, partition.task, partition.ranges)

    def commit(self, end: dict) -> None:
        """Spark recorded ``end`` in its offset log; the file log keeps no consumer offsets."""

    def stop(self) -> None:
        _REGISTRIES.clear()


def _drain_requested(path: str) -> bool:
    """Whether the drain file holds a request for a run that runs (``weir drain``)."""
    from weir.engine.control.drain import read_drain_request

    request = read_drain_request(Path(path))
    return request is not None and request.is_for_a_running_run()


def read_task_range(plan: JobPlan, task: int, ranges: Mapping[str, tuple[int, int]], *,
                    with_ranges: bool = True) -> Iterator[Any]:
    """The rows of one task's input in one batch, as Arrow record batches: each partition's
    admitted range, its records, its end-of-stream when admitted (see the module docstring)."""
    import pyarrow as pa

    schema = _source_arrow_schema()
    head: dict[str, list] = {n: [] for n in schema.names}
    for key, (lo, hi) in sorted(ranges.items()):
        system, stream, partition = parse_ssp_key(key)
        _append(head, task, system, stream, partition, lo, None, None, hi, KIND_RANGE)
    if head["offset"] and with_ranges:
        yield pa.RecordBatch.from_pydict(head, schema=schema)
    for key, (lo, hi) in sorted(ranges.items()):
        if hi <= lo:
            continue
        system, stream, partition = parse_ssp_key(key)
        reader = _file_log_admin(plan, system).reader(stream, partition, lo)
        columns: dict[str, list] = {n: [] for n in schema.names}
        try:
            while True:
                records = reader.read_records(_BATCH_ROWS)
                past = False
                for r in records:
                    if r.offset >= hi:
                        past = True
                        break
                    _append(columns, task, system, stream, partition, r.offset, r.key,
                            r.value, r.timestamp, KIND_MESSAGE)
                if len(columns["offset"]) >= _BATCH_ROWS:
                    yield pa.RecordBatch.from_pydict(columns, schema=schema)
                    columns = {n: [] for n in schema.names}
                if past:
                    break
                if not records:
                    end = reader.end_offset if reader.ended else None
                    if end is not None and end < hi:      # the end-of-stream was admitted
                        _append(columns, task, system, stream, partition, end, None, None,
                                -1, KIND_END_OF_STREAM)
                        break
                    if reader.position >= hi:             # a compacted gap up to the end
                        break
                    raise SparkError(
                        f"{system}.{stream}#{partition}: offsets {reader.position}..{hi - 1} "
                        f"were admitted to this micro-batch but the file log holds no records "
                        f"there (a cut or replaced segment?); nothing was processed")
        finally:
            reader.close()
        if columns["offset"]:
            yield pa.RecordBatch.from_pydict(columns, schema=schema)


def _append(columns: dict[str, list], task: int, system: str, stream: str, partition: int,
            offset: int, key: bytes | None, value: bytes | None, ts: int, kind: int) -> None:
    columns["task"].append(task)
    columns["system"].append(system)
    columns["stream"].append(stream)
    columns["partition"].append(partition)
    columns["offset"].append(offset)
    columns["key"].append(key)
    columns["value"].append(value)
    columns["timestamp"].append(ts)
    columns["kind"].append(kind)


def _source_arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("task", pa.int32()), ("system", pa.string()), ("stream", pa.string()),
                      ("partition", pa.int32()), ("offset", pa.int64()), ("key", pa.binary()),
                      ("value", pa.binary()), ("timestamp", pa.int64()), ("kind", pa.int8())])


# -- the sink --------------------------------------------------------------------------------

def sink_directory(plan: JobPlan) -> Path:
    return Path(plan.checkpoint) / "weir" / "_sink"


@dataclass
class StagedRows(WriterCommitMessage):
    """One task's staged rows of one batch."""

    path: str
    rows: int
    task: int
    attempt: int


class LogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, plan: JobPlan):
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> StagedRows:
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        staging = sink_directory(self.plan) / "staging"
        staging.mkdir(parents=True, exist_ok=True)
        path = staging / (f"b{batch}-p{ctx.partitionId():05d}-a{ctx.attemptNumber()}-"
                          f"{uuid.uuid4().hex[:8]}.arrow")
        rows = 0
        sink = io.BytesIO()
        writer = None
        for record_batch in iterator:
            if record_batch.num_rows == 0:
                continue
            if writer is None:
                writer = pa.ipc.new_stream(sink, record_batch.schema)
            writer.write_batch(record_batch)
            rows += record_batch.num_rows
        if writer is not None:
            writer.close()
        atomic_write(path, sink.getvalue(), temp=path.with_suffix(".tmp"))
        return StagedRows(str(path), rows, ctx.partitionId(), ctx.attemptNumber())

    def commit(self, messages: list[StagedRows | None], batchId: int) -> None:
        LogSink(self.plan).commit(batchId, [m for m in messages if m is not None])

    def abort(self, messages: list[StagedRows | None], batchId: int) -> None:
        for m in messages:
            if m is not None:
                Path(m.path).unlink(missing_ok=True)


class LogSink:
    """The driver's side of the sink (see the module docstring)."""

    def __init__(self, plan: JobPlan):
        self.plan = plan
        self.root = sink_directory(plan)
        self.batches = self.root / "batches"

    def done_path(self, batch: int) -> Path:
        return self.batches / f"{batch:020d}.done"

    def intent_path(self, batch: int) -> Path:
        return self.batches / f"{batch:020d}.intent.json"

    def written(self, batch: int) -> dict[str, int] | None:
        """Records written per output stream by ``batch`` (None: not written yet)."""
        try:
            return orjson.loads(self.done_path(batch).read_bytes()).get("streams", {})
        except FileNotFoundError:
            return None

    def commit(self, batch: int, messages: list[StagedRows]) -> dict[str, int]:
        self.batches.mkdir(parents=True, exist_ok=True)
        done = self.written(batch)
        if done is not None:
            self._drop([m.path for m in messages])
            return done
        intent = self._intent(batch, messages)
        counts = self._append(batch, intent)
        publish_bytes(self.done_path(batch), orjson.dumps(
            {"batch": batch, "streams": counts, "written_ms": time.time_ns() // 1_000_000}))
        self._drop(intent["staged"] + [m.path for m in messages])
        self.intent_path(batch).unlink(missing_ok=True)
        self._drop_orphans(batch)
        return counts

    def _intent(self, batch: int, messages: list[StagedRows]) -> dict[str, Any]:
        self.batches.mkdir(parents=True, exist_ok=True)
        path = self.intent_path(batch)
        try:
            return orjson.loads(path.read_bytes())
        except FileNotFoundError:
            pass
        staged = [m.path for m in sorted(messages, key=lambda m: (m.task, m.attempt, m.path))
                  if m.rows]
        starts: dict[str, int] = {}
        records = self._records(staged)
        upcoming = self._upcoming(sorted({(r[0], r[1], r[2]) for r in records}))
        for (system, stream, partition), offset in upcoming.items():
            starts[f"{system}/{stream}/{partition}"] = offset
        counts: dict[str, int] = {}
        for r in records:
            key = f"{r[0]}/{r[1]}/{r[2]}"
            counts[key] = counts.get(key, 0) + 1
        body = {"batch": batch, "staged": staged, "starts": starts, "counts": counts}
        publish_bytes(path, orjson.dumps(body))
        return orjson.loads(path.read_bytes())

    def _records(self, staged: list[str]) -> list[tuple]:
        import pyarrow as pa

        out = []
        for path in staged:
            try:
                data = Path(path).read_bytes()
            except FileNotFoundError:
                raise SparkJobError(f"the staged output {path} of a batch being written is gone; "
                                    f"the batch cannot be written exactly once") from None
            for rb in pa.ipc.open_stream(data):
                cols = rb.to_pydict()
                out.extend(zip(cols["system"], cols["stream"], cols["partition"], cols["key"],
                               cols["value"], cols["timestamp"]))
        return out

    def _upcoming(self, partitions: list[tuple[str, str, int]]) -> dict[tuple[str, str, int], int]:
        from weir.engine.model import SystemStreamPartition

        out = {}
        by_system: dict[str, list] = {}
        for p in partitions:
            by_system.setdefault(p[0], []).append(SystemStreamPartition(*p))
        for system, members in by_system.items():
            admin = _file_log_admin(self.plan, system)
            for ssp, md in admin.metadata(members).items():
                out[(ssp.system, ssp.stream, ssp.partition)] = md.upcoming
        return out

    def _append(self, batch: int, intent: Mapping[str, Any]) -> dict[str, int]:
        from weir.engine.model import SystemStream, make_outgoing

        records = self._records(intent["staged"])
        by_partition: dict[str, list[tuple]] = {}
        for r in records:
            by_partition.setdefault(f"{r[0]}/{r[1]}/{r[2]}", []).append(r)
        current = self._upcoming([parse_ssp_key(k) for k in by_partition])
        producers: dict[str, Any] = {}
        source = f"spark-sink-{batch}"
        try:
            for key, rows in sorted(by_partition.items()):
                system, stream, partition = parse_ssp_key(key)
                start = int(intent["starts"][key])
                have = current[(system, stream, partition)] - start
                if not 0 <= have <= len(rows):
                    raise SparkJobError(
                        f"output partition {system}.{stream}#{partition} moved from offset "
                        f"{start} to {start + have} while batch {batch} was being written, "
                        f"which holds {len(rows)} record(s) for it: another process writes to "
                        f"the job's output. The sink must be the only writer of its output "
                        f"partitions")
                if have == len(rows):
                    continue
                producer = producers.get(system)
                if producer is None:
                    producer = producers[system] = _registry(self.plan).producer(system)
                    producer.register(source)
                    producer.start()
                ss = SystemStream(system, stream)
                for r in rows[have:]:
                    producer.send(source, make_outgoing(ss, r[4], r[3], None, partition,
                                                                  r[5]))
            for producer in producers.values():
                producer.flush(source)
        finally:
            for producer in producers.values():
                producer.stop()
        counts: dict[str, int] = {}
        for key, rows in by_partition.items():
            system, stream, _ = parse_ssp_key(key)
            name = f"{system}.{stream}"
            counts[name] = counts.get(name, 0) + len(rows)
        return counts

    def _drop(self, paths: list[str]) -> None:
        for path in paths:
            Path(path).unlink(missing_ok=True)

    def _drop_orphans(self, batch: int) -> None:
        """Staged files of batches already written (failed attempts, earlier crashes)."""
        staging = self.root / "staging"
        if not staging.is_dir():
            return
        for entry in staging.iterdir():
            name = entry.name
            if name.startswith("b") and "-" in name:
                head = name[1:].split("-", 1)[0]
                if head.isdigit() and int(head) <= batch and self.written(int(head)) is not None:
                    entry.unlink(missing_ok=True)


class WeirLogDataSource(DataSource):
    """``weirlog``: a job's file-log inputs (streaming read) and the file log (streaming
    write); see the module docstring. Option ``plan``: the JobPlan's JSON."""

    @classmethod
    def name(cls) -> str:
        return "weirlog"

    def _plan(self) -> JobPlan:
        raw = self.options.get("plan")
        if not raw:
            raise SparkError("weirlog needs option('plan', <JobPlan JSON>); `weir run "
                             "--runner spark` builds it")
        return JobPlan.from_json(raw)

    def schema(self) -> str:
        return SOURCE_SCHEMA

    def streamReader(self, schema: Any) -> LogStreamReader:
        return LogStreamReader(self._plan())

    def streamWriter(self, schema: Any, overwrite: bool) -> LogStreamWriter:
        return LogStreamWriter(self._plan())
