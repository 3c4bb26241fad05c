"""The job of the crash matrix (``task.class=tests.e2e._crash_job:CrashCountJob``), and the
kill points it arms in every process that imports it.

The task counts each word twice: in ``counts_r`` (RocksDB) and ``counts_l`` (LMDB), both logged.
``WEIR_CRASH_POINT=<phase>:<n>[:<mode>]`` in the environment makes the process that reaches the
n-th event of ``phase`` SIGKILL its whole process group (the runner and every container: a
machine that loses power), at that exact point:

* ``restore:n``: after the n-th store's changelog replay, before its OFFSET file is written;
* ``process:n``: after the n-th message this process applied to its stores;
* ``flush:n:before|after``: around the n-th flush of a task's stores (changelog, engine, OFFSET);
* ``checkpoint:n:before|torn|after``: around the n-th checkpoint write; ``torn`` leaves half a
  temp file (file manager) or only the first record of the write (stream manager).

``WEIR_CRASH_FALLBACK=<m>`` kills at the m-th message anyway when the armed point was not
reached, so every killed run stops part-way through the input.
"""

from __future__ import annotations

import os
import signal

from weir.engine.task import InitableTask, StreamTask

__all__ = ["CrashCountJob"]

_counts: dict[str, int] = {}


def _kill() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _reached(phase: str) -> bool:
    _counts[phase] = _counts.get(phase, 0) + 1
    return _POINT is not None and _POINT[0] == phase and _counts[phase] == _POINT[1]


def _parse() -> tuple[str, int, str] | None:
    raw = os.environ.get("WEIR_CRASH_POINT")
    if not raw:
        return None
    phase, n, *mode = raw.split(":")
    return phase, int(n), mode[0] if mode else ""


_POINT = _parse()
_FALLBACK = int(os.environ.get("WEIR_CRASH_FALLBACK", "0"))


def _arm() -> None:
    if _POINT is None:
        return
    phase, _, mode = _POINT
    if phase == "restore":
        from weir.recovery.store_restore import StoreRestore
        original_apply = StoreRestore.apply

        def apply(self, *args, **kwargs):
            result = original_apply(self, *args, **kwargs)
            if _reached("restore"):
                _kill()
            return result
        StoreRestore.apply = apply
    elif phase == "flush":
        from weir.engine.container.task_storage import TaskStorage
        original_flush = TaskStorage.flush

        def flush(self):
            hit = _reached("flush")
            if hit and mode == "before":
                _kill()
            result = original_flush(self)
            if hit:
                _kill()
            return result
        TaskStorage.flush = flush
    elif phase == "checkpoint":
        _arm_checkpoint(mode)


def _arm_checkpoint(mode: str) -> None:
    import weir.recovery.checkpoint as files
    from weir.engine.container.checkpoints import StreamCheckpointLog

    original_file_write = files.FileCheckpointManager.write
    original_atomic = files.atomic_write
    original_append = StreamCheckpointLog.append
    torn = {"armed": False}

    def file_write(self, task_name, checkpoint):
        hit = _reached("checkpoint")
        if hit and mode == "before":
            _kill()
        torn["armed"] = hit and mode == "torn"
        original_file_write(self, task_name, checkpoint)
        if hit:
            _kill()

    def atomic_write(path, data, **kwargs):
        if torn["armed"]:
            from weir.stores.filesafety import temp_path_for
            temp = temp_path_for(path)
            with open(temp, "wb") as f:
                f.write(data[:len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
            _kill()
        return original_atomic(path, data, **kwargs)

    def append(self, partition, records):
        hit = _reached("checkpoint")
        if hit and mode == "before":
            _kill()
        if hit and mode == "torn" and len(records) > 1:
            original_append(self, partition, records[:1])
            _kill()
        original_append(self, partition, records)
        if hit:
            _kill()

    files.FileCheckpointManager.write = file_write
    files.atomic_write = atomic_write
    StreamCheckpointLog.append = append


_arm()


class CrashCountJob(StreamTask, InitableTask):
    def init(self, context):
        self.rocks = context.store("counts_r")
        self.lmdb = context.store("counts_l")

    def process(self, envelope, collector, coordinator):
        word = envelope.message
        self.rocks.put(word, (self.rocks.get(word) or 0) + 1)
        self.lmdb.put(word, (self.lmdb.get(word) or 0) + 1)
        if _reached("process") or (_FALLBACK and _counts["process"] == _FALLBACK):
            _kill()
