"""bench/latency.py's scenarios: their streams, jobs and record format."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NS", "PAD", "PARTITIONS", "RECORD", "SCENARIOS", "SCRIPT", "SPECS", "Scenario",
           "create_streams", "job_configs", "log_config"]

SCRIPT = Path(__file__).resolve().parent / "latency.py"   # the producer, consumer, readers
PARTITIONS = 4
SCENARIOS = ("alo", "eos", "chain", "app", "spark")
RECORD = struct.Struct("<qq")          # scheduled monotonic ns, sequence number (-1: a ping)
PAD = b"p" * 16                        # 32-byte values, as small events are
NS = 1_000_000_000


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


def log_config(root: Path) -> dict[str, str]:
    return {"systems.filelog.factory": "filelog", "systems.filelog.root": str(root),
            "systems.filelog.default.stream.samza.offset.default": "oldest"}


def _count_job(run: Path, root: Path, name: str, source: str, target: str,
               extra: dict[str, str]) -> dict[str, str]:
    return log_config(root) | {
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
        return [(log_config(root) | {
            "job.name": "lat-app", "app.class": "bench._app_jobs:LatencyViews",
            "job.data.dir": str(run / "data-app"), "job.container.count": "1",
            "job.intermediate.stream.partitions": str(PARTITIONS),
        } | extra, [])]
    raise SystemExit(f"unknown scenario {scenario!r}; one of {', '.join(SCENARIOS)}")


def create_streams(scenario: Scenario, root: Path) -> None:
    from weir.engine.systems.api import StreamSpec
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    admin = SystemRegistry(Config(log_config(root))).admin("filelog")
    for stream in scenario.streams:
        admin.create_stream(StreamSpec(stream, PARTITIONS))
