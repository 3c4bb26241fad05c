"""Latency, open loop (issue 22): how long a record takes from its scheduled send to a reader
of the job's final output, at 10%, 50% and 90% of the job's measured maximum throughput.

Every part is its own process, as in production:

* a **producer** process appends events to the input stream on a fixed schedule (event ``i``
  is due at ``t0 + i / rate``; whatever is due is appended and written out at once, then it
  sleeps to the next due time). Each event carries its scheduled time (``CLOCK_MONOTONIC``,
  one clock for every process on Linux), and latency is measured from it: a stalled producer
  cannot hide a delay, it shows up as latency (no coordinated omission);
* the **job** runs as ``python -m weir run job.properties`` (the Spark scenario with
  ``--runner spark``), with the defaults unless ``--set`` says otherwise;
* a **consumer** process reads the final output stream with the file log's consumer (the
  default ``read_committed``) and records arrival minus scheduled time for every record.

Scenarios:

==========  ================================================================================
``alo``     one job (``bench._job_tasks:CountEcho``): a running count per key in a RocksDB
            store logged to the file log, every input sent on with its count; at-least-once
``eos``     the same job with ``task.processing.guarantee=exactly_once`` (its default
            commit interval)
``chain``   two such jobs, the first one's output is the second one's input
``app``     the pageviews shape (``bench._app_jobs:LatencyViews``): ``partition_by(user)``,
            every record to one output (records through the shuffle, at-least-once) and a
            tumbling one-second count per user to another. Panes are timed from the moment
            the watermark passes the window's end: the scheduled time of the first event at
            or after the end (event time is the scheduled time, ms, no out-of-orderness)
``spark``   the ``alo`` job on Spark (``weir run --runner spark``, local mode)
==========  ================================================================================

The maximum throughput of a scenario is measured first: the producer appends
``--max-records`` events as fast as it can (producer, job and consumer share the machine, as
in the open-loop runs); the events divided by the time from the first send to the last output
is the maximum (a Spark micro-batch delivers its outputs at once, so arrival rates alone would
overstate it).
Then each load runs for ``--duration`` seconds (the first ``--warmup`` seconds not counted)
in new processes with new streams and state; a ping record is sent until its output appears
(so the job's start-up is not measured) before the producer starts. Loads and scenarios are
interleaved over ``--rounds`` rounds (the order alternates); percentiles are over the pooled
records of every round, the spread is the per-round p99 range.

Keys: ``--keys`` (10,000) uniform keys over 4 partitions (the key picks the partition).

Run::

    .venv/bin/python bench/latency.py                              # everything, ~5 minutes
    .venv/bin/python bench/latency.py --scenarios alo,chain --loads 50 --rounds 3
    .venv/bin/python bench/latency.py --scenarios alo --compare 415c877   # before/after
    .venv/bin/python bench/latency.py --scenarios alo --set task.commit.ms=1000
    .venv/bin/python bench/latency.py --scenarios alo --rate 2000  # absolute rates, no max run
    .venv/bin/python bench/latency.py --readers     # how a waiting reader notices a record
    .venv/bin/python bench/latency.py --idle --compare 415c877 --rounds 3   # idle CPU

``--readers`` measures the ways a consumer can wait (bounded-sleep polling at 10 ms and 1 ms,
inotify on the partition directories, and a condition variable between two threads of one
process, the floor of any shared wake-up): the time from a record written by another process
(at random 10-30 ms gaps) to the poll that returns it, the reader polling as the run loop does
(``poll(ssps, 0.01)``), and the CPU of a reader that waits 10 s with nothing to read.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.append(str(ROOT))  # after a snapshot on PYTHONPATH

from bench.peers_e2e import _env, snapshot, warm_bytecode  # noqa: E402

__all__ = ["main"]

PARTITIONS = 4
SCENARIOS = ("alo", "eos", "chain", "app", "spark")
RECORD = struct.Struct("<qq")          # scheduled monotonic ns, sequence number (-1: a ping)
PAD = b"p" * 16                        # 32-byte values, as small events are
_NS = 1_000_000_000


# -- the scenarios' streams and jobs ----------------------------------------------------------

@dataclass(frozen=True)
class Scenario:
    name: str
    input: str
    outputs: tuple[str, ...]       # read by the consumer
    streams: tuple[str, ...]       # created before the run (input, outputs, between jobs)
    kind: str                      # "records" (CountEcho values) or "views" (the app)


SPECS = {
    "alo": Scenario("alo", "lat-in", ("lat-out",), ("lat-in", "lat-out"), "records"),
    "eos": Scenario("eos", "lat-in", ("lat-out",), ("lat-in", "lat-out"), "records"),
    "chain": Scenario("chain", "lat-in", ("lat-out",), ("lat-in", "lat-mid", "lat-out"),
                      "records"),
    "app": Scenario("app", "lat-views", ("lat-records", "lat-panes"),
                    ("lat-views", "lat-records", "lat-panes"), "views"),
    "spark": Scenario("spark", "lat-in", ("lat-out",), ("lat-in", "lat-out"), "records"),
}


def _log_config(root: Path) -> dict[str, str]:
    return {"systems.filelog.factory": "filelog", "systems.filelog.root": str(root),
            "systems.filelog.default.stream.samza.offset.default": "oldest"}


def _count_job(run: Path, root: Path, name: str, source: str, target: str,
               extra: dict[str, str]) -> dict[str, str]:
    return _log_config(root) | {
        "job.name": name, "task.class": "bench._job_tasks:CountEcho",
        "task.inputs": f"filelog.{source}", "bench.output": target,
        "job.data.dir": str(run / f"data-{name}"), "job.container.count": "1",
        "stores.counts.factory": "rocksdb", "stores.counts.key.serde": "bytes",
        "stores.counts.msg.serde": "int64",
        "stores.counts.changelog": f"filelog.{name}-changelog",
    } | extra


def job_configs(scenario: str, run: Path, root: Path, extra: dict[str, str]
                ) -> list[tuple[dict[str, str], list[str]]]:
    """The job(s) of a scenario: (config, extra ``weir run`` arguments) each."""
    if scenario in ("alo", "spark"):
        args = ["--runner", "spark"] if scenario == "spark" else []
        cfg = _count_job(run, root, "lat-alo", "lat-in", "lat-out", extra)
        if scenario == "spark":
            cfg |= {"spark.master": "local[2]", "spark.ui.enabled": "false"}
        return [(cfg, args)]
    if scenario == "eos":
        return [(_count_job(run, root, "lat-eos", "lat-in", "lat-out",
                            {"task.processing.guarantee": "exactly_once"} | extra), [])]
    if scenario == "chain":
        return [(_count_job(run, root, "lat-a", "lat-in", "lat-mid", extra), []),
                (_count_job(run, root, "lat-b", "lat-mid", "lat-out", extra), [])]
    if scenario == "app":
        return [(_log_config(root) | {
            "job.name": "lat-app", "app.class": "bench._app_jobs:LatencyViews",
            "job.data.dir": str(run / "data-app"), "job.container.count": "1",
            "job.intermediate.stream.partitions": str(PARTITIONS),
        } | extra, [])]
    raise SystemExit(f"unknown scenario {scenario!r}; one of {', '.join(SCENARIOS)}")


def create_streams(scenario: Scenario, root: Path) -> None:
    from weir.engine.systems.api import StreamSpec
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    admin = SystemRegistry(Config(_log_config(root))).admin("filelog")
    for stream in scenario.streams:
        admin.create_stream(StreamSpec(stream, PARTITIONS))


# -- producer ---------------------------------------------------------------------------------

def _producer(root: Path):
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    # A long linger: this producer writes out itself, once per burst of due events.
    cfg = _log_config(root) | {"systems.filelog.producer.linger.ms": "60000"}
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
    step = _NS / rate
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
            time.sleep(wait / _NS)
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
    consumer = SystemRegistry(Config(_log_config(root))).consumer("filelog")
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


# -- readers: how a waiting consumer notices a record ------------------------------------------

READER_MODES = ("poll-10ms", "poll-1ms", "inotify", "in-process-condition")


def _reader_consumer(root: Path, mode: str):
    from weir.engine.model import SystemStreamPartition
    from weir.engine.systems.filelog import consumer as consumer_module
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    sleep = {"poll-10ms": "10", "poll-1ms": "1"}.get(mode, "10")
    if mode.startswith("poll"):  # no watch: the bounded-sleep polling of old
        consumer_module.DirectoryWatch.open = classmethod(lambda cls: None)
    cfg = _log_config(root) | {"systems.filelog.consumer.poll.max.sleep.ms": sleep}
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
    me = str(Path(__file__).resolve())
    env = _env(None, work / "pycache")
    for mode in READER_MODES:
        if mode == "in-process-condition":
            got = [x / 1e6 for x in _in_process_condition(n, gap_s)]
            lines.append(f"| {mode} | {_pct(got, .5):.3f} | {_pct(got, .99):.3f} | "
                         f"{max(got):.3f} | - |")
            continue
        results = {}
        for phase in ("notice", "idle"):
            run = Path(tempfile.mkdtemp(prefix="readers-", dir=work))
            root = run / "log"
            create_streams(Scenario("r", "lat-in", (), ("lat-in",), "records"), root)
            ready, out = run / "ready", run / "out.json"
            proc = _python([me, "--reader", json.dumps({
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
        lines.append(f"| {mode} | {_pct(got, .5):.3f} | {_pct(got, .99):.3f} | {max(got):.3f} "
                     f"| {results['idle']['cpu_pct']:.2f} |")
        print(lines[-1], flush=True)
    return lines


# -- idle CPU of a waiting job ----------------------------------------------------------------

def _cpu_ns(pid: int) -> int:
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
                job = _python(["-m", "weir", "run", str(path), "--status", "off"],
                              run / "job.log", env, run)
                ready = run / "ready"
                consumer = _python([str(Path(__file__).resolve()), "--consume", json.dumps({
                    "root": str(root), "streams": ["lat-out"], "n": 1, "kind": "records",
                    "ready": str(ready), "out": str(run / "c.json"), "timeout": 600})],
                    run / "consumer.log", env, run)
                try:
                    ping(root, scenario, ready, 600)
                    time.sleep(3.0)   # the ping's commit-free aftermath settles
                    c0, t0 = _cpu_ns(job.pid), time.monotonic()
                    time.sleep(seconds)
                    pct = 100 * (_cpu_ns(job.pid) - c0) / 1e9 / (time.monotonic() - t0)
                finally:
                    consumer.kill()
                    consumer.wait()
                    _stop([job])
                samples[tree].append(pct)
                print(f"round {r + 1} idle {tree:<12} {pct:5.2f}% of a core  load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
            finally:
                shutil.rmtree(run, ignore_errors=True)
    lines = ["| tree | idle CPU % of a core, median (min-max) |", "|---|---:|"]
    for tree, values in samples.items():
        lines.append(f"| {tree} | {statistics.median(values):.2f} ({min(values):.2f}-"
                     f"{max(values):.2f}) |")
    return lines


def spark_batches(checkpoint: Path) -> list[float]:
    """The duration (ms) of every micro-batch of a Spark query, from its checkpoint: Spark
    writes ``offsets/<b>`` when batch ``b`` starts and ``commits/<b>`` when it is done."""
    out = []
    for commit in (checkpoint / "commits").glob("[0-9]*"):
        start = checkpoint / "offsets" / commit.name
        if start.exists():
            out.append((commit.stat().st_mtime_ns - start.stat().st_mtime_ns) / 1e6)
    return sorted(out)


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


def _python(args: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, env=env, cwd=str(cwd))


def _stop(procs: list[subprocess.Popen], timeout: float = 60.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_once(name: str, tree: str, weir_path: Path | None, work: Path, rate: float, n: int,
             warmup_n: int, extra: dict[str, str], keys: int) -> RunResult:
    """One run of ``name`` at ``rate`` events/s (0: closed loop over ``n`` prefilled events,
    the max-throughput run) in new processes, streams and state."""
    scenario = SPECS[name]
    run = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    root = run / "log"
    env = _env(weir_path, work / "pycache")
    me = str(Path(__file__).resolve())
    jobs: list[subprocess.Popen] = []
    try:
        create_streams(scenario, root)
        for i, (cfg, args) in enumerate(job_configs(name, run, root, extra)):
            path = run / f"job{i}.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
            jobs.append(_python(["-m", "weir", "run", str(path), "--status", "off", *args],
                                run / f"job{i}.log", env, run))
        ready = run / "ready"
        out = run / "consumed.json"
        timeout = (n / rate if rate > 0 else n / 500) + 120
        consumer = _python([me, "--consume", json.dumps({
            "root": str(root), "streams": list(scenario.outputs), "n": n, "kind": scenario.kind,
            "ready": str(ready), "out": str(out), "timeout": timeout,
            "linger_s": 1.5 if scenario.kind == "views" else 0.0})],
            run / "consumer.log", env, run)
        ping(root, scenario, ready, 600)
        cpu0 = sum(_cpu_ns(job.pid) for job in jobs)
        producer = _python([me, "--produce", json.dumps({
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
        cpu = sum(_cpu_ns(job.pid) for job in jobs) - cpu0
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
        _stop(jobs)
        shutil.rmtree(run, ignore_errors=True)


def _result(name: str, tree: str, rate: float, n: int, warmup_n: int, data: dict) -> RunResult:
    latency, arrival = data["latency"], data["arrival"]
    res = RunResult(name, tree, rate, missing=sum(1 for x in latency if x < 0),
                    dupes=data["dupes"])
    got = [a for a in arrival if a]
    if rate <= 0:  # as fast as it goes: from the first send to the last arrival
        sent = [a - x for x, a in zip(latency, arrival) if x >= 0]
        if len(got) > 1:
            res.throughput = len(got) / ((max(got) - min(sent)) / _NS)
        return res
    measured = [(x, a) for x, a in zip(latency[warmup_n:], arrival[warmup_n:]) if x >= 0]
    res.latencies_ms = [x / 1e6 for x, _ in measured]
    if len(measured) > 1:
        arrivals = [a for _, a in measured]
        res.throughput = (len(measured) - 1) / ((max(arrivals) - min(arrivals)) / _NS)
    if data["panes"]:
        # windows that closed inside the measured part: after the warmup, before the last event
        ats = [a for a in arrival[warmup_n:] if a]
        first_ms = (min(ats) / 1e6) if ats else 0
        last_sched = max(x for x in (a - l for a, l in zip(arrival, latency) if l >= 0))
        res.pane_latencies_ms = [(t - end * 1_000_000) / 1e6 for end, t in data["panes"]
                                 if first_ms + 1000 <= end and end * 1_000_000 <= last_sched]
    return res


# -- report -----------------------------------------------------------------------------------

def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _row(label: str, samples: list[float], rounds: list[list[float]], rate: float,
         throughput: float, missing: int) -> str:
    p99s = [_pct(r, 0.99) for r in rounds if r]
    spread = f"{min(p99s):.1f}-{max(p99s):.1f}" if len(p99s) > 1 else "-"
    return (f"| {label} | {rate:,.0f} | {throughput:,.0f} | {len(samples):,} | "
            f"{_pct(samples, 0.5):.1f} | {_pct(samples, 0.99):.1f} | {spread} | "
            f"{_pct(samples, 0.999):.1f} | {max(samples) if samples else float('nan'):.1f} | "
            f"{missing} |")


def report(results: list[RunResult], maxima: dict[tuple[str, str], float]) -> list[str]:
    lines = ["| scenario, tree | max events/s |", "|---|---:|"]
    for (name, tree), value in maxima.items():
        lines.append(f"| {name}, {tree} | {value:,.0f} |")
    lines += ["", "| scenario, tree, load | target events/s | reached records/s | records | "
              "p50 ms | p99 ms | p99 per round | p99.9 ms | max ms | missing |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[tuple[str, str, float], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.scenario, r.tree, r.rate), []).append(r)
    for (name, tree, rate), runs in groups.items():
        load = maxima.get((name, "this tree"))
        tag = f"{100 * rate / load:.0f}%" if load else f"{rate:,.0f}/s"
        label = f"{name}, {tree}, {tag}"
        pooled = [x for r in runs for x in r.latencies_ms]
        lines.append(_row(label, pooled, [r.latencies_ms for r in runs], rate,
                          statistics.median(r.throughput for r in runs),
                          sum(r.missing for r in runs)))
        panes = [x for r in runs for x in r.pane_latencies_ms]
        if panes:
            lines.append(_row(f"{label}: panes after the watermark passed", panes,
                              [r.pane_latencies_ms for r in runs], rate, 0.0, 0))
    return lines


# -- main -------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--loads", default="10,50,90", help="percent of the measured maximum")
    parser.add_argument("--rate", default="", help="absolute rates (events/s, comma-"
                        "separated) instead of --loads; skips the max-throughput runs")
    parser.add_argument("--duration", type=float, default=12.0, help="seconds per load")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds not counted")
    parser.add_argument("--max-records", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra job config (every job of every scenario)")
    parser.add_argument("--compare", action="append", default=[], metavar="REV",
                        help="also run every load as of git revision REV (same rates)")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--readers", action="store_true",
                        help="measure the ways a waiting reader notices a record instead")
    parser.add_argument("--idle", action="store_true",
                        help="measure the CPU of the alo job waiting on an empty input instead "
                             "(with --compare, per tree)")
    parser.add_argument("--produce", help=argparse.SUPPRESS)
    parser.add_argument("--consume", help=argparse.SUPPRESS)
    parser.add_argument("--reader", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.produce:
        produce(json.loads(args.produce))
        return 0
    if args.consume:
        consume(json.loads(args.consume))
        return 0
    if args.reader:
        reader(json.loads(args.reader))
        return 0
    command = " ".join([".venv/bin/python", "bench/latency.py",
                        *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    extra = dict(kv.split("=", 1) for kv in args.set)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="weir-latency-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.readers:
        load_avg = os.getloadavg()[0]
        lines = readers(work, 300, 10.0, 0.02)
        print("\n".join(lines))
        print(f"\nload average {load_avg:.1f} at the start, {os.getloadavg()[0]:.1f} at the "
              f"end; {os.cpu_count()} cores\ncommand: {command}")
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    trees: dict[str, Path | None] = {"this tree": None}
    for rev in args.compare:
        trees[rev] = snapshot(rev, work)
    for weir_path in trees.values():
        warm_bytecode(work, weir_path)
    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    load_avg = os.getloadavg()[0]
    if args.idle:
        try:
            lines = idle_cpu(work, trees, max(1, args.rounds), 10.0)
            print("\n".join(lines))
            print(f"\nload average {load_avg:.1f} at the start, {os.getloadavg()[0]:.1f} at "
                  f"the end; {os.cpu_count()} cores\ncommand: {command}")
        finally:
            if args.workdir is None:
                shutil.rmtree(work, ignore_errors=True)
        return 0
    try:
        maxima: dict[tuple[str, str], float] = {}
        rates: dict[str, list[float]] = {}
        for name in names:
            if args.rate:
                rates[name] = [float(r) for r in args.rate.split(",")]
                continue
            for tree, path in trees.items():
                res = run_once(name, tree, path, work, 0, args.max_records, 0, extra, args.keys)
                maxima[(name, tree)] = res.throughput
                print(f"{name:<6} {tree:<12} max {res.throughput:>10,.0f} events/s, job cpu "
                      f"{res.job_cpu_us:.0f} us/event "
                      f"({args.max_records:,} events as fast as the producer goes)  load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
            top = maxima[(name, "this tree")]
            rates[name] = [top * float(p) / 100 for p in args.loads.split(",")]
        results: list[RunResult] = []
        plan = [(name, rate) for name in names for rate in rates[name]]
        for r in range(args.rounds):
            for name, rate in (plan if r % 2 == 0 else plan[::-1]):
                for tree in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                    n = max(1, int(rate * args.duration))
                    res = run_once(name, tree, trees[tree], work, rate, n,
                                   int(rate * args.warmup), extra, args.keys)
                    results.append(res)
                    line = (f"round {r + 1} {name:<6} {tree:<12} {rate:>9,.0f}/s -> "
                            f"{res.throughput:>9,.0f}/s  cpu {res.job_cpu_us:5.0f} us/ev  "
                            f"p50 {_pct(res.latencies_ms, .5):7.1f} "
                            f"p99 {_pct(res.latencies_ms, .99):7.1f} "
                            f"p99.9 {_pct(res.latencies_ms, .999):7.1f} ms")
                    if res.pane_latencies_ms:
                        line += (f"  panes p50 {_pct(res.pane_latencies_ms, .5):.1f} "
                                 f"p99 {_pct(res.pane_latencies_ms, .99):.1f} ms")
                    if res.batch_ms:
                        line += (f"  micro-batches {len(res.batch_ms)}: median "
                                 f"{_pct(res.batch_ms, .5):.0f} ms, max "
                                 f"{max(res.batch_ms):.0f} ms")
                    if res.missing:
                        line += f"  MISSING {res.missing}"
                    print(line + f"  load {os.getloadavg()[0]:.1f}", flush=True)
        print("\n".join(report(results, maxima)))
        print(f"\nload average {load_avg:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
              f"{os.cpu_count()} cores\ncommand: {command}")
        return 0
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
