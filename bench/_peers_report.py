"""The tables of bench/peers_e2e.py: per variant events/s, max RSS and CPU time, the ratios
of the same rounds and issue 27's goals (:func:`report`); the same tables from the output of an
earlier run (:func:`from_log`)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from bench._peers_runner import Run
from bench._peers_variants import WEIR

__all__ = ["BASELINE", "report", "from_log"]

BASELINE = "weir-rocksdb-1"


def _resolve(runs: dict[str, list[Run]], name: str) -> str | None:
    """``name``, or else its first ``name@REV`` run (in ``--only`` order: list the commit
    being measured before the one it is compared with)."""
    if name in runs:
        return name
    return next((n for n in runs if n.partition("@")[0] == name), None)


def _ratio(runs: dict[str, list[Run]], a: str, b: str, *, cpu: bool = False) -> float | None:
    """Median over rounds of (events/s of ``a``) / (events/s of ``b``) in the same round; with
    ``cpu``, of (CPU time of ``b``) / (CPU time of ``a``): how much less CPU ``a`` needs."""
    a, b = _resolve(runs, a), _resolve(runs, b)
    if a is None or b is None:
        return None
    if cpu:
        pairs = [(ra.cpu, rb.cpu) for ra, rb in zip(runs[a], runs[b]) if ra.cpu > 0]
        return statistics.median(y / x for x, y in pairs) if pairs else None
    return statistics.median(rb.wall / ra.wall for ra, rb in zip(runs[a], runs[b]))


def report(runs: dict[str, list[Run]], n: int, keys: int, payload: str = "bytes") -> list[str]:
    lines = [f"### {n:,} events, {keys:,} keys, {payload} payload, "
             f"{len(next(iter(runs.values())))} interleaved rounds", "",
             "| variant | events/s (median) | min-max | max RSS MiB (median) | ratio to "
             f"`{BASELINE}` | CPU s (median) | CPU ratio to `{BASELINE}` |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, rs in runs.items():
        rates = sorted(n / r.wall for r in rs)
        ratio = _ratio(runs, name, BASELINE)
        cpu = _ratio(runs, name, BASELINE, cpu=True)
        lines.append(f"| `{name}` | {statistics.median(rates):,.0f} | {rates[0]:,.0f}-"
                     f"{rates[-1]:,.0f} | {statistics.median(r.rss_mib for r in rs):.0f} | "
                     + (f"{ratio:.2f}x |" if ratio is not None else "- |")
                     + f" {statistics.median(r.cpu for r in rs):.2f} | "
                     + (f"{cpu:.2f}x |" if cpu is not None else "- |"))
    revs = sorted({name.partition("@")[2] for name in runs} - {""})
    goals = [(f"{w}", f"{w}@{rev}", None) for rev in revs for w in WEIR]
    # issue 27's goals: one container >= 0.6x ceiling-1 and >= 2.0x Bytewax at 10k keys,
    # >= 1.0x the hand loop and >= 2.0x Bytewax at 1M; automatic containers >= 0.9x the
    # ceiling-2/ceiling-1 ratio of the same rounds (checked below the table).
    small = keys <= 10_000
    goals += [("weir-rocksdb-1", "ceiling-1", 0.6 if small else None),
              ("weir-rocksdb-1", "bytewax-b1000", 2.0),
              ("weir-rocksdb-1", "rocksdict-hand", None if small else 1.0),
              ("weir-rocksdb-1", "quix-txn1000", None),
              ("weir-lmdb-1", "bytewax-b1000", None),
              ("weir-rocksdb-auto", "weir-rocksdb-1", None),
              ("ceiling-2", "ceiling-1", None),
              ("weir-lmdb-auto", "weir-lmdb-1", None)]
    lines += ["", "| ratio (median of per-round ratios) | measured | by CPU time | goal |",
              "|---|---:|---:|---|"]
    seen: set[tuple[str, str]] = set()
    for a, b, goal in goals:
        ratio = _ratio(runs, a, b)
        if ratio is None or (a, b) in seen or _resolve(runs, a) == _resolve(runs, b):
            continue
        seen.add((a, b))
        verdict = "-" if goal is None else f">= {goal}x: {'met' if ratio >= goal else 'MISSED'}"
        by_cpu = _ratio(runs, a, b, cpu=True)
        lines.append(f"| `{_resolve(runs, a)}` / `{_resolve(runs, b)}` | {ratio:.2f}x | "
                     + (f"{by_cpu:.2f}x" if by_cpu is not None else "-") + f" | {verdict} |")
    ceiling = _ratio(runs, "ceiling-2", "ceiling-1")
    for auto, one in (("weir-rocksdb-auto", "weir-rocksdb-1"), ("weir-lmdb-auto", "weir-lmdb-1")):
        gain = _ratio(runs, auto, one)
        if ceiling and gain is not None:
            share = gain / ceiling
            lines.append(f"| `{auto}`/`{one}` over `ceiling-2`/`ceiling-1` | {share:.2f}x | - | "
                         f">= 0.9x: {'met' if share >= 0.9 else 'MISSED'} |")
    return lines


_ROUND_LINE = re.compile(r"^keys\s+([\d,]+) (?:(bytes|json) )?round (\d+) (\S+)\s+[\d,]+ ev/s\s+"
                         r"([\d.]+) s\s+(\d+) MiB(?:.*cpu\s+([\d.]+) s)?")


def from_log(path: Path) -> list[str]:
    """The report of an earlier run, from the per-round lines it printed."""
    n = 0
    by_keys: dict[tuple[int, str], dict[str, list[Run]]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("input: "):
            n = int(line.split()[1].replace(",", ""))
        m = _ROUND_LINE.match(line)
        if m:
            keys = int(m.group(1).replace(",", ""))
            by_keys.setdefault((keys, m.group(2) or "bytes"), {}).setdefault(
                m.group(4), []).append(Run(float(m.group(5)), float(m.group(6)),
                                           float(m.group(7) or 0.0)))
    out: list[str] = []
    for (keys, payload), runs in by_keys.items():
        out += report(runs, n, keys, payload) + [""]
    return out
