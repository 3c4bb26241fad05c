"""Adjunct data stores: bulk bootstrap rate, and a lookup-heavy job vs the same job on a plain store.

1. **Bootstrap**: ``--records`` (default 1,000,000) product records (``sku%07d`` string keys,
   ~60 B JSON values) in a 2-partition file-log stream, bound to a broadcast adjunct store
   (``stores.products.adstore.input``, bootstrap stream). Each round times
   :meth:`AdjunctStorage.open` of a fresh container directory: the recovery table (found none:
   force bootstrap) and the read of both partitions to their heads through the bulk path (file
   log segments parsed into one de-duplicated run, bulk-loaded below serdes and cache: SST
   ingest for RocksDB, ``putmulti`` for LMDB). Goal: >= 500,000 records/s. Reports wall
   and CPU time (the machine is shared: CPU time is the steadier number).
2. **Lookup job**: ``--clicks`` (default 300,000) clicks over 2 partitions, each ``process``
   one ``get`` of a product (``--products`` distinct, default 100,000, uniformly random);
   once with ``products`` as a broadcast adjunct store (bootstrapped before the loop), once as
   a plain RocksDB store of each task filled beforehand with the same content. The run loop's
   time (first message to the final commit, ``ContainerResult.loop_seconds``) is compared,
   rounds interleaved, best of ``--rounds``. Goal: adjunct >= 0.9x the plain store.

Run (not in CI)::

    .venv/bin/python bench/adjunct.py
    .venv/bin/python bench/adjunct.py --records 1000000 --clicks 300000 --rounds 3 --engine lmdb
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from weir.engine.adjunct.storage import AdjunctStorage  # noqa: E402
from weir.engine.config.job import JobConfig  # noqa: E402
from weir.engine.config.streams import all_input_streams  # noqa: E402
from weir.engine.container.container import Container, ProgressMode  # noqa: E402
from weir.engine.container.settings import JobSettings  # noqa: E402
from weir.engine.jobmodel.model import build_job_model  # noqa: E402
from weir.engine.model import OutgoingMessageEnvelope, SystemStream  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.stores.builder import build_store  # noqa: E402
from weir.stores.config import Config  # noqa: E402
from weir.stores.spec import StoreSpec  # noqa: E402

PARTITIONS = 2


def config(root: Path, *, adjunct: bool, engine: str, run: str) -> Config:
    values = {
        "job.name": "adjunct-bench", "task.class": "bench._adjunct_tasks:Lookup",
        "task.inputs": "log.clicks", "task.checkpoint.path": str(root / run / "checkpoints"),
        "job.logged.store.base.dir": str(root / run / "state"),
        "job.non-logged.store.base.dir": str(root / run / "state"),
        "systems.log.factory": "filelog", "systems.log.root": str(root / "log"),
        "systems.log.samza.key.serde": "string", "systems.log.samza.msg.serde": "json",
        "systems.log.default.stream.samza.offset.default": "oldest",
        "stores.products.factory": engine, "stores.products.key.serde": "string",
        "stores.products.msg.serde": "json",
    }
    if adjunct:
        values.update({
            "task.broadcast.inputs": f"log.products#[0-{PARTITIONS - 1}]",
            "systems.log.streams.products.samza.bootstrap": "true",
            "stores.products.adstore.input": "log.products"})
    return Config(values)


def product(i: int) -> tuple[str, dict]:
    return f"sku{i:07d}", {"name": f"product {i}", "price": i % 997, "stock": i % 13}


def produce(registry: SystemRegistry, stream: str, records) -> None:
    ss = SystemStream("log", stream)
    serdes = registry.serdes_for(ss)
    producer = registry.producer("log")
    producer.register("bench")
    producer.start()
    for n, (key, message) in enumerate(records):
        k, m = serdes.serialize(OutgoingMessageEnvelope(ss, message, key=key))
        producer.send("bench", OutgoingMessageEnvelope(ss, m, key=k, partition=n % PARTITIONS))
        if n % 50_000 == 49_999:
            producer.flush("bench")
    producer.flush("bench")
    producer.stop()


# -- 1. bootstrap ----------------------------------------------------------------------------

def bench_bootstrap(root: Path, records: int, rounds: int, engine: str) -> float:
    cfg = config(root, adjunct=True, engine=engine, run="boot")
    registry = SystemRegistry(cfg)
    registry.admin("log").create_stream(StreamSpec("products", PARTITIONS))
    registry.admin("log").create_stream(StreamSpec("clicks", PARTITIONS))
    started = time.perf_counter()
    produce(registry, "products", (product(i) for i in range(records)))
    print(f"produced {records:,} products in {time.perf_counter() - started:.1f} s")
    settings = JobSettings.from_config(cfg, registry)
    model = build_job_model(cfg, registry.partition_counts(all_input_streams(cfg)))
    best = float("inf")
    for r in range(rounds):
        shutil.rmtree(root / "boot" / "state", ignore_errors=True)
        storage = AdjunctStorage(settings.adjuncts, {s.name: s for s in settings.stores},
                                 model.containers["0"].tasks, "0", JobConfig.from_config(cfg),
                                 registry, cfg, budget_bytes=settings.restore.options.budget_bytes)
        t0, c0 = time.perf_counter(), time.process_time()
        (stats,) = storage.open({})
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert stats.records == records and stats.bulk, stats.line()
        assert storage.stores()[0].view().get("sku0000007")["price"] == 7
        storage.close()
        best = min(best, seconds)
        print(f"  round {r + 1}: {records:,} records in {seconds:.2f} s "
              f"({records / seconds:,.0f} records/s wall, {records / cpu:,.0f} records/s CPU)")
    rate = records / best
    print(f"bootstrap ({engine}): best {best:.2f} s = {rate:,.0f} records/s "
          f"(goal >= 500,000: {'met' if rate >= 500_000 else 'NOT met'})")
    return rate


# -- 2. lookup job ---------------------------------------------------------------------------

def fill_plain(cfg: Config, model, products: int) -> None:
    spec = StoreSpec.from_config(cfg, "products")
    job = JobConfig.from_config(cfg)
    from weir.engine.config.job import StoreBase
    for task in model.tasks():
        directory = job.store_dir("products", task, StoreBase.NON_LOGGED)
        directory.mkdir(parents=True, exist_ok=True)
        store = build_store(spec, directory, changelog=None, config=cfg)
        for start in range(0, products, 10_000):
            store.put_all([product(i) for i in range(start, min(start + 10_000, products))])
        store.flush()
        store.close()


def run_job(cfg: Config) -> float:
    registry = SystemRegistry(cfg)
    model = build_job_model(cfg, registry.partition_counts(all_input_streams(cfg)))
    result = Container(cfg, model, "0", registry=registry, progress=ProgressMode.QUIET).run()
    return result.loop_seconds


def bench_lookups(root: Path, clicks: int, products: int, rounds: int, engine: str) -> float:
    base = root / "lookup"
    cfg_a = config(base, adjunct=True, engine=engine, run="adjunct")
    registry = SystemRegistry(cfg_a)
    for stream in ("products", "clicks"):
        registry.admin("log").create_stream(StreamSpec(stream, PARTITIONS, bounded=True))
    produce(registry, "products", (product(i) for i in range(products)))
    rnd = random.Random(7)
    produce(registry, "clicks", ((f"sku{rnd.randrange(products):07d}", {"n": i})
                                 for i in range(clicks)))
    registry.admin("log").end_stream("products")
    registry.admin("log").end_stream("clicks")
    times = {"adjunct": [], "plain": []}
    for r in range(rounds):
        for kind in ("plain", "adjunct"):
            run = f"{kind}-{r}"
            cfg = config(base, adjunct=kind == "adjunct", engine=engine, run=run)
            if kind == "plain":
                reg = SystemRegistry(cfg)
                fill_plain(cfg, build_job_model(cfg, reg.partition_counts(
                    all_input_streams(cfg))), products)
            seconds = run_job(cfg)
            times[kind].append(seconds)
            print(f"  round {r + 1} {kind:8s}: {clicks:,} lookups in {seconds:.2f} s "
                  f"({clicks / seconds:,.0f} msg/s)")
            shutil.rmtree(base / run, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    ratio = best["plain"] / best["adjunct"]
    print(f"lookup job ({engine}): plain {clicks / best['plain']:,.0f} msg/s, adjunct "
          f"{clicks / best['adjunct']:,.0f} msg/s: adjunct = {ratio:.2f}x plain "
          f"(goal >= 0.9x: {'met' if ratio >= 0.9 else 'NOT met'})")
    return ratio


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--clicks", type=int, default=300_000)
    ap.add_argument("--products", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--engine", choices=["rocksdb", "lmdb"], default="rocksdb")
    ap.add_argument("--only", choices=["bootstrap", "lookup"])
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="weir-bench-adjunct-"))
    try:
        if args.only in (None, "bootstrap"):
            bench_bootstrap(root, args.records, args.rounds, args.engine)
        if args.only in (None, "lookup"):
            bench_lookups(root, args.clicks, args.products, args.rounds, args.engine)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
