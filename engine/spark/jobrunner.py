"""Jobs on Spark: ``weir run job.properties --runner spark``.

The same job config and task classes as the embedded runner, run as one Spark Structured
Streaming query::

    spark.readStream.format("weirlog")        one input partition per Weir task (jobplan, logsource)
         .mapInArrow(JobTaskRunner)           each task: run loop, stores, window (jobtask)
         .writeStream.format("weirlog")       outputs appended once per batch id (logsource)
         .option("checkpointLocation", <task.checkpoint.path>/spark)

1. The job is checked exactly as ``weir run`` checks it (every setting parsed once,
   ``task.class`` imported, every directory checked), its job model built from its inputs'
   partition counts, and the job lock taken: one run of a job at a time, whatever the runner.
2. A Spark session starts with the job config's ``spark.*`` keys (``spark.master`` defaults
   to ``local[*]``); Java and PySpark are checked first.
3. The query runs until every task has finished its inputs (bounded inputs that ended), every
   task asked to stop, SIGINT/SIGTERM, ``weir drain`` (the run's id is in its job lock; the
   source admits nothing more and the query stops once the batch in flight is committed), or
   -- with ``--trigger available-now`` -- everything available when it started is processed.

State: ``<checkpoint>/weir/<job>/<task index>/`` (versions of every store of the task, its input
positions, its last window); Spark's offset log is the query's input checkpoint. Outputs are
exactly once per batch: a replayed batch emits the outputs recorded with its version, and the
sink writes each batch once. Applications (``app.class``) run through
:mod:`weir.engine.spark.apprunner`. Not yet on Spark: low-level tasks that need control
messages (watermark or drain listeners, intermediate streams): refused with
:class:`ControlListenerOnSparkError`.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from weir.stores.config import Config
from weir.stores.errors import ConfigError, WeirError

from weir.engine.config.job import JobConfig, load_all_declarations, warn_unknown_keys
from weir.engine.config.streams import all_input_streams
from weir.engine.control.drain import RUN_RECORD_KEY, RunTarget
from weir.engine.container.preflight import check_job
from weir.engine.container.progress import ContainerResult
from weir.engine.container.runner import ContainerFailure, ExitCode, JobResult
from weir.engine.jobmodel.model import build_job_model
from weir.engine.model import SystemStream
from weir.engine.spark.durable import OperatorCheckpoint
from weir.engine.spark.jobplan import JobPlan, TaskPlan
from weir.engine.spark.settings import (SPARK_MASTER, SPARK_WEIR_MAX_RECORDS_PER_BATCH,
                                        SPARK_WEIR_TRIGGER_INTERVAL_MS, ProviderSettings)
from weir.engine.spark.statefile import VersionKind
from weir.engine.systems.registry import SystemRegistry
from weir.engine.task import load_task_factory

__all__ = ["Trigger", "SparkJob", "plan_job", "run_on_spark", "spark_checkpoint",
           "warn_unknown_config_keys", "ControlListenerOnSparkError", "SPARK_RUN_ROLE",
           "run_target"]

log = logging.getLogger("weir.spark.runner")
_POLL_S = 0.5
_WEIR_ERROR = re.compile(r"\b(\w+(?:Error|Exception)): ")
SPARK_RUN_ROLE = "weir run --runner spark"
"""The role a Spark run records in the job lock it holds."""
_LISTENERS = ("on_watermark", "on_drain", "on_stream_watermark", "on_stream_end",
              "on_stream_drain", "on_control_tick")


class ControlListenerOnSparkError(ConfigError):
    """A low-level task that listens for control messages, refused by ``weir run --runner
    spark``: names the task class and its listener methods, and what to do."""

    def __init__(self, task_class: str, listeners: list[str], *, origin: str | None = None):
        self.task_class, self.listeners = task_class, tuple(listeners)
        super().__init__(
            f"task {task_class} listens for control messages ({', '.join(listeners)}), which "
            f"jobs on Spark do not deliver: a low-level task's watermarks and drains would "
            f"need the in-band reconciliation of intermediate streams that only an "
            f"application's stages run on Spark. Write the pipeline as an application "
            f"(app.class: its windows, joins and partition_by get watermarks, end-of-stream "
            f"and idleness through Spark's shuffle) or run this job embedded (weir run "
            f"without --runner spark); docs/SPARK.md, \"Jobs on Spark\"",
            key="task.class", origin=origin)


class Trigger(Enum):
    """When the query's micro-batches run."""

    CONTINUOUS = "continuous"
    """One after the other (or every ``spark.weir.trigger.interval.ms``) until stopped or
    every task finished."""
    AVAILABLE_NOW = "available-now"
    """Process what the inputs hold when the query starts, then stop (Spark's
    ``Trigger.AvailableNow``)."""


def spark_checkpoint(job: JobConfig) -> Path:
    """The query's checkpoint location: ``<task.checkpoint.path>/spark``."""
    return Path(job.checkpoint_dir) / "spark"


@dataclass(frozen=True)
class SparkJob:
    """A job checked and planned for Spark."""

    config: Config
    job: JobConfig
    settings: Any
    plan: JobPlan
    provider: ProviderSettings


def _refuse_unsupported(config: Config) -> None:
    from weir.engine.app.planner import is_application
    from weir.engine.control.settings import is_intermediate
    from weir.engine.control.task_control import ControlHooks

    if is_application(config):
        raise ConfigError("names an application: plan it with weir.engine.spark.apprunner "
                          "(weir run --runner spark does)", key="app.class")
    task = load_task_factory(config)()
    hooks = ControlHooks(task)
    if hooks.any:
        listeners = [name for name, slot in zip(_LISTENERS, ("watermark", "drain",
                     "stream_watermark", "stream_end", "stream_drain", "tick"))
                     if getattr(hooks, slot) is not None]
        raise ControlListenerOnSparkError(config.get_str("task.class") or type(task).__name__,
                                          listeners, origin=config.origin("task.class"))
    for ss in all_input_streams(config):
        if is_intermediate(config, ss):
            raise ConfigError(f"input {ss} is an intermediate stream; jobs on Spark do not "
                              f"read intermediate streams yet: run the job embedded",
                              key="task.inputs", origin=config.origin("task.inputs"))


def warn_unknown_config_keys(config: Config) -> None:
    """Warn about keys no module declares, as ``weir run`` does (a module that fails to import
    only costs the check of its own keys)."""
    try:
        load_all_declarations()
    except Exception as exc:  # noqa: BLE001 - only for warnings about unknown keys
        log.warning("checking config keys against the declarations of the modules that "
                    "import: %s", exc)
    warn_unknown_keys(config, log, load_declarations=False)


def plan_job(config: Config, *, registry: SystemRegistry | None = None,
             config_dir: str | None = None) -> SparkJob:
    """Check the job (as ``weir run`` does, creating nothing) and plan it for Spark.
    ``config_dir``: the job config's directory (task modules beside it are imported from
    there, in the driver and in Spark's Python workers)."""
    warn_unknown_config_keys(config)
    job = JobConfig.from_config(config)
    _refuse_unsupported(config)
    registry = registry if registry is not None else SystemRegistry(config)
    settings = check_job(config, job, registry)
    from weir.engine.systems.filelog import FileLogAdmin

    for ss in all_input_streams(config):
        if not isinstance(registry.admin(ss.system), FileLogAdmin):
            raise ConfigError(f"input {ss} is on system '{ss.system}', which is not a file log; "
                              f"jobs on Spark read the file log",
                              key=f"systems.{ss.system}.factory")
    model = build_job_model(config, registry.partition_counts(all_input_streams(config)))
    tasks = sorted(model.tasks().values(), key=lambda t: t.changelog_partition)
    plan_tasks = tuple(TaskPlan(i, str(t.task_name),
                                tuple((s.system, s.stream, s.partition) for s in t.sorted_ssps()))
                       for i, t in enumerate(tasks))
    chooser = settings.chooser
    config_dir = str(Path(config_dir).resolve()) if config_dir else ""
    plan = JobPlan(
        job=job.name, operator=_operator_name(job), checkpoint=str(spark_checkpoint(job)),
        config=dict(config), origins=dict(config.origins), config_dir=config_dir,
        tasks=plan_tasks,
        bootstrap=frozenset((ss.system, ss.stream) for ss in chooser.bootstrap_streams),
        priorities={(ss.system, ss.stream): p for ss, p in chooser.priorities.items()},
        max_records=SPARK_WEIR_MAX_RECORDS_PER_BATCH.get(config),
        drain_path=str(settings.control.drain_path or ""))
    _check_recorded_tasks(plan)
    return SparkJob(config, job, settings, plan, ProviderSettings.from_mapping(config))


def _operator_name(job: JobConfig) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{job.name}-{job.id}")
    return name.lstrip("._") or "job"


def _check_recorded_tasks(plan: JobPlan) -> None:
    meta = OperatorCheckpoint(plan.checkpoint, plan.operator).read_meta()
    if meta is None:
        return
    recorded = list((meta.extra or {}).get("tasks") or [])
    wanted = [t.name for t in plan.tasks]
    if recorded and recorded != wanted:
        raise ConfigError(
            f"job '{plan.job}' keeps the state of tasks {recorded} on Spark "
            f"({OperatorCheckpoint(plan.checkpoint, plan.operator).meta_path}), but its config "
            f"now makes tasks {wanted} (the grouper or the input partition counts changed). A "
            f"task's stores hold the keys of its own input partitions, so the state cannot "
            f"follow; restore the old settings, or delete {plan.checkpoint} (state and input "
            f"positions) to start the job over on Spark", key="job.systemstreampartition.grouper.factory")


def _spark_conf(config: Config) -> dict[str, str]:
    conf = {k: v for k, v in config.items()
            if k.startswith("spark.") and not k.startswith("spark.weir.")}
    conf.setdefault(SPARK_MASTER.name, SPARK_MASTER.default)
    conf.setdefault("spark.sql.shuffle.partitions", "8")
    conf.setdefault("spark.ui.enabled", "false")
    for key in ("spark.weir.state.provider", "spark.weir.state.snapshot.interval",
                "spark.weir.state.min.versions.to.retain", "spark.weir.state.local.dir"):
        if key in config:
            conf[key] = config[key]
    return conf


def run_on_spark(config: Config, *, trigger: Trigger = Trigger.CONTINUOUS,
                 config_dir: str | None = None) -> JobResult:
    """Run the job of ``config`` on Spark (see the module docstring; an application, ``app.class``,
    runs through :func:`weir.engine.spark.apprunner.run_app_on_spark`). ConfigError and
    StreamNotFoundError from checking the job propagate (nothing ran); failures while running
    are in the result."""
    from weir.engine.app.planner import is_application
    from weir.engine.coordinator.run_lock import hold_stopped_job

    if is_application(config):
        from weir.engine.spark.apprunner import run_app_on_spark
        return run_app_on_spark(config, trigger=trigger, config_dir=config_dir)
    started = time.perf_counter()
    prepared = plan_job(config, config_dir=config_dir)
    job = prepared.job
    # One run of a job at a time, embedded or on Spark, whatever directories either names.
    run_id = uuid.uuid4().hex   # names this run in its job lock; `weir drain` addresses it
    with hold_stopped_job(config, SystemRegistry(config), SPARK_RUN_ROLE,
                          job.checkpoint_dir, job.name,
                          details={RUN_RECORD_KEY: run_id}) as lock:
        return _run(prepared, trigger, started, run_target(lock, run_id))


def run_target(lock: Any, run_id: str) -> RunTarget:
    """This run as a drain request names it (its job lock and id)."""
    holder = lock.holder
    return RunTarget(run_id, str(lock.path.absolute()), holder.pid, holder.host, holder.since,
                     str(holder.details.get("job", "")))


def _run(prepared: SparkJob, trigger: Trigger, started: float, run: RunTarget) -> JobResult:
    from pyspark.sql.types import StructType

    from weir.engine.spark.jobtask import OUTPUT_DDL, JobTaskRunner, job_store_specs
    from weir.engine.spark.operator import METRICS_COLUMN, METRICS_DDL

    plan = prepared.plan

    def build(spark: Any) -> Any:
        specs = job_store_specs(plan, prepared.provider.provider)
        schema = StructType.fromDDL(OUTPUT_DDL).add(METRICS_COLUMN,
                                                    StructType.fromDDL(METRICS_DDL))
        runner = JobTaskRunner(plan, prepared.settings, prepared.provider, specs, schema,
                               spark.conf.get("spark.sql.session.timeZone", None))
        source = spark.readStream.format("weirlog").option("plan", plan.to_json()).load()
        return observed_rows(source.mapInArrow(runner, schema), plan.operator)

    return execute(prepared.config, prepared.job, prepared.settings, [plan], plan, build,
                   trigger, started, what=f"{len(plan.tasks)} task(s)", run=run)


def observed_rows(mapped: Any, operator: str) -> Any:
    """The rows of a Weir ``mapInArrow`` without its metrics rows, whose figures become the
    query's observed metrics ``weir.<operator>``."""
    from pyspark.sql import functions as F

    from weir.engine.spark.operator import _METRIC_FIELDS, METRICS_COLUMN

    observed = mapped.observe(
        f"weir.{operator}",
        *[(F.max if n.endswith("_ms") and n != "task_ms" else F.sum)(
            F.col(f"{METRICS_COLUMN}.{n}")).alias(n) for n, _ in _METRIC_FIELDS])
    return observed.where(F.col(METRICS_COLUMN).isNull()).drop(METRICS_COLUMN)


def execute(config: Config, job: JobConfig, settings: Any, plans: list[JobPlan],
            sink_plan: JobPlan, build: Any, trigger: Trigger, started: float, *, what: str,
            run: RunTarget, inputs_of: Any = None, outputs_of: Any = None) -> JobResult:
    """Start the query ``build(spark)`` makes (its rows go to the ``weirlog`` sink of
    ``sink_plan``), watch it until every task of ``plans`` finished, a signal, a drain
    request for ``run``, or the trigger's end, and sum up. ``inputs_of``/``outputs_of``:
    which streams the summary counts (default all).

    A drain (``weir drain``): the ``weirlog`` source sees the request in the drain file and
    admits nothing more; the driver waits until the batch in flight is committed (Spark's
    offset log has no batch its commit log lacks, no trigger active), stops the query and
    moves the request aside as ``<drain file>.completed-<id>``. Every stage's state is
    published and committed up to that batch; the next run continues from there."""
    from weir.engine.control.drain import DrainMonitor, settle_drain_request

    drain_path = Path(sink_plan.drain_path) if sink_plan.drain_path else None
    # A request for a run that ended is moved aside, and said so: never a drain at once.
    settle_drain_request(drain_path, [Path(job.checkpoint_dir)], run)
    monitor = DrainMonitor(drain_path, settings.control.drain_poll_ms) if drain_path else None
    from weir.engine.metrics import MetricsReporter
    from weir.engine.spark.logsource import WeirLogDataSource
    from weir.engine.spark.metrics import MetricsListener
    from weir.engine.spark.session import spark_session

    plan = sink_plan
    spark = spark_session(_spark_conf(config), app_name=f"weir-{job.name}",
                          python_path=(plan.config_dir,) if plan.config_dir else ())
    spark.dataSource.register(WeirLogDataSource)
    reporter = MetricsReporter.from_settings(settings.metrics, f"spark-{job.name}")
    listener = MetricsListener(reporter, spark=spark)
    spark.streams.addListener(listener)
    try:
        out = build(spark)
    except BaseException:
        listener.remove()
        spark.stop()
        raise
    writer = (out.writeStream.format("weirlog").option("plan", plan.to_json())
              .option("checkpointLocation", plan.checkpoint).queryName(f"weir-{job.name}"))
    interval = SPARK_WEIR_TRIGGER_INTERVAL_MS.get(config)
    if trigger is Trigger.AVAILABLE_NOW:
        writer = writer.trigger(availableNow=True)
    elif interval > 0:
        writer = writer.trigger(processingTime=f"{interval} milliseconds")
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        stop.set()
        log.warning("received %s: stopping the query after the batch in flight",
                    signal.Signals(signum).name)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, on_signal)
    failure: ContainerFailure | None = None
    reason = "stopped"
    first_batch = _last_committed(plan) + 1
    draining: Any = None

    def state_of(batch: int) -> str:
        return _tasks_state(plans, batch)

    try:
        query = writer.start()
        log.info("job '%s' runs on Spark (%s): %s, checkpoint %s", job.name,
                 spark.sparkContext.master, what, plan.checkpoint)
        seen = -1
        while query.isActive:
            if stop.is_set():
                query.stop()
                reason = f"stopped by {signal.Signals(received[0]).name}"
                break
            if draining is None and monitor is not None:
                draining = monitor.current()
                if draining is not None:
                    log.info("drain %s requested: the source admits no new input; the query "
                             "stops once the batch in flight is committed", draining.run_id)
            if draining is not None and _between_batches(query, plan):
                query.stop()
                reason = f"drained (request {draining.run_id[:8]})"
                break
            query.awaitTermination(_POLL_S)
            progress = query.lastProgress
            batch = progress["batchId"] if progress else -1
            if batch != seen and batch >= 0:
                seen = batch
                state = state_of(batch)
                if state == "complete":
                    reason = "ended (end-of-stream)"
                    query.stop()
                elif state == "voted":
                    reason = "ended (shutdown requested)"
                    query.stop()
        error = query.exception()
        if error is not None:
            failure = _failure(error)
        elif reason == "stopped":
            reason = ("ended (available now)" if trigger is Trigger.AVAILABLE_NOW
                      else "stopped")
            if state_of(seen) == "complete":
                reason = "ended (end-of-stream)"
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        try:
            listener.remove()
        finally:
            spark.stop()
    if draining is not None and reason.startswith("drained") and failure is None:
        _complete_drain(drain_path, draining)
    inputs, outputs = _counts(plans, range(first_batch, _last_committed(plan) + 1))
    if inputs_of is not None:
        inputs = {ss: n for ss, n in inputs.items() if inputs_of(ss)}
    if outputs_of is not None:
        outputs = {ss: n for ss, n in outputs.items() if outputs_of(ss)}
    seconds = time.perf_counter() - started
    result = ContainerResult("spark", reason, seconds, {}, inputs, outputs)
    if failure is not None:
        code = ExitCode.CONFIG if failure.error_type == "ConfigError" else ExitCode.FAILED
        return JobResult(job.name, code, "failed on Spark", seconds, (result,), (failure,))
    code = ExitCode.INTERRUPTED if received and received[0] == signal.SIGINT else ExitCode.OK
    return JobResult(job.name, code, reason, seconds, (result,))


def _tasks_state(plans: list[JobPlan], batch: int) -> str:
    """``complete`` when every task (of every plan) finished at ``batch``, ``voted`` when every
    task finished or voted to stop (or one asked its container to stop), else ``running``."""
    if batch < 0:
        return "running"
    complete = voted = 0
    tasks = [(OperatorCheckpoint(p.checkpoint, p.operator), t) for p in plans for t in p.tasks]
    for checkpoint, task in tasks:
        files = checkpoint.partition(task.index)
        try:
            meta = files.read(batch, VersionKind.CHANGELOG, sections=[]).meta
        except FileNotFoundError:
            return "running"
        if meta.get("stop_all"):
            return "voted"   # a container-wide stop request stops the job
        if meta.get("complete"):
            complete += 1
        elif meta.get("voted"):
            voted += 1
    if complete == len(tasks):
        return "complete"
    if complete + voted == len(tasks):
        return "voted"
    return "running"


def _between_batches(query: Any, plan: JobPlan) -> bool:
    """No batch in flight: Spark's offset log holds no batch its commit log lacks, and no
    trigger is active."""
    committed = _last_committed(plan)
    offsets = Path(plan.checkpoint) / "offsets"
    planned = max((int(p.name) for p in offsets.iterdir() if p.name.isdigit()), default=-1) \
        if offsets.is_dir() else -1
    return planned == committed and not query.status.get("isTriggerActive", True)


def _complete_drain(path: Path | None, request: Any) -> None:
    """Move the drain request aside as completed (``weir drain --wait`` looks for it; the
    next run starts normally)."""
    from weir.stores.filesafety import fsync_dir

    if path is None or not path.exists():
        return
    target = path.with_name(f"{path.name}.completed-{request.uuid[:8]}")
    os.replace(path, target)
    fsync_dir(path.parent)
    log.info("drain %s completed: every batch admitted is committed; request moved to %s",
             request.run_id, target)


def _last_committed(plan: JobPlan) -> int:
    """The newest batch id in Spark's commit log of the query (-1: none)."""
    commits = Path(plan.checkpoint) / "commits"
    if not commits.is_dir():
        return -1
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    return max(ids, default=-1)


def _counts(plans: list[JobPlan], batches: range) -> tuple[dict[SystemStream, int],
                                                         dict[SystemStream, int]]:
    """Messages processed per input stream and sent per output stream by ``batches``."""
    inputs: dict[SystemStream, int] = {}
    outputs: dict[SystemStream, int] = {}
    tasks = [(OperatorCheckpoint(p.checkpoint, p.operator), t) for p in plans for t in p.tasks]
    for batch in batches:
        for checkpoint, task in tasks:
            try:
                meta = checkpoint.partition(task.index).read(
                    batch, VersionKind.CHANGELOG, sections=[]).meta
            except (FileNotFoundError, WeirError):
                continue
            for target, counts in ((inputs, meta.get("in") or {}),
                                   (outputs, meta.get("out") or {})):
                for name, n in counts.items():
                    system, stream = name.split(".", 1)
                    ss = SystemStream(system, stream)
                    target[ss] = target.get(ss, 0) + int(n)
    return inputs, outputs


def _failure(error: Any) -> ContainerFailure:
    """The query's exception as a failure, led by the Weir error Spark carried, if any."""
    text = str(getattr(error, "desc", None) or error)
    for name in _WEIR_ERROR.findall(text):
        if name in _KNOWN:
            start = text.find(f"{name}: ")
            message = text[start + len(name) + 2:]
            cut = message.find("\n\tat ")
            return ContainerFailure("spark", name, message[:cut if cut > 0 else 4000].strip())
    return ContainerFailure("spark", type(error).__name__, text[:4000])


_KNOWN = {"StateFileDamagedError", "StateHistoryError", "PartitionCountChangedError",
          "StateOwnershipError", "StatePartitioningError", "InputPositionError", "TaskError",
          "ConfigError", "CorruptRecordError", "SparkError", "SparkJobError",
          "DeserializationError", "OffsetBeyondEndError", "OffsetOutOfRangeError"}
