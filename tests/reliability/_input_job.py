"""A real counting job for the reliability tests, run as `weir run` in a child process.

:class:`InputJob` sets up a job directory (``job.properties``, a file log under ``log/``,
checkpoints, stores) whose task is :class:`StoppingCountJob`: the e2e count job
(``tests/e2e/_count_job.py``: counts words in the logged store ``counts``, sends every count to
``totals`` at end of stream) that also stops with a final commit when it reads the word
``STOP``. A test writes some words and a ``STOP``, runs the job (it commits and exits), damages
something, and runs it again; the words after the ``STOP`` and the end of the stream then let
it run to its end, and :meth:`InputJob.totals` returns the counts it emitted, to compare with
the truth.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from tests.e2e._count_job import CountJob, count_job_properties
from weir.engine.model import SystemStream, SystemStreamPartition
from weir.engine.task import RequestScope
from weir.stores.serdes import Int64Serde

__all__ = ["InputJob", "StoppingCountJob", "STOP", "flip_byte", "words"]

_INT64 = Int64Serde()
STOP = "STOP"
WORDS = SystemStream("filelog", "words")

JOB = {"job.name": "reliability-count",
       "task.class": "tests.reliability._input_job:StoppingCountJob",
       "task.commit.ms": "100000", "job.data.dir": "."}


class StoppingCountJob(CountJob):
    """The e2e count job, which also stops (after a final commit) at the word ``STOP``."""

    def process(self, envelope, collector, coordinator):
        if envelope.message == STOP:
            coordinator.shutdown(RequestScope.CURRENT_TASK)
            return
        super().process(envelope, collector, coordinator)


def words(n: int, seed: int = 11, keys: int = 30) -> list[str]:
    rng = random.Random(seed)
    return [f"w{rng.randrange(keys):02d}" for _ in range(n)]


def flip_byte(path: Path | str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x5A]))


class InputJob:
    """One job directory: create it, feed it, run it, look at what it left."""

    def __init__(self, base: Path, engine: str, *, partitions: int = 1,
                 log_config: dict[str, str] | None = None, extra: str = "",
                 create: bool = True):
        """A new job directory in ``base`` (``create=False``: one set up before, e.g. a copy)."""
        self.base, self.engine, self.partitions = Path(base), engine, partitions
        self.log_config = {"systems.filelog.root": str(self.base / "log"),
                           **{f"systems.filelog.{k}": v for k, v in (log_config or {}).items()}}
        self.sent: list[list[str]] = [[] for _ in range(partitions)]  # words per partition
        if create:
            log_lines = "".join(f"systems.filelog.{k}={v}\n"
                                for k, v in (log_config or {}).items())
            self.config_path.write_text(count_job_properties(engine, JOB) + log_lines + extra)
            self.create_streams()

    # -- config and systems ----------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.base / "job.properties"

    def admin(self):
        from weir.engine.systems.filelog import FileLogAdmin, FileLogSettings
        from weir.stores.config import Config

        return FileLogAdmin(FileLogSettings.from_config("filelog", Config(self.log_config)))

    def create_streams(self) -> None:
        from weir.engine.systems.api import StreamSpec

        admin = self.admin()
        admin.create_stream(StreamSpec("words", self.partitions, bounded=True))
        admin.create_stream(StreamSpec("seen", self.partitions))
        admin.create_stream(StreamSpec("totals", self.partitions))

    def produce(self, items: list[str], *, stop: bool = False, end: bool = False) -> None:
        """Append ``items`` round-robin over the partitions, then a ``STOP`` to every
        partition (``stop``) and the end of the stream (``end``)."""
        admin = self.admin()
        for p in range(self.partitions):
            chunk = items[p::self.partitions] + ([STOP] if stop else [])
            with admin.writer("words", p) as writer:
                for word in chunk:
                    writer.append(None, word.encode())
                if end:
                    writer.end_stream()
                else:
                    writer.flush()
            self.sent[p].extend(w for w in chunk if w != STOP)

    def truth(self) -> dict[int, dict[str, int]]:
        return {p: dict(Counter(self.sent[p])) for p in range(self.partitions)}

    # -- running ---------------------------------------------------------------------------
    def run(self, *overrides: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """``weir run job.properties [--set KEY=VALUE ...]`` to its end; stdout and stderr
        together."""
        sets = [a for o in overrides for a in ("--set", o)]
        return self.weir("run", "job.properties", "--status", "off", *sets, timeout=timeout)

    def run_to_end(self, *overrides: str, runs: int = 5) -> subprocess.CompletedProcess:
        """Run again after each ``STOP`` until the input ends (or a run fails)."""
        for _ in range(runs):
            result = self.run(*overrides)
            if result.returncode != 0 or "ended (end-of-stream)" in result.stdout:
                return result
        raise AssertionError(f"the job did not reach the end of its input in {runs} runs")

    def start(self, *overrides: str) -> subprocess.Popen:
        from tests._processes import start_weir

        return start_weir(self.base, "job.properties",
                          *[a for o in overrides for a in ("--set", o)])

    def weir(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Any ``weir`` command in the job directory (e.g. ``checkpoint reset ... --yes``)."""
        from tests._processes import run_weir

        return run_weir(self.base, *args, timeout=timeout)

    # -- looking at what it left -----------------------------------------------------------
    def task(self, p: int = 0) -> str:
        return f"Partition {p}"

    def checkpoint_path(self, p: int = 0) -> Path:
        from weir.recovery.checkpoint import FileCheckpointManager

        return FileCheckpointManager(self.base / "checkpoints").path_for(self.task(p))

    def checkpoint(self, p: int = 0):
        from weir.recovery.checkpoint import FileCheckpointManager

        return FileCheckpointManager(self.base / "checkpoints").read_last(self.task(p))

    def input_offset(self, p: int = 0) -> int:
        cp = self.checkpoint(p)
        return -1 if cp is None else cp.input_offsets.get(("filelog", "words", p), -1)

    def segment(self, stream: str = "words", p: int = 0, index: int = -1) -> Path:
        from weir.engine.systems.filelog.segment import list_segments

        return Path(list_segments(str(self.base / "log" / stream / str(p)))[index].path)

    def record_position(self, offset: int, stream: str = "words", p: int = 0) -> tuple[Path, int]:
        """The segment file holding ``offset`` and the byte where that record starts."""
        from weir.engine.systems.filelog._format import skip_records
        from weir.engine.systems.filelog.segment import list_segments

        segments = list_segments(str(self.base / "log" / stream / str(p)))
        segment = [s for s in segments if s.base <= offset][-1]
        data = Path(segment.path).read_bytes()
        pos, skipped, _ = skip_records(data, 0, len(data), offset - segment.base)
        assert skipped == offset - segment.base, "offset not in the segment"
        return Path(segment.path), pos

    def files(self) -> dict[str, str]:
        """The job's data files -- input and changelog segments and their indexes, end
        markers, checkpoint files, the stores' ``OFFSET`` files -- as path -> content digest
        (engine-internal store files and lock files churn on every open and are left out, and
        so is the coordinator stream: it records the job's config, which a run with other
        ``--set`` values changes before anything else happens)."""
        out = {}
        for path in sorted(self.base.rglob("*")):
            if not path.is_file() or "LOCK" in path.name.upper():
                continue
            rel = path.relative_to(self.base)
            if rel.parts[0] == "state" and path.name != "OFFSET":
                continue
            if rel.parts[0] == "backup":
                continue
            if len(rel.parts) > 1 and rel.parts[1].startswith("__samza_coordinator_"):
                continue
            out[str(rel)] = hashlib.sha1(path.read_bytes()).hexdigest()
        return out

    def totals(self) -> dict[int, dict[str, int]]:
        """The counts each task sent to ``totals`` (the last value per word wins)."""
        from weir.engine.systems.filelog import FileLogConsumer, FileLogSettings
        from weir.stores.config import Config

        settings = FileLogSettings.from_config("filelog", Config(self.log_config))
        consumer = FileLogConsumer(settings)
        ssps = [SystemStreamPartition("filelog", "totals", p) for p in range(self.partitions)]
        for ssp in ssps:
            consumer.register(ssp, 0)
        consumer.start()
        out: dict[int, dict[str, int]] = {p: {} for p in range(self.partitions)}
        try:
            while True:
                got = consumer.poll(ssps, 0.05)
                if not any(got.values()):
                    return out
                for ssp, envelopes in got.items():
                    for env in envelopes:
                        out[ssp.partition][env.key.decode()] = _INT64.from_bytes(env.message)
        finally:
            consumer.stop()

    def backup(self, path: Path) -> Path:
        copy = self.base / "backup" / path.relative_to(self.base)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
        return copy

    def restore_backup(self, path: Path) -> None:
        shutil.copy2(self.base / "backup" / path.relative_to(self.base), path)
