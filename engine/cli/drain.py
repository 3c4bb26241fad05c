"""``weir drain job.properties [--set key=value ...] [--wait SECONDS]``: drain a running pipeline.

Writes a drain request to the job's drain file (``job.drain.path``, by default
``drain-request.json`` in the checkpoint directory; an application's stages share it) and
prints its id and the runs it is for: the ``weir run`` processes that hold the job lock in the
checkpoint directory (or in its ``stage-N`` directories). When none does, it writes nothing and
fails (exit 2, ``JobNotRunningError``): a request for no running job would make the next run
drain at once. Running containers of the job (or of every stage of the application) notice it
within ``task.drain.poll.interval.ms``: sources stop where they are, everything already read
is processed through every stage, windows fire, and every task commits and stops; ``weir
run`` then exits 0. docs/CONTROL.md has the details.

``--wait SECONDS`` waits until every task checkpoint under the checkpoint directory records
the drain as completed, and exits 1 if that does not happen in time.

A run on Spark (``weir run --runner spark``) drains as docs/SPARK.md says: its source admits
nothing more, the batch in flight is committed, the query stops and the driver moves the
request aside as ``<drain file>.completed-<id>``, which ``--wait`` looks for.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["register", "drained_tasks"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "drain", help="stop a running pipeline cleanly for a redeploy",
        description="Ask a running job (or every stage of an application) to drain: stop "
                    "reading its sources, finish everything in flight, fire its windows, "
                    "commit and stop.")
    parser.add_argument("path", help="the job's config (.properties, .yaml or .yml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config key (repeatable)")
    parser.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                        help="wait until every task recorded the drain as completed")
    parser.set_defaults(func=_drain)


def drained_tasks(checkpoint_dir: Path, run_id: str) -> tuple[list[str], list[str]]:
    """``(drained, pending)`` task checkpoints (``stage-N/Task`` names) under a checkpoint
    directory, by whether their control bookkeeping completed drain ``run_id``."""
    from weir.engine.control.drain import drain_progress

    progress = drain_progress([Path(checkpoint_dir)], run_id)
    return list(progress.completed), list(progress.pending)


def _drain(args: argparse.Namespace) -> int:
    from weir.engine.config.job import JobConfig, load_config
    from weir.engine.control.drain import drain_path_of, request_drain

    config = load_config(args.path, args.overrides)
    request = request_drain(config)
    print(f"drain requested: id {request.run_id} for {request.describe_runs()} in "
          f"{drain_path_of(config)}")
    if args.wait is None:
        return 0
    checkpoint_dir = JobConfig.from_config(config).checkpoint_dir
    path = drain_path_of(config)
    completed = path.with_name(f"{path.name}.completed-{request.uuid[:8]}")
    deadline = time.monotonic() + args.wait
    while True:
        if completed.exists():   # a run on Spark completed it (its tasks keep no checkpoints)
            print("drained: the run committed every batch it admitted and stopped")
            return 0
        drained, pending = drained_tasks(checkpoint_dir, request.run_id)
        if drained and not pending:
            print(f"drained: {len(drained)} task(s) committed and stopped")
            return 0
        if time.monotonic() >= deadline:
            print(f"not drained after {args.wait:g} s: {len(drained)} task(s) done, waiting for "
                  f"{', '.join(pending) or 'the job to start'}", file=sys.stderr)
            return 1
        time.sleep(0.2)
