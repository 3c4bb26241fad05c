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


def test_terminal_gets_one_bar_for_every_store_and_a_summary_line_each():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    with RestoreProgress("container 0", ProgressMode.AUTO, console=console) as progress:
        assert progress.mode is ProgressMode.BAR
        first = progress.begin("Partition 0", _plan())
        second = progress.begin("Partition 1", _plan())
        assert progress.total == 20_000
        first.advance(4_999, 5_000, 1 << 20)
        second.advance(9_999, 10_000, 2 << 20)
        first.done(_stats())
    text = out.getvalue()
    assert "restoring container 0" in text
    assert "records" in text and "MiB" in text and "ETA" in text
    assert "20,000 records/s" in text  # the store's summary line
    assert progress.records == 15_000


def test_without_terminal_progress_and_summary_are_log_lines(caplog):
    console = Console(file=io.StringIO(), force_terminal=False)
    with caplog.at_level(logging.INFO, logger="weir.recovery.restore"):
        with RestoreProgress("container 0", ProgressMode.AUTO, console=console) as progress:
            assert progress.mode is ProgressMode.LOG
            handle = progress.begin("Partition 0",
                                    _plan(warning="checkpointed offset outside the range"))
            handle.done(_stats())
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.WARNING, "task 'Partition 0': checkpointed offset outside the range") \
        in messages
    assert any("replaying offsets 0..9999" in m for _, m in messages)
    assert any(m.startswith("restored store 'counts'") for _, m in messages)


def test_the_periodic_log_line_gives_the_combined_records_rate_and_time_left(caplog,
                                                                              monkeypatch):
    import weir.recovery._progress as module
    monkeypatch.setattr(module, "_LOG_EVERY_S", 0.0)
    with caplog.at_level(logging.INFO, logger="weir.recovery.restore"):
        with RestoreProgress("container 0", ProgressMode.LOG) as progress:
            progress.expect("Partition 1", _plan())
            handle = progress.begin("Partition 0", _plan())
            handle.advance(4_999, 5_000, 2_000_000)
    lines = [r.getMessage() for r in caplog.records if "of 20,000 records" in r.getMessage()]
    assert lines and lines[-1].startswith("restoring container 0: 5,000 of 20,000 records (25%), "
                                          "1.9 MiB, ")
    assert "records/s, about" in lines[-1] and lines[-1].endswith("left")


def test_a_store_that_replays_less_than_its_range_shrinks_the_total():
    with RestoreProgress("container 0", ProgressMode.QUIET) as progress:
        handle = progress.begin("Partition 0", _plan())
        handle.advance(9_999, 7_000, 0)  # a compacted changelog has gaps
        handle.done(_stats())
    assert (progress.records, progress.total) == (7_000, 7_000)
