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
from enum import Enum
from pathlib import Path

__all__ = ["event_keys", "event_lines", "json_line", "key_name", "bytewax_job", "quix_job",
           "rocksdict_job", "ceiling_job", "Payload"]

BATCH = 1_000
_PACK = struct.Struct("<q")
_FRAME = struct.Struct("<IH")

#: Counting passes of the ceiling: issue 27 wrote its ">= 0.6x ceiling-1" goal against a
#: ceiling that counts the drawn keys 8 times; kept so the goal means what the issue measured.
CEILING_PASSES = 8


def key_name(keys: int) -> str:
    """The key format: ``key%05d`` for up to 100,000 keys (PERF-FACTS), wider beyond."""
    return "key%0{}d".format(max(5, len(str(keys - 1))))


def event_keys(n: int, keys: int, seed: int = 12345) -> list[str]:
    """PERF-FACTS part 2: ``n`` keys drawn uniformly from ``keys`` with ``random.Random(seed)``."""
    rng = random.Random(seed)
    fmt = key_name(keys)
    return [fmt % rng.randrange(keys) for _ in range(n)]


class Payload(Enum):
    """What an event is. ``BYTES``: the key as bytes, nothing to decode (the issue 16 job).
    ``JSON``: a JSON line with a few fields, ``{"k": "key00042", "n": 7, "src": "bench",
    "ok": true}``, every system parsing it (orjson, as Weir's ``json`` serde does) and
    counting by its ``k`` field, a string."""

    BYTES = "bytes"
    JSON = "json"


def json_line(key: str, i: int) -> bytes:
    """Event ``i`` with key ``key`` as a JSON line (the JSON variant's message bytes, the same
    for Weir's input stream and the peers)."""
    return b'{"k":"%s","n":%d,"src":"bench","ok":true}' % (key.encode(), i)


def event_lines(n: int, keys: int, seed: int = 12345) -> list[bytes]:
    """The JSON variant's events: :func:`event_keys` as :func:`json_line` lines."""
    return [json_line(k, i) for i, k in enumerate(event_keys(n, keys, seed))]


def _parse_key(payload: Payload) -> Callable[[object], str]:
    """The per-event work before counting: the key as it is, or the JSON line parsed
    (orjson) and its ``k`` field."""
    if payload is Payload.BYTES:
        return lambda event: event
    import orjson
    loads = orjson.loads
    return lambda line: loads(line)["k"]


def bytewax_job(batch: int = BATCH, payload: Payload = Payload.BYTES) -> Callable[[list], None]:
    """Bytewax: ``TestingSource`` with input batches of ``batch``, ``key_on`` + ``stateful_map``,
    a sink that drops every item, ``run_main`` (1 worker), no recovery. With the JSON payload
    an ``op.map`` parses each line before ``key_on`` takes its ``k`` field."""
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
        if payload is Payload.JSON:
            import orjson
            events = op.map("parse", events, orjson.loads)
            keyed = op.key_on("key", events, lambda m: m["k"])
        else:
            keyed = op.key_on("key", events, lambda k: k)
        counts = op.stateful_map("count", keyed, count)
        op.output("out", counts, _DropSink())
        run_main(flow)

    return run


def quix_job(path: Path, txn: int = BATCH, payload: Payload = Payload.BYTES):
    """Quix Streams state layer: ``RocksDBStorePartition`` with Quix's default options,
    ``tx.as_state(prefix=key)`` get/set as a stateful ``sdf.apply`` does, one transaction per
    ``txn`` events closed by ``prepare()`` + ``flush()`` (no Kafka, no changelog producer).
    Returns ``(run, close, handles)``."""
    from quixstreams.state.rocksdb.partition import RocksDBStorePartition

    parse = _parse_key(payload)

    partition = RocksDBStorePartition(str(path))

    def run(keys: list[str]) -> None:
        tx = partition.begin()
        n = 0
        for event in keys:
            state = tx.as_state(prefix=parse(event).encode())
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


def rocksdict_job(path: Path, batch: int = BATCH,
                  payload: Payload = Payload.BYTES) -> Callable[[list], None]:
    """A hand-written rocksdict loop with a changelog (PERF-FACTS ``rocks-cache-batch1000`` plus
    its changelog): a read-through dict of every key seen, the keys changed in each ``batch``
    events written as one RocksDB ``WriteBatch`` (raw mode, WAL off) and framed
    (``u32 body_len | u16 key_len | key | value``), zstd-L1 compressed, appended to a changelog
    file; the file is fsynced and the store flushed at the end. With the JSON payload each
    line is parsed (orjson) and counted by its ``k`` field."""
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
        parse = _parse_key(payload)
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
            for event in keys:
                k = parse(event).encode()
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


def ceiling_job(processes: int, n: int, keys: int, payload: Payload = Payload.BYTES) -> None:
    """Not a peer: the machine's parallel ceiling (``ceiling-<processes>`` in peers_e2e.py).
    The jobs' work per event in pure Python and nothing else: draw the events as the peers do,
    then take each event's key once (the JSON payload: parse the line once with orjson and read
    its ``k``, as Weir's ``json`` serde and the peers do) and count the keys in a dict, in
    ``CEILING_PASSES`` (8) passes as the ceiling issue 27's goals were measured with. Split over
    ``processes`` processes started at once (``fork``), ``n // processes`` events each; returns
    when all are done."""
    share = n // processes
    pids = []
    for i in range(processes):
        pid = os.fork()
        if pid == 0:
            try:
                _count_work(share, keys, 12345 + i, payload)
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)


def _count_work(n: int, keys: int, seed: int, payload: Payload) -> dict[str, int]:
    """Each event parsed once (:func:`_parse_key`), then counted by key in
    :data:`CEILING_PASSES` passes: the yardstick issue 27's goals are written against."""
    events = event_lines(n, keys, seed) if payload is Payload.JSON else event_keys(n, keys, seed)
    parse = _parse_key(payload)
    parsed = [parse(event) for event in events]
    counts: dict[str, int] = {}
    for _ in range(CEILING_PASSES):
        counts = {}
        get = counts.get
        for key in parsed:
            counts[key] = get(key, 0) + 1
    return counts
