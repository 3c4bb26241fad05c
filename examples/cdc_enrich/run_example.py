"""Run the CDC enrichment example end to end: generate, run, replace the model while the job
runs, check.

One command, a few seconds by default::

    python examples/cdc_enrich/run_example.py
    python examples/cdc_enrich/run_example.py --products 200000 --clicks 100000

1. a product table's change stream (inserts, updates, deletes as tombstones) and model
   version 1 (sealed) are written; the first half of the clicks too;
2. the job starts: both adjunct stores are bootstrapped before the first click (the product
   table through the bulk path), then the clicks are joined and scored;
3. while it runs, model version 2 is written and sealed (as ``weir log produce model --seal``
   would): the store builds it beside version 1 and switches when the seal arrives; the
   second half of the clicks is written after the switch;
4. every ``enriched`` message is checked against the final product table and the model
   version it names (one version per click: the name and the score agree).

Everything lives in a fresh temporary directory (``--workdir DIR`` to choose it, ``--keep`` to
keep it). Exit code 0 when everything matches.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # enrich_task and cdc_generate sit beside this file

from weir.engine.adjunct import seal_dataset  # noqa: E402
from weir.engine.config.job import load_config  # noqa: E402
from weir.engine.config.streams import all_input_streams  # noqa: E402
from weir.engine.container.container import Container, ProgressMode  # noqa: E402
from weir.engine.jobmodel.model import build_job_model  # noqa: E402
from weir.engine.model import (OutgoingMessageEnvelope, SystemStream,  # noqa: E402
                               SystemStreamPartition, partition_for)
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.stores.config import Config  # noqa: E402

from enrich_task import score  # noqa: E402
from cdc_generate import PARTITIONS, Truth, clicks, model_version, products_cdc  # noqa: E402

__all__ = ["job_config", "produce", "read_enriched", "check", "main"]


def job_config(workdir: Path, overrides: Sequence[str] = ()) -> Config:
    return load_config(HERE / "job.properties", [
        f"systems.filelog.root={workdir / 'log'}", f"job.data.dir={workdir}", *overrides])


def produce(registry: SystemRegistry, stream: str, records, *, partition: int | None = None
            ) -> None:
    """Send ``(key, message)`` pairs with the stream's serdes: to ``partition``, else by key
    (a product's changes stay in order on one partition)."""
    ss = SystemStream("filelog", stream)
    serdes = registry.serdes_for(ss)
    producer = registry.producer("filelog")
    producer.register("example")
    producer.start()
    try:
        for key, message in records:
            k, m = serdes.serialize(OutgoingMessageEnvelope(ss, message, key=key))
            p = partition if partition is not None else partition_for(k, PARTITIONS)
            producer.send("example", OutgoingMessageEnvelope(ss, m, key=k, partition=p))
        producer.flush("example")
    finally:
        producer.stop()


def read_enriched(registry: SystemRegistry) -> dict[str, dict]:
    """Click id -> its ``enriched`` message."""
    ss = SystemStream("filelog", "enriched")
    serdes = registry.serdes_for(ss)
    ssps = [SystemStreamPartition("filelog", "enriched", p) for p in range(PARTITIONS)]
    consumer = registry.consumer("filelog")
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    out: dict[str, dict] = {}
    try:
        while True:
            got = consumer.poll(ssps, 0.05)
            envs = [e for es in got.values() for e in es if not e.is_end_of_stream]
            if not envs:
                return out
            for env in envs:
                typed = serdes.deserialize(env)
                out[typed.key] = typed.message
    finally:
        consumer.stop()


def check(truth: Truth, phase1: list, phase2: list, enriched: dict[str, dict]) -> list[str]:
    """Problems found comparing ``enriched`` with the truth (empty: everything matches)."""
    problems = []
    for version, batch in ((1, phase1), (2, phase2)):
        for key, click in batch:
            got = enriched.get(key)
            if got is None:
                problems.append(f"click {key} was not enriched")
                continue
            product = truth.products.get(click["sku"])
            name = product["name"] if product else None
            weight = truth.models[version][product["category"]] if product else 0.0
            want = {"sku": click["sku"], "name": name, "score": score(weight, click["user"]),
                    "model_version": version}
            if got != want:
                problems.append(f"click {key}: {got} instead of {want}")
    return problems[:10]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the CDC enrichment example end to end.")
    parser.add_argument("--products", type=int, default=20_000)
    parser.add_argument("--clicks", type=int, default=20_000)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--verbose", "-v", action="store_true", help="log at INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="weir-cdc-enrich-"))
    try:
        config = job_config(workdir)
        registry = SystemRegistry(config)
        admin = registry.admin("filelog")
        for stream, partitions in (("products-cdc", PARTITIONS), ("model", 1),
                                   ("clicks", PARTITIONS), ("enriched", PARTITIONS)):
            admin.create_stream(StreamSpec(stream, partitions, bounded=stream != "enriched"))
        truth = Truth()
        started = time.perf_counter()
        produce(registry, "products-cdc", products_cdc(truth, args.products))
        produce(registry, "model", model_version(truth, 1), partition=0)
        seal_dataset(registry, "filelog", "model", [0])
        half = args.clicks // 2
        phase1 = clicks(half, args.products)
        produce(registry, "clicks", phase1)
        print(f"generated {args.products:,} products (+ updates and deletes), model version 1,"
              f" {half:,} clicks in {time.perf_counter() - started:.1f} s")

        model = build_job_model(config, registry.partition_counts(all_input_streams(config)))
        container = Container(config, model, "0", registry=registry,
                              progress=ProgressMode.QUIET)
        failure: list[BaseException] = []
        thread = threading.Thread(target=lambda: _run(container, failure), name="job")
        thread.start()
        try:
            _wait(lambda: failure or len(read_enriched(registry)) >= half)
            print(f"phase 1: {half:,} clicks enriched with model version 1")
            produce(registry, "model", model_version(truth, 2), partition=0)
            seal_dataset(registry, "filelog", "model", [0])
            store = next(u.store for u in container.adjunct.units if u.spec.name == "model")
            _wait(lambda: failure or store.serving == 2)
            print("model version 2 sealed while the job runs: switched to it, version 1 "
                  "dropped")
            phase2 = clicks(args.clicks - half, args.products, first=half)
            produce(registry, "clicks", phase2)
        finally:
            for stream in ("products-cdc", "model", "clicks"):
                admin.end_stream(stream)
            thread.join()
        if failure:
            raise failure[0]
        enriched = read_enriched(registry)
        problems = check(truth, phase1, phase2, enriched)
        versions = Counter(m["model_version"] for m in enriched.values())
        unknown = sum(1 for m in enriched.values() if m["name"] is None)
        print(f"phase 2: {len(phase2):,} clicks enriched; by model version: "
              f"{dict(sorted(versions.items()))}; {unknown:,} clicks on deleted or unknown "
              f"products")
        if problems:
            print("MISMATCH:\n  " + "\n  ".join(problems))
            return 1
        print(f"all {len(enriched):,} enriched clicks match the product table and the model "
              f"version they name ({time.perf_counter() - started:.1f} s)")
        return 0
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        elif args.keep:
            print(f"kept {workdir}")


def _run(container: Container, failure: list) -> None:
    try:
        container.run()
    except BaseException as exc:  # noqa: BLE001 - reported by main
        failure.append(exc)


def _wait(condition, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the job did not get there in time")
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
