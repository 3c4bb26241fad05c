"""The application planner: from the operator graph to stages, streams and job configs.

:func:`plan_application` loads ``app.class``, calls its ``describe(app)`` and

1. **cuts the graph into stages** at every ``partition_by``: a stage is a connected group of
   operators (operators using the same table count as connected) and the streams that feed
   it (source streams, or intermediate streams written by a ``partition_by`` of an earlier
   stage). Stages are numbered in data-flow order. A
   ``partition_by`` whose own output feeds back into it is refused (end-of-stream could never
   get through);
2. **names the intermediate streams** as Samza does, ``<app>-<id>-partition_by-<name>``, on
   ``job.default.system`` (the file log by default), and gives each its **partition count**:
   ``partition_by(..., partitions=N)``, else ``job.intermediate.stream.partitions``, else
   Samza's inference (the inputs of a join take the partition count of the join's other
   inputs; every other intermediate stream takes the largest partition count of the
   application's input and output streams, at most 256);
3. counts, per intermediate stream, the **upstream tasks** that write control messages to it
   (the tasks of the producing stage that read the ``partition_by``'s inputs), as Samza's
   ``producerCount`` (2.3);
4. generates the **job config** that runs the application on the ordinary engine: task class
   :class:`~weir.engine.app.task.ApplicationTask`, the stages' inputs as ``task.inputs``, the
   intermediate streams' keys (``samza.intermediate``, serdes, upstream task count, read from
   the oldest offset), a store (with a changelog) per window, join and table,
   ``task.window.ms`` when a window runs on processing time or has a time-based trigger (the
   greatest common divisor of their durations, at most :data:`MAX_TRIGGER_TIMER_MS`; Samza's
   planner sets it to the gcd too), and the **processing guarantee**: exactly-once
   (``task.processing.guarantee=exactly_once``, whose ``task.commit.ms`` defaults to 100 ms)
   when every
   system the application writes (intermediate streams, outputs, changelogs) is a file log
   and checkpoints are files, else at-least-once, with a log line saying why. The user's
   config wins over every generated default; ``task.class``/``task.inputs`` must not be set.

One job runs every stage (the default, Samza's way: task ``Partition N`` runs every stage's
operators for partition N), or :meth:`ExecutionPlan.job_config` gives stage ``N`` a job of its
own (``weir run --stage N``): job name ``<job>-stage-<N>``, its own checkpoint and store
directories, the application's drain file. Both reach the same results; pick one per
deployment (their state lives in different directories).

Example::

    plan = plan_application(load_config("app.properties"))
    plan.create_streams()
    run_job(plan.job_config())            # or plan.job_config(stage=1)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.stores.config import Config, ConfigError, declare

from weir.engine.app.api import ApplicationDescriptor, StreamApplication
from weir.engine.app.errors import ApplicationError
from weir.engine.app.graph import OpCode, OperatorGraph, OpSpec
from weir.engine.app.serdes import KEY_SERDE, TIME_KEY_SERDE, registry_config
from weir.engine.app.windows import WindowKind
from weir.engine.config.job import (JOB_CHANGELOG_SYSTEM, JOB_ID, JOB_LOGGED_STORE_BASE_DIR,
                                    JOB_NAME, JOB_NON_LOGGED_STORE_BASE_DIR, TASK_CHECKPOINT_PATH,
                                    JobConfig)
from weir.engine.config.streams import JOB_DEFAULT_SYSTEM, TASK_INPUTS, stream_property
from weir.engine.control.settings import JOB_DRAIN_PATH
from weir.engine.errors import StreamNotFoundError
from weir.engine.jobmodel.model import group_ssps
from weir.engine.model import SystemStream
from weir.engine.systems.api import StreamSpec
from weir.engine.task import TASK_CLASS, load_object

__all__ = [
    "APP_CLASS", "APP_NAME", "APP_ID", "APP_STAGE", "APP_STORE_FACTORY",
    "JOB_INTERMEDIATE_STREAM_PARTITIONS", "MAX_INFERRED_PARTITIONS", "MAX_TRIGGER_TIMER_MS",
    "APPLICATION_TASK",
    "StreamPlan", "StagePlan", "ExecutionPlan", "load_application", "describe_application",
    "plan_application", "is_application", "stage_operators",
]

log = logging.getLogger("weir.app")

_C = "application"
APP_CLASS = declare(
    "app.class", str, None,
    "The high-level application: `module:Name` of a StreamApplication class (or of a function "
    "taking the application descriptor). `weir run` and `weir plan` plan it into stages.",
    component=_C)
APP_NAME = declare(
    "app.name", str, None,
    "Name used in the application's stream and store names (`<app.name>-<app.id>-...`); "
    "default `job.name`.", component=_C)
APP_ID = declare("app.id", str, None, "Instance id in stream and store names; default `job.id`.",
                 component=_C)
APP_STAGE = declare(
    "app.stage", int, -1,
    "Run only this stage of the application, as its own job (`weir run --stage N` sets it); "
    "-1 runs every stage in one job.", component=_C)
APP_STORE_FACTORY = declare(
    "app.store.factory", str, "rocksdb",
    "Engine of the stores the planner adds for windows, joins and tables (`stores.<store>.*` "
    "keys in the config win).", component=_C)
JOB_INTERMEDIATE_STREAM_PARTITIONS = declare(
    "job.intermediate.stream.partitions", int, -1,
    "Partition count of intermediate streams (Samza's key); -1 infers it: the partition count "
    "of a join's other inputs, else the largest of the application's input and output "
    "streams, at most 256.", component=_C)

MAX_INFERRED_PARTITIONS = 256
MAX_TRIGGER_TIMER_MS = 100
"""The longest ``task.window.ms`` the planner generates for processing-time windows and
time-based triggers: a pane is emitted at most this long after its processing-time deadline."""
APPLICATION_TASK = "weir.engine.app.task:ApplicationTask"
_ORIGIN = "application plan"


def is_application(config: Config) -> bool:
    return bool(APP_CLASS.get(config))


def app_identity(config: Config) -> tuple[str, str]:
    """``(app name, app id)``: ``app.name``/``app.id``, else ``job.name``/``job.id``."""
    name = APP_NAME.get(config) or config.require(JOB_NAME.name)
    return name, APP_ID.get(config) or JOB_ID.get(config)


def load_application(config: Config) -> Any:
    """The object ``app.class`` names: a StreamApplication instance (a class is made with no
    arguments), or a callable ``describe(app)``."""
    key = APP_CLASS.name
    spec = config.require(key)
    target = load_object(spec, key=key, origin=config.origin(key))
    if isinstance(target, type):
        target = target()
    if not (isinstance(target, StreamApplication) or callable(getattr(target, "describe", None))
            or callable(target)):
        raise ConfigError(f"{spec!r} is neither a StreamApplication nor a function taking the "
                          f"application descriptor", key=key, origin=config.origin(key))
    return target


def describe_application(config: Config) -> ApplicationDescriptor:
    """Run the application's ``describe`` on a fresh descriptor (once per caller: every task
    gets its own operator functions, as in Samza)."""
    app = load_application(config)
    name, app_id = app_identity(config)
    descriptor = ApplicationDescriptor(config, name, app_id)
    describe = getattr(app, "describe", None)
    (describe if callable(describe) else app)(descriptor)
    if not descriptor.graph.inputs:
        raise ApplicationError(f"application {config.get_str(APP_CLASS.name)!r} declares no "
                               f"input: call app.input(...) in describe()")
    return descriptor


# -- the plan -------------------------------------------------------------------------------

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
        the user's, else the planner's choice, see the module docstring)."""
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
            inputs = _dedupe(s for st in self.stages for s in st.inputs)
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
        merged = Config(defaults, origins={k: _ORIGIN for k in defaults}).merged(user)
        return merged.merged({TASK_CLASS.name: APPLICATION_TASK, **forced}, origin=_ORIGIN)


def _drain_path(config: Config) -> Path:
    raw = JOB_DRAIN_PATH.get(config)
    if raw:
        return Path(raw)
    return JobConfig.from_config(config).checkpoint_dir / "drain-request.json"


def _dedupe(items: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


# -- planning ---------------------------------------------------------------------------------

class _Components:
    """Union-find over operators joined by operator edges (not by intermediate streams)."""

    def __init__(self, ops: list[OpSpec]):
        self.parent = {id(o): id(o) for o in ops}

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _check_cycles(graph: OperatorGraph) -> None:
    """Refuse a partition_by fed (through operators and intermediate streams) by itself."""
    for op in graph.ops:
        if op.opcode is not OpCode.PARTITION_BY:
            continue
        seen: set[int] = set()
        stack = list(op.inputs)
        while stack:
            cur = stack.pop()
            if cur is op:
                raise ApplicationError(
                    f"partition_by {op.name!r} is fed by its own intermediate stream "
                    f"{op.stream}: end-of-stream could never get through; break the cycle")
            if id(cur) in seen:
                continue
            seen.add(id(cur))
            stack.extend(cur.inputs)
            if cur.is_intermediate_input:
                stack.append(cur.producer)


def stage_operators(graph: OperatorGraph) -> list[list[OpSpec]]:
    """The operators of each stage, stages in data-flow order (see the module docstring);
    the planner and every ApplicationTask compute the same list from the same graph."""
    comps = _Components(graph.ops)
    tables: dict[str, OpSpec] = {}
    for op in graph.ops:
        for upstream in op.inputs:
            comps.union(id(op), id(upstream))
        if op.opcode in (OpCode.SEND_TO_TABLE, OpCode.JOIN_TABLE):
            first = tables.setdefault(op.table.name, op)   # a table's users share its tasks
            comps.union(id(op), id(first))
    groups: dict[int, list[OpSpec]] = {}
    for op in graph.ops:
        groups.setdefault(comps.find(id(op)), []).append(op)
    members = list(groups.values())
    index_of = {id(op): i for i, group in enumerate(members) for op in group}
    deps: dict[int, set[int]] = {i: set() for i in range(len(members))}
    for i, group in enumerate(members):
        for op in group:
            if op.is_intermediate_input:
                d = index_of[id(op.producer)]
                if d != i:
                    deps[i].add(d)
    order: list[int] = []
    done: set[int] = set()
    while len(order) < len(members):
        ready = [i for i in range(len(members)) if i not in done and deps[i] <= done]
        if not ready:
            left = [members[i][0].id for i in range(len(members)) if i not in done]
            raise ApplicationError(f"the stages around {', '.join(left)} depend on each other "
                                   f"in a cycle through intermediate streams; break the cycle")
        first = min(ready, key=lambda i: min(o.index for o in members[i]))
        order.append(first)
        done.add(first)
    return [sorted(members[i], key=lambda o: o.index) for i in order]


def _side_roots(graph: OperatorGraph, op: OpSpec) -> list[list[OpSpec]]:
    return [graph.roots(side) for side in op.inputs]


def _infer_partitions(graph: OperatorGraph, config: Config, counts: dict[SystemStream, int],
                      output_counts: Iterable[int]) -> None:
    """Fill ``counts`` for the intermediate streams (see the module docstring)."""
    for op in graph.ops:
        if op.opcode is OpCode.PARTITION_BY and op.partitions is not None:
            counts[op.stream] = op.partitions
    configured = JOB_INTERMEDIATE_STREAM_PARTITIONS.get(config)
    if configured > 0:
        for op in graph.ops:
            if op.opcode is OpCode.PARTITION_BY:
                counts.setdefault(op.stream, configured)
    joins = [op for op in graph.ops if op.opcode is OpCode.JOIN]
    changed = True
    while changed:
        changed = False
        for join in joins:
            streams = _dedupe(r.stream for side in _side_roots(graph, join) for r in side)
            known = {counts[s] for s in streams if s in counts}
            if len(known) > 1:
                detail = ", ".join(f"{s} ({counts[s]})" for s in streams if s in counts)
                raise ApplicationError(
                    f"join {join.name!r} joins streams with different partition counts: "
                    f"{detail}; partition_by both sides into the same number of partitions")
            if known:
                n = known.pop()
                for s in streams:
                    if s not in counts:
                        counts[s] = n
                        changed = True
    rest = [op for op in graph.ops if op.opcode is OpCode.PARTITION_BY and op.stream not in counts]
    if rest:
        sources = [counts[s] for s, op in graph.inputs.items() if not op.is_intermediate_input]
        inferred = max([*sources, *output_counts, 1])
        if inferred > MAX_INFERRED_PARTITIONS:
            log.warning("inferred intermediate stream partition count %d is above %d; using %d",
                        inferred, MAX_INFERRED_PARTITIONS, MAX_INFERRED_PARTITIONS)
            inferred = MAX_INFERRED_PARTITIONS
        for op in rest:
            counts[op.stream] = inferred


def _task_groups(config: Config, inputs: list[SystemStream],
                 counts: Mapping[SystemStream, int]) -> dict[str, frozenset]:
    cfg = config.merged({TASK_INPUTS.name: ",".join(str(s) for s in inputs)}, origin=_ORIGIN)
    return {name: frozenset(ssps) for name, ssps in
            group_ssps(cfg, {s: counts[s] for s in inputs}).items()}


def _serde_defaults(config: Config, ss: SystemStream, key_serde: str | None,
                    msg_serde: str | None) -> dict[str, str]:
    out = {}
    for prop, serde in (("samza.key.serde", key_serde), ("samza.msg.serde", msg_serde)):
        if serde and stream_property(config, ss, prop) is None:
            out[f"systems.{ss.system}.streams.{ss.stream}.{prop}"] = serde
    return out


def _store_config(config: Config, name: str, *, key_serde: str, msg_serde: str,
                  changelog: str, factory: str | None = None) -> dict[str, str]:
    prefix = f"stores.{name}."
    if any(k.startswith(prefix) for k in config):
        return {}   # the user configured this store: theirs entirely
    return {prefix + "factory": factory or APP_STORE_FACTORY.get(config),
            prefix + "key.serde": key_serde, prefix + "msg.serde": msg_serde,
            prefix + "changelog": changelog}


def plan_application(config: Config, registry: Any = None) -> ExecutionPlan:
    """Plan the application of ``config`` (see the module docstring). ``registry`` is a
    :class:`~weir.engine.systems.registry.SystemRegistry` (one is made by default)."""
    from weir.engine.systems.registry import SystemRegistry

    for key in (TASK_CLASS.name, TASK_INPUTS.name):
        if key in config:
            raise ConfigError(f"is set together with app.class: an application's task and inputs "
                              f"come from its describe(); remove {key}", key=key,
                              origin=config.origin(key))
    registry = registry if registry is not None else SystemRegistry(config)
    app = describe_application(config)
    graph = app.graph
    _check_cycles(graph)
    stage_ops = stage_operators(graph)

    sources = [s for s, op in graph.inputs.items() if not op.is_intermediate_input]
    counts: dict[SystemStream, int] = dict(registry.partition_counts(sources))
    output_counts: dict[SystemStream, int] = {}
    missing_outputs: set[SystemStream] = set()
    for ss, out in app.outputs.items():
        admin = registry.admin(ss.system)
        if admin.stream_exists(ss.stream):
            output_counts[ss] = admin.partition_count(ss.stream)
        elif out.partitions is not None:
            output_counts[ss] = out.partitions
            missing_outputs.add(ss)
        else:
            raise StreamNotFoundError(ss.system, ss.stream,
                                      f"create it (`weir log create {ss.stream} --partitions N`) "
                                      f"or declare app.output('{ss}', partitions=N)")
    _infer_partitions(graph, config, counts, output_counts.values())
    for op in graph.ops:
        if op.opcode is OpCode.PARTITION_BY:
            admin = registry.admin(op.stream.system)
            if admin.stream_exists(op.stream.stream):
                existing = admin.partition_count(op.stream.stream)
                if existing != counts[op.stream]:
                    raise ApplicationError(
                        f"intermediate stream {op.stream} exists with {existing} partitions, "
                        f"the plan needs {counts[op.stream]}; delete it (`weir log delete "
                        f"{op.stream.stream} --yes`) if its data is not needed, or plan with "
                        f"partition_by(..., partitions={existing})")

    name, app_id = app_identity(config)
    changelog_system = (JOB_CHANGELOG_SYSTEM.get(config) or JOB_DEFAULT_SYSTEM.get(config)
                        or app.intermediate_system)
    generated: dict[str, str] = dict(registry_config())
    stage_stores: dict[int, dict[str, str]] = {}
    stages: list[StagePlan] = []
    stage_of_op: dict[int, int] = {}
    producers: dict[SystemStream, tuple[int, OpSpec]] = {}
    for index, ops in enumerate(stage_ops):
        for op in ops:
            stage_of_op[id(op)] = index
            if op.opcode is OpCode.PARTITION_BY:
                producers[op.stream] = (index, op)

    for index, ops in enumerate(stage_ops):
        inputs = [op.stream for op in ops if op.opcode is OpCode.INPUT]
        groups = _task_groups(config, inputs, counts)
        stores: dict[str, str] = {}
        names: list[str] = []
        for op in ops:
            if op.opcode is OpCode.WINDOW:
                window = op.window
                stores.update(_store_config(config, op.id, key_serde=TIME_KEY_SERDE,
                                            msg_serde="msgpack",
                                            changelog=f"{changelog_system}.{op.id}-changelog"))
                names.append(op.id)
                if window.kind is WindowKind.SESSION:
                    sid = f"{op.id}-sessions"
                    stores.update(_store_config(config, sid, key_serde=KEY_SERDE,
                                                msg_serde="msgpack",
                                                changelog=f"{changelog_system}.{sid}-changelog"))
                    names.append(sid)
            elif op.opcode is OpCode.JOIN:
                roots = _side_roots(graph, op)
                for ss in (r.stream for side in roots for r in side):
                    if counts[ss] != counts[roots[0][0].stream]:
                        raise ApplicationError(f"join {op.name!r}: its inputs have different "
                                               f"partition counts; partition_by both sides")
                for sid, key_serde in ((op.id, KEY_SERDE), (f"{op.id}-expiry", TIME_KEY_SERDE)):
                    stores.update(_store_config(config, sid, key_serde=key_serde,
                                                msg_serde="msgpack",
                                                changelog=f"{changelog_system}.{sid}-changelog"))
                    names.append(sid)
            elif op.opcode in (OpCode.JOIN_TABLE, OpCode.SEND_TO_TABLE):
                table = op.table
                if table.name not in names:
                    stores.update(_store_config(
                        config, table.name, key_serde=table.key_serde, msg_serde=table.msg_serde,
                        factory=table.factory,
                        changelog=f"{changelog_system}.{name}-{app_id}-table-{table.name}-changelog"))
                    names.append(table.name)
        _check_tables(graph, ops, counts)
        stage_stores[index] = stores
        inter_out = [op.stream for op in ops if op.opcode is OpCode.PARTITION_BY]
        outs = _dedupe(op.stream for op in ops if op.opcode is OpCode.SEND_TO)
        stages.append(StagePlan(index, tuple(inputs), tuple(inter_out), tuple(outs),
                                tuple((op.id, op.opcode.value) for op in ops), tuple(names),
                                len(groups)))
        for op in ops:
            if op.opcode is not OpCode.PARTITION_BY:
                continue
            roots = {r.stream for r in graph.roots(op)}
            upstream = sum(1 for ssps in groups.values()
                           if any(s.system_stream in roots for s in ssps))
            ss = op.stream
            sid = ss.stream
            generated.update({
                f"streams.{sid}.samza.system": ss.system,
                f"streams.{sid}.samza.physical.name": ss.stream,
                f"streams.{sid}.samza.intermediate": "true",
                f"streams.{sid}.samza.key.serde": op.key_serde or KEY_SERDE,
                f"streams.{sid}.samza.msg.serde": op.msg_serde or "msgpack",
                f"streams.{sid}.samza.offset.default": "oldest",
                f"streams.{sid}.intermediate.upstream.tasks": str(upstream),
            })
            op.params["upstream_tasks"] = upstream

    for ss, op in graph.inputs.items():
        if not op.is_intermediate_input:
            generated.update(_serde_defaults(config, ss, op.key_serde, op.msg_serde))
            if _feeds_only_tables(op) and stream_property(config, ss, "samza.bootstrap") is None:
                generated[f"systems.{ss.system}.streams.{ss.stream}.samza.bootstrap"] = "true"
    for ss, out in app.outputs.items():
        generated.update(_serde_defaults(config, ss, out.key_serde, out.msg_serde))

    writers: dict[SystemStream, set[int]] = {}
    for st in stages:
        for ss in st.outputs:
            writers.setdefault(ss, set()).add(st.index)
    streams: dict[SystemStream, StreamPlan] = {}
    for ss, op in graph.inputs.items():
        consumers = tuple(sorted({stage_of_op[id(op)]}))
        if op.is_intermediate_input:
            pstage, pop = producers[ss]
            streams[ss] = StreamPlan(ss, "intermediate", counts[ss], pstage, consumers,
                                     pop.upstream_tasks, pop.id,
                                     registry.admin(ss.system).stream_exists(ss.stream))
        else:
            streams[ss] = StreamPlan(ss, "input", counts[ss], None, consumers)
    for ss in app.outputs:
        streams[ss] = StreamPlan(ss, "output", output_counts[ss],
                                 min(writers.get(ss, {-1})), (), None, None,
                                 ss not in missing_outputs)
    generated.update(_timer_config(config, graph))
    generated.update(_guarantee_config(config, registry, app, changelog_system,
                                       any(stage_stores.values())))
    _check_deployment(config)
    return ExecutionPlan(name, app_id, config.get_str(APP_CLASS.name), config, tuple(stages),
                         streams, generated, stage_stores, registry)


def _timer_config(config: Config, graph: OperatorGraph) -> dict[str, str]:
    """``task.window.ms`` for processing-time windows and time-based triggers (the
    ApplicationTask's ``window`` checks them): the gcd of their durations, at most
    :data:`MAX_TRIGGER_TIMER_MS`."""
    from weir.engine.runloop.settings import TASK_WINDOW_MS

    durations = [d for op in graph.ops if op.opcode is OpCode.WINDOW
                 for d in op.window.timer_durations()]
    if not durations or TASK_WINDOW_MS.name in config:
        return {}
    return {TASK_WINDOW_MS.name: str(max(1, min(math.gcd(*durations), MAX_TRIGGER_TIMER_MS)))}


def _guarantee_config(config: Config, registry: Any, app: ApplicationDescriptor,
                      changelog_system: str, has_stores: bool) -> dict[str, str]:
    """Exactly-once for an application whose file log allows it (see the module docstring),
    unless the config chooses a guarantee."""
    from weir.engine.container.checkpoints import CheckpointKind, CheckpointSettings
    from weir.engine.container.exactly_once import (TASK_PROCESSING_GUARANTEE,
                                                    transactional_systems)

    if any(k in config for k in (TASK_PROCESSING_GUARANTEE.name, *TASK_PROCESSING_GUARANTEE.aliases)):
        return {}
    written = {op.stream.system for op in app.graph.ops if op.opcode is OpCode.PARTITION_BY}
    written |= {ss.system for ss in app.outputs}
    if has_stores:
        written.add(changelog_system)
    reasons = [f"system '{s}' is not a file log (transactions exist on the file log only)"
               for s in sorted(written - set(transactional_systems(registry, written)))]
    try:
        if CheckpointSettings.from_config(config).kind is not CheckpointKind.FILE:
            reasons.append("its checkpoints are in a stream (task.checkpoint.factory), and "
                           "exactly-once needs checkpoint files")
    except ConfigError:
        pass   # the job's own checks name the bad key
    if reasons:
        log.info("application %s runs at-least-once (task.processing.guarantee): %s",
                 config.get_str(APP_CLASS.name), "; ".join(reasons))
        return {}
    return {TASK_PROCESSING_GUARANTEE.name: "exactly_once"}


def _feeds_only_tables(op: OpSpec) -> bool:
    return bool(op.outputs) and all(o.opcode is OpCode.SEND_TO_TABLE for o in op.outputs)


def _check_tables(graph: OperatorGraph, ops: list[OpSpec], counts: Mapping[SystemStream, int]) -> None:
    """A table and the streams joined with it must have the same partition count."""
    fills: dict[str, set[int]] = {}
    reads: dict[str, set[int]] = {}
    for op in ops:
        if op.opcode in (OpCode.SEND_TO_TABLE, OpCode.JOIN_TABLE):
            target = fills if op.opcode is OpCode.SEND_TO_TABLE else reads
            target.setdefault(op.table.name, set()).update(counts[r.stream] for r in graph.roots(op))
    for table, read in reads.items():
        both = read | fills.get(table, set())
        if len(both) > 1:
            raise ApplicationError(
                f"table {table!r} is filled and joined from streams with different partition "
                f"counts ({', '.join(map(str, sorted(both)))}); each task holds its partitions' "
                f"rows, so partition both the same way")
    for table in reads:
        if table not in fills:
            log.info("table %r is joined but never filled in this stage (fill it with "
                     "send_to(table) or pre-load its store)", table)


def _check_deployment(config: Config) -> None:
    from weir.engine.runloop.settings import TASK_MAX_CONCURRENCY

    if TASK_MAX_CONCURRENCY.get(config) > 1:
        key = TASK_MAX_CONCURRENCY.name
        raise ConfigError(
            f"is {TASK_MAX_CONCURRENCY.get(config)}, but an application's operators keep "
            f"per-task state (windows, joins) that must see a task's elements one at a time; "
            f"remove it (tasks still run in parallel with job.container.thread.pool.size)",
            key=key, origin=config.origin(key))
