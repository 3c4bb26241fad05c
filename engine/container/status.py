"""The live status of a running job: one line on a terminal, periodic log lines otherwise.

``weir run`` shows, while the job runs::

    currency-join  52,410 msgs  48,900 msg/s  lag transactions 1,204 · transactions-replay 9,000  last commit 2s ago

* **msgs**: messages processed so far this run, over every container;
* **msg/s**: the rate over the last few seconds (progress is sampled every
  ``job.status.interval.ms`` in both modes, so the first line already has a rate);
* **lag** per input stream: messages not yet processed (the partitions' upcoming offsets minus
  the tasks' next offsets, summed over partitions; an ended partition has no lag);
* **last commit**: time since the newest checkpoint of any task.

On a terminal (standard error is a TTY) the line is redrawn every ``job.status.interval.ms``
with rich and log records print above it; otherwise one log line is written every
``job.status.log.interval.ms`` on the ``weir.status`` logger. :class:`StatusMode` picks either
explicitly (``weir run --status line|log|off``).

Example::

    >>> from weir.engine.container.container import ContainerProgress
    >>> from weir.engine.model import SystemStreamPartition as SSP
    >>> from weir.engine.systems.api import PartitionMetadata as MD
    >>> p = ContainerProgress("0", "running", 120, {SSP("filelog", "tx", 0): 120})
    >>> snap = StatusSnapshot.of("demo", [p], {SSP("filelog", "tx", 0): MD(0, 199, 200)},
    ...                          rate=1000.0, now_ms=0)
    >>> snap.line()
    'demo  120 msgs  1,000 msg/s  lag tx 80  no commit yet'
"""

from __future__ import annotations

import collections
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from weir.stores.config import Config, declare

from weir.engine.container.progress import ContainerProgress
from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import PartitionMetadata

if TYPE_CHECKING:  # rich is imported when something is drawn (or a terminal may be there)
    from rich.console import Console
    from rich.live import Live

__all__ = [
    "JOB_STATUS_INTERVAL_MS",
    "JOB_STATUS_LOG_INTERVAL_MS",
    "StatusMode",
    "StatusSettings",
    "StatusSnapshot",
    "StatusReporter",
    "configure_logging",
    "stderr_console",
]

log = logging.getLogger("weir.status")

_C = "runner"
JOB_STATUS_INTERVAL_MS = declare(
    "job.status.interval.ms", int, 500,
    "How often `weir run` redraws its status line on a terminal (milliseconds).", component=_C)
JOB_STATUS_LOG_INTERVAL_MS = declare(
    "job.status.log.interval.ms", int, 10_000,
    "How often `weir run` logs a status line when standard error is not a terminal "
    "(milliseconds); 0 or less: never.", component=_C)

_RATE_WINDOW_S = 3.0
_METADATA_COST_FACTOR = 20


class StatusMode(Enum):
    """How a running job reports its status."""

    AUTO = "auto"
    """LINE on a terminal, LOG otherwise."""
    LINE = "line"
    LOG = "log"
    OFF = "off"

    def resolve(self, console: Console | None = None) -> "StatusMode":
        if self is not StatusMode.AUTO:
            return self
        terminal = console.is_terminal if console is not None else sys.stderr.isatty()
        return StatusMode.LINE if terminal else StatusMode.LOG


def stderr_console(mode: StatusMode) -> Console | None:
    """A rich console on standard error when ``mode`` may draw on it (LINE; AUTO unless
    standard error is plainly not a terminal), else None: rich is not imported."""
    if mode in (StatusMode.OFF, StatusMode.LOG) or (mode is StatusMode.AUTO and _plain_stderr()):
        return None
    from rich.console import Console
    return Console(stderr=True)


def _plain_stderr() -> bool:
    """Whether rich's console would find standard error not to be a terminal, decided
    without rich: not a TTY, and neither ``TTY_COMPATIBLE`` nor ``FORCE_COLOR`` set (the
    variables that make rich see a terminal anyway)."""
    import os
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return not tty and not os.environ.get("TTY_COMPATIBLE") \
        and os.environ.get("FORCE_COLOR") is None


@dataclass(frozen=True)
class StatusSettings:
    interval_ms: int = 500
    log_interval_ms: int = 10_000

    @classmethod
    def from_config(cls, config: Config) -> "StatusSettings":
        return cls(max(50, JOB_STATUS_INTERVAL_MS.get(config)),
                   JOB_STATUS_LOG_INTERVAL_MS.get(config))


@dataclass(frozen=True)
class StatusSnapshot:
    """One status reading, aggregated over containers."""

    job: str
    processed: int
    rate: float
    lag: Mapping[str, int]
    last_commit_ms: int
    now_ms: int
    containers: int = 1

    @classmethod
    def of(cls, job: str, progress: Iterable[ContainerProgress],
           metadata: Mapping[SystemStreamPartition, PartitionMetadata], *, rate: float,
           now_ms: int | None = None) -> "StatusSnapshot":
        progress = list(progress)
        lag: dict[str, int] = {}
        for p in progress:
            for ssp, nxt in p.positions.items():
                md = metadata.get(ssp)
                behind = 0 if md is None or ssp in p.ended else max(0, md.upcoming - nxt)
                lag[ssp.stream] = lag.get(ssp.stream, 0) + behind
        return cls(job, sum(p.processed for p in progress), rate, lag,
                   max((p.last_commit_ms for p in progress), default=0),
                   time.time_ns() // 1_000_000 if now_ms is None else now_ms, len(progress))

    def commit_age(self) -> str:
        if self.last_commit_ms <= 0:
            return "no commit yet"
        return f"last commit {max(0, self.now_ms - self.last_commit_ms) / 1000:.0f}s ago"

    def line(self) -> str:
        lag = " · ".join(f"{stream} {n:,}" for stream, n in sorted(self.lag.items()))
        return (f"{self.job}  {self.processed:,} msgs  {self.rate:,.0f} msg/s  "
                f"lag {lag or '-'}  {self.commit_age()}")


class StatusReporter:
    """Reads progress every interval on a daemon thread and shows it (see the module doc).

    ``read`` returns the current :class:`ContainerProgress` of every container; ``metadata``
    returns partition metadata for a list of SSPs (a ``SystemRegistry.metadata``; give the
    reporter its own registry so its admin calls never share objects with the job's thread).
    Use as a context manager around the run.

    Progress is sampled every ``interval_ms`` in both modes (reading it is cheap: counters of
    the containers); the line is redrawn at each sample on a terminal and logged every
    ``log_interval_ms`` otherwise, so the rate of the first logged line already covers the
    last few seconds. ``clock`` (seconds, monotonic) is for tests.
    """

    def __init__(self, job: str, read: Callable[[], list[ContainerProgress]],
                 metadata: Callable[[list[SystemStreamPartition]],
                                    Mapping[SystemStreamPartition, PartitionMetadata]],
                 mode: StatusMode = StatusMode.AUTO, settings: StatusSettings = StatusSettings(),
                 *, console: Console | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.job = job
        self._read = read
        self._metadata = metadata
        self.console = console if console is not None else stderr_console(mode)
        self.mode = mode.resolve(self.console) if self.console is not None else (
            StatusMode.LOG if mode is StatusMode.AUTO else mode)
        self.settings = settings
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._heads_cache: dict[SystemStreamPartition, PartitionMetadata] = {}
        self._heads_due = 0.0
        self._running = False
        self._clock = clock
        self._next_log: float | None = None
        self.last: StatusSnapshot | None = None

    def __enter__(self) -> "StatusReporter":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.mode is StatusMode.OFF:
            return
        if self.mode is StatusMode.LOG and self.settings.log_interval_ms <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="weir-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        if self._live is not None:
            self._live.stop()
            self._live = None

    def sample(self) -> list[ContainerProgress]:
        """Read the containers' progress and remember the count for the rate."""
        progress = self._read()
        now = self._clock()
        if self._next_log is None:
            self._next_log = now + self.settings.log_interval_ms / 1000
        samples = self._samples
        samples.append((now, sum(p.processed for p in progress)))
        while len(samples) > 2 and now - samples[0][0] > _RATE_WINDOW_S:
            samples.popleft()
        self._running = any(p.state == "running" for p in progress)
        return progress

    def rate(self) -> float:
        """Messages per second over the samples of the last few seconds (0 before two)."""
        if len(self._samples) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def snapshot(self, progress: list[ContainerProgress] | None = None) -> StatusSnapshot:
        """Sample the containers (unless ``progress`` was just sampled) and read the
        partitions' heads now."""
        if progress is None:
            progress = self.sample()
        metadata = self._heads(sorted({s for p in progress for s in p.positions}))
        self.last = StatusSnapshot.of(self.job, progress, metadata, rate=self.rate())
        return self.last

    def tick(self) -> StatusSnapshot | None:
        """One step of the reporting thread: sample, and return the snapshot to show now
        (on a terminal: every tick once a container runs; in log mode: when a log line is
        due), else None."""
        if self.mode is StatusMode.LOG:
            progress = self.sample()
            now = self._clock()
            if self._next_log is not None and now < self._next_log:
                return None
            self._next_log = now + self.settings.log_interval_ms / 1000
            return self.snapshot(progress)
        snap = self.snapshot()
        return snap if self._running else None

    def _heads(self, ssps: list[SystemStreamPartition]
               ) -> Mapping[SystemStreamPartition, PartitionMetadata]:
        """Partition metadata for the lag, re-read at most every ``_METADATA_COST_FACTOR``
        times what the last read took (reading heads can cost: the file log counts records
        appended since its last look), so the status never takes much from the job."""
        now = time.monotonic()
        if ssps and (now >= self._heads_due or set(ssps) - self._heads_cache.keys()):
            try:
                self._heads_cache = dict(self._metadata(ssps))
            except Exception as exc:  # noqa: BLE001 - the status must never stop the job
                log.debug("status: reading partition metadata failed: %s", exc)
            took = time.monotonic() - now
            self._heads_due = now + took * _METADATA_COST_FACTOR
        return self._heads_cache

    def _show(self, snap: StatusSnapshot) -> None:
        # The line appears once a container runs: restores draw their own progress bars.
        from rich.live import Live
        from rich.text import Text
        if self._live is None:
            self._live = Live(Text(snap.line()), console=self.console, transient=True,
                              auto_refresh=False, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        self._live.update(Text(snap.line()), refresh=True)

    def _run(self) -> None:
        interval = self.settings.interval_ms / 1000
        if self.mode is StatusMode.LOG:
            interval = min(interval, self.settings.log_interval_ms / 1000)
        try:
            self.sample()  # the first rate is measured from the start of the run
        except Exception as exc:  # noqa: BLE001 - the status must never stop the job
            log.debug("status: %s", exc)
        while not self._stop.wait(interval):
            try:
                snap = self.tick()
            except Exception as exc:  # noqa: BLE001
                log.debug("status: %s", exc)
                continue
            if snap is None:
                continue
            if self.mode is StatusMode.LOG:
                log.info("%s", snap.line())
            else:
                self._show(snap)


def configure_logging(mode: StatusMode, console: Console | None = None,
                      level: int = logging.INFO) -> Console | None:
    """Send log records to standard error: through rich (above the status line) in LINE
    mode, as plain timestamped lines otherwise. Does nothing if the root logger already has
    handlers (an application configured logging itself). Returns the console to share with
    the :class:`StatusReporter` (None when nothing will be drawn: ``--status off`` or
    ``log``, or standard error is not a terminal; rich is then not imported)."""
    console = console if console is not None else stderr_console(mode)
    root = logging.getLogger()
    if root.handlers:
        return console
    if console is not None and mode.resolve(console) is StatusMode.LINE:
        from rich.logging import RichHandler
        handler: logging.Handler = RichHandler(console=console, show_path=False,
                                               rich_tracebacks=False, markup=False)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    return console
