"""The operator graph an application describes: operator specs and their edges.

Every call on a :class:`~weir.engine.app.api.MessageStream` adds an :class:`OpSpec`. An
operator's **id** is Samza's ``<app name>-<app id>-<opcode>-<name>``; ``partition_by``,
``window`` and ``join`` need a ``name`` (it names the intermediate stream or the store, which
must stay the same when the code changes), the others get ``<opcode>-<n>`` in declaration
order. ``partition_by`` ends a branch: it writes the intermediate stream whose id is its own
op id, and the stream comes back as a new :attr:`OpSpec.INPUT` operator (``intermediate``).

Example::

    >>> g = OperatorGraph("pageviews", "1")
    >>> src = g.add(OpSpec(OpCode.INPUT, "clicks", stream=SystemStream("filelog", "clicks")), [])
    >>> m = g.add(OpSpec(OpCode.MAP, None, fn=str.upper), [src])
    >>> m.id, [o.id for o in src.outputs]
    ('pageviews-1-map-1', ['pageviews-1-map-1'])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from weir.engine.app.errors import ApplicationError
from weir.engine.model import SystemStream

__all__ = ["OpCode", "OpSpec", "OperatorGraph", "NAMED_OPS"]

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


class OpCode(Enum):
    INPUT = "input"
    MAP = "map"
    FLAT_MAP = "flat_map"
    FILTER = "filter"
    MERGE = "merge"
    PARTITION_BY = "partition_by"
    WINDOW = "window"
    LATE_ELEMENTS = "late_elements"
    JOIN = "join"
    JOIN_TABLE = "join_table"
    SEND_TO = "send_to"
    SEND_TO_TABLE = "send_to_table"
    SINK = "sink"


NAMED_OPS = frozenset({OpCode.PARTITION_BY, OpCode.WINDOW, OpCode.JOIN})
"""Operators that must be named: their name is part of a stream or store name."""


class OpSpec:
    """One operator of the graph. ``params`` holds what the operator needs (functions,
    window spec, stream, table, ...), readable as attributes."""

    def __init__(self, opcode: OpCode, name: str | None, **params: Any):
        self.opcode, self.name, self.params = opcode, name, params
        self.id, self.index = "", -1
        self.inputs, self.outputs = [], []

    def __getattr__(self, item: str) -> Any:
        try:
            return self.__dict__["params"][item]
        except KeyError:
            raise AttributeError(item) from None

    def __repr__(self) -> str:
        return f"<{self.opcode.value} {self.id or self.name}>"

    @property
    def stream(self) -> SystemStream | None:
        return self.params.get("stream")

    @property
    def is_intermediate_input(self) -> bool:
        return self.opcode is OpCode.INPUT and self.params.get("producer") is not None


class OperatorGraph:
    """The operators of one application, in declaration order."""

    def __init__(self, app_name: str, app_id: str):
        self.app_name, self.app_id = app_name, app_id
        self.ops: list[OpSpec] = []
        self.inputs: dict[SystemStream, OpSpec] = {}
        self._ids: set[str] = set()
        self._counts: dict[OpCode, int] = {}

    def op_id(self, opcode: OpCode, name: str) -> str:
        return f"{self.app_name}-{self.app_id}-{opcode.value}-{name}"

    def add(self, spec: OpSpec, inputs: Iterable[OpSpec]) -> OpSpec:
        """Add ``spec`` fed by ``inputs``; checks names and gives it its id."""
        if spec.name is None:
            if spec.opcode in NAMED_OPS:
                raise ApplicationError(
                    f"{spec.opcode.value}(...) needs name=...: the name is part of the "
                    f"{'intermediate stream' if spec.opcode is OpCode.PARTITION_BY else 'store'} "
                    f"name and must not change when the application changes")
            n = self._counts[spec.opcode] = self._counts.get(spec.opcode, 0) + 1
            spec.name = f"{n}"
            spec.id = self.op_id(spec.opcode, spec.name)
        else:
            if not isinstance(spec.name, str) or not _NAME_RE.match(spec.name):
                raise ApplicationError(f"bad operator name {spec.name!r} for "
                                       f"{spec.opcode.value}: use letters, digits, '-' and '_'")
            spec.id = self.op_id(spec.opcode, spec.name)
        if spec.opcode is OpCode.INPUT:
            spec.id = str(spec.stream)
        if spec.id in self._ids:
            raise ApplicationError(f"two operators are named {spec.id!r}; give each "
                                   f"{spec.opcode.value} its own name")
        self._ids.add(spec.id)
        spec.index = len(self.ops)
        for upstream in inputs:
            spec.inputs.append(upstream)
            upstream.outputs.append(spec)
        self.ops.append(spec)
        if spec.opcode is OpCode.INPUT:
            self.inputs[spec.stream] = spec
        return spec

    def downstream(self, spec: OpSpec) -> Iterable[OpSpec]:
        """Every operator reachable from ``spec`` without crossing an intermediate stream."""
        seen: set[int] = set()
        stack = [spec]
        while stack:
            op = stack.pop()
            if id(op) in seen:
                continue
            seen.add(id(op))
            yield op
            stack.extend(op.outputs)

    def roots(self, spec: OpSpec) -> list[OpSpec]:
        """The input operators that feed ``spec`` (without crossing an intermediate stream)."""
        out, seen, stack = [], set(), [spec]
        while stack:
            op = stack.pop()
            if id(op) in seen:
                continue
            seen.add(id(op))
            if op.opcode is OpCode.INPUT:
                out.append(op)
            stack.extend(op.inputs)
        return sorted(out, key=lambda o: o.index)

    def walk(self, fn: Callable[[OpSpec], None]) -> None:
        for op in self.ops:
            fn(op)
