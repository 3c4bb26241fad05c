"""Restore benchmark: what reading the changelog through restore's failure wrapper costs.

Restore reads every changelog record through ``_CheckedSource`` (recovery/store_restore.py, `CheckedSource`), which
turns any error of the changelog into ``ChangelogDamagedError`` with the offset it happened at,
so that a damaged changelog is never mistaken for one that ends. This measures that layer side
by side with reading the same ``FileChangelog`` directly (1,000,000 records of 111 B, page cache
warm), interleaved, best of N; the per-record difference is the wrapper's cost.

Run::

    .venv/bin/python -m pytest bench/test_bench_restore.py -q -s
"""

from __future__ import annotations

import os
import time

from weir.recovery.store_restore import CheckedSource as _CheckedSource
from weir.testing import FileChangelog

RECORDS = int(os.environ.get("WEIR_BENCH_RESTORE_RECORDS", "1000000"))
ROUNDS = int(os.environ.get("WEIR_BENCH_ROUNDS", "5"))


def _drain(source) -> float:
    started = time.perf_counter()
    n = sum(1 for _ in source.read(0, RECORDS - 1))
    assert n == RECORDS
    return time.perf_counter() - started


def test_side_by_side(tmp_path, capsys):
    with FileChangelog(tmp_path / "changelog") as log:
        log.append_all([(b"key%08d" % i, b"v" * 100) for i in range(RECORDS)])
        log.flush()
        checked = _CheckedSource(log)
        raw = wrapped = float("inf")
        for _ in range(ROUNDS):
            raw = min(raw, _drain(log))
            wrapped = min(wrapped, _drain(checked))
    with capsys.disabled():
        print(f"\nFileChangelog.read: {RECORDS / raw:,.0f} records/s; through _CheckedSource: "
              f"{RECORDS / wrapped:,.0f} records/s; wrapper {(wrapped - raw) / RECORDS * 1e9:.0f}"
              f" ns/record ({wrapped / raw:.2f}x)")
