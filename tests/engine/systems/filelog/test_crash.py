"""Crash safety with real processes: a writer killed with SIGKILL in the middle of appending
never loses an acknowledged record, and the next writer continues without gap or duplicate."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

import pytest

from weir.engine.systems.filelog.segment import list_segments, scan_plain

from tests.engine.systems.filelog.conftest import Log

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))


def _torn_bytes(log: Log) -> int:
    """Bytes after the last whole record of the active segment."""
    active = list_segments(log.pdir())[-1].path
    fd = os.open(active, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        return size - scan_plain(fd, size).end
    finally:
        os.close(fd)


def _check_log(log: Log) -> int:
    """Every record's value names its own offset, offsets run 0..n-1; returns n."""
    records = log.read()
    assert [r.offset for r in records] == list(range(len(records)))
    assert all(int(r.value.split(b"|")[0]) == r.offset for r in records)
    return len(records)


def _run_writer(root: str, seed: int, kill_after: int, tear_after: int) -> int:
    """Start the writer process, SIGKILL it once it acknowledged ``kill_after`` flushes (or
    once it tore a record); return the highest acknowledged offset."""
    child = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "_crash_writer.py"), REPO, root, str(seed),
         str(tear_after)], stdout=subprocess.PIPE, text=True)
    acked, lines = -1, 0
    try:
        for line in child.stdout:
            if line.strip() == "torn":
                break
            acked = max(acked, int(line))
            lines += 1
            if not tear_after and lines >= kill_after:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    return acked


@pytest.mark.slow
def test_sigkill_mid_append_never_loses_or_duplicates_acknowledged_records(tmp_path):
    root = str(tmp_path / "log")
    log = Log(root)
    log.create()
    rng = random.Random(2024)
    highest_acked = -1
    for round_ in range(5):
        tear = round_ in (1, 3)
        acked = _run_writer(root, round_, rng.randint(3, 60), rng.randint(3, 30) if tear else 0)
        highest_acked = max(highest_acked, acked)
        present = _check_log(log)                 # readers stop before any torn tail
        assert present > highest_acked            # every acknowledged record is there
        if tear:                                  # the next writer has a tail to cut off
            assert _torn_bytes(log) > 0
    with log.writer() as w:                       # repairs, then continues at the right offset
        assert w.upcoming == present and _torn_bytes(log) == 0
        assert w.append(b"last", b"%d|" % present) == present
        w.flush()
    assert _check_log(log) == present + 1
