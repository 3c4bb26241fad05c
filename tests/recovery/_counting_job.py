"""A tiny stateful job for crash tests: count messages per key in a logged store.

Run as a child process (``python -m tests.recovery._counting_job --base DIR ...``) that may
SIGKILL itself at a chosen point, or in-process with :func:`run` to finish the work. Input
message ``i`` is ``make_input(n)[i]``, a deterministic key; the job commits (flush the storage
manager, then write the checkpoint with the last processed offset) every ``commit_every``
messages and prints ``committed <offset>`` after each commit.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
from collections import Counter
from pathlib import Path

from weir.recovery.checkpoint import Checkpoint, FileCheckpointManager
from weir.recovery.storage import ProgressMode, TaskStorageManager
from weir.stores.config import Config
from weir.testing import FileChangelog
from weir.stores.spec import StoreSpec

__all__ = ["INPUT", "KEYS", "TASK", "count_of", "make_input", "open_counts", "restart_and_stop", "run",
           "truth"]

TASK = "Partition 0"
INPUT = ("filelog", "words", 0)
KEYS = 50
SEED = 7


def make_input(n: int) -> list[str]:
    rng = random.Random(SEED)
    return [f"k{rng.randrange(KEYS):02d}" for _ in range(n)]


def truth(n: int) -> dict[str, int]:
    return dict(Counter(make_input(n)))


PAD = "x" * 1000


def _config(engine: str) -> Config:
    # Engine files must run ahead of the last checkpoint when the job is killed, or the crash
    # tests prove little: a cache much smaller than the key set makes evictions write to the
    # engine (and changelog) between commits; LMDB commits every 4 keys, and RocksDB's
    # smallest memtable (64 KiB) fills with the 1 KB values and is flushed to SST files
    # several times between two commits.
    return Config({"stores.counts.factory": engine, "stores.counts.key.serde": "string",
                   "stores.counts.msg.serde": "json",
                   "stores.counts.changelog": "filelog.counts-changelog",
                   "stores.counts.object.cache.size": "16",
                   "stores.counts.write.batch.size": "8",
                   **({"stores.counts.lmdb.write.batch.size": "4",
                       "stores.counts.lmdb.sync": "false"} if engine == "lmdb" else {}),
                   **({"stores.counts.rocksdb.write.buffer.size.bytes": "65536"}
                      if engine == "rocksdb" else {})})


def count_of(value: dict | None) -> int:
    return value["n"] if value else 0


def _manager(base: Path) -> FileCheckpointManager:
    mgr = FileCheckpointManager(base / "checkpoints")
    mgr.register(TASK)
    mgr.start()
    return mgr


def open_counts(base: Path, engine: str):
    """Open the job's storage at its last checkpoint: ``(tsm, store, changelog, checkpoint)``."""
    config = _config(engine)
    checkpoint = _manager(base).read_last(TASK)
    log = FileChangelog(base / "changelogs" / "counts.log")
    tsm = TaskStorageManager(TASK, [StoreSpec.from_config(config, "counts")], base / "state",
                             {"counts": (log, log)}, config, progress=ProgressMode.QUIET)
    return tsm, tsm.open(checkpoint)["counts"], log, checkpoint


def run(base: Path, engine: str, n: int, commit_every: int, *, kill_phase: str = "none",
        kill_at: int = -1) -> None:
    """Process the input from the last checkpoint to the end (or until the kill point)."""
    mgr = _manager(base)
    tsm, counts, log, checkpoint = open_counts(base, engine)
    inputs = make_input(n)
    start = checkpoint.input_offsets[INPUT] + 1 if checkpoint else 0
    for i in range(start, n):
        key = inputs[i]
        counts.put(key, {"n": count_of(counts.get(key)) + 1, "pad": PAD})
        if kill_phase == "process" and i == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if (i + 1) % commit_every == 0 or i == n - 1:
            offsets = tsm.flush()
            if kill_phase == "after-flush" and i >= kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            mgr.write(TASK, Checkpoint({INPUT: i}, offsets))
            print(f"committed {i}", flush=True)
    tsm.close()
    log.close()


def restart_and_stop(base: Path, engine: str) -> None:
    """Restore, commit at once without processing anything, and stop cleanly (as a job that
    is restarted and shut down again does). The commit records the changelog's newest
    offset, so any record a crashed run left after its checkpoint must have been reverted."""
    tsm, _, log, checkpoint = open_counts(base, engine)
    offsets = tsm.flush()
    if checkpoint is not None:
        _manager(base).write(TASK, Checkpoint(checkpoint.input_offsets, offsets))
    tsm.close()
    log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--engine", required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--commit-every", type=int, required=True)
    parser.add_argument("--kill-phase", choices=["none", "process", "after-flush"],
                        default="none")
    parser.add_argument("--kill-at", type=int, default=-1)
    args = parser.parse_args(argv)
    run(args.base, args.engine, args.messages, args.commit_every, kill_phase=args.kill_phase,
        kill_at=args.kill_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
