"""The status line: lag per input stream, rate, log mode and the cost-based metadata backoff."""

from __future__ import annotations

import logging
import time

from weir.engine.cli.run import _STATUS_MODES
from weir.engine.container.container import ContainerProgress
from weir.engine.model import SystemStreamPartition as SSP
from weir.engine.container.status import StatusMode, StatusReporter, StatusSettings, StatusSnapshot
from weir.engine.systems.api import PartitionMetadata as MD

TX0, TX1, CODES = SSP("filelog", "tx", 0), SSP("filelog", "tx", 1), SSP("filelog", "codes", 0)
HEADS = {TX0: MD(0, 99, 100), TX1: MD(0, 49, 50), CODES: MD(0, 9, 10)}


def test_lag_sums_partitions_per_stream_and_ended_partitions_have_none():
    progress = [ContainerProgress("0", "running", 70, {TX0: 40, CODES: 10}),
                ContainerProgress("1", "running", 30, {TX1: 30}, ended=frozenset({TX1}))]

    snap = StatusSnapshot.of("job", progress, HEADS, rate=5.0, now_ms=10_000)

    assert snap.lag == {"tx": 60, "codes": 0}
    assert snap.processed == 100 and snap.containers == 2
    assert snap.line() == "job  100 msgs  5 msg/s  lag codes 0 · tx 60  no commit yet"


def test_commit_age_is_shown_from_the_newest_checkpoint():
    progress = [ContainerProgress("0", "running", 1, {}, last_commit_ms=7_000),
                ContainerProgress("1", "running", 1, {}, last_commit_ms=8_000)]
    assert StatusSnapshot.of("j", progress, {}, rate=0, now_ms=10_000).commit_age() == \
        "last commit 2s ago"


def test_log_mode_writes_status_lines_on_the_weir_status_logger(caplog):
    progress = [ContainerProgress("0", "running", 5, {TX0: 5})]
    reporter = StatusReporter("job", lambda: progress, lambda ssps: HEADS, StatusMode.LOG,
                              StatusSettings(interval_ms=50, log_interval_ms=20))
    with caplog.at_level(logging.INFO, logger="weir.status"), reporter:
        deadline = time.monotonic() + 5
        while not caplog.records and time.monotonic() < deadline:
            time.sleep(0.01)
    assert "job  5 msgs" in caplog.records[0].getMessage()
    assert "lag tx 95" in caplog.records[0].getMessage()


def test_partition_heads_are_reread_less_often_when_reading_them_is_slow():
    calls = []

    def slow_heads(ssps):
        calls.append(ssps)
        time.sleep(0.02)
        return HEADS

    progress = [ContainerProgress("0", "running", 5, {TX0: 5})]
    reporter = StatusReporter("job", lambda: progress, slow_heads, StatusMode.OFF)
    for _ in range(10):
        reporter.snapshot()
    assert len(calls) == 1  # the next read is due 20x the 20 ms it took
    assert reporter.last.lag == {"tx": 95}


def test_weir_run_offers_every_status_mode():
    assert _STATUS_MODES == tuple(m.value for m in StatusMode)
