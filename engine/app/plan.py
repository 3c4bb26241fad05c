"""The plan of an application, as data: its stages (:class:`StagePlan`), its streams
(:class:`StreamPlan`) and :class:`ExecutionPlan`, which creates the streams and gives the job
config of every stage or of one (``weir run --stage N``). :func:`~weir.engine.app.planner.
plan_application` makes it."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.stores.config import Config, ConfigError

from weir.engine.app.errors import ApplicationError
from weir.engine.app.settings import APP_ID, APP_NAME, APP_STAGE, APPLICATION_TASK, PLAN_ORIGIN
from weir.engine.config.job import (JOB_LOGGED_STORE_BASE_DIR, JOB_NAME,
                                    JOB_NON_LOGGED_STORE_BASE_DIR, TASK_CHECKPOINT_PATH,
                                    JobConfig)
from weir.engine.config.streams import TASK_INPUTS
from weir.engine.control.settings import JOB_DRAIN_PATH
from weir.engine.model import SystemStream
from weir.engine.systems.api import StreamSpec
from weir.engine.task import TASK_CLASS

__all__ = ["StreamPlan", "StagePlan", "ExecutionPlan", "dedupe"]

log = logging.getLogger("weir.app")


@dataclass(frozen=True)
class StreamPlan:
    """One stream of the application: ``kind`` is ``input``, ``intermediate`` or ``output``."""

    stream: SystemStream
    kind: str
    partitions: int
    producer_stage: int | None = None
    consumer_stages: tuple[int, ...] = ()
    upstream_tasks: int | None = None
    producer_op: str | None = None
    exists: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"stream": str(self.stream), "kind": self.kind, "partitions": self.partitions,
                "producerStage": self.producer_stage, "consumerStages": list(self.consumer_stages),
                "upstreamTasks": self.upstream_tasks, "producer": self.producer_op,
                "exists": self.exists}


@dataclass(frozen=True)
class StagePlan:
    """One stage: its input streams, the streams it writes, its operators, stores and
    number of tasks."""

    index: int
    inputs: tuple[SystemStream, ...]
    intermediate_outputs: tuple[SystemStream, ...]
    outputs: tuple[SystemStream, ...]
    ops: tuple[tuple[str, str], ...]
    stores: tuple[str, ...]
    tasks: int

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.index, "inputs": [str(s) for s in self.inputs],
                "intermediateOutputs": [str(s) for s in self.intermediate_outputs],
                "outputs": [str(s) for s in self.outputs],
                "operators": [{"id": i, "op": o} for i, o in self.ops],
                "stores": list(self.stores), "tasks": self.tasks}


@dataclass(frozen=True)
class ExecutionPlan:
    """The stages, streams and generated config of one application."""

    app_name: str
    app_id: str
    app_class: str
    config: Config
    stages: tuple[StagePlan, ...]
    streams: Mapping[SystemStream, StreamPlan]
    generated: Mapping[str, str] = field(repr=False)
    stage_stores: Mapping[int, Mapping[str, str]] = field(repr=False)
    registry: Any = field(repr=False, compare=False, default=None)

    @property
    def guarantee(self) -> str:
        """The processing guarantee the job config runs with (``task.processing.guarantee``:
        the user's, else the planner's choice, see :mod:`~weir.engine.app.planner`)."""
        from weir.engine.container.exactly_once import TASK_PROCESSING_GUARANTEE
        return TASK_PROCESSING_GUARANTEE.get(
            Config(dict(self.generated)).merged(self.config))

    def to_json(self) -> dict[str, Any]:
        return {"application": self.app_class, "name": self.app_name, "id": self.app_id,
                "guarantee": self.guarantee,
                "stages": [s.to_json() for s in self.stages],
                "streams": [p.to_json() for p in self.streams.values()]}

    def stage(self, index: int) -> StagePlan:
        for s in self.stages:
            if s.index == index:
                return s
        raise ConfigError(f"the application has stages {', '.join(str(s.index) for s in self.stages)}"
                          f", not {index}", key=APP_STAGE.name)

    def create_streams(self) -> list[SystemStream]:
        """Create the intermediate streams and the outputs declared with ``partitions``
        that do not exist yet; returns the streams created. An existing intermediate stream
        with another partition count is refused."""
        created = []
        for plan in self.streams.values():
            if plan.kind == "input" or (plan.kind == "output" and plan.exists):
                continue
            admin = self.registry.admin(plan.stream.system)
            try:
                made = admin.create_stream(StreamSpec(plan.stream.stream, plan.partitions))
            except Exception as exc:  # noqa: BLE001 - a partition count mismatch, named
                raise ApplicationError(
                    f"cannot create {plan.kind} stream {plan.stream} with {plan.partitions} "
                    f"partitions: {exc}; delete the stream (`weir log delete`) if its data is "
                    f"not needed, or plan with its partition count "
                    f"(partition_by(..., partitions=N) / job.intermediate.stream.partitions)"
                ) from exc
            if made:
                log.info("created %s stream %s with %d partitions", plan.kind, plan.stream,
                         plan.partitions)
                created.append(plan.stream)
        return created

    def job_config(self, stage: int | None = None) -> Config:
        """The config of the job that runs every stage (``stage=None``) or only ``stage``."""
        user = self.config
        if stage is None or stage < 0:
            inputs = dedupe(s for st in self.stages for s in st.inputs)
            stores: dict[str, str] = {}
            for index in sorted(self.stage_stores):
                stores.update(self.stage_stores[index])
            forced = {TASK_INPUTS.name: ",".join(str(s) for s in inputs)}
        else:
            plan = self.stage(stage)
            inputs = list(plan.inputs)
            stores = dict(self.stage_stores.get(stage, {}))
            job = JobConfig.from_config(user)
            base_logged = job.logged_store_base_dir / f"stage-{stage}"
            base_plain = job.non_logged_store_base_dir / f"stage-{stage}"
            forced = {
                TASK_INPUTS.name: ",".join(str(s) for s in inputs),
                APP_STAGE.name: str(stage),
                JOB_NAME.name: f"{job.name}-stage-{stage}",
                APP_NAME.name: self.app_name, APP_ID.name: self.app_id,
                TASK_CHECKPOINT_PATH.name: str(job.checkpoint_dir / f"stage-{stage}"),
                JOB_LOGGED_STORE_BASE_DIR.name: str(base_logged),
                JOB_NON_LOGGED_STORE_BASE_DIR.name: str(base_plain),
                JOB_DRAIN_PATH.name: str(_drain_path(user)),
            }
        defaults = {**self.generated, **stores}
        merged = Config(defaults, origins={k: PLAN_ORIGIN for k in defaults}).merged(user)
        return merged.merged({TASK_CLASS.name: APPLICATION_TASK, **forced}, origin=PLAN_ORIGIN)


def _drain_path(config: Config) -> Path:
    raw = JOB_DRAIN_PATH.get(config)
    if raw:
        return Path(raw)
    return JobConfig.from_config(config).checkpoint_dir / "drain-request.json"


def dedupe(items: Iterable[Any]) -> list[Any]:
    """``items`` without repeats, in first-seen order."""
    return list(dict.fromkeys(items))
