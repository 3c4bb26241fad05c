"""Applications on Spark: ``weir run app.properties --runner spark`` (a config with ``app.class``).

1. The application is planned as ``weir run`` plans it (:mod:`weir.engine.app.planner`: the
   same stages, intermediate streams, partition counts, stores and generated config), then
   onto one Spark query (:mod:`weir.engine.spark.appplan`); ``weir plan --runner spark``
   shows that plan and creates nothing.
2. Running creates the intermediate and declared output streams as the embedded runner does
   (the intermediate streams stay empty on Spark: their records travel through Spark's
   shuffle; they are created so that the plan and ``weir run`` embedded see one application),
   checks the job, takes the job lock, and runs the query: source -> stage 0 -> shuffle ->
   stage 1 -> ... -> sink (each stage an :class:`~weir.engine.spark.appstage.AppStageRunner`),
   watched by the same driver loop as jobs (:func:`weir.engine.spark.jobrunner.execute`).
3. The query ends when every task of every stage has finished (every source ended and its
   end-of-stream reached the last stage), on SIGINT/SIGTERM, on ``weir drain`` (the source
   admits nothing more, the batch in flight is committed through every stage), or with
   ``--trigger available-now`` once what the sources held at the start is processed.

State: ``<task.checkpoint.path>/spark/weir/<job>-<id>-stage-<k>/<task>/``.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from weir.stores.config import Config
from weir.stores.errors import ConfigError

from weir.engine.config.job import JobConfig
from weir.engine.container.runner import JobResult
from weir.engine.jobmodel.model import build_job_model
from weir.engine.spark.appplan import SparkApplication, describe_stages, plan_stages
from weir.engine.spark.jobplan import TaskPlan
from weir.engine.spark.settings import SPARK_WEIR_MAX_RECORDS_PER_BATCH, ProviderSettings

__all__ = ["SparkApp", "plan_app", "run_app_on_spark"]

log = logging.getLogger("weir.spark.app")


@dataclass(frozen=True)
class SparkApp:
    """An application checked and planned for Spark."""

    app: SparkApplication
    job: JobConfig
    settings: Any
    """The one job's JobSettings (None when only planned)."""
    provider: ProviderSettings


def plan_app(config: Config, *, config_dir: str | None = None, registry: Any = None,
             check: bool = False) -> SparkApp:
    """Plan the application of ``config`` for Spark (creating nothing). ``check``: also check
    the job as ``weir run`` does (its intermediate streams must exist then)."""
    from pathlib import Path

    from weir.engine.app.planner import plan_application
    from weir.engine.config.streams import TASK_INPUTS
    from weir.engine.container.preflight import check_job
    from weir.engine.spark.jobrunner import (_operator_name, spark_checkpoint,
                                            warn_unknown_config_keys)
    from weir.engine.systems.filelog import FileLogAdmin
    from weir.engine.systems.registry import SystemRegistry

    warn_unknown_config_keys(config)
    registry = registry if registry is not None else SystemRegistry(config)
    execution = plan_application(config, registry)
    one_job = execution.job_config()
    job = JobConfig.from_config(one_job)
    for sp in execution.streams.values():
        if not isinstance(registry.admin(sp.stream.system), FileLogAdmin):
            raise ConfigError(f"{sp.kind} stream {sp.stream} is on system "
                              f"'{sp.stream.system}', which is not a file log; applications "
                              f"on Spark read and write the file log",
                              key=f"systems.{sp.stream.system}.factory")
    settings = None
    job_registry = SystemRegistry(one_job)
    if check:
        settings = check_job(one_job, job, job_registry)
    sources = [ss for ss, sp in execution.streams.items() if sp.kind == "input"]
    stage0 = one_job.merged({TASK_INPUTS.name: ",".join(str(s) for s in sources)},
                            origin="spark plan")
    model = build_job_model(stage0, registry.partition_counts(sources))
    tasks = sorted(model.tasks().values(), key=lambda t: t.changelog_partition)
    source_tasks = tuple(
        TaskPlan(i, str(t.task_name),
                 tuple((s.system, s.stream, s.partition) for s in t.sorted_ssps()))
        for i, t in enumerate(tasks))
    bootstrap: frozenset = frozenset()
    priorities: dict = {}
    if settings is not None:
        chooser = settings.chooser
        bootstrap = frozenset((ss.system, ss.stream) for ss in chooser.bootstrap_streams)
        priorities = {(ss.system, ss.stream): p for ss, p in chooser.priorities.items()}
    app = plan_stages(execution, one_job, operator=_operator_name(job),
                      checkpoint=str(spark_checkpoint(job)),
                      config_dir=str(Path(config_dir).resolve()) if config_dir else "",
                      source_tasks=source_tasks, bootstrap=bootstrap, priorities=priorities,
                      max_records=SPARK_WEIR_MAX_RECORDS_PER_BATCH.get(one_job),
                      drain_path=str(settings.control.drain_path or "") if settings else "")
    return SparkApp(app, job, settings, ProviderSettings.from_mapping(one_job))


def run_app_on_spark(config: Config, *, trigger: Any, config_dir: str | None = None) -> JobResult:
    """Run the application of ``config`` on Spark (see the module docstring)."""
    from weir.engine.app.planner import plan_application
    from weir.engine.coordinator.run_lock import hold_stopped_job
    from weir.engine.control.drain import RUN_RECORD_KEY
    from weir.engine.spark.jobrunner import SPARK_RUN_ROLE, _check_recorded_tasks, run_target
    from weir.engine.systems.registry import SystemRegistry

    started = time.perf_counter()
    registry = SystemRegistry(config)
    plan_app(config, config_dir=config_dir, registry=registry)   # refusals before creating
    plan_application(config, registry).create_streams()
    prepared = plan_app(config, config_dir=config_dir, registry=registry, check=True)
    for stage in prepared.app.stages:
        _check_recorded_tasks(stage.plan)
    job = prepared.job
    run_id = uuid.uuid4().hex   # names this run in its job lock; `weir drain` addresses it
    with hold_stopped_job(prepared.app.config, SystemRegistry(prepared.app.config),
                          SPARK_RUN_ROLE, job.checkpoint_dir, job.name,
                          details={RUN_RECORD_KEY: run_id}) as lock:
        return _run(prepared, trigger, started, run_target(lock, run_id))


def _run(prepared: SparkApp, trigger: Any, started: float, run: Any) -> JobResult:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from weir.engine.spark.appplan import APP_OUTPUT_DDL, ROUTE_COLUMN
    from weir.engine.spark.appstage import AppStageRunner
    from weir.engine.spark.jobrunner import execute, observed_rows
    from weir.engine.spark.jobtask import job_store_specs
    from weir.engine.spark.operator import METRICS_COLUMN, METRICS_DDL

    app = prepared.app
    execution = app.execution
    counts = {str(ss): sp.partitions for ss, sp in execution.streams.items()
              if sp.kind == "intermediate"}
    sources = {ss for ss, sp in execution.streams.items() if sp.kind == "input"}
    outputs = {ss for ss, sp in execution.streams.items() if sp.kind == "output"}

    def build(spark: Any) -> Any:
        schema = StructType.fromDDL(APP_OUTPUT_DDL).add(METRICS_COLUMN,
                                                        StructType.fromDDL(METRICS_DDL))
        timezone = spark.conf.get("spark.sql.session.timeZone", None)
        rows = spark.readStream.format("weirlog").option("plan", app.source.plan.to_json()).load()
        for k, stage in enumerate(app.stages):
            following = app.stages[k + 1] if k + 1 < len(app.stages) else None
            specs = [s for s in job_store_specs(stage.plan, prepared.provider.provider)
                     if s.name in stage.stores]
            runner = AppStageRunner(
                stage.plan, prepared.settings, prepared.provider, specs, schema, timezone,
                reads=None if stage.reads_sources else app.stage_inputs(k),
                next_reads=None if following is None else app.stage_inputs(k + 1),
                next_partitions=following.partitions if following is not None else 1,
                partition_counts=counts)
            if not stage.reads_sources:
                rows = rows.repartition(stage.partitions, F.col(ROUTE_COLUMN))
            rows = observed_rows(rows.mapInArrow(runner, schema), stage.plan.operator)
        return rows.drop(ROUTE_COLUMN, "origin", "seq")

    for line in describe_stages(app):
        log.info("%s", line)
    plans = [st.plan for st in app.stages]
    return execute(app.config, prepared.job, prepared.settings, plans, app.source.plan, build,
                   trigger, started,
                   what=f"application of {len(app.stages)} stage(s), "
                        f"{sum(len(p.tasks) for p in plans)} task(s)",
                   run=run, inputs_of=lambda ss: ss in sources,
                   outputs_of=lambda ss: ss in outputs)
