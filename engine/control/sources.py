"""Watermarks of source partitions: bounded out-of-orderness and idle partitions.

A source partition (an input that is not an intermediate stream) has no upstream task to
send it watermarks: its watermark is generated from the event times of the messages the
task has processed, as Flink's ``forBoundedOutOfOrderness`` does::

    watermark = (largest event time seen) - task.watermark.max.out.of.orderness.ms - 1

so a message may arrive up to the bound later than a message with a larger event time and
still be on time. A partition that has ended counts as
:data:`~weir.engine.control.messages.WATERMARK_MAX`.

**Idle partitions.** With ``task.watermark.idle.timeout.ms`` > 0, a partition that has not
delivered a message for that long (or never did, once the task is that old) is left out of
the minimum over the task's partitions of a stream, so one quiet partition does not stall
event time; when all of a stream's partitions are idle the stream's watermark stays where it
is. The timer reads the clock; the per-message path does not (it sets a flag).

Per-message cost is one attribute compare and one store on the partition's
:class:`PartitionClock`; the rest runs on the run loop's watermark timer.

Example::

    >>> from weir.engine.model import SystemStreamPartition as SSP
    >>> p0, p1 = SSP("filelog", "views", 0), SSP("filelog", "views", 1)
    >>> src = SourceWatermarks([p0, p1], out_of_orderness_ms=5, idle_timeout_ms=100, now_ms=0)
    >>> src.clock(p0).observe(1_000); src.clock(p1).observe(2_000)
    >>> src.stream_watermark(p0.system_stream, now_ms=10)
    994
    >>> src.clock(p1).observe(2_100)
    >>> src.stream_watermark(p0.system_stream, now_ms=150)   # p0 idle since 10: left out
    2094
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from weir.engine.control.messages import WATERMARK_MAX, WATERMARK_NOT_EXIST
from weir.engine.model import SystemStream, SystemStreamPartition

__all__ = ["PartitionClock", "SourceWatermarks"]

_NEVER = -(1 << 63)


class PartitionClock:
    """Event-time bookkeeping of one source partition; ``observe(ts)`` per message."""

    __slots__ = ("max_ts", "active", "last_active_ms", "ended")

    def __init__(self, now_ms: int):
        self.max_ts = _NEVER
        self.active = False
        self.last_active_ms = now_ms
        self.ended = False

    def observe(self, ts: int) -> None:
        """A message with event time ``ts`` (ms) was processed."""
        if ts > self.max_ts:
            self.max_ts = ts
        self.active = True


class SourceWatermarks:
    """The generated watermarks of a task's source partitions (see the module docstring)."""

    def __init__(self, ssps: Iterable[SystemStreamPartition], *, out_of_orderness_ms: int = 0,
                 idle_timeout_ms: int = -1, now_ms: int = 0):
        self.out_of_orderness_ms = max(0, out_of_orderness_ms)
        self.idle_timeout_ms = idle_timeout_ms
        self._clocks = {SystemStreamPartition(*s): PartitionClock(now_ms) for s in ssps}
        self._streams: dict[SystemStream, list[PartitionClock]] = {}
        for ssp, clock in self._clocks.items():
            self._streams.setdefault(ssp.system_stream, []).append(clock)
        self._last: dict[SystemStream, int] = {ss: WATERMARK_NOT_EXIST for ss in self._streams}

    def __contains__(self, ssp: object) -> bool:
        return ssp in self._clocks

    @property
    def streams(self) -> list[SystemStream]:
        return list(self._streams)

    def clock(self, ssp: SystemStreamPartition) -> PartitionClock:
        return self._clocks[ssp]

    @property
    def observed(self) -> bool:
        """Whether a message was observed since the last watermark computation (a tick)."""
        return any(clock.active for clock in self._clocks.values())

    def end(self, ssp: SystemStreamPartition) -> None:
        """The partition ended: it no longer holds event time back."""
        self._clocks[ssp].ended = True

    def stream_watermark(self, ss: SystemStream, *, now_ms: int) -> int:
        """The watermark of stream ``ss`` over the task's partitions: the minimum over those
        not idle, never lower than before (see the module docstring)."""
        clocks = self._streams[ss]
        idle_limit = now_ms - self.idle_timeout_ms if self.idle_timeout_ms > 0 else None
        values = []
        for clock in clocks:
            if clock.active:
                clock.active = False
                clock.last_active_ms = now_ms
            if clock.ended:
                values.append(WATERMARK_MAX)
                continue
            if idle_limit is not None and clock.last_active_ms <= idle_limit:
                continue  # idle: left out
            values.append(WATERMARK_NOT_EXIST if clock.max_ts == _NEVER
                          else max(WATERMARK_NOT_EXIST,
                                   clock.max_ts - self.out_of_orderness_ms - 1))
        last = self._last[ss]
        if values:
            m = min(values)
            if m > last:
                last = self._last[ss] = m
        return last

    def idle(self, ssp: SystemStreamPartition, *, now_ms: int) -> bool:
        clock = self._clocks[ssp]
        return (self.idle_timeout_ms > 0 and not clock.active and not clock.ended
                and clock.last_active_ms <= now_ms - self.idle_timeout_ms)

    # -- checkpoint -------------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        """``{"max": {ssp: largest event time}, "streams": {ss: watermark}}`` (keys as
        ``system.stream#p`` / ``system.stream``)."""
        from weir.engine.control.states import ssp_key
        return {
            "max": {ssp_key(s): c.max_ts for s, c in self._clocks.items() if c.max_ts != _NEVER},
            "streams": {f"{ss.system}.{ss.stream}": wm for ss, wm in self._last.items()
                        if wm != WATERMARK_NOT_EXIST},
        }

    def restore(self, saved: Mapping[str, Any]) -> None:
        from weir.engine.control.states import parse_ssp_key
        for key, value in (saved.get("max") or {}).items():
            ssp = parse_ssp_key(key)
            if ssp in self._clocks:
                clock = self._clocks[ssp]
                clock.max_ts = max(clock.max_ts, int(value))
        for key, value in (saved.get("streams") or {}).items():
            ss = SystemStream.parse(key)
            if ss in self._last:
                self._last[ss] = max(self._last[ss], int(value))
