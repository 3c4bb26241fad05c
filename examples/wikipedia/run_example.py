"""Run hello-samza's Wikipedia jobs, ported, on generated edits, and check what they computed.

One command, a few seconds::

    python examples/wikipedia/run_example.py                 # 5,000 feed events
    python examples/wikipedia/run_example.py --edits 50000

The two jobs run with their ``.properties`` (as close to hello-samza's as Weir allows: see
the ``Weir:`` lines) through the same runner as ``weir run``: ``wikipedia-parser`` reads
``wikipedia-raw`` and writes the parsed edits to ``wikipedia-edits``; ``wikipedia-stats``
reads them, keeps the edits of all time in its RocksDB store, reports its metrics to the
``metrics`` stream (Samza's snapshot reporter) and writes the counts of each window to
``wikipedia-stats``. The ``kafka`` system of the configs is Weir's file log, in a fresh
temporary directory (``--workdir DIR`` to choose it, ``--keep`` to keep it).

Afterwards the outputs are checked against a direct computation over the generated events:
every parsable event parsed once, the windows' edits and bytes adding up, the store's
edits of all time (read back from its changelog) and the ``repeat-edits`` metric of the last
metrics snapshot. Exit code 0 when everything matches.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # the task modules sit beside this file

from generate_edits import NOT_AN_EDIT, edits  # noqa: E402

from weir.engine.config.job import load_config  # noqa: E402
from weir.engine.container.runner import ExitCode, run_job  # noqa: E402
from weir.engine.container.status import StatusMode, configure_logging  # noqa: E402
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.stores.config import Config  # noqa: E402
from weir.stores.serdes import serde_from_name  # noqa: E402

__all__ = ["job_config", "main", "PARTITIONS"]

PARTITIONS = 2
RAW, EDITS, STATS = "wikipedia-raw", "wikipedia-edits", "wikipedia-stats"
_DIFF = re.compile(r"\* \(\+?(-?\d+)\) ")


def job_config(name: str, workdir: Path, overrides: Sequence[str] = ()) -> Config:
    """``<name>.properties`` with the file log and the job's directory inside ``workdir``."""
    return load_config(HERE / f"{name}.properties", [
        f"systems.kafka.root={workdir / 'log'}", f"job.data.dir={workdir / name}",
        *overrides])


def read(registry: SystemRegistry, stream: str, *, raw: bool = False) -> list:
    """Every record of ``stream`` (every partition, in order), deserialized by the stream's
    serdes (``raw``: bytes as they are)."""
    admin = registry.admin("kafka")
    ssps = [SystemStreamPartition("kafka", stream, p) for p in range(admin.partition_count(stream))]
    metadata = registry.metadata(ssps)
    serdes = registry.serdes_for(SystemStream("kafka", stream))
    consumer = registry.consumer("kafka")
    out = []
    for ssp in ssps:
        consumer.register(ssp, metadata[ssp].oldest)
    consumer.start()
    try:
        for ssp in ssps:
            left = metadata[ssp].upcoming - metadata[ssp].oldest
            while left > 0:
                for env in consumer.poll([ssp], 1000).get(ssp, []):
                    if env.kind.value == "message":
                        out.append(env if raw else serdes.deserialize(env))
                        left -= 1
    finally:
        consumer.stop()
    return out


def produce(registry: SystemRegistry, events: list[dict]) -> None:
    admin = registry.admin("kafka")
    admin.create_stream(StreamSpec(RAW, PARTITIONS, bounded=True))
    admin.create_stream(StreamSpec(EDITS, PARTITIONS, bounded=True))
    admin.create_stream(StreamSpec(STATS, 1))
    producer = registry.producer("kafka")
    producer.register("generator")
    producer.start()
    raw = SystemStream("kafka", RAW)
    serdes = registry.serdes_for(raw)  # JSON, as systems.kafka.samza.msg.serde says
    for i, event in enumerate(events):
        producer.send("generator", OutgoingMessageEnvelope(
            raw, serdes.serialize_message(event), partition=i % PARTITIONS))
    producer.flush("generator")
    producer.end_stream(RAW)
    producer.stop()


def run(config: Config) -> bool:
    result = run_job(config, status=StatusMode.OFF)
    for line in result.summary_lines():
        print(line)
    return result.exit_code is ExitCode.OK


def check(registry: SystemRegistry, events: list[dict]) -> list[str]:
    """What does not match a direct computation over ``events`` (empty: everything does)."""
    problems = []
    parsable = [e for e in events if e["raw"] != NOT_AN_EDIT]
    bytes_added = sum(int(_DIFF.search(e["raw"]).group(1)) for e in parsable)
    parsed = [env.message for env in read(registry, EDITS)]
    if sorted(p["diff-url"] for p in parsed) != sorted(e["raw"].split(" * ")[0].rsplit(" ", 1)[1]
                                                      for e in parsable):
        problems.append(f"wikipedia-edits holds {len(parsed):,} edits, expected each of "
                        f"{len(parsable):,} once")
    windows = [env.message for env in read(registry, STATS)]
    if sum(w["edits"] for w in windows) != len(parsable):
        problems.append(f"the windows count {sum(w['edits'] for w in windows):,} edits, "
                        f"expected {len(parsable):,}")
    if sum(w["bytes-added"] for w in windows) != bytes_added:
        problems.append(f"the windows add {sum(w['bytes-added'] for w in windows):,} bytes, "
                        f"expected {bytes_added:,}")
    last: dict[int, int] = {}
    store_values = serde_from_name("integer", registry.config)  # stores.*.msg.serde
    for env in read(registry, "wikipedia-stats-changelog", raw=True):
        if env.key == b"count-edits-all-time":
            last[env.ssp.partition] = store_values.from_bytes(env.message)
    if sum(last.values()) != len(parsable):
        problems.append(f"the store's edits of all time add up to {sum(last.values()):,}, "
                        f"expected {len(parsable):,}")
    snapshots: dict[str, dict] = {}
    for env in read(registry, "metrics"):
        snapshots[env.message["header"]["source"]] = env.message["metrics"]
    repeats = sum(m.get("edit-counters", {}).get("repeat-edits", 0)
                  for source, m in snapshots.items() if source.startswith("TaskName-"))
    expected = sum(w["edits"] - w["unique-titles"] for w in windows)
    if repeats != expected:
        problems.append(f"the repeat-edits metric says {repeats:,}, the windows {expected:,}")
    print(f"{len(events):,} feed events, {len(parsed):,} edits parsed, {len(windows):,} "
          f"window(s), {sum(last.values()):,} edits of all time in the store, "
          f"{repeats:,} repeat edits")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=5_000, help="feed events to generate")
    parser.add_argument("--workdir", type=Path, help="directory to work in (default: a "
                                                     "fresh temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a key of both jobs")
    args = parser.parse_args(argv)
    configure_logging(StatusMode.OFF)
    logging.getLogger("weir").setLevel(logging.WARNING)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="weir-wikipedia-"))
    try:
        events = list(edits(args.edits))
        parser_config = job_config("wikipedia-parser", workdir, args.overrides)
        stats_config = job_config("wikipedia-stats", workdir, args.overrides)
        registry = SystemRegistry(stats_config)
        produce(registry, events)
        if not run(parser_config):
            return 1
        registry.admin("kafka").end_stream(EDITS)  # the parser ended: so do its edits
        if not run(stats_config):
            return 1
        problems = check(registry, events)
        for problem in problems:
            print(f"MISMATCH: {problem}")
        if not problems:
            print("the parsed edits, the windows, the store and the metrics match a direct "
                  "computation")
        return 1 if problems else 0
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif args.keep:
            print(f"kept {workdir}")


if __name__ == "__main__":
    sys.exit(main())
