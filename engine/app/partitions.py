"""Partition counts of an application's intermediate streams, and the checks that the
streams a join or a table brings together are partitioned alike (see
:mod:`~weir.engine.app.planner`, step 2): ``partition_by(..., partitions=N)``, else
``job.intermediate.stream.partitions``, else Samza's inference (the inputs of a join take the
partition count of the join's other inputs; every other intermediate stream takes the largest
partition count of the application's input and output streams, at most
:data:`~weir.engine.app.settings.MAX_INFERRED_PARTITIONS`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from weir.stores.config import Config

from weir.engine.app.errors import ApplicationError
from weir.engine.app.graph import OpCode, OperatorGraph, OpSpec
from weir.engine.app.plan import dedupe
from weir.engine.app.settings import JOB_INTERMEDIATE_STREAM_PARTITIONS, MAX_INFERRED_PARTITIONS
from weir.engine.model import SystemStream

__all__ = ["side_roots", "infer_partitions", "check_tables"]

log = logging.getLogger("weir.app")


def side_roots(graph: OperatorGraph, op: OpSpec) -> list[list[OpSpec]]:
    """The root input operators of each input side of ``op`` (a join)."""
    return [graph.roots(side) for side in op.inputs]


def infer_partitions(graph: OperatorGraph, config: Config, counts: dict[SystemStream, int],
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
            streams = dedupe(r.stream for side in side_roots(graph, join) for r in side)
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


def check_tables(graph: OperatorGraph, ops: list[OpSpec], counts: Mapping[SystemStream, int]) -> None:
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
