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
from collections.abc import Mapping
from typing import Any

from weir.stores.config import Config, ConfigError

from weir.engine.app.api import ApplicationDescriptor
from weir.engine.app.errors import ApplicationError
from weir.engine.app.graph import OpCode, OperatorGraph, OpSpec
from weir.engine.app.loader import describe_application, load_application
from weir.engine.app.partitions import check_tables, infer_partitions, side_roots
from weir.engine.app.plan import ExecutionPlan, StagePlan, StreamPlan, dedupe
from weir.engine.app.serdes import KEY_SERDE, TIME_KEY_SERDE, registry_config
from weir.engine.app.settings import (APP_CLASS, APP_ID, APP_NAME, APP_STAGE, APP_STORE_FACTORY,
                                      APPLICATION_TASK, JOB_INTERMEDIATE_STREAM_PARTITIONS,
                                      MAX_INFERRED_PARTITIONS, MAX_TRIGGER_TIMER_MS, PLAN_ORIGIN,
                                      app_identity, is_application)
from weir.engine.app.stages import check_cycles, stage_operators
from weir.engine.app.windows import WindowKind
from weir.engine.config.job import JOB_CHANGELOG_SYSTEM
from weir.engine.config.streams import JOB_DEFAULT_SYSTEM, TASK_INPUTS, stream_property
from weir.engine.errors import StreamNotFoundError
from weir.engine.jobmodel.model import group_ssps
from weir.engine.model import SystemStream
from weir.engine.task import TASK_CLASS

__all__ = [
    "plan_application",
    # re-exported: these lived here before the planner was split (engine/spark, engine/cli
    # and users import them from this module)
    "APP_CLASS", "APP_NAME", "APP_ID", "APP_STAGE", "APP_STORE_FACTORY",
    "JOB_INTERMEDIATE_STREAM_PARTITIONS", "MAX_INFERRED_PARTITIONS", "MAX_TRIGGER_TIMER_MS",
    "APPLICATION_TASK", "StreamPlan", "StagePlan", "ExecutionPlan", "load_application",
    "describe_application", "is_application", "app_identity", "stage_operators",
]

log = logging.getLogger("weir.app")


def _task_groups(config: Config, inputs: list[SystemStream],
                 counts: Mapping[SystemStream, int]) -> dict[str, frozenset]:
    cfg = config.merged({TASK_INPUTS.name: ",".join(str(s) for s in inputs)}, origin=PLAN_ORIGIN)
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
    check_cycles(graph)
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
    infer_partitions(graph, config, counts, output_counts.values())
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
                roots = side_roots(graph, op)
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
        check_tables(graph, ops, counts)
        stage_stores[index] = stores
        inter_out = [op.stream for op in ops if op.opcode is OpCode.PARTITION_BY]
        outs = dedupe(op.stream for op in ops if op.opcode is OpCode.SEND_TO)
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


def _check_deployment(config: Config) -> None:
    from weir.engine.runloop.settings import TASK_MAX_CONCURRENCY

    if TASK_MAX_CONCURRENCY.get(config) > 1:
        key = TASK_MAX_CONCURRENCY.name
        raise ConfigError(
            f"is {TASK_MAX_CONCURRENCY.get(config)}, but an application's operators keep "
            f"per-task state (windows, joins) that must see a task's elements one at a time; "
            f"remove it (tasks still run in parallel with job.container.thread.pool.size)",
            key=key, origin=config.origin(key))
