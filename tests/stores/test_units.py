"""One format for sizes in every progress line, summary and table."""

from __future__ import annotations

from weir.stores.units import human_bytes


def test_sizes_are_binary_units_with_thousands_separators():
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1,023 B"
    assert human_bytes(1024) == "1.0 KiB"
    assert human_bytes(3 * 1024 ** 2 + 512 * 1024) == "3.5 MiB"
    assert human_bytes(2048 * 1024 ** 4) == "2,048.0 TiB"


def test_restore_progress_lines_use_the_same_units():
    from weir.recovery._progress import ProgressMode, RestoreProgress
    progress = RestoreProgress("container 0", ProgressMode.LOG)
    progress.total, progress.records, progress.nbytes = 2_000_000, 1_234_567, 5 * 1024 ** 2

    line = progress._line(progress._started + 2.0)

    assert "1,234,567 of 2,000,000 records" in line and "5.0 MiB" in line
    assert " MB" not in line
