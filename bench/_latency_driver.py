"""bench/latency.py's open-loop driver: the producer and consumer processes, the job
processes of one run, and the idle-CPU measurement of a waiting job."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench._latency_scenarios import (NS, PAD, PARTITIONS, RECORD, SCRIPT, SPECS, Scenario,
                                      create_streams, job_configs, log_config)
from bench.peers_e2e import _env

__all__ = ["RunResult", "consume", "cpu_ns", "idle_cpu", "ping", "produce", "run_once",
           "spark_batches", "start_python", "stop_all"]


# -- producer ---------------------------------------------------------------------------------

def _producer(root: Path):
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    # A long linger: this producer writes out itself, once per burst of due events.
    cfg = log_config(root) | {"systems.filelog.producer.linger.ms": "60000"}
    producer = SystemRegistry(Config(cfg)).producer("filelog")
    producer.register("bench")
    producer.start()
    return producer


def _encoder(kind: str, stream: str, keys: int):
    """``send(producer, seq, scheduled_ns, rng)``: one event (seq -1: a ping, partition 0..3)."""
    from weir.engine.model import OutgoingMessageEnvelope, SystemStream

    ss = SystemStream("filelog", stream)
    if kind == "records":
        def send(producer, seq: int, at: int, rng: random.Random) -> None:
            k = rng.randrange(keys) if seq >= 0 else -seq
            producer.send("bench", OutgoingMessageEnvelope(
                ss, RECORD.pack(at, seq) + PAD, key=b"key%05d" % k, partition=k % PARTITIONS))
        return send
    import msgpack

    def send_view(producer, seq: int, at: int, rng: random.Random) -> None:
        k = rng.randrange(keys) if seq >= 0 else -seq
        user = "u%03d" % (k % 60)
        producer.send("bench", OutgoingMessageEnvelope(
            ss, msgpack.packb({"user": user, "ts": at // 1_000_000, "at": at, "seq": seq}),
            key=user.encode(), partition=k % PARTITIONS))
    return send_view


def produce(spec: dict) -> None:
    """The producer process (``--produce``): ``n`` events at ``rate`` per second on schedule
    (``rate`` 0: as fast as it can, for the max-throughput run)."""
    producer = _producer(Path(spec["root"]))
    send = _encoder(spec["kind"], spec["stream"], spec["keys"])
    rng = random.Random(7)
    n, rate = spec["n"], spec["rate"]
    now = time.monotonic_ns
    if rate <= 0:  # as fast as it can, written out every 256 events
        for i in range(n):
            send(producer, i, now(), rng)
            if i % 256 == 255:
                producer.write_through("bench")
        producer.stop()
        return
    step = NS / rate
    t0 = now() + 20_000_000
    i = 0
    while i < n:
        due = min(n, int((now() - t0) / step) + 1)
        while i < due:
            send(producer, i, t0 + int(i * step), rng)
            i += 1
        producer.write_through("bench")
        wait = t0 + int(i * step) - now()
        if wait > 0:
            time.sleep(wait / NS)
    producer.stop()


def ping(root: Path, scenario: Scenario, ready: Path, timeout: float) -> float:
    """Send ping events (one per partition) every 100 ms until the consumer saw the output of
    one (the job is up); returns the seconds it took."""
    producer = _producer(root)
    send = _encoder(scenario.kind, scenario.input, 0)
    started = time.monotonic()
    rng = random.Random(0)
    try:
        while not ready.exists():
            if time.monotonic() - started > timeout:
                raise SystemExit(f"no output {timeout:.0f} s after the job started; see the "
                                 f"job logs in {ready.parent}")
            for p in range(PARTITIONS):
                send(producer, -(p + 1), time.monotonic_ns(), rng)
            producer.write_through("bench")
            time.sleep(0.1)
    finally:
        producer.stop()
    return time.monotonic() - started


# -- consumer ---------------------------------------------------------------------------------

def consume(spec: dict) -> None:
    """The consumer process (``--consume``): read the output streams from their start until
    ``n`` records of the run (sequence >= 0) arrived (and, for the app, ``linger_s`` longer
    for the last panes) or ``timeout`` passed since the first ping's output (the job's
    start-up is not counted); write per-record arrival and latency."""
    from weir.engine.model import SystemStreamPartition
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    root = Path(spec["root"])
    consumer = SystemRegistry(Config(log_config(root))).consumer("filelog")
    ssps = [SystemStreamPartition("filelog", s, p) for s in spec["streams"]
            for p in range(PARTITIONS)]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    ready = Path(spec["ready"])
    n, kind = spec["n"], spec["kind"]
    latency = [-1] * n             # ns, per sequence number
    arrival = [0] * n
    panes: list[tuple[int, int]] = []   # (window end ms, arrival ns)
    seen = dupes = 0
    now = time.monotonic_ns
    deadline = time.monotonic() + spec["timeout"] + 600   # + the job's start-up, at most
    done_at = None
    unpack = RECORD.unpack_from
    if kind == "views":
        import msgpack
        unpackb = msgpack.unpackb
    while time.monotonic() < deadline:
        if done_at is not None and time.monotonic() >= done_at:
            break
        batch = consumer.poll(ssps, 0.1)
        t = now()
        for ssp, envelopes in batch.items():
            for env in envelopes:
                if kind == "records":
                    at, seq = unpack(env.message)
                elif ssp.stream == "lat-panes":
                    pane = unpackb(env.message)
                    panes.append((pane["end"], t))
                    continue
                else:
                    view = unpackb(env.message)
                    at, seq = view["at"], view["seq"]
                if seq < 0:
                    if not ready.exists():  # the job is up: the timeout counts from here
                        ready.write_text("ready")
                        deadline = time.monotonic() + spec["timeout"]
                    continue
                if latency[seq] >= 0:
                    dupes += 1
                    continue
                latency[seq], arrival[seq] = t - at, t
                seen += 1
        if seen >= n and done_at is None:
            done_at = time.monotonic() + spec.get("linger_s", 0.0)
    consumer.stop()
    Path(spec["out"]).write_text(json.dumps({"latency": latency, "arrival": arrival,
                                             "panes": panes, "seen": seen, "dupes": dupes}))


# -- processes --------------------------------------------------------------------------------

def start_python(args: list[str], log: Path, env: dict[str, str], cwd: Path
                 ) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, env=env, cwd=str(cwd))


def stop_all(procs: list[subprocess.Popen], timeout: float = 60.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_ns(pid: int) -> int:
    """CPU time (ns) of every thread of ``pid`` and of its descendants, from schedstat."""
    from bench.peers_e2e import _descendants

    total = 0
    for proc in (pid, *_descendants(pid)):
        for stat in Path(f"/proc/{proc}/task").glob("*/schedstat"):
            try:
                total += int(stat.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total



# -- one run ----------------------------------------------------------------------------------

@dataclass
class RunResult:
    scenario: str
    tree: str
    rate: float                    # target events/s (0: the max-throughput run)
    latencies_ms: list[float] = field(default_factory=list)
    pane_latencies_ms: list[float] = field(default_factory=list)
    throughput: float = 0.0        # records/s reaching the consumer
    missing: int = 0
    dupes: int = 0
    job_cpu_us: float = 0.0        # CPU of the job's processes per event (all threads)
    batch_ms: list[float] = field(default_factory=list)   # Spark: each micro-batch's duration


def spark_batches(checkpoint: Path) -> list[float]:
    """The duration (ms) of every micro-batch of a Spark query, from its checkpoint: Spark
    writes ``offsets/<b>`` when batch ``b`` starts and ``commits/<b>`` when it is done."""
    out = []
    for commit in (checkpoint / "commits").glob("[0-9]*"):
        start = checkpoint / "offsets" / commit.name
        if start.exists():
            out.append((commit.stat().st_mtime_ns - start.stat().st_mtime_ns) / 1e6)
    return sorted(out)

def run_once(name: str, tree: str, weir_path: Path | None, work: Path, rate: float, n: int,
             warmup_n: int, extra: dict[str, str], keys: int) -> RunResult:
    """One run of ``name`` at ``rate`` events/s (0: closed loop over ``n`` prefilled events,
    the max-throughput run) in new processes, streams and state."""
    scenario = SPECS[name]
    run = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    root = run / "log"
    env = _env(weir_path, work / "pycache")
    jobs: list[subprocess.Popen] = []
    try:
        create_streams(scenario, root)
        for i, (cfg, args) in enumerate(job_configs(name, run, root, extra)):
            path = run / f"job{i}.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
            jobs.append(start_python(["-m", "weir", "run", str(path), "--status", "off", *args],
                                     run / f"job{i}.log", env, run))
        ready = run / "ready"
        out = run / "consumed.json"
        timeout = (n / rate if rate > 0 else n / 500) + 120
        consumer = start_python([str(SCRIPT), "--consume", json.dumps({
            "root": str(root), "streams": list(scenario.outputs), "n": n, "kind": scenario.kind,
            "ready": str(ready), "out": str(out), "timeout": timeout,
            "linger_s": 1.5 if scenario.kind == "views" else 0.0})],
            run / "consumer.log", env, run)
        ping(root, scenario, ready, 600)
        cpu0 = sum(cpu_ns(job.pid) for job in jobs)
        producer = start_python([str(SCRIPT), "--produce", json.dumps({
            "root": str(root), "stream": scenario.input, "kind": scenario.kind, "n": n,
            "rate": rate, "keys": keys})], run / "producer.log", env, run)
        if producer.wait() != 0:
            raise SystemExit(f"the producer failed:\n{(run / 'producer.log').read_text()}")
        if consumer.wait(timeout + 60) != 0:
            raise SystemExit(f"the consumer failed:\n{(run / 'consumer.log').read_text()}")
        for i, job in enumerate(jobs):
            if job.poll() is not None:
                raise SystemExit(f"job {i} exited {job.returncode} during the run:\n"
                                 + (run / f"job{i}.log").read_text()[-3000:])
        cpu = sum(cpu_ns(job.pid) for job in jobs) - cpu0
        data = json.loads(out.read_text())
        res = _result(name, tree, rate, n, warmup_n, data)
        res.job_cpu_us = cpu / 1000 / max(1, n)
        if name == "spark":
            res.batch_ms = spark_batches(run / "data-lat-alo" / "checkpoints" / "spark")
        return res
    except SystemExit as failed:
        logs = "".join(f"\n--- {log.name} ---\n{log.read_text()[-3000:]}"
                       for log in sorted(run.glob("*.log")))
        raise SystemExit(f"{failed}{logs}") from None
    finally:
        stop_all(jobs)
        shutil.rmtree(run, ignore_errors=True)


def _result(name: str, tree: str, rate: float, n: int, warmup_n: int, data: dict) -> RunResult:
    latency, arrival = data["latency"], data["arrival"]
    res = RunResult(name, tree, rate, missing=sum(1 for x in latency if x < 0),
                    dupes=data["dupes"])
    got = [a for a in arrival if a]
    if rate <= 0:  # as fast as it goes: from the first send to the last arrival
        sent = [a - x for x, a in zip(latency, arrival) if x >= 0]
        if len(got) > 1:
            res.throughput = len(got) / ((max(got) - min(sent)) / NS)
        return res
    measured = [(x, a) for x, a in zip(latency[warmup_n:], arrival[warmup_n:]) if x >= 0]
    res.latencies_ms = [x / 1e6 for x, _ in measured]
    if len(measured) > 1:
        arrivals = [a for _, a in measured]
        res.throughput = (len(measured) - 1) / ((max(arrivals) - min(arrivals)) / NS)
    if data["panes"]:
        # windows that closed inside the measured part: after the warmup, before the last event
        ats = [a for a in arrival[warmup_n:] if a]
        first_ms = (min(ats) / 1e6) if ats else 0
        last_sched = max(x for x in (a - l for a, l in zip(arrival, latency) if l >= 0))
        res.pane_latencies_ms = [(t - end * 1_000_000) / 1e6 for end, t in data["panes"]
                                 if first_ms + 1000 <= end and end * 1_000_000 <= last_sched]
    return res


# -- idle CPU of a waiting job ----------------------------------------------------------------

def idle_cpu(work: Path, trees: dict[str, Path | None], rounds: int, seconds: float
             ) -> list[str]:
    """The CPU of the ``alo`` job (``weir run``, one container) waiting on an empty input:
    started, pinged until its output appears, then measured over ``seconds`` (every thread of
    the job's processes, ``/proc/<pid>/task/*/schedstat``), per tree, interleaved."""
    scenario = SPECS["alo"]
    samples: dict[str, list[float]] = {tree: [] for tree in trees}
    for r in range(rounds):
        for tree in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
            run = Path(tempfile.mkdtemp(prefix="idle-", dir=work))
            root = run / "log"
            env = _env(trees[tree], work / "pycache")
            try:
                create_streams(scenario, root)
                cfg, _ = job_configs("alo", run, root, {})[0]
                path = run / "job.properties"
                path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
                job = start_python(["-m", "weir", "run", str(path), "--status", "off"],
                                   run / "job.log", env, run)
                ready = run / "ready"
                consumer = start_python([str(SCRIPT), "--consume", json.dumps({
                    "root": str(root), "streams": ["lat-out"], "n": 1, "kind": "records",
                    "ready": str(ready), "out": str(run / "c.json"), "timeout": 600})],
                    run / "consumer.log", env, run)
                try:
                    ping(root, scenario, ready, 600)
                    time.sleep(3.0)   # the ping's commit-free aftermath settles
                    c0, t0 = cpu_ns(job.pid), time.monotonic()
                    time.sleep(seconds)
                    percent = 100 * (cpu_ns(job.pid) - c0) / 1e9 / (time.monotonic() - t0)
                finally:
                    consumer.kill()
                    consumer.wait()
                    stop_all([job])
                samples[tree].append(percent)
                print(f"round {r + 1} idle {tree:<12} {percent:5.2f}% of a core  load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
            finally:
                shutil.rmtree(run, ignore_errors=True)
    lines = ["| tree | idle CPU % of a core, median (min-max) |", "|---|---:|"]
    for tree, values in samples.items():
        lines.append(f"| {tree} | {statistics.median(values):.2f} ({min(values):.2f}-"
                     f"{max(values):.2f}) |")
    return lines
