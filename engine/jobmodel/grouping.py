"""The pure steps of the job model: changelog partitions per task and tasks per container.

Internal to :mod:`weir.engine.jobmodel.model` (re-exported there). No config here: names and counts in,
mappings out, deterministic.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from weir.engine.errors import EngineError
from weir.engine.model import TaskName

__all__ = ["JobModelError", "changelog_partition_mapping", "assign_containers", "container_order"]


class JobModelError(EngineError):
    """A job model cannot be built or read (no tasks, bad JSON, inconsistent tasks)."""


def container_order(cid: str) -> tuple[int, int | str]:
    """Sort key of container ids: numeric ids in numeric order, then the others."""
    return (0, int(cid)) if cid.isdigit() else (1, cid)


def _partition_number(name: str) -> int | None:
    prefix = "Partition "
    if name.startswith(prefix) and name[len(prefix):].isdigit():
        return int(name[len(prefix):])
    return None


def changelog_partition_mapping(task_names: Collection[str],
                                previous: Mapping[str, int] | None = None) -> dict[TaskName, int]:
    """Changelog partition per task (as Samza maps them, with one deviation; docs/RECOVERY.md, "The changelog partition of a store").

    Previous entries win, so a task never moves. A new task ``Partition N`` takes N when no
    task, current or previous, holds it (Samza would hand out partitions in string order of
    the names, so that ``Partition 10`` got 2). Every other new task, in name order, takes
    ``max(partitions in use, -1) + 1``.

    >>> changelog_partition_mapping(["Partition 10", "Partition 2", "x"], {"old": 0})
    {'Partition 10': 10, 'Partition 2': 2, 'x': 11}
    """
    previous = dict(previous or {})
    mapping: dict[TaskName, int] = {}
    used = set(previous.values())
    pending: list[str] = []
    for name in sorted(task_names):
        if name in previous:
            mapping[TaskName(name)] = previous[name]
            continue
        n = _partition_number(name)
        if n is not None and n not in used:
            mapping[TaskName(name)] = n
            used.add(n)
        else:
            pending.append(name)
    for name in pending:
        nxt = max(used, default=-1) + 1
        mapping[TaskName(name)] = nxt
        used.add(nxt)
    return {name: mapping[name] for name in sorted(mapping)}


def _reusable(previous: Mapping[str, str], names: list[str]) -> list[str] | None:
    """The previous container ids (``"0".."k-1"``) when the previous assignment covers
    exactly ``names``; otherwise None."""
    if not previous or set(previous) != set(names):
        return None
    ids = sorted(set(previous.values()), key=container_order)
    return ids if ids == [str(i) for i in range(len(ids))] else None


def _round_robin(names: list[str], count: int) -> dict[str, list[TaskName]]:
    out: dict[str, list[TaskName]] = {str(i): [] for i in range(count)}
    for i, name in enumerate(names):
        out[str(i % count)].append(TaskName(name))
    return out


def assign_containers(task_names: Collection[str], count: int,
                      previous: Mapping[str, str] | None = None) -> dict[str, list[TaskName]]:
    """Container id -> task names, as Samza's GroupByContainerCount.

    Without a usable previous assignment: names sorted as strings, dealt round-robin (task i
    to container ``i % count``). With one (the same tasks; previous and new count > 1): the
    same count keeps it; another count rebalances, moving as few tasks as possible —
    container i ends with ``len // count`` tasks (+1 for the first ``len % count``); the
    surplus, taken from the end of each old container's sorted list, fills the others in
    container order.

    >>> assign_containers(["Partition 0", "Partition 1", "Partition 10", "Partition 2"], 2)
    {'0': ['Partition 0', 'Partition 10'], '1': ['Partition 1', 'Partition 2']}
    """
    names = sorted(task_names)
    if not names:
        raise JobModelError("the job has no tasks: no input partition is left after taking out "
                            "broadcast inputs; add a stream to task.inputs")
    if count < 1 or count > len(names):
        raise JobModelError(f"cannot spread {len(names)} tasks over {count} containers; use "
                            f"1 to {len(names)} containers")
    prev_ids = _reusable(previous or {}, names)
    if prev_ids is None or len(prev_ids) == 1 or count == 1:
        return _round_robin(names, count)
    groups = {cid: sorted(n for n, c in previous.items() if c == cid) for cid in prev_ids}
    if len(prev_ids) == count:
        return {cid: [TaskName(n) for n in groups[cid]] for cid in prev_ids}
    expected = [len(names) // count + (1 if i < len(names) % count else 0)
                for i in range(count)] + [0] * max(0, len(prev_ids) - count)
    surplus: list[str] = []
    for i, cid in enumerate(prev_ids):
        while len(groups[cid]) > expected[i]:
            surplus.append(groups[cid].pop())
    out: dict[str, list[TaskName]] = {}
    for i in range(count):
        group = groups.get(str(i), [])
        while len(group) < expected[i]:
            group.append(surplus.pop(0))
        out[str(i)] = [TaskName(n) for n in group]
    return out
