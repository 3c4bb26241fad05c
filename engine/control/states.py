"""Reconciliation state of control messages per input partition (docs/CONTROL.md, "Reconciliation in the receiving task").

:class:`EndOfStreamStates` tracks, per SSP of a task, which upstream tasks have sent
end-of-stream; the SSP has ended when every expected upstream task has (or one message
without a task name arrived). :class:`WatermarkStates` tracks each upstream task's latest
watermark per SSP; the SSP's watermark is the minimum over the upstream tasks, it only moves
forward, and upstream tasks that declared themselves idle (a watermark-status message, as
Flink's ``WatermarkStatus``; Samza has none) are left out while a quorum of them is still
active (Samza's quorum rule).

Both carry the bookkeeping a checkpoint stores (:class:`EndOfStreamCheckpoint`,
:class:`WatermarkCheckpoint`) and are rebuilt from it after a crash: a partition that ended
stays ended, a watermark never moves backwards.

Weir departs from Samza in one rule, on purpose: an upstream task that has sent
end-of-stream counts as watermark :data:`~weir.engine.control.messages.WATERMARK_MAX` for the
minimum (:meth:`WatermarkStates.end_of_stream`). In Samza its last watermark keeps holding
event time back, so one upstream task whose input ended early (a skewed, bounded partition)
stalls every window downstream until all the others end too.

``expected`` may be ``None`` when the number of upstream tasks is not configured; the first
control message's ``taskCount`` sets it (:meth:`EndOfStreamStates.expect`).

Example::

    >>> from weir.engine.model import SystemStreamPartition as SSP
    >>> p0 = SSP("filelog", "p1", 0)
    >>> eos = EndOfStreamStates({p0: 2})
    >>> eos.update(p0, "Partition 0")
    False
    >>> eos.update(p0, "Partition 1")
    True
    >>> wm = WatermarkStates({p0: 2})
    >>> wm.update(p0, 4, "Partition 0")   # not every upstream task reported yet
    -1
    >>> wm.update(p0, 3, "Partition 1")
    3
    >>> wm.set_idle(p0, "Partition 1", True)   # its inputs have nothing: left out
    4
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.engine.control.errors import BadTaskCountError
from weir.engine.control.messages import WATERMARK_MAX, WATERMARK_NOT_EXIST
from weir.engine.model import SystemStream, SystemStreamPartition

__all__ = [
    "EndOfStreamCheckpoint",
    "WatermarkCheckpoint",
    "EndOfStreamStates",
    "WatermarkStates",
    "ssp_key",
    "parse_ssp_key",
]


def ssp_key(ssp: SystemStreamPartition) -> str:
    """The JSON key of an SSP in the checkpoint: ``system.stream#partition``."""
    return f"{ssp.system}.{ssp.stream}#{ssp.partition}"


def parse_ssp_key(text: str) -> SystemStreamPartition:
    head, _, partition = text.rpartition("#")
    system, _, stream = head.partition(".")
    return SystemStreamPartition(system, stream, int(partition))


# -- checkpoint shapes --------------------------------------------------------------------

@dataclass(frozen=True)
class EndOfStreamCheckpoint:
    """What a checkpoint keeps of one SSP's end-of-stream reconciliation: the upstream tasks
    that sent it, whether the SSP has ended, and the learned upstream count."""

    tasks: tuple[str, ...] = ()
    ended: bool = False
    expected: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"tasks": list(self.tasks), "ended": self.ended, "expected": self.expected}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "EndOfStreamCheckpoint":
        return cls(tuple(data.get("tasks") or ()), bool(data.get("ended", False)),
                   data.get("expected"))


@dataclass(frozen=True)
class WatermarkCheckpoint:
    """What a checkpoint keeps of one SSP's watermark reconciliation: each upstream task's
    latest watermark, the SSP's watermark (never lower after a restore) and the upstream
    tasks that declared themselves idle (``"idle"``, written only when there are some)."""

    timestamps: Mapping[str, int] = field(default_factory=dict)
    watermark: int = WATERMARK_NOT_EXIST
    expected: int | None = None
    idle: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = {"timestamps": dict(self.timestamps), "watermark": self.watermark,
               "expected": self.expected}
        if self.idle:
            out["idle"] = list(self.idle)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WatermarkCheckpoint":
        return cls(dict(data.get("timestamps") or {}),
                   int(data.get("watermark", WATERMARK_NOT_EXIST)), data.get("expected"),
                   tuple(data.get("idle") or ()))


# -- end of stream ------------------------------------------------------------------------

class _EosState:
    __slots__ = ("expected", "tasks", "ended")

    def __init__(self, expected: int | None):
        self.expected = expected
        self.tasks: set[str] = set()
        self.ended = False


class EndOfStreamStates:
    """Per-SSP end-of-stream reconciliation (docs/CONTROL.md).

    ``expected`` maps every SSP to track to its number of upstream tasks (``0`` for a source
    stream: it ends only by a message without a task name, i.e. the system's end-of-stream;
    ``None`` when unknown until the first message's ``taskCount``).
    """

    def __init__(self, expected: Mapping[SystemStreamPartition, int | None]):
        self._states = {SystemStreamPartition(*s): _EosState(n) for s, n in expected.items()}

    def __contains__(self, ssp: object) -> bool:
        return ssp in self._states

    def expected(self, ssp: SystemStreamPartition) -> int | None:
        return self._states[ssp].expected

    def expect(self, ssp: SystemStreamPartition, count: int, *, offset: int | None = None) -> None:
        """Record the upstream count a message announced; a count that disagrees with the
        one known raises :class:`BadTaskCountError`."""
        state = self._states[ssp]
        if state.expected is None:
            if len(state.tasks) > count:
                raise BadTaskCountError(
                    f"taskCount {count} is less than the {len(state.tasks)} upstream tasks that "
                    f"already sent end-of-stream", ssp=ssp, offset=offset, expected=count,
                    got=len(state.tasks))
            state.expected = count
            state.ended = state.ended or (len(state.tasks) == count and count > 0)
        elif state.expected != count:
            raise BadTaskCountError(
                f"taskCount {count} disagrees with the {state.expected} upstream tasks expected",
                ssp=ssp, offset=offset, expected=state.expected, got=count)

    def update(self, ssp: SystemStreamPartition, task_name: str | None, *,
               offset: int | None = None) -> bool:
        """Record an end-of-stream from ``task_name`` (None: from a source or aggregator,
        which ends the SSP at once); returns whether the SSP has ended. A duplicate from the
        same task counts once; a task beyond the expected count raises BadTaskCountError."""
        state = self._states[ssp]
        if task_name is None:
            state.ended = True
            return True
        state.tasks.add(task_name)
        if state.expected is not None:
            if len(state.tasks) > state.expected:
                raise BadTaskCountError(
                    f"end-of-stream from {len(state.tasks)} distinct upstream tasks "
                    f"({', '.join(sorted(state.tasks))}) but only {state.expected} are expected",
                    ssp=ssp, offset=offset, expected=state.expected, got=len(state.tasks))
            # Samza compares with ==; a source SSP (expected 0) never ends by a named message.
            state.ended = state.ended or len(state.tasks) == state.expected
        return state.ended

    def is_end_of_stream(self, ssp: SystemStreamPartition) -> bool:
        return self._states[ssp].ended

    def tasks(self, ssp: SystemStreamPartition) -> frozenset[str]:
        return frozenset(self._states[ssp].tasks)

    def stream_ended(self, ss: SystemStream) -> bool:
        """Every tracked SSP of ``ss`` has ended (vacuously true when none is tracked)."""
        return all(st.ended for s, st in self._states.items() if s.system_stream == ss)

    def all_end_of_stream(self) -> bool:
        return all(st.ended for st in self._states.values())

    def ended_ssps(self) -> frozenset[SystemStreamPartition]:
        return frozenset(s for s, st in self._states.items() if st.ended)

    # -- checkpoint -------------------------------------------------------------------------
    def checkpoint(self) -> dict[SystemStreamPartition, EndOfStreamCheckpoint]:
        return {s: EndOfStreamCheckpoint(tuple(sorted(st.tasks)), st.ended, st.expected)
                for s, st in self._states.items() if st.tasks or st.ended or st.expected is not None}

    def restore(self, saved: Mapping[SystemStreamPartition, EndOfStreamCheckpoint]) -> None:
        """Bring back the state of a checkpoint (SSPs this task no longer reads are
        ignored; a configured upstream count that differs from a saved one wins only when
        the saved state has not ended)."""
        for ssp, cp in saved.items():
            state = self._states.get(ssp)
            if state is None:
                continue
            state.tasks = set(cp.tasks)
            if state.expected is None:
                state.expected = cp.expected
            state.ended = cp.ended or (state.expected is not None and state.expected > 0
                                       and len(state.tasks) == state.expected)


# -- watermarks ---------------------------------------------------------------------------

class _WatermarkState:
    __slots__ = ("expected", "timestamps", "idle", "watermark", "quorum_size", "quorum_count")

    def __init__(self, expected: int | None, quorum_pct: float):
        self.expected = expected
        self.timestamps: dict[str, int] = {}
        self.idle: set[str] = set()
        self.watermark = WATERMARK_NOT_EXIST
        self.quorum_size = int((expected or 0) * quorum_pct)
        self.quorum_count = 0


class WatermarkStates:
    """Per-SSP watermark reconciliation over upstream tasks (docs/CONTROL.md), with idleness
    declared by the upstream tasks, as Flink's ``WatermarkStatus``.

    ``update(ssp, ts, task)``:

    1. a named task's new watermark replaces its old one unless it is lower (a lower one is
       ignored); a watermark from a task that declared itself idle makes it active again;
    2. a message without a task name raises the SSP's watermark to at least ``ts``;
    3. otherwise, once every expected task has reported a watermark or declared itself idle:
       ``m`` = the minimum over the tasks that are not idle, provided at least
       ``int(tasks x quorum fraction)`` of them are not idle (Samza's quorum); when every
       task that has not ended is idle, the largest of their watermarks (Flink's valve);
       ``watermark = max(watermark, m)``.

    ``set_idle(ssp, task, idle)`` applies a watermark-status message: an idle task is left
    out of the minimum until it sends ``ACTIVE`` or a watermark. A task is never left out
    for being quiet: only its own ``IDLE`` says its inputs have nothing (a slow task holds the
    watermark until it catches up, so its records are never late). A task that resumes behind
    the SSP's watermark holds it there until it catches up (the watermark never moves back).
    """

    def __init__(self, expected: Mapping[SystemStreamPartition, int | None], *,
                 quorum_pct: float = 0.5):
        self.quorum_pct = quorum_pct
        self._states = {SystemStreamPartition(*s): _WatermarkState(n, quorum_pct)
                        for s, n in expected.items()}

    def __contains__(self, ssp: object) -> bool:
        return ssp in self._states

    def expect(self, ssp: SystemStreamPartition, count: int) -> None:
        """Set the upstream count learned from a message (checked by EndOfStreamStates)."""
        state = self._states[ssp]
        if state.expected is None:
            state.expected = count
            state.quorum_size = int(count * self.quorum_pct)

    def update(self, ssp: SystemStreamPartition, ts: int, task_name: str | None) -> int:
        """Apply one watermark message; returns the SSP's watermark."""
        state = self._states[ssp]
        if task_name is None:
            if ts > state.watermark:
                state.watermark = ts
            return state.watermark
        previous = state.timestamps.get(task_name)
        if previous is None or previous <= ts:
            state.timestamps[task_name] = ts
        state.idle.discard(task_name)
        return self._advance(state)

    def set_idle(self, ssp: SystemStreamPartition, task_name: str, idle: bool) -> int:
        """Apply a watermark-status message of ``task_name``; returns the SSP's watermark."""
        state = self._states[ssp]
        if idle:
            if state.timestamps.get(task_name) != WATERMARK_MAX:   # an ended task stays ended
                state.idle.add(task_name)
        else:
            state.idle.discard(task_name)
        return self._advance(state)

    def end_of_stream(self, ssp: SystemStreamPartition, task_name: str | None) -> int:
        """An upstream task ended: it no longer holds the watermark back (Weir's rule)."""
        if task_name is None:
            return self._states[ssp].watermark
        return self.update(ssp, WATERMARK_MAX, task_name)

    def is_idle(self, ssp: SystemStreamPartition) -> bool:
        """Every upstream task of ``ssp`` that has not ended declared itself idle (and one
        at least did): the partition has nothing coming and holds no watermark back."""
        state = self._states[ssp]
        if not state.idle or state.expected is None:
            return False
        known = state.idle | state.timestamps.keys()
        return len(known) >= state.expected and all(
            t in state.idle or state.timestamps[t] == WATERMARK_MAX for t in known)

    def idle_tasks(self, ssp: SystemStreamPartition) -> frozenset[str]:
        return frozenset(self._states[ssp].idle)

    def _advance(self, state: _WatermarkState) -> int:
        idle, stamps = state.idle, state.timestamps
        if state.expected is None or len(idle | stamps.keys()) < state.expected:
            return state.watermark   # not every upstream task reported or declared idle yet
        if idle:
            # the active tasks: neither idle nor ended (ended ones no longer hold the minimum,
            # but alone they do not move it either: with the others idle, it stays)
            counted = [ts for task, ts in stamps.items() if task not in idle]
            active = [ts for ts in counted if ts != WATERMARK_MAX]
            state.quorum_count = len(counted)   # ended tasks count towards the quorum
            if not active:
                # every task that has not ended is idle: nothing is coming, so the partition
                # goes to the largest watermark they reached (Flink's valve does the same)
                m = max((ts for ts in stamps.values() if ts != WATERMARK_MAX),
                        default=WATERMARK_NOT_EXIST)
            elif len(counted) < state.quorum_size:
                return state.watermark
            else:
                m = min(active)
        else:
            state.quorum_count = len(stamps)
            m = min(stamps.values())
        if m > state.watermark:
            state.watermark = m
        return state.watermark

    def watermark(self, ssp: SystemStreamPartition) -> int:
        return self._states[ssp].watermark

    def quorum_count(self, ssp: SystemStreamPartition) -> int:
        return self._states[ssp].quorum_count

    def stream_watermark(self, ss: SystemStream, ssps: Iterable[SystemStreamPartition] | None = None) -> int:
        """The minimum watermark over this task's SSPs of ``ss`` (-1 when it has none)."""
        values = [st.watermark for s, st in self._states.items()
                  if s.system_stream == ss and (ssps is None or s in ssps)]
        return min(values) if values else WATERMARK_NOT_EXIST

    # -- checkpoint -------------------------------------------------------------------------
    def checkpoint(self) -> dict[SystemStreamPartition, WatermarkCheckpoint]:
        return {s: WatermarkCheckpoint(dict(st.timestamps), st.watermark, st.expected,
                                       tuple(sorted(st.idle)))
                for s, st in self._states.items()
                if st.timestamps or st.idle or st.watermark != WATERMARK_NOT_EXIST}

    def restore(self, saved: Mapping[SystemStreamPartition, WatermarkCheckpoint]) -> None:
        """Bring back a checkpoint's watermarks and idle upstream tasks."""
        for ssp, cp in saved.items():
            state = self._states.get(ssp)
            if state is None:
                continue
            if state.expected is None and cp.expected is not None:
                self.expect(ssp, cp.expected)
            state.timestamps = {str(t): int(v) for t, v in cp.timestamps.items()}
            state.idle = {str(t) for t in cp.idle}
            state.watermark = max(state.watermark, cp.watermark)
