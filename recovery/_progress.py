"""Progress output of a restore: a rich bar per store on a terminal, log lines otherwise.

Every store ends with one summary line (:meth:`RestoreStats.summary`): printed under the bars
in ``BAR`` mode, logged at INFO on the ``weir.recovery.restore`` logger in ``LOG`` mode. Warnings of
a plan (checkpointed offset outside the changelog) are always logged at WARNING.
"""

from __future__ import annotations

import logging
import sys
import time
from enum import Enum
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn,
                           TimeElapsedColumn)

from weir.recovery.restore import RestorePlan, RestoreStats

__all__ = ["ProgressMode", "RestoreProgress"]

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


class RestoreProgress:
    """Progress of all the stores of one task's restore. A context manager."""

    def __init__(self, task: str, mode: ProgressMode = ProgressMode.AUTO, *,
                 console: Console | None = None):
        if mode is ProgressMode.AUTO:
            terminal = console.is_terminal if console is not None else sys.stderr.isatty()
            mode = ProgressMode.BAR if terminal else ProgressMode.LOG
        self.task = task
        self.mode = mode
        self._console = console
        self._bar: Progress | None = None

    def __enter__(self) -> "RestoreProgress":
        if self.mode is ProgressMode.BAR:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("records"), TimeElapsedColumn(),
                console=self._console or Console(stderr=True), transient=False)
            self._bar.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def begin(self, plan: RestorePlan) -> "StoreProgress":
        """Report the start of one store's restore."""
        if plan.warning:
            _log.warning("task '%s': %s", self.task, plan.warning)
        total = plan.target - plan.start + 1 if plan.replays else 0
        if self.mode is ProgressMode.LOG and plan.replays:
            _log.info("task '%s': restoring store '%s' (%s: %s), replaying offsets %d..%d",
                      self.task, plan.store, plan.action.value, plan.reason, plan.start,
                      plan.target)
        bar_task = None
        if self._bar is not None:
            bar_task = self._bar.add_task(escape(f"{plan.store} ({plan.action.value})"),
                                          total=max(total, 1))
        return StoreProgress(self, plan, bar_task, total)


class StoreProgress:
    """One store's progress; :meth:`at` after each batch, :meth:`done` at the end."""

    def __init__(self, owner: RestoreProgress, plan: RestorePlan, bar_task: TaskID | None,
                 total: int):
        self._owner = owner
        self._plan = plan
        self._bar_task = bar_task
        self._total = total
        self._next_log = time.monotonic() + _LOG_EVERY_S

    def at(self, offset: int) -> None:
        """The restore has applied every record up to ``offset``."""
        done = offset - self._plan.start + 1
        bar = self._owner._bar
        if bar is not None and self._bar_task is not None:
            bar.update(self._bar_task, completed=done)
        elif self._owner.mode is ProgressMode.LOG and time.monotonic() >= self._next_log:
            self._next_log = time.monotonic() + _LOG_EVERY_S
            _log.info("task '%s': store '%s' at offset %d of %d (%.0f%%)", self._owner.task,
                      self._plan.store, offset, self._plan.target,
                      100.0 * done / max(self._total, 1))

    def done(self, stats: RestoreStats) -> None:
        bar = self._owner._bar
        line = stats.summary()
        if bar is not None and self._bar_task is not None:
            bar.update(self._bar_task, completed=max(self._total, 1))
            bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        elif self._owner.mode is ProgressMode.QUIET:
            _log.debug(line)
        else:
            _log.info(line)
