"""Late elements made visible: a rate-limited warning with counts, for every operator that
drops elements behind the watermark (windows past their allowed lateness, stream-stream joins).

Every drop is also counted in the task's metrics (``late-dropped-<operator id>``, registered
when the operator opens, so it reads 0 until something is dropped) and, for a window whose
application asked for it, sent to the window's late side output
(``stream.window(...).late_elements()``). The warning names the operator, the task, how many
elements were dropped since the last warning and in all, how far behind the watermark the
latest one was, and what to change. The first drop is logged at once; later ones at most once
per ``app.late.log.interval.ms``; what was not logged yet is logged when the operator's input
ends or drains.

Example::

    >>> drops = LateDrops("window 'per-minute'", "Partition 0", interval_ms=10_000,
    ...                   hint="raise task.watermark.max.out.of.orderness.ms")
    >>> drops.dropped(ts=3_800, watermark=5_000)   # logs a warning: 1,200 ms behind
    >>> drops.total, drops.unlogged
    (1, 0)
"""

from __future__ import annotations

import logging
import time

from weir.stores.config import Config, ConfigError, declare

from weir.engine.control.messages import WATERMARK_MAX

__all__ = ["APP_LATE_LOG_INTERVAL_MS", "LateDrops", "late_log_interval_ms"]

log = logging.getLogger("weir.app")

APP_LATE_LOG_INTERVAL_MS = declare(
    "app.late.log.interval.ms", int, 10_000,
    "An operator that drops late elements (a window past its allowed lateness, a "
    "stream-stream join) logs a warning with counts at the first drop and then at most once "
    "per this many milliseconds, and once more when its input ends; 0 logs every drop, -1 "
    "none (drops are still counted in the task's metrics as `late-dropped-<operator>` and "
    "sent to a window's late_elements() side output).", component="application")


def late_log_interval_ms(config: Config) -> int:
    value = APP_LATE_LOG_INTERVAL_MS.get(config)
    if value < -1:
        key = APP_LATE_LOG_INTERVAL_MS.name
        raise ConfigError(f"must be -1 (no warnings), 0 (every drop) or a positive number of "
                          f"milliseconds, got {value}", key=key, origin=config.origin(key))
    return value


class LateDrops:
    """Counts one operator's late drops and logs them, rate-limited (see the module
    docstring)."""

    __slots__ = ("what", "task", "interval_s", "hint", "total", "unlogged", "latest_ts",
                 "latest_watermark", "_next_at")

    def __init__(self, what: str, task: str, *, interval_ms: int, hint: str):
        self.what, self.task, self.hint = what, task, hint
        self.interval_s = interval_ms / 1000.0 if interval_ms >= 0 else -1.0
        self.total = 0
        self.unlogged = 0
        self.latest_ts = self.latest_watermark = 0
        self._next_at = 0.0

    def dropped(self, ts: int, watermark: int) -> None:
        """One element at event time ``ts`` dropped, the operator's watermark at
        ``watermark``."""
        self.total += 1
        self.unlogged += 1
        self.latest_ts, self.latest_watermark = ts, watermark
        if self.interval_s < 0:
            return
        now = time.monotonic()
        if now >= self._next_at:
            self._log(now)

    def flush(self) -> None:
        """Log what was not logged yet (the operator's input ended or drained)."""
        if self.unlogged and self.interval_s >= 0:
            self._log(time.monotonic())

    def _log(self, now: float) -> None:
        since = ("" if self.total == self.unlogged or self.interval_s <= 0 else
                 " since the last warning")
        if self.latest_watermark >= WATERMARK_MAX:
            where = (f"at event time {self.latest_ts:,}, after the end of the operator's input "
                     f"(every upstream had ended)")
        else:
            where = f"{self.latest_watermark - self.latest_ts:,} ms behind the watermark"
        log.warning("task '%s': %s dropped %s late element%s%s (%s in all); the latest was "
                    "%s. %s", self.task, self.what, f"{self.unlogged:,}",
                    "" if self.unlogged == 1 else "s", since, f"{self.total:,}", where, self.hint)
        self.unlogged = 0
        self._next_at = now + self.interval_s
