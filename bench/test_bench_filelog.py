"""File log throughput through the system API, side by side with raw loops over the same format.

Records: 16-byte key, 100-byte value, no timestamp (124 bytes framed), one partition.

- **raw append**: plain Python; frame each record (``struct.pack`` + ``crc32c``) and write it
  to a buffered file (1 MiB buffer); flush + ``fdatasync`` every 10,000 records.
- **produce**: ``SystemProducer.send`` of prebuilt ``OutgoingMessageEnvelope`` objects,
  ``flush`` every 10,000 (default fsync policy: every flush fsyncs).
- **raw parse**: plain Python; read the framed file in 1 MiB chunks, ``unpack_from`` each
  header, check each CRC, copy key and value out as ``bytes``.
- **consume**: ``SystemConsumer.poll`` until every record was delivered as an
  ``IncomingMessageEnvelope`` (default ``fetch.max.records``, 500; page cache warm).

Goals: consume >= 0.5x raw parse, produce >= 0.3x raw append.

Run::

    .venv/bin/python -m pytest bench/test_bench_filelog.py::test_side_by_side -q -s
    .venv/bin/python -m pytest bench/test_bench_filelog.py --benchmark-enable -q

``test_side_by_side`` interleaves the four loops for several rounds and prints the best
wall-clock and CPU rates and the ratios (CPU time is the steadier measure on a shared machine;
fsync waits show only in wall time).
"""

from __future__ import annotations

import gc
import itertools
import os
import struct
import time

import pytest
from crc32c import crc32c

from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.filelog import FileLogSystemFactory, PartitionWriter, WriterSharing
from weir.engine.systems.filelog.stream import load_meta
from weir.stores.config import Config

N = 500_000
FLUSH_EVERY = 10_000
ROUNDS = 5
SYSTEM = "bench"
KEYS = [b"k%015d" % i for i in range(N)]
VALUE = b"v" * 100

_TS_KLEN = struct.Struct("<qI").pack
_U32 = struct.Struct("<I").pack
_LEN_CRC = struct.Struct("<II").pack
_HDR = struct.Struct("<IIqI").unpack_from


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-filelog")
    config = Config({f"systems.{SYSTEM}.root": str(root / "log")})
    factory = FileLogSystemFactory()
    admin = factory.get_admin(SYSTEM, config)
    counter = itertools.count()

    def new_stream() -> SystemStream:
        name = f"produce-{next(counter)}"
        admin.create_stream(StreamSpec(name, 1))
        return SystemStream(SYSTEM, name)

    state = {"root": root, "config": config, "factory": factory, "new_stream": new_stream,
             "raw_path": str(root / "raw.log")}
    read_stream = new_stream()
    produce(state, read_stream, _envelopes(read_stream))
    raw_append(state)
    state["read_ssp"] = SystemStreamPartition(SYSTEM, read_stream.stream, 0)
    return state


def _envelopes(stream: SystemStream) -> list[OutgoingMessageEnvelope]:
    return [OutgoingMessageEnvelope(stream, VALUE, key=key, partition=0) for key in KEYS]


# -- the four loops ---------------------------------------------------------------------------

def raw_append(state) -> int:
    path = state["raw_path"]
    with open(path, "wb", buffering=1 << 20) as f:
        write = f.write
        for i, key in enumerate(KEYS):
            body = b"".join((_TS_KLEN(-1, len(key)), key, _U32(len(VALUE)), VALUE))
            write(_LEN_CRC(len(body), crc32c(body)))
            write(body)
            if i % FLUSH_EVERY == FLUSH_EVERY - 1:
                f.flush()
                os.fdatasync(f.fileno())
        f.flush()
        os.fdatasync(f.fileno())
    return N


def produce(state, stream: SystemStream, envelopes) -> int:
    producer = state["factory"].get_producer(SYSTEM, state["config"])
    producer.register("bench")
    producer.start()
    send = producer.send
    for i, envelope in enumerate(envelopes):
        send("bench", envelope)
        if i % FLUSH_EVERY == FLUSH_EVERY - 1:
            producer.flush("bench")
    producer.flush("bench")
    producer.stop()
    return len(envelopes)


def raw_parse(state) -> int:
    n = 0
    with open(state["raw_path"], "rb", buffering=0) as f:
        leftover = b""
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            buf = leftover + chunk if leftover else chunk
            mv = memoryview(buf)
            pos, end = 0, len(buf)
            while pos + 24 <= end:
                length, check, ts, klen = _HDR(buf, pos)
                rend = pos + 8 + length
                if rend > end:
                    break
                if crc32c(mv[pos + 8:rend]) != check:
                    raise ValueError(f"bad record at {pos}")
                key = buf[pos + 20:pos + 20 + klen]
                value = buf[pos + 24 + klen:rend]
                n += 1
                pos = rend
            mv.release()
            leftover = buf[pos:]
    assert key == KEYS[-1] and value == VALUE
    return n


def consume(state) -> int:
    consumer = state["factory"].get_consumer(SYSTEM, state["config"])
    ssp = state["read_ssp"]
    consumer.register(ssp, 0)
    consumer.start()
    ssps = [ssp]
    n = 0
    while n < N:
        n += len(consumer.poll(ssps, 0)[ssp])
    consumer.stop()
    return n


# -- pytest-benchmark -------------------------------------------------------------------------

def test_raw_append(benchmark, env):
    assert benchmark.pedantic(raw_append, args=(env,), rounds=3, iterations=1) == N


def test_produce(benchmark, env):
    def setup():
        stream = env["new_stream"]()
        return (env, stream, _envelopes(stream)), {}
    assert benchmark.pedantic(produce, setup=setup, rounds=3, iterations=1) == N


def test_raw_parse(benchmark, env):
    assert benchmark.pedantic(raw_parse, args=(env,), rounds=3, iterations=1) == N


def test_consume(benchmark, env):
    assert benchmark.pedantic(consume, args=(env,), rounds=3, iterations=1) == N


# -- side by side -----------------------------------------------------------------------------

def _timed(fn, *args) -> tuple[float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    assert fn(*args) == N
    return time.perf_counter() - wall, time.process_time() - cpu


def test_side_by_side(env):
    best = {name: [float("inf"), float("inf")] for name in
            ("raw append", "produce", "raw parse", "consume")}
    for _ in range(ROUNDS):
        for name in best:
            if name == "produce":  # prebuilt envelopes, dropped before the next loop runs
                stream = env["new_stream"]()
                wall, cpu = _timed(produce, env, stream, _envelopes(stream))
            else:
                wall, cpu = _timed({"raw append": raw_append, "raw parse": raw_parse,
                                    "consume": consume}[name], env)
            best[name][0] = min(best[name][0], wall)
            best[name][1] = min(best[name][1], cpu)
    rate = {name: (N / wall, N / cpu) for name, (wall, cpu) in best.items()}
    print(f"\n{N:,} records of 124 B, best of {ROUNDS} interleaved rounds, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'loop':<12}{'wall rec/s':>14}{'CPU rec/s':>14}")
    for name, (wall_rate, cpu_rate) in rate.items():
        print(f"{name:<12}{wall_rate:>14,.0f}{cpu_rate:>14,.0f}")
    for ours, raw, goal in (("produce", "raw append", 0.3), ("consume", "raw parse", 0.5)):
        print(f"{ours} / {raw}: wall {rate[ours][0] / rate[raw][0]:.2f}x, "
              f"CPU {rate[ours][1] / rate[raw][1]:.2f}x (goal >= {goal}x)")


# -- shared writers (producers of several processes on one partition) ------------------------

def _write(state, sharing, writers: int) -> int:
    """N records through ``writers`` PartitionWriters of one new partition, taking turns every
    FLUSH_EVERY records (each flush of a shared writer first catches up with the others)."""
    stream = state["new_stream"]()
    meta = load_meta(str(state["root"] / "log"), stream.stream, SYSTEM)
    root = str(state["root"] / "log")
    open_ = [PartitionWriter(root, meta, 0, sharing=sharing, system=SYSTEM)
             for _ in range(writers)]
    try:
        for i, key in enumerate(KEYS):
            w = open_[(i // FLUSH_EVERY) % writers]
            w.append(key, VALUE)
            if i % FLUSH_EVERY == FLUSH_EVERY - 1:
                w.flush()
    finally:
        for w in open_:
            w.close()
    return N


def test_shared_writers_side_by_side(env):
    """Exclusive writer against one shared writer (the append lock and catch-up check per
    write-out) and two shared writers taking turns (each catches up with the other's
    records: the scan of what another process appended)."""
    variants = {"exclusive": (WriterSharing.EXCLUSIVE, 1), "shared": (WriterSharing.SHARED, 1),
                "2 shared": (WriterSharing.SHARED, 2)}
    best = {name: [float("inf"), float("inf")] for name in variants}
    for _ in range(ROUNDS):
        for name, (sharing, writers) in variants.items():
            wall, cpu = _timed(_write, env, sharing, writers)
            best[name][0] = min(best[name][0], wall)
            best[name][1] = min(best[name][1], cpu)
    print(f"\n{N:,} records of 124 B, flush every {FLUSH_EVERY:,}, best of {ROUNDS} rounds, "
          f"load average {os.getloadavg()[0]:.1f}")
    for name, (wall, cpu) in best.items():
        print(f"{name:<10}{N / wall:>14,.0f} wall rec/s{N / cpu:>14,.0f} CPU rec/s  "
              f"{best['exclusive'][1] / cpu:.2f}x exclusive (CPU)")
