"""Progress output of restores: one combined bar on a terminal, log lines otherwise.

One :class:`RestoreProgress` covers every store a storage manager restores -- all stores of
all tasks of a container when the :class:`~weir.recovery.container_storage.ContainerStorageManager`
restores them in parallel threads. On a terminal it draws one bar for all of them: records
replayed of the records to replay, MB read, the rate and the time left. Elsewhere the
``weir.recovery.restore`` logger gets a start line per store (what it does and why), a
combined progress line at most every 5 seconds, and the summaries. Every store ends with one
summary line (:meth:`RestoreStats.summary`): printed under the bar in ``BAR`` mode, logged at
INFO in ``LOG`` mode, at DEBUG in ``QUIET`` mode. Warnings of a plan (a changelog that lost
records, the compaction-lag rule) are always logged at WARNING.

Every method may be called from any restore thread (and from the restore worker pool's
dispatcher thread).

Example::

    >>> from weir.recovery.restore import Action, RestorePlan, RestoreStats
    >>> plan = RestorePlan("counts", Action.REBUILD, 0, 999, 999, "no OFFSET file")
    >>> with RestoreProgress("container 0", ProgressMode.QUIET) as progress:
    ...     handle = progress.begin("Partition 0", plan)
    ...     handle.advance(999, 1000, 120_000)
    ...     progress.records
    1000
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from enum import Enum
from types import TracebackType
from typing import TYPE_CHECKING

from weir.stores.units import human_bytes

from weir.recovery.restore import RestorePlan, RestoreStats

if TYPE_CHECKING:  # rich is imported for the bar only (a terminal)
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["ProgressMode", "RestoreProgress", "StoreProgress"]

_log = logging.getLogger("weir.recovery.restore")

_LOG_EVERY_S = 5.0


class ProgressMode(Enum):
    """How a restore reports progress."""

    AUTO = "auto"
    """A bar on a terminal (stderr is a TTY), log lines otherwise."""
    BAR = "bar"
    LOG = "log"
    QUIET = "quiet"
    """No progress; the summary line is logged at DEBUG."""


def _human_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class RestoreProgress:
    """Progress of the restores of one storage manager (see the module docstring). A context
    manager; ``title`` heads the bar and the log lines (a task name, or ``container 0``)."""

    def __init__(self, title: str, mode: ProgressMode = ProgressMode.AUTO, *,
                 console: Console | None = None):
        if mode is ProgressMode.AUTO:
            terminal = console.is_terminal if console is not None else sys.stderr.isatty()
            mode = ProgressMode.BAR if terminal else ProgressMode.LOG
        self.title = title
        self.mode = mode
        self._console = console
        self._bar: Progress | None = None
        self._bar_task: TaskID | None = None
        self._lock = threading.Lock()
        self.total = 0
        """Changelog offsets to replay, over every store begun (or announced with
        :meth:`expect`)."""
        self.records = 0
        self.nbytes = 0
        self._expected: dict[tuple[str, str], int] = {}
        self._started = time.monotonic()
        self._next_log = self._started + _LOG_EVERY_S

    def __enter__(self) -> "RestoreProgress":
        if self.mode is ProgressMode.BAR:
            from weir.recovery._progress_bar import restore_bar
            self._bar = restore_bar(self._console)
            self._bar.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    # -- totals ----------------------------------------------------------------------------
    def expect(self, task: str, plan: RestorePlan) -> None:
        """Announce a store's restore before it starts (the bar's total covers every store
        from the beginning)."""
        with self._lock:
            self._set_expected((str(task), plan.store), _replay_count(plan))

    def _set_expected(self, key: tuple[str, str], count: int) -> None:
        previous = self._expected.get(key, 0)
        self._expected[key] = count
        self.total += count - previous
        self._draw_total()

    def _draw_total(self) -> None:
        if self._bar is None:
            return
        if self._bar_task is None:
            self._bar_task = self._bar.add_task(f"restoring {self.title}", total=max(self.total, 1),
                                                nbytes=0)
        else:
            self._bar.update(self._bar_task, total=max(self.total, 1))

    # -- stores ----------------------------------------------------------------------------
    def begin(self, task: str, plan: RestorePlan) -> "StoreProgress":
        """Report the start of one store's restore."""
        task = str(task)
        if plan.warning:
            _log.warning("task '%s': %s", task, plan.warning)
        if self.mode is ProgressMode.LOG and plan.replays:
            _log.info("task '%s': restoring store '%s' (%s: %s), replaying offsets %d..%d",
                      task, plan.store, plan.action.value, plan.reason, plan.start,
                      plan.target)
        with self._lock:
            self._set_expected((task, plan.store), _replay_count(plan))
        return StoreProgress(self, task, plan)

    def _advance(self, records: int, nbytes: int) -> None:
        with self._lock:
            self.records += records
            self.nbytes += nbytes
            if self._bar is not None and self._bar_task is not None:
                self._bar.update(self._bar_task, advance=records, nbytes=self.nbytes)
                return
            if self.mode is not ProgressMode.LOG:
                return
            now = time.monotonic()
            if now < self._next_log:
                return
            self._next_log = now + _LOG_EVERY_S
            line = self._line(now)
        _log.info("%s", line)

    def _line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = self.records / elapsed
        left = max(self.total - self.records, 0)
        eta = _human_seconds(left / rate) if rate > 0 else "unknown"
        share = 100.0 * self.records / max(self.total, 1)
        return (f"restoring {self.title}: {self.records:,} of {self.total:,} records "
                f"({share:.0f}%), {human_bytes(self.nbytes)}, {rate:,.0f} records/s, "
                f"about {eta} left")

    def _finished(self, key: tuple[str, str], replayed: int, expected: int) -> None:
        """A store is done: its part of the total becomes what it actually replayed
        (compacted changelogs have gaps; a failed store replays nothing more)."""
        with self._lock:
            self._set_expected(key, replayed)
            if self._bar is not None and self._bar_task is not None:
                self._bar.update(self._bar_task, completed=self.records)

    def _print(self, line: str) -> None:
        bar = self._bar
        if bar is not None:
            bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        elif self.mode is ProgressMode.QUIET:
            _log.debug("%s", line)
        else:
            _log.info("%s", line)


class StoreProgress:
    """One store's progress: :meth:`advance` per batch read, :meth:`done` at the end (or
    :meth:`failed`)."""

    def __init__(self, owner: RestoreProgress, task: str, plan: RestorePlan):
        self._owner = owner
        self._key = (task, plan.store)
        self._plan = plan
        self.records = 0

    def replan(self, plan: RestorePlan) -> None:
        """The store's plan changed (its local copy turned out unusable once opened)."""
        self._plan = plan
        with self._owner._lock:
            self._owner._set_expected(self._key, _replay_count(plan))

    def advance(self, last: int, records: int, nbytes: int) -> None:
        """A batch of ``records`` changelog records (``nbytes`` bytes) up to offset ``last``
        was read."""
        self.records += records
        self._owner._advance(records, nbytes)

    def at(self, offset: int) -> None:
        """Every record up to ``offset`` was applied (callers that count offsets)."""
        done = offset - self._plan.start + 1
        if done > self.records:
            self.advance(offset, done - self.records, 0)

    def done(self, stats: RestoreStats) -> None:
        self._owner._finished(self._key, self.records, _replay_count(self._plan))
        self._owner._print(stats.summary())

    def failed(self) -> None:
        self._owner._finished(self._key, self.records, _replay_count(self._plan))


def _replay_count(plan: RestorePlan) -> int:
    return plan.target - plan.start + 1 if plan.replays else 0
