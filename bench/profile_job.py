"""CPU profile of one ``weir run`` (issue 27, "Per-message path"): cProfile in this process with
``time.process_time`` as its clock, so a busy machine (waiting for a core) does not show up as
cost, then the functions that spent the most CPU themselves as a table.

The job runs in one container in this process (``job.container.count=1``; the profiler sees one
process). Under the profiler every Python call costs extra, so the totals are several times the
unprofiled CPU time: compare shares and call counts, and time whole processes with
``bench/peers_e2e.py``.

Run::

    .venv/bin/python bench/profile_job.py job.properties                 # the table
    .venv/bin/python bench/profile_job.py job.properties --top 25 --save prof.out
    .venv/bin/python bench/profile_job.py --table prof.out               # the table of a saved run

A job over the benchmark's input (``bench/peers_e2e.py --workdir DIR`` keeps its input and its
job file pattern; ``--payload json`` for the JSON variant).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import sys
import time
from pathlib import Path

__all__ = ["main", "table"]


def table(stats: pstats.Stats, top: int) -> list[str]:
    """The ``top`` functions by own CPU time as a Markdown table, and the totals."""
    total = stats.total_tt
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    lines = ["| function | calls | own CPU s | own share | with callees s |",
             "|---|---:|---:|---:|---:|"]
    for (path, _line, fn), (_cc, calls, own, cum, _callers) in rows:
        path = re.sub(r".*/site-packages/", "", re.sub(r".*/(engine|stores|recovery|bench)/",
                                                        r"\1/", path))
        name = fn if path == "~" else f"{path}:{fn}"
        lines.append(f"| `{name}` | {calls:,} | {own:.2f} | {own / total:.0%} | {cum:.2f} |")
    calls = sum(v[1] for v in stats.stats.values())
    loop = [v[3] for k, v in stats.stats.items() if k[2] in ("_run_inline", "_run_general")]
    lines.append("")
    lines.append(f"{total:.2f} s CPU under the profiler, {calls:,} calls"
                 + (f"; the run loop {loop[0]:.2f} s ({loop[0] / total:.0%})" if loop else ""))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", nargs="?", type=Path, help="the job's properties file")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override, as weir run's --set")
    parser.add_argument("--top", type=int, default=16)
    parser.add_argument("--save", type=Path, help="also write the raw profile here")
    parser.add_argument("--table", type=Path, metavar="FILE", help="the table of a saved run")
    args = parser.parse_args(argv)
    if args.table:
        print("\n".join(table(pstats.Stats(str(args.table)), args.top)))
        return 0
    if args.job is None:
        parser.error("give the job's properties file (or --table FILE)")
    from weir.engine.cli import main as weir

    cli = ["run", str(args.job), "--status", "off", "--set", "job.container.count=1"]
    for item in args.set:
        cli += ["--set", item]
    profiler = cProfile.Profile(time.process_time)
    wall, cpu = time.perf_counter(), time.process_time()
    profiler.enable()
    try:
        code = weir(cli)
    except SystemExit as stop:
        code = stop.code
    finally:
        profiler.disable()
    print(f"weir {' '.join(cli)}: exit {code}, {time.perf_counter() - wall:.2f} s wall, "
          f"{time.process_time() - cpu:.2f} s CPU (profiled)", file=sys.stderr)
    if args.save:
        profiler.dump_stats(str(args.save))
    print("\n".join(table(pstats.Stats(profiler), args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
