"""The 1M-key store path of the end-to-end count job, side by side with the hand-written
rocksdict loop, in one process (issue 27 item 3).

One task's share of ``bench/peers_e2e.py --keys 1000000``: the 1,000,000 events drawn from
1,000,000 keys (``bench/_peer_jobs.py``'s ``event_keys``), the quarter whose key index is 0
modulo 4 (~250,000 events over ~158,000 keys, what task 0 of the 4-partition job sees).

- ``weir``: ``build_store`` of the job's store (RocksDB, ``bytes`` keys, ``int64`` counts, a
  changelog, every size from the default memory budget with 4 tasks) and a read-modify-write
  per event; the changelog sink counts what it is given and writes nothing (the file log's
  framing is the engine's, measured by ``bench/peers_e2e.py``), then ``flush``;
- ``hand``: the loop of ``rocksdict_job`` without its changelog file: a read-through dict of
  every key seen, a ``WriteBatch`` per 1,000 events (raw mode, WAL off), ``flush``.

Rounds alternate; CPU time of the loop (``time.process_time``), best of ``--rounds``, which is
steadier than wall time on a shared machine. Run::

    .venv/bin/python bench/store_path.py                # 3 rounds
"""

from __future__ import annotations

import argparse
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer_jobs import event_keys  # noqa: E402
from rocksdict import Options, Rdict, WriteBatch, WriteOptions  # noqa: E402

from weir.stores.budget import MemoryBudget  # noqa: E402
from weir.stores.builder import build_store  # noqa: E402
from weir.stores.changelog import ChangelogSink  # noqa: E402
from weir.stores.config import Config  # noqa: E402
from weir.stores.spec import StoreSpec  # noqa: E402

_PACK = struct.Struct("<q")
_CONFIG = Config({"stores.counts.factory": "rocksdb", "stores.counts.key.serde": "bytes",
                  "stores.counts.msg.serde": "int64", "stores.counts.changelog": "log.counts"})


class _CountingSink(ChangelogSink):
    def __init__(self) -> None:
        self.records = 0

    def append(self, key: bytes, value: bytes | None) -> None:
        self.records += 1

    def append_columns(self, keys, values) -> None:
        self.records += len(keys)

    def flush(self) -> None:
        pass


def weir(keys: list[bytes], directory: Path) -> float:
    spec = StoreSpec.from_config(_CONFIG, "counts")
    [spec] = MemoryBudget.from_config(_CONFIG, ["counts"]).size([spec], tasks=4)
    store = build_store(spec, directory, changelog=_CountingSink(), config=_CONFIG)
    started = time.process_time()
    get, put = store.get, store.put
    for key in keys:
        put(key, (get(key) or 0) + 1)
    store.flush()
    seconds = time.process_time() - started
    store.close()
    return seconds


def hand(keys: list[bytes], directory: Path, batch: int = 1000) -> float:
    db = Rdict(str(directory), Options(raw_mode=True))
    wopts = WriteOptions()
    wopts.disable_wal = True
    pack, unpack = _PACK.pack, _PACK.unpack
    cache: dict[bytes, int] = {}
    dirty: dict[bytes, int] = {}
    started = time.process_time()
    n = 0
    for key in keys:
        v = cache.get(key)
        if v is None:
            raw = db.get(key)
            v = unpack(raw)[0] if raw is not None else 0
        cache[key] = dirty[key] = v + 1
        n += 1
        if n % batch == 0:
            wb = WriteBatch(raw_mode=True)
            for k, count in dirty.items():
                wb.put(k, pack(count))
            db.write(wb, wopts)
            dirty.clear()
    wb = WriteBatch(raw_mode=True)
    for k, count in dirty.items():
        wb.put(k, pack(count))
    db.write(wb, wopts)
    db.flush()
    seconds = time.process_time() - started
    db.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    keys = [k.encode() for k in event_keys(1_000_000, 1_000_000)]
    keys = [k for k in keys if int(k[3:]) % 4 == 0]
    print(f"{len(keys):,} events over {len(set(keys)):,} keys")
    work = Path(tempfile.mkdtemp(prefix="weir-store-path-"))
    runs: dict[str, list[float]] = {"weir": [], "hand": []}
    try:
        for r in range(args.rounds):
            for name in (("weir", "hand") if r % 2 == 0 else ("hand", "weir")):
                directory = work / name
                runs[name].append((weir if name == "weir" else hand)(keys, directory))
                shutil.rmtree(directory, ignore_errors=True)
                print(f"round {r + 1} {name:<5} {runs[name][-1]:.2f} s CPU", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, seconds in runs.items():
        print(f"{name:<5} best {min(seconds):.2f} s CPU, {len(keys) / min(seconds):,.0f} events/s")
    print(f"weir / hand (events/s, best of each): {min(runs['hand']) / min(runs['weir']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
