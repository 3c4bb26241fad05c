"""Reconciliation state of control messages per input partition (docs/CONTROL.md, "Reconciliation in the receiving task").

:class:`EndOfStreamStates` tracks, per SSP of a task, which upstream tasks have sent
end-of-stream; the SSP has ended when every expected upstream task has (or one message
without a task name arrived). :class:`WatermarkStates` tracks each upstream task's latest
watermark per SSP; the SSP's watermark is the minimum over the upstream tasks, it only moves
forward, and upstream tasks that stayed quiet longer than ``task.watermark.idle.timeout.ms``
are left out while a quorum of them is still active (Samza's rule, word for word, below).

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
    >>> wm.update(p0, 4, "Partition 0", now_ms=0)   # not every upstream task reported yet
    -1
    >>> wm.update(p0, 3, "Partition 1", now_ms=0)
    3
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
    latest watermark and the SSP's watermark (never lower after a restore)."""

    timestamps: Mapping[str, int] = field(default_factory=dict)
    watermark: int = WATERMARK_NOT_EXIST
    expected: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"timestamps": dict(self.timestamps), "watermark": self.watermark,
                "expected": self.expected}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WatermarkCheckpoint":
        return cls(dict(data.get("timestamps") or {}),
                   int(data.get("watermark", WATERMARK_NOT_EXIST)), data.get("expected"))


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
    __slots__ = ("expected", "timestamps", "last_update", "watermark", "quorum_size",
                 "created_ms", "quorum_count")

    def __init__(self, expected: int | None, quorum_pct: float, now_ms: int):
        self.expected = expected
        self.timestamps: dict[str, int] = {}
        self.last_update: dict[str, int] = {}
        self.watermark = WATERMARK_NOT_EXIST
        self.quorum_size = int((expected or 0) * quorum_pct)
        self.created_ms = now_ms
        self.quorum_count = 0


class WatermarkStates:
    """Per-SSP watermark reconciliation over upstream tasks (docs/CONTROL.md).

    ``update(ssp, ts, task, now)``:

    1. a named task's new watermark replaces its old one unless it is lower (a lower one is
       ignored and does not count as activity);
    2. a message without a task name raises the SSP's watermark to at least ``ts``;
    3. otherwise, when every expected task has reported, or (idle timeout > 0) the SSP is at
       least one idle timeout old and a quorum has reported: ``m`` = the minimum over the
       tasks; if that does not advance the watermark, only the tasks active within the idle
       timeout count (and only if at least a quorum of them, else nothing);
       ``watermark = max(watermark, m)``.

    :meth:`refresh` re-runs step 3 without a new message, so idle upstream tasks are left out
    on the run loop's watermark timer too, not only when a message arrives (Samza only
    re-evaluates on messages).
    """

    def __init__(self, expected: Mapping[SystemStreamPartition, int | None], *,
                 idle_timeout_ms: int = -1, quorum_pct: float = 0.5, now_ms: int = 0):
        self.idle_timeout_ms = idle_timeout_ms
        self.quorum_pct = quorum_pct
        self._states = {SystemStreamPartition(*s): _WatermarkState(n, quorum_pct, now_ms)
                        for s, n in expected.items()}

    def __contains__(self, ssp: object) -> bool:
        return ssp in self._states

    def expect(self, ssp: SystemStreamPartition, count: int) -> None:
        """Set the upstream count learned from a message (checked by EndOfStreamStates)."""
        state = self._states[ssp]
        if state.expected is None:
            state.expected = count
            state.quorum_size = int(count * self.quorum_pct)

    def update(self, ssp: SystemStreamPartition, ts: int, task_name: str | None, *,
               now_ms: int) -> int:
        """Apply one watermark message; returns the SSP's watermark."""
        state = self._states[ssp]
        if task_name is None:
            if ts > state.watermark:
                state.watermark = ts
            return state.watermark
        previous = state.timestamps.get(task_name)
        if previous is None or previous <= ts:
            state.timestamps[task_name] = ts
            state.last_update[task_name] = now_ms
        return self._advance(state, now_ms)

    def end_of_stream(self, ssp: SystemStreamPartition, task_name: str | None, *,
                      now_ms: int) -> int:
        """An upstream task ended: it no longer holds the watermark back (Weir's rule)."""
        if task_name is None:
            return self._states[ssp].watermark
        return self.update(ssp, WATERMARK_MAX, task_name, now_ms=now_ms)

    def refresh(self, ssp: SystemStreamPartition, *, now_ms: int) -> int:
        """Re-evaluate idle exclusion without a new message; returns the SSP's watermark."""
        state = self._states[ssp]
        if state.timestamps:
            self._advance(state, now_ms)
        return state.watermark

    def _can_update(self, state: _WatermarkState, now_ms: int) -> bool:
        reported = len(state.timestamps)
        if state.expected is not None and reported == state.expected:
            return True
        return (self.idle_timeout_ms > 0 and now_ms - state.created_ms >= self.idle_timeout_ms
                and reported >= state.quorum_size)

    def _advance(self, state: _WatermarkState, now_ms: int) -> int:
        if not self._can_update(state, now_ms):
            return state.watermark
        m = min(state.timestamps.values())
        if m <= state.watermark and self.idle_timeout_ms > 0:
            limit = now_ms - self.idle_timeout_ms
            active = [ts for task, ts in state.timestamps.items()
                      if state.last_update[task] > limit]
            m = min(active) if active and len(active) >= state.quorum_size else WATERMARK_NOT_EXIST
            state.quorum_count = len(active)
        else:
            state.quorum_count = len(state.timestamps)
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
        return {s: WatermarkCheckpoint(dict(st.timestamps), st.watermark, st.expected)
                for s, st in self._states.items()
                if st.timestamps or st.watermark != WATERMARK_NOT_EXIST}

    def restore(self, saved: Mapping[SystemStreamPartition, WatermarkCheckpoint], *,
                now_ms: int) -> None:
        """Bring back a checkpoint's watermarks; restored tasks count as active now."""
        for ssp, cp in saved.items():
            state = self._states.get(ssp)
            if state is None:
                continue
            if state.expected is None and cp.expected is not None:
                self.expect(ssp, cp.expected)
            state.timestamps = {str(t): int(v) for t, v in cp.timestamps.items()}
            state.last_update = {t: now_ms for t in state.timestamps}
            state.watermark = max(state.watermark, cp.watermark)
