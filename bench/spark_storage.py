"""What a micro-batch costs the Weir state provider on each checkpoint store (issue 26 item 2).

One state partition of a running count (``--keys`` distinct keys, ``--changes`` of them updated
per batch), driven the way an operator task drives it (:class:`PartitionState`: open, stage,
publish, snapshot every ``--interval`` versions, retention) for ``--batches`` batches, on:

* ``local``: a directory (temp file + ``link``, the default);
* ``s3_boto3``: ``s3a://`` on an S3-compatible server (moto, server mode, on loopback) through
  boto3 (:class:`S3Storage`, what ``s3a://`` locations use);
* ``s3_s3fs``: the same bucket through s3fs (:class:`FsspecStorage`, the code path gcsfs and
  adlfs take for ``gs://`` and ``abfss://``);
* ``hdfs_webhdfs``: ``hdfs://`` through WebHDFS (:class:`WebHdfsStorage`) against the loopback
  WebHDFS endpoint of the tests (``tests/engine/spark/_webhdfs.py``, a directory behind HDFS's
  REST API: HDFS cannot run here). Its request counts are what a NameNode and DataNode would
  serve; its times say nothing about HDFS.

Before timing, ``fidelity`` asks each S3 client Python has -- boto3, s3fs and pyarrow.fs -- to
create an object that exists, with its create-if-absent (boto3 ``IfNoneMatch="*"``, s3fs
``pipe_file(mode="create")``, pyarrow ``open_output_stream`` with an ``If-None-Match: *``
header in its metadata, the only way pyarrow lets a caller add one), and reports whether the
store refused it and what the object holds afterwards: a client that overwrites cannot publish
a version (docs/SPARK.md, "Why these clients").

Every task also reads ``_meta.json`` (as an operator task does). The replica stays open between
batches (a reused Python worker); ``--cold`` drops it before every batch (a new executor each
time: restore from snapshot + changelogs). Requests are counted by the server; time is the
median task time (open + publish + snapshot) per batch. moto answers from memory on this
machine, so the times are the clients' own costs plus loopback, not S3's latency (add the
store's round trip, typically 10-30 ms within a region, per request)::

    .venv/bin/python bench/spark_storage.py
    .venv/bin/python bench/spark_storage.py --batches 40 --keys 100000 --changes 2000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta  # noqa: E402
from weir.engine.spark.locations import StorageKind  # noqa: E402
from weir.engine.spark.partition import PartitionState  # noqa: E402
from weir.engine.spark.providers import store_specs  # noqa: E402
from weir.engine.spark.replica import release_replicas  # noqa: E402
from weir.engine.spark.settings import ProviderSettings  # noqa: E402
from weir.engine.spark.storage import FsspecStorage, S3Storage  # noqa: E402

from tests.engine.spark._s3server import start_s3_server  # noqa: E402
from tests.engine.spark._webhdfs import start_webhdfs  # noqa: E402


def run(variant: str, args, server, bucket: str, scratch: Path) -> dict:
    hdfs = None
    if variant == "local":
        location, storage = str(scratch / f"ckpt-{variant}"), None
    elif variant == "hdfs_webhdfs":
        from weir.engine.spark.storage import StorageOptions, open_storage

        hdfs = start_webhdfs(scratch / "hdfs")
        location = f"hdfs://namenode:8020/bench/{uuid.uuid4().hex[:6]}"
        storage = open_storage(location, StorageOptions.from_mapping(hdfs.conf()))
    elif variant == "s3_boto3":
        location = f"s3a://{bucket}/{variant}-{uuid.uuid4().hex[:6]}"
        storage = S3Storage(server.options())
    else:
        import s3fs

        location = f"s3a://{bucket}/{variant}-{uuid.uuid4().hex[:6]}"
        storage = FsspecStorage(s3fs.S3FileSystem(
            key=server.key, secret=server.secret, use_listings_cache=False,
            skip_instance_cache=True, client_kwargs={"endpoint_url": server.endpoint,
                                                     "region_name": server.region}),
            StorageKind.S3)
    specs = store_specs(["counts"], {"stores.counts.key.serde": "bytes",
                                     "stores.counts.msg.serde": "bytes"}, "rocksdb")
    settings = ProviderSettings(snapshot_interval=args.interval,
                                min_versions_to_retain=args.retain,
                                local_dir=str(scratch / f"local-{variant}"),
                                orphan_age_ms=3_600_000)
    cp = OperatorCheckpoint(location, "counts", settings.storage, storage=storage)
    wanted = OperatorMeta("counts", "state-operator", 1, {s.name: s.describe() for s in specs},
                          "bench", 0)
    times, sizes = [], []
    server.reset()
    if hdfs is not None:
        hdfs.requests.clear()
    for batch in range(args.batches):
        if args.cold:
            release_replicas()
            shutil.rmtree(settings.local_dir, ignore_errors=True)
        started = time.perf_counter()
        meta = cp.ensure_meta(wanted)
        state = PartitionState(cp, meta, 0, batch, specs, settings)
        state.open()
        staged = state.staged("counts")
        base = (batch * args.changes) % args.keys
        for i in range(args.changes):
            k = (base + i) % args.keys
            staged.put(b"k%09d" % k, b"%d" % batch)
        state.commit()
        state.close()
        times.append((time.perf_counter() - started) * 1000)
        sizes.append(state.metrics.version_bytes)
    if hdfs is not None:
        requests = dict(hdfs.requests)
        hdfs.stop()
    else:
        requests = server.requests() if variant != "local" else {}
    release_replicas()
    per_batch = {k: round(v / args.batches, 2) for k, v in sorted(requests.items())}
    return {"variant": variant, "batches": args.batches, "cold": args.cold,
            "median_ms": round(statistics.median(times), 2),
            "p90_ms": round(sorted(times)[int(len(times) * 0.9) - 1], 2),
            "requests_per_batch": per_batch,
            "requests_total_per_batch": round(sum(requests.values()) / args.batches, 2),
            "changelog_bytes": int(statistics.median(sizes)),
            "load": os.getloadavg()[0]}


def fidelity(server, bucket: str) -> list[dict]:
    """Does each client's create-if-absent leave an existing object alone?"""
    import boto3

    raw = server.client()
    rows = []

    def probe(client: str, create) -> None:
        key = f"fidelity/{client}-{uuid.uuid4().hex[:6]}"
        raw.put_object(Bucket=bucket, Key=key, Body=b"first")
        try:
            create(key)
            outcome = "accepted"
        except Exception as exc:  # noqa: BLE001 - the refusal is what is measured
            outcome = f"refused ({type(exc).__name__})"
        held = raw.get_object(Bucket=bucket, Key=key)["Body"].read()
        rows.append({"client": client, "second create": outcome,
                     "object afterwards": held.decode(),
                     "create-if-absent": held == b"first" and outcome != "accepted"})

    probe(f"boto3 {boto3.__version__}",
          lambda key: raw.put_object(Bucket=bucket, Key=key, Body=b"second", IfNoneMatch="*"))
    try:
        import s3fs

        fs = s3fs.S3FileSystem(key=server.key, secret=server.secret, skip_instance_cache=True,
                               client_kwargs={"endpoint_url": server.endpoint,
                                              "region_name": server.region})
        probe(f"s3fs {s3fs.__version__}",
              lambda key: fs.pipe_file(f"{bucket}/{key}", b"second", mode="create"))
    except ImportError:
        pass
    try:
        import pyarrow
        from pyarrow import fs as pafs

        pa = pafs.S3FileSystem(access_key=server.key, secret_key=server.secret,
                               endpoint_override=server.endpoint, scheme="http",
                               region=server.region)

        def arrow_create(key: str) -> None:
            with pa.open_output_stream(f"{bucket}/{key}",
                                       metadata={"If-None-Match": "*"}) as out:
                out.write(b"second")

        probe(f"pyarrow.fs {pyarrow.__version__}", arrow_create)
    except ImportError:
        pass
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--interval", type=int, default=10)
    parser.add_argument("--retain", type=int, default=20)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--variants", default="local,s3_boto3,s3_s3fs,hdfs_webhdfs")
    args = parser.parse_args()
    server = start_s3_server()
    scratch = Path(tempfile.mkdtemp(prefix="weir-bench-storage-"))
    try:
        bucket = server.bucket(f"weir-bench-{uuid.uuid4().hex[:8]}")
        print("| client | second create of an existing object | object afterwards | "
              "create-if-absent |")
        print("|---|---|---|---|")
        for f in fidelity(server, bucket):
            print(f"| {f['client']} | {f['second create']} | {f['object afterwards']} | "
                  f"{'yes' if f['create-if-absent'] else 'NO'} |")
        print(flush=True)
        rows = []
        for variant in args.variants.split(","):
            row = run(variant, args, server, bucket, scratch)
            print(json.dumps(row), flush=True)
            rows.append(row)
        print()
        print("| store (client) | median ms / batch | p90 ms | requests / batch |")
        print("|---|---|---|---|")
        for r in rows:
            reqs = ", ".join(f"{k} {v}" for k, v in r["requests_per_batch"].items()) or "-"
            print(f"| {r['variant']} | {r['median_ms']} | {r['p90_ms']} | "
                  f"{r['requests_total_per_batch']} ({reqs}) |")
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
