"""Weir's store stacks and peer systems on the same running-count workload, in one process run.

Workload (PERF-FACTS part 2, section 4): N events (default 1,000,000), key ``key%05d`` drawn
uniformly from 10,000 keys (``random.Random(12345)``), a running count per key, output
discarded. Variants, interleaved per round (the order alternates between rounds):

- Weir RocksDB stack: ``build_store`` with object cache, serdes, changelog to a FileChangelog,
  commit (``flush``) every 1,000 and every 25,000 events (bench/test_bench_stores.py's setup);
- Weir LMDB stack: the same with the LMDB engine;
- Quix Streams state (``quixstreams``): ``RocksDBStorePartition`` with Quix's default options,
  ``tx.as_state(prefix=key)`` get/set as a stateful ``sdf.apply`` does, one transaction per
  1,000 events closed by ``prepare()`` + ``flush()`` (no Kafka, no changelog producer);
- Bytewax (``bytewax``): ``TestingSource`` with batch 1,000, ``key_on`` + ``stateful_map``,
  a sink that drops every item, ``run_main`` (1 worker), no recovery.

Every store keeps its state between rounds (a warm-up pass over the first N/10 events runs
first); Bytewax starts each run with empty state (its state lives in the dataflow). A peer
whose package is not importable is skipped with the reason printed. Rates are events per
second of the timed loop (wall and process CPU time, bests over rounds); "ratio" is the median
over rounds of the per-round rate ratio to the Weir RocksDB stack committing every 1,000.

Run::

    .venv/bin/pip install -e '.[peers]' && .venv/bin/python bench/peers.py
    .venv/bin/python bench/peers.py --n 300000 --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import shlex
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from _peer_jobs import bytewax_job, event_keys, quix_job  # noqa: E402
from test_bench_stores import (  # noqa: E402
    BATCH, HOT_KEYS, _measure, _rocksdb_handles, _settle, open_stack, rmw_stack,
)

__all__ = ["main"]

BASELINE = "Weir RocksDB stack, commit/1000"


@dataclass(frozen=True)
class _Variant:
    name: str
    state: str
    run: Callable[[list[str]], None]
    close: Callable[[], None]
    handles: tuple = ()


def _missing(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure means "skip this peer"
        return f"{type(exc).__name__}: {exc}"
    return None


def _weir(root: Path, engine: str, commit_every: int) -> _Variant:
    sub = root / f"weir-{engine}-{commit_every}"
    sub.mkdir()
    store, log = open_stack(sub, engine)
    label = "RocksDB" if engine == "rocksdb" else "LMDB"

    def close() -> None:
        store.close()
        log.close()

    handles = tuple(_rocksdb_handles({"s": (None, (store,))}))
    return _Variant(f"Weir {label} stack, commit/{commit_every}",
                    f"{label} + object cache + file changelog",
                    functools.partial(_weir_run, store, commit_every), close, handles)


def _weir_run(store, commit_every: int, keys: list[str]) -> None:
    rmw_stack(store, keys, commit_every)


def _quix(root: Path) -> _Variant:
    run, close, handles = quix_job(root / "quix", BATCH)
    return _Variant("Quix Streams state, txn/1000", "RocksDB (Quix options)", run, close,
                    handles)


def _bytewax(_root: Path) -> _Variant:
    return _Variant("Bytewax, batch 1000, no recovery", "Python objects", bytewax_job(BATCH),
                    lambda: None)


_PEERS = (("quixstreams", _quix), ("bytewax", _bytewax))


def _rounds(variants: list[_Variant], keys: list[str], rounds: int, console: Console) -> dict:
    times: dict[str, list[tuple[float, float]]] = {v.name: [] for v in variants}
    handles = [h for v in variants for h in v.handles]
    for v in variants:  # warm-up: files created, caches filled, imports done
        v.run(keys[: max(1, len(keys) // 10)])
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            _settle(handles)
            wall, cpu = _measure(v.run, keys)
            times[v.name].append((wall, cpu))
            console.print(f"round {r + 1} {v.name:<36} {len(keys) / wall:>11,.0f} ev/s "
                          f"({wall:.2f} s wall, {cpu:.2f} s cpu)")
    return times


def _table(variants: list[_Variant], times: dict, n: int, title: str) -> Table:
    table = Table(title=title)
    for col, justify in (("system / configuration", "left"), ("state kept in", "left"),
                         ("best wall ev/s", "right"), ("median wall ev/s", "right"),
                         ("best cpu ev/s", "right"), ("ratio to Weir RocksDB", "right")):
        table.add_column(col, justify=justify)
    base = times[BASELINE]
    for v in variants:
        runs = times[v.name]
        ratio = statistics.median(b[0] / t[0] for t, b in zip(runs, base))
        table.add_row(v.name, v.state, f"{n / min(w for w, _ in runs):,.0f}",
                      f"{n / statistics.median(w for w, _ in runs):,.0f}",
                      f"{n / min(c for _, c in runs):,.0f}", f"{ratio:.2f}x")
    return table


def _markdown(variants: list[_Variant], times: dict, n: int) -> str:
    """The same figures as a Markdown table, for bench/RESULTS.md."""
    lines = ["| system / configuration | state kept in | best wall ev/s | median wall ev/s "
             "| best cpu ev/s | ratio to Weir RocksDB |", "|---|---|---:|---:|---:|---:|"]
    base = times[BASELINE]
    for v in variants:
        runs = times[v.name]
        ratio = statistics.median(b[0] / t[0] for t, b in zip(runs, base))
        lines.append(f"| {v.name} | {v.state} | {n / min(w for w, _ in runs):,.0f} | "
                     f"{n / statistics.median(w for w, _ in runs):,.0f} | "
                     f"{n / min(c for _, c in runs):,.0f} | {ratio:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="events per round")
    parser.add_argument("--keys", type=int, default=HOT_KEYS, help="distinct keys")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args(argv)
    console = Console(width=160)
    command = " ".join([".venv/bin/python", "bench/peers.py", *map(shlex.quote, sys.argv[1:])])
    load_before = os.getloadavg()

    keys = event_keys(args.n, args.keys)
    with tempfile.TemporaryDirectory(prefix="weir-peers-") as tmp:
        root = Path(tmp)
        variants = [_weir(root, "rocksdb", 1_000), _weir(root, "rocksdb", 25_000),
                    _weir(root, "lmdb", 1_000), _weir(root, "lmdb", 25_000)]
        for module, build in _PEERS:
            reason = _missing(module)
            if reason:
                console.print(f"[yellow]skipped {module}[/]: not importable ({reason}); "
                              f"install with .venv/bin/pip install -e '.[peers]'")
                continue
            variants.append(build(root))
        try:
            times = _rounds(variants, keys, args.rounds, console)
        finally:
            for v in variants:
                v.close()
    load_after = os.getloadavg()
    title = (f"running count, {args.n:,} events, {args.keys:,} keys, {args.rounds} interleaved "
             f"rounds")
    console.print(_table(variants, times, args.n, title))
    console.print(_markdown(variants, times, args.n), markup=False, highlight=False)
    console.print(f"load average before {load_before[0]:.2f} / {load_before[1]:.2f} / "
                  f"{load_before[2]:.2f}, after {load_after[0]:.2f} / {load_after[1]:.2f} / "
                  f"{load_after[2]:.2f}")
    console.print(f"command: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
