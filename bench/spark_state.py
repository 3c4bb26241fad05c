"""Running count on Spark: the Weir state provider against Spark's own stateful APIs (issue 11).

Workload: ``--events`` events (default 1,000,000) over ``--keys`` uniform keys (default 10,000
and 1,000,000), in ``--batches`` parquet files (default 10) read one per micro-batch
(``maxFilesPerTrigger=1``, ``availableNow``); a running count per key; output to the ``noop``
sink (Weir's operators run inside the plan, so the sink executes them); 4 state partitions on
``local[2]``. Each variant runs in a child process with its own SparkSession; wall time is from
query start to its end (session start-up excluded); the final state is read back and checked
(sum = events, one row per distinct key), so a fast wrong answer is reported as wrong.

Variants:

* ``weir_vec_rocksdb`` / ``weir_vec_lmdb``: :class:`weir.spark.StateOperator`, one vectorised
  Arrow ``group_by`` + ``get_all`` + ``put_all`` per partition and batch (the Weir state
  provider's primary form), its own stage (the default placement: one more exchange of the
  output); ``weir_vec_rocksdb_in_stage``: the same with ``placement="in-stage"``;
* ``weir_proc_rocksdb`` / ``weir_proc_lmdb``: :func:`weir.spark.transform_with_state` running the
  unchanged per-key PySpark ``StatefulProcessor`` (``PandasCount``) on Weir stores;
* ``spark_apply``: ``applyInPandasWithState`` on Spark's RocksDB provider;
* ``spark_tws_pandas``: ``transformWithStateInPandas`` (same ``PandasCount``), RocksDB provider;
* ``spark_tws_rows``: ``transformWithState`` (row flavour, ``RowCount``), RocksDB provider;
* ``spark_count``: Spark's native ``groupBy().count()`` (JVM only), RocksDB provider.

Rounds are interleaved (every variant once, then again), medians are reported, and the load
average is recorded before and after every run. Not part of CI (minutes to hours)::

    .venv/bin/python bench/spark_state.py                      # the issue's full workload
    .venv/bin/python bench/spark_state.py --events 200000 --keys 2000,200000 --rounds 1
    .venv/bin/python bench/spark_state.py --variants weir_vec_rocksdb,spark_count

Prints one JSON line per run and, at the end, a Markdown table with the ratios the issue asks
for (vectorised vs ``transformWithStateInPandas`` and vs native count, per-key vs
``transformWithStateInPandas``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ["weir_vec_rocksdb", "weir_vec_lmdb", "weir_vec_rocksdb_in_stage", "weir_proc_rocksdb",
            "weir_proc_lmdb", "spark_apply", "spark_tws_pandas", "spark_tws_rows", "spark_count"]
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PARTITIONS = 4


def generate(directory: Path, events: int, keys: int, batches: int) -> int:
    """Parquet input files (mtimes ordered, SPARK-NOTES trap 8); the number of distinct keys."""
    import numpy as np
    import pandas as pd

    done = directory / "_DONE"
    if done.exists():
        return int(done.read_text())
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rng = np.random.default_rng(42)
    per = events // batches
    seen: set = set()
    for b in range(batches):
        ids = rng.integers(0, keys, per)
        seen.update(np.unique(ids).tolist())
        path = directory / f"part-{b:04d}.parquet"
        pd.DataFrame({"key": np.char.add("key-", ids.astype(str)),
                      "v": rng.integers(0, 1000, per)}).to_parquet(path, index=False)
        os.utime(path, (1_700_000_000 + b,) * 2)
    done.write_text(str(len(seen)))
    return len(seen)


# ---------------------------------------------------------------- the state functions


def weir_count(state, table):
    """Vectorised running count on the Weir state provider."""
    import pyarrow as pa

    if table.num_rows == 0:
        return None
    counts = state.store("counts")
    grouped = table.group_by("key").aggregate([("key", "count")])
    keys = grouped.column("key").to_pylist()
    old = counts.get_all(keys)
    new = [old.get(k, 0) + n for k, n in zip(keys, grouped.column("key_count").to_pylist())]
    counts.put_all(list(zip(keys, new)))
    return pa.table({"key": keys, "count": pa.array(new, pa.int64())})


def _processors():
    import pandas as pd
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class PandasCount(StatefulProcessor):
        def init(self, handle):
            self.c = handle.getValueState("count", "n long")

        def handleInputRows(self, key, rows, timerValues):
            n = self.c.get()[0] if self.c.exists() else 0
            for pdf in rows:
                n += len(pdf)
            self.c.update((n,))
            yield pd.DataFrame({"key": [key[0]], "count": [n]})

        def close(self):
            pass

    class RowCount(StatefulProcessor):
        def init(self, handle):
            self.c = handle.getValueState("count", "n long")

        def handleInputRows(self, key, rows, timerValues):
            n = self.c.get()[0] if self.c.exists() else 0
            n += sum(1 for _ in rows)
            self.c.update((n,))
            yield Row(key=key[0], count=n)

        def close(self):
            pass

    return PandasCount, RowCount


def apply_count(key, pdfs, state):
    import pandas as pd

    n = state.get[0] if state.exists else 0
    for pdf in pdfs:
        n += len(pdf)
    state.update((n,))
    yield pd.DataFrame({"key": [key[0]], "count": [n]})


# ---------------------------------------------------------------- one run (child process)


def run_variant(variant: str, data: Path, work: Path, events: int, distinct: int) -> dict:
    from weir.engine.spark.session import spark_session

    provider = (variant.removesuffix("_in_stage").rsplit("_", 1)[1] if variant.startswith("weir_")
                else "rocksdb")
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    spark = spark_session({
        "spark.master": "local[2]", "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(PARTITIONS),
        "spark.default.parallelism": str(PARTITIONS),
        "spark.local.dir": str(work / "scratch"),
        "spark.driver.memory": "2g",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.weir.state.provider": provider,
        "spark.weir.state.local.dir": str(work / "replicas"),
    }, app_name=f"bench-{variant}", python_path=(str(REPO / "bench"),))
    spark.sparkContext.setLogLevel("ERROR")
    startup = time.perf_counter() - started
    warm = None
    if os.environ.get("WEIR_BENCH_WARM_UP") == "1":
        from weir.spark import warm_up

        warm = warm_up(spark, transform_with_state=variant.startswith("weir_proc")).seconds
    from pyspark.sql.streaming.state import GroupStateTimeout

    from weir.spark import StateOperator, transform_with_state

    ckpt = work / "ckpt"
    src = spark.readStream.schema("key string, v long").option("maxFilesPerTrigger", 1) \
        .parquet(str(data))
    PandasCount, RowCount = _processors()
    grouped = src.groupBy("key")
    if variant.startswith("weir_vec"):
        op = StateOperator("counts", checkpoint_location=str(ckpt), key="key",
                           stores={"counts": {"key.serde": "string", "msg.serde": "int64"}},
                           partitions=PARTITIONS,
                           placement="in-stage" if variant.endswith("_in_stage") else "own-stage")
        df = op.apply(src, weir_count, "key string, count long")
    elif variant.startswith("weir_proc"):
        df = transform_with_state(grouped, PandasCount(), "key string, count long",
                                  checkpoint_location=str(ckpt), name="counts",
                                  partitions=PARTITIONS)
    elif variant == "spark_apply":
        df = grouped.applyInPandasWithState(apply_count, "key string, count long", "n long",
                                            "Update", GroupStateTimeout.NoTimeout)
    elif variant == "spark_tws_pandas":
        df = grouped.transformWithStateInPandas(PandasCount(), "key string, count long",
                                                "Update", "None")
    elif variant == "spark_tws_rows":
        df = grouped.transformWithState(RowCount(), "key string, count long", "Update", "None")
    elif variant == "spark_count":
        df = grouped.count()
    else:
        raise SystemExit(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    load_before = os.getloadavg()[0]
    jvm = spark.sparkContext._gateway.proc.pid
    cpu0 = _tree_cpu(jvm) + time.process_time()
    t0 = time.perf_counter()
    query = (df.writeStream.format("noop").outputMode("update")
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    query.awaitTermination()
    wall = time.perf_counter() - t0
    cpu = _tree_cpu(jvm) + time.process_time() - cpu0
    load_after = os.getloadavg()[0]
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    batch_ms = [p["durationMs"]["triggerExecution"] for p in progress]
    # where each batch goes: Spark's phases, and the Weir operator's own figures (task_ms summed
    # over the batch's tasks, restore/publish the slowest task's) from its observed metrics
    batches = [{"ms": p["durationMs"]["triggerExecution"],
                "add_ms": p["durationMs"].get("addBatch"),
                "plan_ms": p["durationMs"].get("queryPlanning"),
                **_weir_figures(p)} for p in progress]

    if variant.startswith("weir_vec"):
        row = (spark.read.format("weirstate").option("operator", "counts").load(str(ckpt))
               .selectExpr("sum(value) AS total", "count(*) AS keys").collect()[0])
        total, keys = row.total, row["keys"]
    elif variant.startswith("weir_proc"):
        # the per-key state is a processor's value state: count its rows via the metrics, and
        # the total from the rows of the newest version (one "count" value per key)
        import pickle

        from weir.engine.spark.durable import OperatorCheckpoint
        from weir.engine.spark.partition import load_version

        op = OperatorCheckpoint(ckpt, "counts")
        meta = op.read_meta()
        total = keys = 0
        for p in range(meta.partitions):
            version = op.partition(p).listing().latest
            for store, entries in load_version(op, p, version, sorted(meta.stores)).items():
                for k, v in entries.items():
                    if k.startswith(b"v\0count\0"):
                        keys += 1
                        total += _tws_value(v, pickle)
    else:
        reader = spark.read.format("statestore")
        if variant.startswith("spark_tws"):
            reader = reader.option("stateVarName", "count")
        column = {"spark_apply": "value.groupState.n", "spark_count": "value.count"}.get(
            variant, "value.n")
        row = reader.load(str(ckpt)).selectExpr(f"sum({column}) AS total",
                                                "count(*) AS keys").collect()[0]
        total, keys = row.total, row["keys"]
    spark.stop()
    return {"variant": variant, "events": events, "distinct_keys": distinct,
            "batches": len(progress), "wall_s": round(wall, 2),
            "events_per_s": round(events / wall), "cpu_s": round(cpu, 1),
            "first_batch_s": round(batch_ms[0] / 1000, 2) if batch_ms else None,
            "median_batch_s": round(statistics.median(batch_ms[1:]) / 1000, 2)
            if len(batch_ms) > 1 else None,
            "startup_s": round(startup, 1), "warm_up_s": warm, "load_before": round(load_before, 2),
            "load_after": round(load_after, 2), "state_total": total, "state_keys": keys,
            "ok": total == events and keys == distinct,
            **({"batch_detail": batches} if os.environ.get("WEIR_BENCH_DETAIL") else {})}


def _weir_figures(progress) -> dict:
    """The Weir operator's own figures of one batch from its observed metrics."""
    row = (progress["observedMetrics"] or {}).get("weir.counts")
    if row is None:
        return {}
    return {k: round(v, 1) for k, v in row.asDict().items()
            if k in ("task_ms", "restore_ms", "publish_ms") and v is not None}


def _tree_cpu(root: int) -> float:
    """CPU seconds (user + system, with reaped children) of process ``root`` and its live
    descendants: the JVM, the Python daemon and its workers."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in stats.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return sum(stats[p][1] for p in tree if p in stats) / tick


def _tws_value(raw: bytes, pickle) -> int:
    """The count in a value-state entry of transform_with_state: u64 expiry, then the pickled
    row (see the layout in weir/engine/spark/processor.py)."""
    return int(pickle.loads(raw[8:])[0])


# ---------------------------------------------------------------- the driver


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", default="10000,1000000", help="comma-separated key counts")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--work", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--run", nargs=4, metavar=("VARIANT", "DATA", "EVENTS", "DISTINCT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--warm-up", action="store_true",
                        help="call weir.spark.warm_up(spark) before each query (every variant)")
    parser.add_argument("--detail", action="store_true",
                        help="per-batch figures in each JSON line (Spark's phases, Weir's task, "
                             "restore and publish times)")
    args = parser.parse_args(argv)
    if args.run:
        variant, data, events, distinct = args.run
        work = Path(tempfile.mkdtemp(prefix=f"weir-bench-{variant}-"))
        try:
            result = run_variant(variant, Path(data), work, int(events), int(distinct))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print("RESULT " + json.dumps(result), flush=True)
        return 0

    variants = [v for v in args.variants.split(",") if v]
    key_counts = [int(k) for k in args.keys.split(",")]
    root = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="weir-bench-spark-"))
    env = {**os.environ, **({"WEIR_BENCH_WARM_UP": "1"} if args.warm_up else {}),
           **({"WEIR_BENCH_DETAIL": "1"} if args.detail else {}), "PYTHONPATH": os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    results: dict[tuple[int, str], list[dict]] = {}
    print(f"# {args.events:,} events, {args.batches} batches, keys {key_counts}, "
          f"{args.rounds} round(s), {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
          flush=True)
    try:
        for keys in key_counts:
            data = root / f"data-{args.events}-{keys}-{args.batches}"
            distinct = generate(data, args.events, keys, args.batches)
            for round_ in range(args.rounds):
                for variant in variants:
                    cmd = [sys.executable, __file__, "--run", variant, str(data),
                           str(args.events), str(distinct)]
                    try:
                        done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                              timeout=args.timeout)
                    except subprocess.TimeoutExpired:
                        print(json.dumps({"variant": variant, "keys": keys, "round": round_,
                                          "error": f"timeout after {args.timeout:.0f} s"}),
                              flush=True)
                        continue
                    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                    if not line:
                        print(json.dumps({"variant": variant, "keys": keys, "round": round_,
                                          "error": done.stderr[-2000:]}), flush=True)
                        continue
                    result = {**json.loads(line[0][7:]), "keys": keys, "round": round_}
                    print(json.dumps(result), flush=True)
                    results.setdefault((keys, variant), []).append(result)
    finally:
        if not args.work:
            shutil.rmtree(root, ignore_errors=True)
    _report(results, key_counts, variants, args)
    return 0


def _median(runs: list[dict], field: str) -> float:
    return statistics.median(r[field] for r in runs)


def _report(results, key_counts, variants, args) -> None:
    print("\n| keys (distinct) | variant | wall s (median) | events/s | median batch s | "
          "load | correct |")
    print("|---|---|---|---|---|---|---|")
    for keys in key_counts:
        for variant in variants:
            runs = results.get((keys, variant))
            if not runs:
                print(f"| {keys:,} | {variant} | failed | | | | |")
                continue
            loads = [r["load_before"] for r in runs]
            print(f"| {keys:,} ({runs[0]['distinct_keys']:,}) | {variant} | "
                  f"{_median(runs, 'wall_s'):.1f} | {round(_median(runs, 'events_per_s')):,} | "
                  f"{_median(runs, 'median_batch_s') if runs[0]['median_batch_s'] else '-'} | "
                  f"{min(loads):.1f}-{max(loads):.1f} | {all(r['ok'] for r in runs)} |")
    print("\nRatios (median wall time of the reference / of the Weir variant; > 1: Weir faster):")
    for keys in key_counts:
        def wall(v):
            runs = results.get((keys, v))
            return _median(runs, "wall_s") if runs else None

        for weir, ref, goal in (("weir_vec_rocksdb", "spark_tws_pandas", 8),
                                ("weir_vec_lmdb", "spark_tws_pandas", 8),
                                ("weir_vec_rocksdb", "spark_count", 1),
                                ("weir_vec_lmdb", "spark_count", 1),
                                ("weir_vec_rocksdb", "spark_apply", None),
                                ("weir_vec_rocksdb", "spark_tws_rows", None),
                                ("weir_proc_rocksdb", "spark_tws_pandas", 3),
                                ("weir_proc_lmdb", "spark_tws_pandas", 3),
                                ("weir_proc_rocksdb", "spark_tws_rows", None)):
            a, b = wall(weir), wall(ref)
            if a and b:
                print(f"- {keys:,} keys: {weir} vs {ref}: {b / a:.2f}x"
                      + (f" (goal >= {goal}x)" if goal else ""))


if __name__ == "__main__":
    sys.exit(main())
