"""Cutting an application's operator graph into stages (see :mod:`~weir.engine.app.planner`,
step 1): a stage is a connected group of operators (operators using the same table count as
connected) and the streams that feed it; a ``partition_by`` starts a new one. Stages are
numbered in data-flow order; a ``partition_by`` fed by its own intermediate stream is refused.
The planner and every :class:`~weir.engine.app.task.ApplicationTask` compute the same stages
from the same graph."""

from __future__ import annotations

from weir.engine.app.errors import ApplicationError
from weir.engine.app.graph import OpCode, OperatorGraph, OpSpec

__all__ = ["check_cycles", "stage_operators"]


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


def check_cycles(graph: OperatorGraph) -> None:
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
