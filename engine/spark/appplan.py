"""An application (``app.class``) planned onto one Spark streaming query.

The embedded planner (:func:`~weir.engine.app.planner.plan_application`) cuts the
application into stages joined by intermediate streams (one per ``partition_by``). On Spark
the same stages become one query::

    readStream weirlog            the source streams, one Spark partition per stage-0 task
      .mapInArrow(stage 0)         ApplicationTask(app.stage=0) per task (weir.engine.spark.appstage)
      .repartition(N1, route)      the shuffle of partition_by: row -> its Weir partition
      .mapInArrow(stage 1)         ApplicationTask(app.stage=1): task p reads partition p
      ...
      .writeStream weirlog          the application's outputs, once per batch id

* **Shuffles.** A ``partition_by`` sends each element to ``crc32(key bytes) % N`` (the
  embedded collector computes it; the record carries it). Spark's ``repartition(N, col)``
  places a row at ``pmod(murmur3(col), N)``, so each row carries a *route*: an int whose
  Spark hash lands on exactly its Weir partition (:func:`route_keys`, computed once with
  :mod:`~weir.engine.spark.sparkhash`); Spark partition ``p`` of stage ``k`` is Weir task
  ``Partition p`` of that stage, and the stage checks it (``StatePartitioningError``).
* **Stages.** Each stage keeps its stores in the Weir state provider under the operator
  ``<job>-<id>-stage-<k>``: one state partition per task, one version per micro-batch,
  retries, replays and replicas as jobs on Spark (:mod:`~weir.engine.spark.jobtask`).
* **Event time.** Watermarks, end-of-stream and idleness travel in-band, through the shuffle,
  exactly as through an intermediate stream embedded: each upstream task's control messages
  keep their order among its records (rows are ordered by upstream task and sequence before a
  stage reads them) and each downstream task reconciles them over the upstream tasks
  (docs/SPARK.md, "Applications on Spark", says why not Spark's global watermark).

Supported shapes: the stages that read source streams run together as the query's first
stage (as in the embedded one-job mode: task ``Partition N`` reads partition N of each);
every other stage reads only intermediate streams of one partition count, written by earlier
stages. Others are refused
with :class:`UnsupportedOnSparkError` naming the stage and what to do.

Example::

    app = plan_app_on_spark(load_config("app.properties"), config_dir="examples/pageviews")
    for line in app.describe():
        print(line)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from weir.stores.config import Config
from weir.stores.errors import ConfigError

from weir.engine.app.planner import APP_CLASS, APP_STAGE, ExecutionPlan, StagePlan
from weir.engine.model import SystemStream
from weir.engine.spark.jobplan import JobPlan, TaskPlan

__all__ = ["UnsupportedOnSparkError", "SparkStage", "SparkApplication", "route_keys",
           "plan_stages", "stage_operator", "ROUTE_COLUMN", "APP_OUTPUT_DDL"]

ROUTE_COLUMN = "route"
APP_OUTPUT_DDL = ("system string, stream string, partition int, key binary, value binary, "
                  "timestamp bigint, route int, origin int, seq bigint")
"""The rows between stages: what a task sent, the route of the next shuffle, the sending
task (``origin``) and its send order (``seq``)."""


class UnsupportedOnSparkError(ConfigError):
    """An application shape or operator that ``weir run --runner spark`` does not run; the
    message names the stage or operator and what to do (run it embedded)."""

    def __init__(self, message: str):
        super().__init__(message + "; run the application embedded (weir run without "
                         "--runner spark), docs/SPARK.md lists what runs on Spark",
                         key=APP_CLASS.name)


@lru_cache(maxsize=64)
def route_keys(partitions: int) -> tuple[int, ...]:
    """Per Weir partition ``p < partitions``, the smallest int ``r`` that Spark's
    ``repartition(partitions, r)`` sends to partition ``p`` (Murmur3, seed 42, pmod).

    >>> from weir.engine.spark.sparkhash import partition_of
    >>> keys = route_keys(4)
    >>> [partition_of([r], ["int"], 4) for r in keys]
    [0, 1, 2, 3]
    """
    from weir.engine.spark.sparkhash import partition_of

    out: dict[int, int] = {}
    candidate = 0
    while len(out) < partitions:
        p = partition_of([candidate], ["int"], partitions)
        out.setdefault(p, candidate)
        candidate += 1
    return tuple(out[p] for p in range(partitions))


@dataclass(frozen=True)
class SparkStage:
    """One ``mapInArrow`` of the query: the planner's stage ``index``, or -- the first one --
    every stage that reads source streams (``indices``), run by the same tasks as embedded
    (task ``Partition N`` reads partition N of every source stream)."""

    indices: tuple[int, ...]
    plan: JobPlan
    """Its tasks (Spark partition = task index), operator name and config (``app.stage``)."""
    inputs: tuple[SystemStream, ...]
    reads_sources: bool
    stores: tuple[str, ...]
    writes: tuple[SystemStream, ...]
    """Intermediate streams it writes (read by later stages)."""
    outputs: tuple[SystemStream, ...]

    @property
    def index(self) -> int:
        return self.indices[0]

    @property
    def label(self) -> str:
        return ", ".join(str(i) for i in self.indices)

    @property
    def partitions(self) -> int:
        return len(self.plan.tasks)


@dataclass(frozen=True)
class SparkApplication:
    """An application planned for Spark: the embedded plan and its Spark stages in
    data-flow order (the source stage first)."""

    execution: ExecutionPlan
    config: Config
    """The one-job config the embedded runner would run."""
    stages: tuple[SparkStage, ...]
    store_factories: Mapping[str, str] = field(default_factory=dict)

    @property
    def source(self) -> SparkStage:
        return self.stages[0]

    def stage_inputs(self, position: int) -> frozenset[str]:
        """``system.stream`` names the ``position``-th Spark stage reads (pass-through is
        decided by them)."""
        return frozenset(str(s) for s in self.stages[position].inputs)

    def rows(self) -> list[tuple[str, ...]]:
        """The plan as table rows: stage, runs as, inputs, operators, stores, tasks, writes."""
        out = []
        for st in self.stages:
            if st.reads_sources:
                how = f"readStream weirlog -> mapInArrow ({st.partitions} tasks)"
            else:
                how = (f"repartition({st.partitions}, route) -> mapInArrow "
                       f"({st.partitions} tasks)")
            inputs = "\n".join(f"{s} ({self.execution.streams[s].partitions})"
                               for s in st.inputs)
            ops = "\n".join(op for i in st.indices for _, op in self.execution.stage(i).ops)
            stores = "\n".join(f"{s} ({self.store_factories.get(s, '?')})"
                               for s in st.stores) or "-"
            writes = "\n".join([*(f"{s} (shuffle)" for s in st.writes),
                                *(f"{s} (sink)" for s in st.outputs)]) or "-"
            out.append((st.label, how, inputs, ops, f"{st.plan.operator}\n{stores}",
                        str(st.partitions), writes))
        return out


def stage_operator(job_operator: str, indices: tuple[int, ...]) -> str:
    """The state operator name of the Spark stage running the planner's stages ``indices``
    (its directory in the checkpoint): ``<job>-<id>-stage-0``, ``<job>-<id>-stage-0-1``."""
    return f"{job_operator}-stage-{'-'.join(str(i) for i in indices)}"


def _unique(items: Any) -> tuple:
    return tuple(dict.fromkeys(items))


def plan_stages(execution: ExecutionPlan, config: Config, *, operator: str, checkpoint: str,
                config_dir: str, source_tasks: tuple[TaskPlan, ...],
                bootstrap: frozenset[tuple[str, str]] = frozenset(),
                priorities: Mapping[tuple[str, str], int] | None = None,
                max_records: int = 0, drain_path: str = "") -> SparkApplication:
    """The Spark stages of ``execution`` (see the module docstring). ``config``: the one-job
    config; ``source_tasks``: the tasks of the job model over every source stream;
    ``drain_path``: the drain request file the source stage's admission looks at."""
    _refuse_shapes(execution)
    streams = execution.streams
    source_eps = [ep for ep in execution.stages
                  if all(streams[s].kind == "input" for s in ep.inputs)]
    groups = [source_eps] + [[ep] for ep in execution.stages if ep not in source_eps]
    stages = []
    for eps in groups:
        indices = tuple(ep.index for ep in eps)
        reads_sources = eps is source_eps
        selected = str(indices[0]) if len(indices) == 1 else "-1"   # -1: all, by their inputs
        stage_cfg = config.merged({APP_STAGE.name: selected}, origin="spark plan")
        inputs = _unique(s for ep in eps for s in ep.inputs)
        if reads_sources:
            tasks = source_tasks
        else:
            n = streams[inputs[0]].partitions
            tasks = tuple(TaskPlan(p, f"Partition {p}",
                                   tuple((s.system, s.stream, p) for s in inputs))
                          for p in range(n))
        plan = JobPlan(job=config.require("job.name"),
                       operator=stage_operator(operator, indices), checkpoint=checkpoint,
                       config=dict(stage_cfg), origins=dict(stage_cfg.origins),
                       config_dir=config_dir, tasks=tasks,
                       bootstrap=bootstrap if reads_sources else frozenset(),
                       priorities=dict(priorities or {}) if reads_sources else {},
                       max_records=max_records,
                       drain_path=drain_path if reads_sources else "")
        stages.append(SparkStage(indices, plan, inputs, reads_sources,
                                 _unique(s for ep in eps for s in ep.stores),
                                 _unique(s for ep in eps for s in ep.intermediate_outputs),
                                 _unique(s for ep in eps for s in ep.outputs)))
    factories = {}
    for name in (s for st in stages for s in st.stores):
        factories[name] = config.get_str(f"stores.{name}.factory") or "?"
    return SparkApplication(execution, config, tuple(stages), factories)


def _refuse_shapes(execution: ExecutionPlan) -> None:
    streams = execution.streams
    for ep in execution.stages:
        kinds = {streams[s].kind for s in ep.inputs}
        if kinds == {"input"}:
            continue
        if "input" in kinds:
            raise UnsupportedOnSparkError(
                f"stage {ep.index} reads source streams ({_names(ep, streams, 'input')}) "
                f"and intermediate streams ({_names(ep, streams, 'intermediate')}): on "
                f"Spark a stage reads either source streams (the query's first stage) or "
                f"what a shuffle brings (partition_by the source streams into the stage)")
        counts = {streams[s].partitions for s in ep.inputs}
        if len(counts) > 1:
            raise UnsupportedOnSparkError(
                f"stage {ep.index} reads intermediate streams of different partition counts "
                f"({', '.join(f'{s}: {streams[s].partitions}' for s in ep.inputs)}): one "
                f"shuffle feeds a stage on Spark; give the partition_bys the same "
                f"partitions=N")
        for ss in ep.inputs:
            producer = streams[ss].producer_stage
            if producer is None or producer >= ep.index:
                raise UnsupportedOnSparkError(
                    f"stage {ep.index} reads {ss}, written by stage {producer}: on Spark a "
                    f"stage reads only what earlier stages write")


def _names(ep: StagePlan, streams: Mapping[SystemStream, Any], kind: str) -> str:
    return ", ".join(str(s) for s in ep.inputs if streams[s].kind == kind) or "-"


def describe_stages(app: SparkApplication) -> list[str]:
    """One line per stage (logs)."""
    return [f"stage {st.label}: {st.partitions} task(s), reads "
            f"{', '.join(str(s) for s in st.inputs)}; state operator {st.plan.operator}"
            for st in app.stages]
