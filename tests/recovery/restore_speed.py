"""Measure changelog restore speed (not a test; run it by hand).

    .venv/bin/python -m tests.recovery.restore_speed [--records 1000000] [--keys 100000]

Writes a FileChangelog of ``--records`` puts over ``--keys`` distinct keys (100-byte values),
then times a full rebuild into each engine through TaskStorageManager.open and prints each
store's summary line.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from weir.recovery.storage import ProgressMode, TaskStorageManager
from weir.stores.config import Config
from weir.testing import FileChangelog
from weir.stores.spec import StoreSpec


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--engines", default="memory,rocksdb,lmdb")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="weir-restore-speed-"))
    log = FileChangelog(base / "changelog")
    rng = random.Random(1)
    value = b"v" * 100
    started = time.perf_counter()
    for _ in range(args.records):
        log.append(f"key{rng.randrange(args.keys):08d}".encode(), value)
    log.flush()
    print(f"wrote {args.records:,} changelog records in {time.perf_counter() - started:.2f} s")
    for engine in args.engines.split(","):
        cfg = Config({"stores.s.factory": engine, "stores.s.key.serde": "bytes",
                      "stores.s.msg.serde": "bytes", "stores.s.changelog": "filelog.s"})
        tsm = TaskStorageManager("Partition 0", [StoreSpec.from_config(cfg, "s")],
                                 base / engine, {"s": (log, log)}, cfg,
                                 progress=ProgressMode.QUIET)
        tsm.open(None)
        print(engine.ljust(8), tsm.restore_stats["s"].summary())
        tsm.close()
    log.close()


if __name__ == "__main__":
    main()
