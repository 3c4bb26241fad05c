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


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Counting:
    """Progress of one container that processes ``per_second`` messages per clock second."""

    def __init__(self, clock: _Clock, per_second: int) -> None:
        self.clock, self.per_second = clock, per_second

    def __call__(self) -> list[ContainerProgress]:
        n = int(self.clock.now * self.per_second)
        return [ContainerProgress("0", "running", n, {TX0: n})]


def _ticks_until_first_line(reporter: StatusReporter, clock: _Clock, step: float):
    reporter.sample()  # what the reporting thread does when it starts
    for _ in range(1000):
        clock.now += step
        snap = reporter.tick()
        if snap is not None:
            return snap
    raise AssertionError("no status line")


def test_the_first_logged_status_line_shows_the_rate_not_zero():
    clock = _Clock()
    reporter = StatusReporter("job", _Counting(clock, 1000), lambda ssps: HEADS, StatusMode.LOG,
                              StatusSettings(interval_ms=500, log_interval_ms=10_000),
                              clock=clock)

    first = _ticks_until_first_line(reporter, clock, 0.5)

    assert clock.now == 10.0  # logged once, after the log interval
    assert first.rate == 1000.0
    assert "1,000 msg/s" in first.line()


def test_the_first_terminal_status_line_shows_the_rate_not_zero():
    clock = _Clock()
    reporter = StatusReporter("job", _Counting(clock, 400), lambda ssps: HEADS, StatusMode.LINE,
                              StatusSettings(interval_ms=500), clock=clock)

    first = _ticks_until_first_line(reporter, clock, 0.5)

    assert clock.now == 0.5 and "400 msg/s" in first.line()


def test_log_mode_samples_between_lines_and_logs_only_when_due():
    clock = _Clock()
    reads = []
    counting = _Counting(clock, 10)

    def read():
        reads.append(clock.now)
        return counting()

    reporter = StatusReporter("job", read, lambda ssps: HEADS, StatusMode.LOG,
                              StatusSettings(interval_ms=1000, log_interval_ms=5000),
                              clock=clock)
    reporter.sample()
    lines = []
    for _ in range(10):
        clock.now += 1.0
        if reporter.tick() is not None:
            lines.append(clock.now)
    assert lines == [5.0, 10.0]
    assert len(reads) == 11  # one sample per tick: the rate never rests on a single sample


def test_the_rate_is_zero_before_two_samples():
    reporter = StatusReporter("job", lambda: [], lambda ssps: {}, StatusMode.OFF)
    assert reporter.rate() == 0.0


def test_nothing_to_draw_makes_no_console_and_a_status_line_gets_one():
    import subprocess
    import sys
    code = ("import os, sys\n"
            "os.environ.pop('FORCE_COLOR', None); os.environ.pop('TTY_COMPATIBLE', None)\n"
            "from weir.engine.container.status import StatusMode, StatusReporter, "
            "configure_logging\n"
            "console = configure_logging(StatusMode(sys.argv[1]))\n"
            "reporter = StatusReporter('job', lambda: [], lambda ssps: {}, StatusMode(sys.argv[1]))\n"
            "print(console is None, reporter.console is None, reporter.mode.value)")

    def run(mode: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", code, mode], capture_output=True,
                              text=True, check=True).stdout.split()
    assert run("off") == ["True", "True", "off"]
    assert run("log") == ["True", "True", "log"]
    assert run("auto") == ["True", "True", "log"]  # standard error is a pipe here
    assert run("line") == ["False", "False", "line"]
