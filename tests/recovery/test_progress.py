"""Restore progress: a bar and a summary line on a terminal, log lines elsewhere."""

from __future__ import annotations

import io
import logging

from rich.console import Console

from weir.recovery._progress import ProgressMode, RestoreProgress
from weir.recovery.restore import Action, RestorePlan, RestoreStats


def _plan(warning: str | None = None) -> RestorePlan:
    return RestorePlan("counts", Action.REBUILD, 0, 9_999, 10_010, "no OFFSET file", warning)


def _stats() -> RestoreStats:
    return RestoreStats("Partition 0", "counts", Action.REBUILD, 10_000, 3 << 20, 0.5, 0,
                        9_999, 4, trimmed_records=11)


def test_summary_line_gives_records_bytes_seconds_and_rate():
    line = _stats().summary()
    assert line == ("restored store 'counts' of task 'Partition 0' (rebuild, offsets 0..9999): "
                    "10,000 records, 3.0 MiB, 0.50 s, 20,000 records/s, reverted 11 uncommitted "
                    "changelog records (4 keys)")


def test_terminal_gets_a_bar_and_the_summary_line():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with RestoreProgress("Partition 0", ProgressMode.AUTO, console=console) as progress:
        assert progress.mode is ProgressMode.BAR
        handle = progress.begin(_plan())
        handle.at(4_999)
        handle.done(_stats())
    text = out.getvalue()
    assert "counts (rebuild)" in text
    assert "20,000 records/s" in text


def test_without_terminal_progress_and_summary_are_log_lines(caplog):
    console = Console(file=io.StringIO(), force_terminal=False)
    with caplog.at_level(logging.INFO, logger="weir.recovery.restore"):
        with RestoreProgress("Partition 0", ProgressMode.AUTO, console=console) as progress:
            assert progress.mode is ProgressMode.LOG
            handle = progress.begin(_plan(warning="checkpointed offset outside the range"))
            handle.done(_stats())
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.WARNING, "task 'Partition 0': checkpointed offset outside the range") \
        in messages
    assert any("replaying offsets 0..9999" in m for _, m in messages)
    assert any(m.startswith("restored store 'counts'") for _, m in messages)
