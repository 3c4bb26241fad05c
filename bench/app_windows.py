"""A windowed count over a shuffle with the high-level API, against the same count without a
shuffle, without watermarks, and in Bytewax, on the same input in one process run.

Workload: N events (default 1,000,000), ``{"user": "u0042", "ts": ms}`` as MessagePack in a
2-partition file-log stream partitioned by user, 1,000 users drawn uniformly
(``random.Random(2024)``), event time 1 ms apart and shuffled by up to 50 ms. The count is per
user and one-minute tumbling window (~17 windows x 1,000 users). Variants, interleaved per
round (the order alternates between rounds), each a complete run from planning to the job's
end through the embedded runner (wall time includes planning and starting the job, ~0.5 s):

- **application**: ``map -> partition_by(user) -> window(tumbling 60 s, count) -> send_to``,
  two stages in one job, watermarks every 100 ms per task (``task.watermark.interval.ms``),
  window state in RocksDB with a changelog;
- **application, no watermarks**: the same with a one-hour watermark interval, so no
  watermark is generated during the run and every window fires at the end of input: the
  difference to the first is the cost of control messages and incremental firing;
- **application, one job per stage**: the same plan run as two jobs (``weir run --stage N``),
  each in its own process, both running at once (the machine has 2 cores);
- **low-level task, no shuffle**: one task per input partition counting into the same kind of
  RocksDB store (same key layout, changelog), emitting every count at end of stream;
- **Bytewax** (``pip install -e '.[peers]'``): ``TestingSource`` (batch 1,000) over the same
  events held in memory, ``key_on`` + ``windowing.count_window`` with an ``EventClock`` and a
  60 s ``TumblingWindower``, output dropped, 1 worker, no recovery.

Ratios are medians over rounds of the per-round wall-time ratio to the application.

Run::

    .venv/bin/python bench/app_windows.py                    # 1,000,000 events, 3 rounds
    .venv/bin/python bench/app_windows.py --n 200000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import msgpack  # noqa: E402
from rich.console import Console  # noqa: E402

from weir.engine.app.runner import prepare_application  # noqa: E402
from weir.engine.container.runner import ExitCode, run_job  # noqa: E402
from weir.engine.container.status import StatusMode  # noqa: E402
from weir.engine.model import OutgoingMessageEnvelope, SystemStream  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.recovery.storage import ProgressMode  # noqa: E402
from weir.stores.config import Config  # noqa: E402

from _app_jobs import WINDOW_MS  # noqa: E402

__all__ = ["main"]

PARTITIONS = 2
USERS = 1_000
BASELINE = "application (watermarks every 100 ms)"


@dataclass
class _Variant:
    name: str
    run: Callable[[int], tuple[float, float, str]]


def _events(n: int) -> list[dict]:
    rng = random.Random(2024)
    return [{"user": f"u{rng.randrange(USERS):04d}", "ts": max(0, i - rng.randrange(50))}
            for i in range(n)]


def _common(root: Path, name: str) -> dict[str, str]:
    return {"job.name": name, "systems.filelog.root": str(root / "log"),
            "systems.filelog.default.stream.samza.offset.default": "oldest",
            "task.checkpoint.path": str(root / name / "checkpoints"),
            "job.logged.store.base.dir": str(root / name / "state"),
            "job.non-logged.store.base.dir": str(root / name / "state"),
            "task.watermark.max.out.of.orderness.ms": "50",
            "systems.filelog.streams.events.samza.msg.serde": "msgpack"}


def _produce(root: Path, events: list[dict]) -> None:
    registry = SystemRegistry(Config({"systems.filelog.root": str(root / "log")}))
    registry.admin("filelog").create_stream(StreamSpec("events", PARTITIONS, bounded=True))
    producer = registry.producer("filelog")
    producer.register("bench")
    producer.start()
    ss = SystemStream("filelog", "events")
    for e in events:
        producer.send("bench", OutgoingMessageEnvelope(
            ss, msgpack.packb(e), key=None, partition=zlib.crc32(e["user"].encode()) % PARTITIONS,
            timestamp=e["ts"]))
    producer.end_stream("events")
    producer.stop()


def _timed(config: Config) -> tuple[float, float, str]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_job(config, status=StatusMode.OFF, progress=ProgressMode.QUIET)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if result.exit_code is not ExitCode.OK:
        raise SystemExit("\n".join(result.summary_lines()))
    control = sum(n for ss, n in result.outputs.items() if "partition_by" in ss.stream)
    return wall, cpu, f"{control:,} intermediate records"


def _application(root: Path, interval_ms: int, tag: str) -> Callable[[int], tuple]:
    def run(round_no: int) -> tuple[float, float, str]:
        name = f"app-{tag}-{round_no}"
        config = Config({**_common(root, name),
                         "app.class": "_app_jobs:ShuffledWindowCount",
                         "task.watermark.interval.ms": str(interval_ms),
                         "job.intermediate.stream.partitions": str(PARTITIONS)})
        registry = SystemRegistry(config)
        registry.admin("filelog").create_stream(StreamSpec("counts", PARTITIONS))
        _, job_config = prepare_application(config, registry=registry)
        return _timed(job_config)
    return run


def _stage_process(config_items: dict, out) -> None:
    """Child process: run one stage job, report (wall, cpu, ok)."""
    sys.path.insert(0, str(HERE))
    started, cpu = time.perf_counter(), time.process_time()
    result = run_job(Config(config_items), status=StatusMode.OFF, progress=ProgressMode.QUIET)
    out.put((time.perf_counter() - started, time.process_time() - cpu,
             result.exit_code is ExitCode.OK, "\n".join(result.summary_lines())))


def _split(root: Path) -> Callable[[int], tuple]:
    """The application as one job per stage, each in its own process (2 cores: both run)."""
    import multiprocessing

    def run(round_no: int) -> tuple[float, float, str]:
        name = f"split-{round_no}"
        config = Config({**_common(root, name), "app.class": "_app_jobs:ShuffledWindowCount",
                         "task.watermark.interval.ms": "100",
                         "job.intermediate.stream.partitions": str(PARTITIONS)})
        registry = SystemRegistry(config)
        registry.admin("filelog").create_stream(StreamSpec("counts", PARTITIONS))
        plan, _ = prepare_application(config, registry=registry)
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=_stage_process, args=(dict(plan.job_config(s.index)), out))
                 for s in plan.stages]
        wall = time.perf_counter()
        for p in procs:
            p.start()
        reports = [out.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        wall = time.perf_counter() - wall
        for *_, ok, summary in reports:
            if not ok:
                raise SystemExit(summary)
        return wall, sum(r[1] for r in reports), f"{len(procs)} processes, cpu summed"
    return run


def _low_level(root: Path) -> Callable[[int], tuple]:
    def run(round_no: int) -> tuple[float, float, str]:
        name = f"direct-{round_no}"
        SystemRegistry(Config({"systems.filelog.root": str(root / "log")})).admin(
            "filelog").create_stream(StreamSpec("counts", PARTITIONS))
        config = Config({**_common(root, name),
                         "task.class": "_app_jobs:DirectWindowCount",
                         "task.inputs": "filelog.events",
                         "serializers.registry.weir-time-key.class":
                             "weir.engine.app.serdes:TimeKeySerde",
                         "stores.counts.factory": "rocksdb",
                         "stores.counts.key.serde": "weir-time-key",
                         "stores.counts.msg.serde": "msgpack",
                         "stores.counts.changelog": f"filelog.{name}-counts-changelog",
                         "systems.filelog.streams.counts.samza.msg.serde": "msgpack",
                         "systems.filelog.streams.counts.samza.key.serde": "string"})
        return _timed(config)
    return run


def _bytewax(events: list[dict]) -> Callable[[int], tuple] | None:
    try:
        import bytewax.operators as op
        import bytewax.operators.windowing as win
        from bytewax.dataflow import Dataflow
        from bytewax.outputs import DynamicSink, StatelessSinkPartition
        from bytewax.testing import TestingSource, run_main
    except Exception as exc:  # noqa: BLE001 - any import failure: skip the peer
        print(f"skipped bytewax: not importable ({type(exc).__name__}: {exc}); install with "
              f".venv/bin/pip install -e '.[peers]'")
        return None
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    timed = [(e["user"], epoch + timedelta(milliseconds=e["ts"])) for e in events]

    class _Drop(StatelessSinkPartition):
        def write_batch(self, items) -> None:
            pass

    class _DropSink(DynamicSink):
        def build(self, step_id, worker_index, worker_count):
            return _Drop()

    def run(round_no: int) -> tuple[float, float, str]:
        flow = Dataflow("bench-windows")
        stream = op.input("in", flow, TestingSource(timed, batch_size=1000))
        clock = win.EventClock(lambda item: item[1], wait_for_system_duration=timedelta(0))
        windower = win.TumblingWindower(length=timedelta(milliseconds=WINDOW_MS), align_to=epoch)
        counts = win.count_window("count", stream, clock, windower, lambda item: item[0])
        op.output("out", counts.down, _DropSink())
        wall, cpu = time.perf_counter(), time.process_time()
        run_main(flow)
        return time.perf_counter() - wall, time.process_time() - cpu, "in memory, no recovery"
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="events")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--only", default="app,nowm,split,low,bytewax",
                        help="variants to run, comma-separated from app, nowm, split, low, "
                             "bytewax (app is always run: it is the baseline)")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) | {"app"}
    console = Console(width=160)
    command = " ".join([".venv/bin/python", "bench/app_windows.py", *map(shlex.quote, sys.argv[1:])])
    events = _events(args.n)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="weir-bench-windows-") as tmp:
        root = Path(tmp)
        _produce(root, events)
        variants = [_Variant(BASELINE, _application(root, 100, "wm100"))]
        if "nowm" in only:
            variants.append(_Variant("application, no watermarks during the run",
                                     _application(root, 3_600_000, "nowm")))
        if "split" in only:
            variants.append(_Variant("application, one job per stage (2 processes)",
                                     _split(root)))
        if "low" in only:
            variants.append(_Variant("low-level task, no shuffle", _low_level(root)))
        bytewax = _bytewax(events) if "bytewax" in only else None
        if bytewax is not None:
            variants.append(_Variant("Bytewax count_window (in memory, no recovery)", bytewax))
        times: dict[str, list[tuple[float, float, str]]] = {v.name: [] for v in variants}
        for r in range(args.rounds):
            for v in (variants if r % 2 == 0 else variants[::-1]):
                wall, cpu, note = v.run(r)
                times[v.name].append((wall, cpu, note))
                console.print(f"round {r + 1} {v.name:<48} {args.n / wall:>10,.0f} ev/s "
                              f"({wall:.2f} s wall, {cpu:.2f} s cpu; {note})")
    load_after = os.getloadavg()
    base = times[BASELINE]
    lines = ["| variant | best wall ev/s | median wall ev/s | best cpu ev/s | "
             "application / variant (wall) |", "|---|---:|---:|---:|---:|"]
    for v in variants:
        runs = times[v.name]
        ratio = statistics.median(t[0] / b[0] for t, b in zip(runs, base))
        lines.append(f"| {v.name} | {args.n / min(t[0] for t in runs):,.0f} | "
                     f"{args.n / statistics.median(t[0] for t in runs):,.0f} | "
                     f"{args.n / min(t[1] for t in runs):,.0f} | {ratio:.2f}x |")
    console.print("\n".join(lines), markup=False, highlight=False)
    console.print(f"load average before {load_before[0]:.2f} / {load_before[1]:.2f} / "
                  f"{load_before[2]:.2f}, after {load_after[0]:.2f} / {load_after[1]:.2f} / "
                  f"{load_after[2]:.2f}")
    console.print(f"command: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
