"""A Spark driver run as its own process by the fault tests (``python -m
tests.engine.spark._driver BASE [HOLD]``): a running count with ``StateOperator`` over the
parquet files in ``BASE/src`` (one per micro-batch), written to a parquet file sink (Spark's
exactly-once sink, its own ``_spark_metadata`` log) under ``BASE/out``, checkpoint ``BASE/ckpt``.

``HOLD`` is ``<point>:<batch>``: at ``mid-batch`` the operator's function of that batch, at
``after-publish`` a function after the operator in the same task (the operator has published
its version; Spark has not committed the batch), writes ``BASE/held-<point>`` and waits for the
test to SIGKILL the driver's process group.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pyarrow as pa

from tests.engine.spark._spark import running_count

STORES = {"counts": {"key.serde": "string", "msg.serde": "int64"}}
SCHEMA = "key string, count long, batch long"


def _hold(marker: str) -> None:
    with open(marker + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(marker + ".tmp", marker)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:       # the test kills this process group
        time.sleep(0.2)
    raise RuntimeError(f"{marker}: held for 600 s and nobody killed the driver")


def counting(hold: str | None, base: str):
    point, batch = (hold.split(":") if hold else (None, "-1"))

    def fn(state, table):
        if point == "mid-batch" and state.batch_id == int(batch) and table.num_rows:
            _hold(f"{base}/held-mid-batch")
        out = running_count(state, table)
        if out is None:
            return None
        return out.append_column("batch", pa.array([state.batch_id] * out.num_rows, pa.int64()))

    return fn


def after_publish(hold: str | None, base: str):
    point, batch = (hold.split(":") if hold else (None, "-1"))

    def fn(batches):
        for b in batches:
            if point == "after-publish" and b.num_rows and \
                    b.column(b.schema.get_field_index("batch"))[0].as_py() == int(batch):
                _hold(f"{base}/held-after-publish")
            yield b

    return fn


def main(base: str, hold: str | None) -> None:
    from tests.engine.spark._spark import await_query, start_spark

    from weir.spark import StateOperator

    root = Path(base)
    spark = start_spark(root / "scratch", app="weir-fault-driver")
    op = StateOperator("counts", checkpoint_location=str(root / "ckpt"), key="key",
                       stores=STORES, placement="in-stage")
    stream = (spark.readStream.schema("key string, v long").option("maxFilesPerTrigger", 1)
              .parquet(str(root / "src")))
    out = op.apply(stream, counting(hold, base), SCHEMA)
    out = out.mapInArrow(after_publish(hold, base), out.schema)
    query = (out.writeStream.format("parquet").option("path", str(root / "out"))
             .option("checkpointLocation", str(root / "ckpt"))
             .trigger(availableNow=True).start())
    await_query(query, timeout=900)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
