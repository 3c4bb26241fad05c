"""A real counting job for the store-side reliability tests, run by `weir run` in child processes.

:class:`StoreJob` sets up a job directory (``job.properties``, a file log under ``log/``,
``checkpoints/``, stores under ``state/``) whose task, :class:`StopWordCountJob`, is the e2e
count job (``tests/e2e/_count_job.py``: counts words in the logged store ``counts`` and sends
every count to ``totals`` at the end of its input) that also stops, with a final commit, at the
word ``STOP``. The changelog ``counts-changelog`` has small segments, so it has sealed segments
and an active one, optionally zstd-compressed.

A test writes words and a ``STOP``, runs the job (it commits and exits), damages a changelog
segment, an ``OFFSET`` file or the store's files, and runs it again (words after the ``STOP``
and the end of the stream let it finish); it then compares :meth:`StoreJob.totals` with a
direct count over the input. :func:`cut_changelog` is the procedure docs/RECOVERY.md gives for
"cut the changelog at the damaged record", and :meth:`StoreJob.follow` runs the ``weir state
repair`` command a restore error names, literally.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shlex
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

from tests.e2e._count_job import count_job_properties
from tests.reliability._input_job import StoppingCountJob as StopWordCountJob
from tests.reliability._input_job import flip_byte
from weir.engine.config.job import load_config
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.checkpoint import FileCheckpointManager
from weir.stores.serdes import Int64Serde

__all__ = ["STOP", "StopWordCountJob", "StoreJob", "cut_changelog", "flip_byte", "words"]

STOP = "STOP"
TASK = "Partition 0"
WORDS = SystemStream("filelog", "words")
_INT64 = Int64Serde()



def words(n: int, seed: int = 5, keys: int = 40) -> list[str]:
    rng = random.Random(seed)
    return [f"k{rng.randrange(keys):02d}" for _ in range(n)]


def cut_changelog(partition_dir: Path, path: Path | str, position: int | None,
                  aside: Path) -> None:
    """docs/RECOVERY.md, 'Cutting a damaged changelog', for a file-log partition: remove the
    damaged record (in ``path`` at byte ``position``) and every later one, moving files aside
    (never deleting them). A plain ``.log`` segment is truncated at the position and its
    index moved aside; a compressed or compacted one moves aside whole and an empty plain
    segment with its base offset takes its place (the partition's active segment); every
    segment file after it (and its index) moves aside."""
    path = Path(path)
    aside.mkdir(parents=True, exist_ok=True)
    base = int(path.name.split(".")[0])
    plain = path.name.endswith(".log") and ".g" not in path.name
    for child in sorted(partition_dir.iterdir()):
        name = child.name
        if not name[:1].isdigit():
            continue
        child_base = int(name.split(".")[0])
        if child_base > base or (child_base == base and not (plain and child == path)):
            shutil.move(child, aside / name)
    if plain:
        shutil.copy2(path, aside / path.name)  # the damaged original, for later inspection
        os.truncate(path, position or 0)
    else:
        (partition_dir / f"{base:020d}.log").touch()


class StoreJob:
    """One job directory: create it, feed it, run it, damage it, look at what it left."""

    def __init__(self, root: Path, engine: str, *, compression: str = "none",
                 segment_bytes: int = 8192, create: bool = True):
        self.root, self.engine = Path(root), engine
        self.compression, self.segment_bytes = compression, segment_bytes
        self.fed: list[str] = []
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "job.properties").write_text(count_job_properties(engine, {
            "job.name": "store-reliability", "job.data.dir": str(self.root),
            "task.class": "tests.reliability._store_job:StopWordCountJob",
            "task.commit.ms": "100000", "systems.filelog.root": f"{self.root}/log",
            "systems.filelog.streams.counts-changelog.segment.bytes": str(segment_bytes),
            "systems.filelog.streams.counts-changelog.compression": compression,
            "stores.counts.lmdb.map.size.bytes": "4194304"}))
        self.config = load_config(self.root / "job.properties")
        if create:
            admin = self._registry().admin("filelog")
            admin.create_stream(StreamSpec("words", 1, bounded=True))
            admin.create_stream(StreamSpec("seen", 1))
            admin.create_stream(StreamSpec("totals", 1))

    def clone(self, root: Path) -> "StoreJob":
        """A copy of this job directory (log, checkpoints, stores) at ``root``."""
        shutil.copytree(self.root, root, symlinks=True)
        other = StoreJob(root, self.engine, compression=self.compression,
                         segment_bytes=self.segment_bytes, create=False)
        other.fed = list(self.fed)
        return other

    def _registry(self) -> SystemRegistry:
        return SystemRegistry(self.config)

    # -- feeding and running ---------------------------------------------------------------
    def feed(self, items: list[str], *, end: bool = False) -> None:
        producer = self._registry().producer("filelog")
        producer.register("test")
        producer.start()
        for word in items:
            producer.send("test", OutgoingMessageEnvelope(WORDS, word.encode(), partition=0))
        if end:
            producer.end_stream("words")
        producer.stop()
        self.fed.extend(items)

    def weir(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
        """Run a ``weir`` command in the job directory (stdout and stderr apart)."""
        from tests._processes import run_weir

        return run_weir(self.root, *args, timeout=timeout, merge=False)

    def run(self, *overrides: str) -> subprocess.CompletedProcess:
        """``weir run job.properties`` to its end."""
        sets = [a for o in overrides for a in ("--set", o)]
        return self.weir("run", "job.properties", "--status", "off", *sets)

    def run_and_kill(self, until_changelog_newest: int, *overrides: str) -> None:
        """Start ``weir run`` and SIGKILL it once its changelog holds ``until_changelog_newest``
        (its writes since the last checkpoint reached the changelog files)."""
        from tests._processes import kill, start_weir

        proc = start_weir(self.root, "job.properties",
                          *[a for o in overrides for a in ("--set", o)])
        deadline = time.monotonic() + 60
        while self.changelog_newest() < until_changelog_newest:
            if proc.poll() is not None or time.monotonic() >= deadline:
                proc.kill()
                output, _ = proc.communicate(timeout=30)
                raise AssertionError(f"the job ended, or its changelog did not grow, before "
                                     f"the kill:\n{output}")
            time.sleep(0.01)
        kill(proc)

    def follow(self, error_text: str, choice: str) -> subprocess.CompletedProcess:
        """Run the ``weir state repair ... --<choice>`` command the error advises, literally."""
        commands = re.findall(r"`(weir state repair [^`]*)`", error_text)
        chosen = [c for c in commands if c.endswith(f"--{choice}")]
        assert chosen, f"the error offers no --{choice} repair:\n{error_text}"
        args = shlex.split(chosen[0].replace("<job config>", "job.properties"))
        return self.weir(*args[1:])

    # -- what the job left -------------------------------------------------------------------
    @property
    def store_dir(self) -> Path:
        return self.root / "state" / "counts" / "Partition_0"

    @property
    def changelog_dir(self) -> Path:
        return self.root / "log" / "counts-changelog" / "0"

    def segments(self) -> list[Path]:
        """The changelog partition's segment files, by base offset."""
        return sorted((p for p in self.changelog_dir.iterdir()
                       if p.name[:1].isdigit() and not p.name.endswith(".idx")),
                      key=lambda p: int(p.name.split(".")[0]))

    def changelog_newest(self) -> int:
        """The newest offset of the changelog partition as its files say now (-1: none)."""
        admin = self._registry().admin("filelog")
        if not admin.stream_exists("counts-changelog"):
            return -1
        ssp = SystemStreamPartition("filelog", "counts-changelog", 0)
        return admin.metadata([ssp])[ssp].newest

    def changelog_state(self, upto: int) -> dict[str, int]:
        """The state the changelog's records up to ``upto`` describe, read directly."""
        reader = self._registry().admin("filelog").reader("counts-changelog", 0, 0)
        state: dict[str, int | None] = {}
        try:
            while True:
                records = reader.read_records(10_000)
                if not records:
                    break
                for r in records:
                    if r.offset <= upto:
                        state[r.key.decode()] = (None if r.value is None
                                                 else _INT64.from_bytes(r.value))
                if records[-1].offset >= upto:
                    break
        finally:
            reader.close()
        return {k: v for k, v in state.items() if v is not None}

    def checkpoint(self) -> tuple[int, int]:
        """``(last processed input offset, changelog offset)`` of the task's checkpoint."""
        manager = FileCheckpointManager(self.root / "checkpoints")
        cp = manager.read_last(TASK)
        assert cp is not None
        (offset,) = cp.input_offsets.values()
        return offset, cp.changelog_offsets["counts"]

    def totals_mark(self) -> int:
        """The upcoming offset of the ``totals`` stream (totals emitted later come after it)."""
        admin = self._registry().admin("filelog")
        ssp = SystemStreamPartition("filelog", "totals", 0)
        return admin.metadata([ssp])[ssp].upcoming

    def totals(self, since: int) -> dict[str, int]:
        """The counts the job emitted at the end of its input, from ``totals`` offset ``since``."""
        reader = self._registry().admin("filelog").reader("totals", 0, since)
        try:
            records = reader.read_records(100_000)
        finally:
            reader.close()
        return {r.key.decode(): _INT64.from_bytes(r.value) for r in records}

    def truth(self) -> dict[str, int]:
        return dict(Counter(w for w in self.fed if w != STOP))

    def tree(self) -> dict[str, str]:
        """Every file of the store directory (its lock file aside) with a digest of its bytes,
        and the store's sibling directories (set-aside or kept copies)."""
        files = {str(p.relative_to(self.store_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
                 for p in sorted(self.store_dir.rglob("*"))
                 if p.is_file() and p.name != "WEIR.LOCK"}
        files["<siblings>"] = ",".join(sorted(p.name for p in self.store_dir.parent.iterdir()))
        return files
