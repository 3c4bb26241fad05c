"""Generate page views, run the pageviews application to its end, check and summarize.

One command, a few seconds::

    python examples/pageviews/run_example.py                   # 50,000 views
    python examples/pageviews/run_example.py --views 500000 --stages   # one job per stage
    python examples/pageviews/run_example.py --runner spark    # one Spark query (docs/SPARK.md)

Everything lives in a fresh temporary directory (``--workdir DIR`` to choose it, ``--keep``
to keep it). The application is planned and run through the same runner as ``weir run``
(``--stages`` runs each stage as its own job, as ``weir run --stage N`` does). Afterwards
every per-minute count and every session is checked against a direct computation over the
generated views. Exit code 0 when everything matches. ``--runner spark`` runs the same
application as one Spark streaming query in local mode (``weir run --runner spark --trigger
available-now``; needs ``pip install 'weir[spark]'`` and Java 17+).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # pageviews.py sits beside this file

from weir.engine.app.runner import prepare_application  # noqa: E402
from weir.engine.config.job import load_config  # noqa: E402
from weir.engine.container.runner import ExitCode, run_job  # noqa: E402
from weir.engine.container.status import StatusMode, configure_logging  # noqa: E402
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.recovery.storage import ProgressMode  # noqa: E402
from weir.stores.config import Config  # noqa: E402

__all__ = ["app_config", "make_views", "write_views", "generate", "truth", "read_panes", "main"]

PARTITIONS = 4
MINUTE, SESSION_GAP, DISORDER = 60_000, 30 * 60_000, 5_000


def app_config(workdir: Path, overrides: Sequence[str] = ()) -> Config:
    """The example's app.properties with its directories inside ``workdir``."""
    return load_config(HERE / "app.properties", [
        f"systems.filelog.root={workdir / 'log'}",
        f"job.logged.store.base.dir={workdir / 'state'}",
        f"job.non-logged.store.base.dir={workdir / 'state'}",
        f"task.checkpoint.path={workdir / 'checkpoints'}",
        *overrides])


def make_views(views: int, seed: int = 1) -> list[dict]:
    """``views`` page views over a simulated day (about one per 1.5 s), some robots, a quiet
    half hour now and then."""
    rng = random.Random(seed)
    users = [f"User{u:03d}" for u in range(60)]
    pages = [f"/p/{p}" for p in range(50)]
    out, clock = [], 0
    for i in range(views):
        clock += rng.expovariate(1 / 1_500)                     # ~ a view per 1.5 s
        user = rng.choice(users)
        if rng.random() < 0.002:
            clock += SESSION_GAP                                  # a quiet half hour now and then
        out.append({"user": user, "page": rng.choice(pages), "ts": int(clock),
                    "robot": rng.random() < 0.03})
    return out


def write_views(config: Config, views: list[dict], *, end: bool = True, seed: int = 1) -> None:
    """Write ``views`` to the ``pageviews`` stream (created if needed), partitioned by page,
    each partition's event times shuffled by up to 5 s; ``end`` ends the stream after them."""
    rng = random.Random(seed)
    registry = SystemRegistry(config)
    admin = registry.admin("filelog")
    if not admin.stream_exists("pageviews"):
        admin.create_stream(StreamSpec("pageviews", PARTITIONS, bounded=True))
    by_partition = defaultdict(list)
    for view in views:
        by_partition[int(view["page"].rsplit("/", 1)[1]) % PARTITIONS].append(view)
    producer = registry.producer("filelog")
    producer.register("generator")
    producer.start()
    ss = SystemStream("filelog", "pageviews")
    for partition, rows in sorted(by_partition.items()):
        rows.sort(key=lambda v: v["ts"] + rng.randrange(DISORDER))   # late by up to 5 s
        for view in rows:
            producer.send("generator", OutgoingMessageEnvelope(
                ss, json.dumps(view).encode(), partition=partition))
    if end:
        producer.end_stream("pageviews")
    producer.stop()


def generate(config: Config, views: int, seed: int = 1) -> list[dict]:
    """``views`` page views (:func:`make_views`) written and the stream ended
    (:func:`write_views`). Returns the views written."""
    out = make_views(views, seed)
    write_views(config, out, seed=seed)
    return out


def truth(views: list[dict]) -> tuple[dict, Counter]:
    """The direct computation: ``{(user, minute start): count}`` and a Counter of sessions
    ``(user, start, end, count)``."""
    minutes: Counter = Counter()
    times = defaultdict(list)
    for v in views:
        if v["robot"]:
            continue
        user = v["user"].lower()
        minutes[(user, v["ts"] - v["ts"] % MINUTE)] += 1
        times[user].append(v["ts"])
    sessions: Counter = Counter()
    for user, ts in times.items():
        ts.sort()
        start, last, n = ts[0], ts[0], 1
        for t in ts[1:]:
            if t < last + SESSION_GAP:
                last, n = t, n + 1
            else:
                sessions[(user, start, last + SESSION_GAP, n)] += 1
                start, last, n = t, t, 1
        sessions[(user, start, last + SESSION_GAP, n)] += 1
    return dict(minutes), sessions


def read_panes(config: Config, stream: str) -> list[dict]:
    """Every pane written to ``stream`` (a window's key, start, end, value, late)."""
    registry = SystemRegistry(config)
    ss = SystemStream("filelog", stream)
    serdes = registry.serdes_for(ss)
    consumer = registry.consumer("filelog")
    ssps = [SystemStreamPartition("filelog", stream, p) for p in range(PARTITIONS)]
    ends = {s: m.upcoming for s, m in registry.metadata(ssps).items()}
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    panes = []
    try:
        for ssp in ssps:
            # the reader's position: commit markers (exactly-once) take offsets but are not
            # delivered, so the last record's offset may stay below the end
            while consumer.position(ssp) < ends[ssp]:
                for env in consumer.poll([ssp], 1.0).get(ssp, []):
                    panes.append(serdes.deserialize(env).message)
    finally:
        consumer.stop()
    return panes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the pageviews application end to end.")
    parser.add_argument("--views", type=int, default=50_000, help="page views (default 50,000)")
    parser.add_argument("--stages", action="store_true",
                        help="run each stage as its own job, one after the other")
    parser.add_argument("--workdir", type=Path, help="where the log, stores and checkpoints "
                        "go (default: a new temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config key")
    parser.add_argument("--runner", choices=("embedded", "spark"), default="embedded",
                        help="embedded (default) or spark: the application as one Spark "
                             "streaming query in local mode (docs/SPARK.md)")
    parser.add_argument("--status", choices=[m.value for m in StatusMode], default="off")
    parser.add_argument("--verbose", "-v", action="store_true", help="log at INFO")
    args = parser.parse_args(argv)

    mode = StatusMode(args.status)
    console = configure_logging(mode, level=logging.INFO if args.verbose else logging.WARNING)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="weir-pageviews-"))
    for name in ("log", "state", "checkpoints"):
        shutil.rmtree(workdir / name, ignore_errors=True)
    config = app_config(workdir, args.overrides)
    try:
        started = time.perf_counter()
        views = generate(config, args.views)
        print(f"generated {len(views):,} page views in {time.perf_counter() - started:.2f} s")
        plan, one_job = prepare_application(config)
        print(f"planned {len(plan.stages)} stages: "
              + "; ".join(f"stage {s.index} reads {', '.join(str(i) for i in s.inputs)}"
                          for s in plan.stages))
        if args.runner == "spark" and args.stages:
            parser.error("--stages is for the embedded runner")
        jobs = ([plan.job_config(s.index) for s in plan.stages] if args.stages else [one_job])
        for job in jobs:
            if args.runner == "spark":
                from weir.engine.spark.jobrunner import Trigger, run_on_spark

                result = run_on_spark(config, trigger=Trigger.AVAILABLE_NOW,
                                      config_dir=str(HERE))
            else:
                result = run_job(job, status=mode, console=console,
                                 progress=None if args.verbose else ProgressMode.QUIET)
            for line in result.summary_lines():
                print(line)
            if result.exit_code is not ExitCode.OK:
                return int(result.exit_code)
        minutes, sessions = truth(views)
        # the plan's config knows the output serdes the application declared
        got_minutes = {(p["key"], p["start"]): p["value"]
                       for p in read_panes(one_job, "views-per-minute")}
        got_sessions = Counter((p["key"], p["start"], p["end"], p["value"])
                               for p in read_panes(one_job, "sessions"))
        problems = []
        if got_minutes != minutes:
            bad = [k for k in minutes.keys() | got_minutes.keys()
                   if minutes.get(k) != got_minutes.get(k)]
            problems.append(f"{len(bad)} per-minute counts differ, e.g. {sorted(bad)[:3]}")
        if got_sessions != sessions:
            problems.append(f"sessions differ: {len(got_sessions)} emitted, {len(sessions)} "
                            f"expected")
        busiest = Counter()
        for (user, _), n in got_minutes.items():
            busiest[user] += n
        print("  user      views  busiest minute  sessions")
        per_user_sessions = Counter(user for user, *_ in got_sessions.elements())
        for user, n in busiest.most_common(5):
            top = max(v for (u, _), v in got_minutes.items() if u == user)
            print(f"  {user:<8} {n:>6,}  {top:>14}  {per_user_sessions[user]:>8}")
        for problem in problems:
            print(f"MISMATCH: {problem}")
        if not problems:
            print(f"checked: {len(minutes):,} per-minute counts and {sum(sessions.values()):,} "
                  f"sessions match a direct computation over the views")
        return 1 if problems else 0
    finally:
        if args.keep or args.workdir:
            print(f"work directory: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
