"""bench/latency.py's report: percentiles and the Markdown tables of bench/RESULTS.md."""

from __future__ import annotations

import statistics

from bench._latency_driver import RunResult

__all__ = ["pct", "report"]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _row(label: str, samples: list[float], rounds: list[list[float]], rate: float,
         throughput: float, missing: int) -> str:
    p99s = [pct(r, 0.99) for r in rounds if r]
    spread = f"{min(p99s):.1f}-{max(p99s):.1f}" if len(p99s) > 1 else "-"
    return (f"| {label} | {rate:,.0f} | {throughput:,.0f} | {len(samples):,} | "
            f"{pct(samples, 0.5):.1f} | {pct(samples, 0.99):.1f} | {spread} | "
            f"{pct(samples, 0.999):.1f} | {max(samples) if samples else float('nan'):.1f} | "
            f"{missing} |")


def report(results: list[RunResult], maxima: dict[tuple[str, str], float]) -> list[str]:
    lines = ["| scenario, tree | max events/s |", "|---|---:|"]
    for (name, tree), value in maxima.items():
        lines.append(f"| {name}, {tree} | {value:,.0f} |")
    lines += ["", "| scenario, tree, load | target events/s | reached records/s | records | "
              "p50 ms | p99 ms | p99 per round | p99.9 ms | max ms | missing |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[tuple[str, str, float], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.scenario, r.tree, r.rate), []).append(r)
    for (name, tree, rate), runs in groups.items():
        load = maxima.get((name, "this tree"))
        tag = f"{100 * rate / load:.0f}%" if load else f"{rate:,.0f}/s"
        label = f"{name}, {tree}, {tag}"
        pooled = [x for r in runs for x in r.latencies_ms]
        lines.append(_row(label, pooled, [r.latencies_ms for r in runs], rate,
                          statistics.median(r.throughput for r in runs),
                          sum(r.missing for r in runs)))
        panes = [x for r in runs for x in r.pane_latencies_ms]
        if panes:
            lines.append(_row(f"{label}: panes after the watermark passed", panes,
                              [r.pane_latencies_ms for r in runs], rate, 0.0, 0))
    return lines
