"""What a job on Spark is, as the driver planned it, and how micro-batches admit its input.

:class:`JobPlan` is built once on the driver from the parsed job (its config, the job model's
tasks and their input partitions, the chooser's bootstrap streams and priorities) and travels
as JSON in the ``weirlog`` source's and sink's options and inside the task function, so no
Spark process re-plans the job.

:func:`admit` is the admission of one micro-batch: how far each input partition's offset may
move. It keeps the chooser's rules across micro-batches:

* **bootstrap first**: while any bootstrap partition is behind the head it had when the query
  started, only bootstrap partitions are admitted (up to that head), so no other message is
  processed before the bootstrap streams are read (Samza's bootstrapping chooser);
* **priorities**: with a per-batch budget (``spark.weir.max.records.per.batch``), the budget
  goes to the highest priority tier with data first, shared fairly between its partitions;
  lower tiers get what is left;
* everything admitted is processed in the batch (its task's chooser orders it; the bootstrap
  heads it sees are clipped to the batch), so the offsets Spark commits never pass what the
  tasks processed.

Offsets: per input partition, the next offset to admit; an ended partition's end-of-stream
counts as one more record (its offset is the partition's upcoming offset), so a partition whose
offset is ``upcoming + 1`` has delivered its end-of-stream.

Example::

    >>> a, b, c = ("l", "codes", 0), ("l", "tx", 0), ("l", "old", 0)
    >>> tiers = {a: 2**31 - 1, b: 2, c: 1}
    >>> admit({a: 0, b: 0, c: 0}, {a: 3, b: 10, c: 10}, {a: 3}, tiers, 5)
    {('l', 'codes', 0): 3, ('l', 'tx', 0): 0, ('l', 'old', 0): 0}
    >>> admit({a: 3, b: 0, c: 0}, {a: 3, b: 10, c: 10}, {a: 3}, tiers, 12)
    {('l', 'codes', 0): 3, ('l', 'tx', 0): 10, ('l', 'old', 0): 2}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["SSP", "TaskPlan", "JobPlan", "admit", "ssp_key", "parse_ssp_key"]

SSP = tuple[str, str, int]
"""(system, stream, partition)."""


def ssp_key(ssp: Sequence[Any]) -> str:
    """An input partition as a key of Spark's offset JSON: ``system/stream/partition``."""
    system, stream, partition = ssp
    return f"{system}/{stream}/{int(partition)}"


def parse_ssp_key(key: str) -> SSP:
    system, rest = key.split("/", 1)
    stream, partition = rest.rsplit("/", 1)
    return system, stream, int(partition)


@dataclass(frozen=True)
class TaskPlan:
    """One Weir task: its name and input partitions; its index is its Spark partition."""

    index: int
    name: str
    ssps: tuple[SSP, ...]


@dataclass(frozen=True)
class JobPlan:
    """A job as the driver planned it (see the module docstring)."""

    job: str
    operator: str
    checkpoint: str
    config: Mapping[str, str]
    origins: Mapping[str, str]
    config_dir: str
    tasks: tuple[TaskPlan, ...]
    bootstrap: frozenset[tuple[str, str]] = frozenset()
    priorities: Mapping[tuple[str, str], int] = field(default_factory=dict)
    max_records: int = 0
    drain_path: str = ""
    """The job's drain request file (``job.drain.path``): while it holds a request for a
    running run, the source admits no new input (a drain on Spark, docs/SPARK.md)."""

    @property
    def ssps(self) -> list[SSP]:
        return sorted({ssp for t in self.tasks for ssp in t.ssps})

    def tier(self, ssp: SSP) -> int:
        """The chooser's priority of ``ssp``'s stream (bootstrap streams highest)."""
        from weir.engine.chooser.spec import BOOTSTRAP_PRIORITY

        stream = (ssp[0], ssp[1])
        explicit = self.priorities.get(stream, -1)
        if stream in self.bootstrap:
            return BOOTSTRAP_PRIORITY + max(explicit, 0)
        return explicit

    def to_json(self) -> str:
        return orjson.dumps({
            "job": self.job, "operator": self.operator, "checkpoint": self.checkpoint,
            "config": dict(self.config), "origins": dict(self.origins),
            "config_dir": self.config_dir,
            "tasks": [[t.index, t.name, [list(s) for s in t.ssps]] for t in self.tasks],
            "bootstrap": sorted(list(s) for s in self.bootstrap),
            "priorities": [[s, t, p] for (s, t), p in sorted(self.priorities.items())],
            "max_records": self.max_records, "drain_path": self.drain_path,
        }).decode()

    @classmethod
    def from_json(cls, text: str) -> "JobPlan":
        obj = orjson.loads(text)
        return cls(obj["job"], obj["operator"], obj["checkpoint"], obj["config"],
                   obj.get("origins") or {}, obj["config_dir"],
                   tuple(TaskPlan(i, n, tuple((s[0], s[1], int(s[2])) for s in ssps))
                         for i, n, ssps in obj["tasks"]),
                   frozenset((s, t) for s, t in obj.get("bootstrap", [])),
                   {(s, t): int(p) for s, t, p in obj.get("priorities", [])},
                   int(obj.get("max_records", 0)), str(obj.get("drain_path", "")))


def admit(start: Mapping[SSP, int], heads: Mapping[SSP, int],
          bootstrap_heads: Mapping[SSP, int], tiers: Mapping[SSP, int],
          limit: int) -> dict[SSP, int]:
    """The end offsets of the next micro-batch (see the module docstring). ``heads``: how far
    each partition can be read now (its end-of-stream included); ``bootstrap_heads``: the
    heads of the bootstrap partitions when the query started; ``limit``: records per batch
    (0: no limit)."""
    end = {ssp: start.get(ssp, 0) for ssp in heads}
    lagging = {ssp: head for ssp, head in bootstrap_heads.items()
               if ssp in end and end[ssp] < head}
    if lagging:
        _share(end, {ssp: min(head, heads[ssp]) for ssp, head in lagging.items()}, limit)
        return end
    if limit <= 0:
        return {ssp: max(end[ssp], heads[ssp]) for ssp in end}
    budget = limit
    for tier in sorted({tiers.get(ssp, -1) for ssp in end}, reverse=True):
        members = {ssp: heads[ssp] for ssp in end if tiers.get(ssp, -1) == tier}
        budget = _share(end, members, budget)
        if budget <= 0:
            break
    return end


def _share(end: dict[SSP, int], targets: Mapping[SSP, int], budget: int) -> int:
    """Move ``end`` towards ``targets``, sharing ``budget`` (0: unlimited) fairly; returns
    what is left of it."""
    if budget <= 0:
        for ssp, target in targets.items():
            end[ssp] = max(end[ssp], target)
        return 0
    while budget > 0:
        open_ = sorted(ssp for ssp, target in targets.items() if end[ssp] < target)
        if not open_:
            break
        share = max(1, budget // len(open_))
        for ssp in open_:
            take = min(share, targets[ssp] - end[ssp], budget)
            end[ssp] += take
            budget -= take
            if budget <= 0:
                break
    return budget
