"""The running-count job written for each peer system, shared by bench/peers.py (in one process)
and bench/peers_e2e.py (each run its own process).

Imports are lazy: a peer's package is imported only when its job is built, so a whole-process
run of one peer pays for that peer's imports and nothing else.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable
from pathlib import Path

__all__ = ["event_keys", "key_name", "bytewax_job", "quix_job", "rocksdict_job", "ceiling_job"]

BATCH = 1_000
CEILING_PASSES = 8
_PACK = struct.Struct("<q")
_FRAME = struct.Struct("<IH")


def key_name(keys: int) -> str:
    """The key format: ``key%05d`` for up to 100,000 keys (PERF-FACTS), wider beyond."""
    return "key%0{}d".format(max(5, len(str(keys - 1))))


def event_keys(n: int, keys: int, seed: int = 12345) -> list[str]:
    """PERF-FACTS part 2: ``n`` keys drawn uniformly from ``keys`` with ``random.Random(seed)``."""
    rng = random.Random(seed)
    fmt = key_name(keys)
    return [fmt % rng.randrange(keys) for _ in range(n)]


def bytewax_job(batch: int = BATCH) -> Callable[[list[str]], None]:
    """Bytewax: ``TestingSource`` with input batches of ``batch``, ``key_on`` + ``stateful_map``,
    a sink that drops every item, ``run_main`` (1 worker), no recovery."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.outputs import DynamicSink, StatelessSinkPartition
    from bytewax.testing import TestingSource, run_main

    class _Drop(StatelessSinkPartition):
        def write_batch(self, items) -> None:
            del items  # output discarded, as in PERF-FACTS

    class _DropSink(DynamicSink):
        def build(self, step_id, worker_index, worker_count):
            return _Drop()

    def count(state, _value):
        state = 1 if state is None else state + 1
        return state, state

    def run(keys: list[str]) -> None:
        flow = Dataflow("peers-count")
        events = op.input("in", flow, TestingSource(keys, batch_size=batch))
        keyed = op.key_on("key", events, lambda k: k)
        counts = op.stateful_map("count", keyed, count)
        op.output("out", counts, _DropSink())
        run_main(flow)

    return run


def quix_job(path: Path, txn: int = BATCH):
    """Quix Streams state layer: ``RocksDBStorePartition`` with Quix's default options,
    ``tx.as_state(prefix=key)`` get/set as a stateful ``sdf.apply`` does, one transaction per
    ``txn`` events closed by ``prepare()`` + ``flush()`` (no Kafka, no changelog producer).
    Returns ``(run, close, handles)``."""
    from quixstreams.state.rocksdb.partition import RocksDBStorePartition

    partition = RocksDBStorePartition(str(path))

    def run(keys: list[str]) -> None:
        tx = partition.begin()
        n = 0
        for key in keys:
            state = tx.as_state(prefix=key.encode())
            state.set("count", state.get("count", 0) + 1)
            n += 1
            if n % txn == 0:
                tx.prepare()
                tx.flush()
                tx = partition.begin()
        tx.prepare()
        tx.flush()

    handles = tuple(h for h in (getattr(partition, "_db", None),) if h is not None)
    return run, partition.close, handles


def rocksdict_job(path: Path, batch: int = BATCH) -> Callable[[list[str]], None]:
    """A hand-written rocksdict loop with a changelog (PERF-FACTS ``rocks-cache-batch1000`` plus
    its changelog): a read-through dict of every key seen, the keys changed in each ``batch``
    events written as one RocksDB ``WriteBatch`` (raw mode, WAL off) and framed
    (``u32 body_len | u16 key_len | key | value``), zstd-L1 compressed, appended to a changelog
    file; the file is fsynced and the store flushed at the end."""
    import os

    import zstandard
    from rocksdict import Options, Rdict, WriteBatch, WriteOptions

    def run(keys: list[str]) -> None:
        path.mkdir(parents=True, exist_ok=True)
        db = Rdict(str(path / "db"), Options(raw_mode=True))
        wopts = WriteOptions()
        wopts.disable_wal = True
        compress = zstandard.ZstdCompressor(level=1).compress
        pack, unpack, frame = _PACK.pack, _PACK.unpack, _FRAME.pack
        cache: dict[bytes, int] = {}
        dirty: dict[bytes, int] = {}
        with open(path / "changelog.zst", "ab") as log:
            def flush() -> None:
                wb = WriteBatch(raw_mode=True)
                frames = []
                for k, v in dirty.items():
                    packed = pack(v)
                    wb.put(k, packed)
                    frames.append(frame(len(k) + len(packed) + 2, len(k)) + k + packed)
                db.write(wb, wopts)
                log.write(compress(b"".join(frames)))
                dirty.clear()

            n = 0
            for key in keys:
                k = key.encode()
                v = cache.get(k)
                if v is None:
                    raw = db.get(k)
                    v = unpack(raw)[0] if raw is not None else 0
                cache[k] = dirty[k] = v + 1
                n += 1
                if n % batch == 0:
                    flush()
            flush()
            log.flush()
            os.fsync(log.fileno())
        db.flush()
        db.close()

    return run


def ceiling_job(processes: int, n: int, keys: int) -> None:
    """Not a peer: the machine's parallel ceiling (``ceiling-<processes>`` in peers_e2e.py).
    Pure-Python counting work (draw ``n`` keys, count them in a dict, 8 passes) split over
    ``processes`` processes started at once (``fork``); returns when all are done."""
    share = n // processes
    pids = []
    for i in range(processes):
        pid = os.fork()
        if pid == 0:
            try:
                _count_work(share, keys, seed=12345 + i)
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)


def _count_work(n: int, keys: int, seed: int) -> None:
    events = event_keys(n, keys, seed)
    for _ in range(CEILING_PASSES):
        counts: dict[str, int] = {}
        for key in events:
            counts[key] = counts.get(key, 0) + 1
