"""bench/latency.py --readers: how a waiting consumer notices a record (bounded-sleep
polling, inotify, a condition variable between two threads)."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from bench._latency_driver import start_python
from bench._latency_report import pct
from bench._latency_scenarios import (PARTITIONS, RECORD, SCRIPT, Scenario, create_streams,
                                      log_config)
from bench.peers_e2e import _env

__all__ = ["READER_MODES", "reader", "readers"]

READER_MODES = ("poll-10ms", "poll-1ms", "inotify", "in-process-condition")


def _reader_consumer(root: Path, mode: str):
    from weir.engine.model import SystemStreamPartition
    from weir.engine.systems.filelog import consumer as consumer_module
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    sleep = {"poll-10ms": "10", "poll-1ms": "1"}.get(mode, "10")
    if mode.startswith("poll"):  # no watch: the bounded-sleep polling of old
        consumer_module.DirectoryWatch.open = classmethod(lambda cls: None)
    cfg = log_config(root) | {"systems.filelog.consumer.poll.max.sleep.ms": sleep}
    consumer = SystemRegistry(Config(cfg)).consumer("filelog")
    ssps = [SystemStreamPartition("filelog", "lat-in", p) for p in range(PARTITIONS)]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    return consumer, ssps


def reader(spec: dict) -> None:
    """The reader process of ``--readers``: poll as the run loop does (``poll(ssps, 0.01)``)
    and time each record from its write (``notice``), or sit idle and measure CPU."""
    import resource

    consumer, ssps = _reader_consumer(Path(spec["root"]), spec["mode"])
    ready = Path(spec["ready"])
    out: dict = {}
    if spec["idle_s"]:
        ready.write_text("ready")
        def cpu() -> float:
            r = resource.getrusage(resource.RUSAGE_SELF)
            return r.ru_utime + r.ru_stime
        c0, t0 = cpu(), time.monotonic()
        while time.monotonic() - t0 < spec["idle_s"]:
            consumer.poll(ssps, 0.01)
        out["cpu_pct"] = 100 * (cpu() - c0) / (time.monotonic() - t0)
    else:
        notices: list[int] = []
        ready.write_text("ready")
        while len(notices) < spec["n"]:
            for envelopes in consumer.poll(ssps, 0.01).values():
                t = time.monotonic_ns()
                notices += [t - RECORD.unpack_from(e.message)[0] for e in envelopes]
        out["notice_ns"] = notices
    consumer.stop()
    Path(spec["out"]).write_text(json.dumps(out))


def _in_process_condition(n: int, gap_s: float) -> list[int]:
    """The floor of a shared wake-up: writer and reader threads of one process, the writer
    notifying a condition the reader waits on after each write."""
    import threading

    cond, box, notices = threading.Condition(), [], []

    def read() -> None:
        with cond:
            while len(notices) < n:
                while not box:
                    cond.wait(0.01)
                notices.append(time.monotonic_ns() - box.pop())
    t = threading.Thread(target=read)
    t.start()
    rng = random.Random(3)
    for _ in range(n):
        time.sleep(gap_s * (0.5 + rng.random()))
        with cond:
            box.append(time.monotonic_ns())
            cond.notify()
    t.join()
    return notices


def readers(work: Path, n: int, idle_s: float, gap_s: float) -> list[str]:
    """Each way of waiting: the time from a record's write (another process, written out at
    once) to a waiting reader's poll returning it, and the CPU of a reader that waits with
    nothing to read."""
    lines = ["| waiting reader | notice p50 ms | p99 ms | max ms | idle CPU % of a core |",
             "|---|---:|---:|---:|---:|"]
    env = _env(None, work / "pycache")
    for mode in READER_MODES:
        if mode == "in-process-condition":
            got = [x / 1e6 for x in _in_process_condition(n, gap_s)]
            lines.append(f"| {mode} | {pct(got, .5):.3f} | {pct(got, .99):.3f} | "
                         f"{max(got):.3f} | - |")
            continue
        results = {}
        for phase in ("notice", "idle"):
            run = Path(tempfile.mkdtemp(prefix="readers-", dir=work))
            root = run / "log"
            create_streams(Scenario("r", "lat-in", (), ("lat-in",), "records"), root)
            ready, out = run / "ready", run / "out.json"
            proc = start_python([str(SCRIPT), "--reader", json.dumps({
                "root": str(root), "mode": mode, "ready": str(ready), "out": str(out),
                "n": n, "idle_s": idle_s if phase == "idle" else 0})], run / "reader.log",
                env, run)
            while not ready.exists():
                time.sleep(0.01)
            if phase == "notice":
                from weir.engine.systems.filelog.settings import FileLogSettings
                from weir.engine.systems.filelog.stream import load_meta
                from weir.engine.systems.filelog.writer import PartitionWriter

                meta = load_meta(str(root), "lat-in", "filelog")
                writer = PartitionWriter(str(root), meta, 0, FileLogSettings("filelog", str(root))
                                         .for_stream("lat-in"), linger_ms=0)
                rng = random.Random(3)
                for i in range(n):
                    time.sleep(gap_s * (0.5 + rng.random()))
                    writer.append(b"k", RECORD.pack(time.monotonic_ns(), i))
                writer.close()
            if proc.wait(600) != 0:
                raise SystemExit((run / "reader.log").read_text())
            results[phase] = json.loads(out.read_text())
            shutil.rmtree(run, ignore_errors=True)
        got = [x / 1e6 for x in results["notice"]["notice_ns"]]
        lines.append(f"| {mode} | {pct(got, .5):.3f} | {pct(got, .99):.3f} | {max(got):.3f} "
                     f"| {results['idle']['cpu_pct']:.2f} |")
        print(lines[-1], flush=True)
    return lines
