"""The rich progress bar of restores on a terminal (:class:`~weir.recovery._progress.RestoreProgress`
in ``BAR`` mode), in its own module so that rich is imported only when a bar is drawn."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (BarColumn, Progress, ProgressColumn, Task, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text

from weir.stores.units import human_bytes

__all__ = ["restore_bar"]


class _Throughput(ProgressColumn):
    """``12.3 MiB, 1,234,567 records/s`` of a combined restore task."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed or 0.0
        return Text(f"{human_bytes(task.fields.get('nbytes', 0))}, {speed:,.0f} records/s",
                    style="progress.data.speed")


class _Records(ProgressColumn):
    def render(self, task: Task) -> Text:
        total = f"{int(task.total):,}" if task.total is not None else "?"
        return Text(f"{int(task.completed):,}/{total} records", style="progress.download")


def restore_bar(console: Console | None = None) -> Progress:
    """A bar for one combined restore task: records of records, MB and rate, ETA, elapsed;
    on ``console`` (standard error by default), not started."""
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), _Records(), _Throughput(),
        TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(),
        console=console or Console(stderr=True), transient=False)
