"""``weir run job.properties [--set key=value ...] [--stage N]``: run a job embedded on this machine.

The config names a low-level task (``task.class``) or a high-level application
(``app.class``, docs/APPLICATIONS.md): an application is planned first (its intermediate
streams are created) and runs every stage in one job, or only stage ``N`` with ``--stage N``.

The config file's directory is put first on ``sys.path``, so ``task.class=module:Class``
finds a module that sits beside the config. While the job runs, a status line (terminal) or
periodic log lines show progress; when it stops, a summary goes to standard output: why it
stopped, messages in and out per stream, time and rate. Exit codes: 0 (inputs ended, a task
asked to stop, or SIGTERM), 1 (a container failed; the error names task, SSP and offset),
2 (bad config or missing stream, nothing ran; a changed immutable setting, which
``--reset-state`` accepts by setting the job's state aside), 130 (SIGINT). docs/RUNNING.md and
docs/COORDINATOR.md have the details.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["register", "add_config_dir_to_path"]


_STATUS_MODES = ("auto", "line", "log", "off")  # engine.status.StatusMode, imported late


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run a job or an application: on this machine (embedded), or on Spark "
                    "with --runner spark",
        description="Run a job (task.class) or an application (app.class). Embedded (the "
                    "default): its containers in this process, or one process each when it "
                    "has more than one. On Spark (--runner spark): one Spark streaming query. "
                    "Stops on SIGINT/SIGTERM with a final commit and by itself when all inputs "
                    "are bounded and have ended.")
    parser.add_argument("path", help="job config (.properties, .yaml or .yml) naming a task "
                                     "(task.class) or an application (app.class)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config key (repeatable)")
    parser.add_argument("--reset-state", action="store_true",
                        help="accept changed immutable settings (grouper, input partition "
                             "counts, a store's changelog, container count with host "
                             "affinity) by setting the job's state aside (renamed "
                             ".reset-<time>, never deleted): local stores, changelogs and "
                             "checkpoints; the assignments are forgotten and inputs are read "
                             "again from samza.offset.default")
    parser.add_argument("--status", choices=_STATUS_MODES, default="auto",
                        help="progress display: a status line on a terminal, log lines "
                             "otherwise (auto, the default), or force line/log/off")
    parser.add_argument("--runner", choices=("embedded", "spark"), default="embedded",
                        help="embedded (this machine, the default) or spark: the same job as "
                             "one Spark streaming query (docs/SPARK.md; needs weir[spark] and "
                             "Java 17+; spark.master in the config, default local[*])")
    parser.add_argument("--trigger", choices=("continuous", "available-now"),
                        default="continuous",
                        help="--runner spark: run micro-batches until stopped or every task "
                             "finished (continuous), or process what the inputs hold now "
                             "and stop (available-now)")
    parser.add_argument("--stage", type=int, default=None, metavar="N",
                        help="run only stage N of an application as its own job (see `weir "
                             "plan`); default: every stage in one job (or app.stage)")
    parser.set_defaults(func=_run)


def add_config_dir_to_path(path: str | os.PathLike) -> str:
    """Put the directory of the config file first on ``sys.path`` (once); return it."""
    directory = str(Path(path).resolve().parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    return directory


def _names_application(config: Mapping[str, str]) -> bool:
    """Whether the config names a high-level application (``app.class``). The planner (and
    with it the whole high-level API) is imported only when the key is there at all."""
    if _APP_CLASS not in config:
        return False
    from weir.engine.app.planner import is_application
    return is_application(config)


_APP_CLASS = "app.class"
"""``weir.engine.app.planner.APP_CLASS``'s name (tests/engine/cli/test_run_cli.py checks)."""


def _run(args: argparse.Namespace) -> int:
    # Imported here so that `weir --help` and the other subcommands start fast.
    from weir.engine.config.job import load_config

    config = load_config(args.path, args.overrides)
    add_config_dir_to_path(args.path)
    if args.runner != "spark":
        # Before importing the runner: the containers' fork server imports Weir in its own
        # process while this one imports the runner (run_job would start it ~0.15 s later).
        from weir.engine.container.starter import warm_up_for
        warm_up_for(config)
    from weir.engine.container.runner import run_job
    from weir.engine.container.status import StatusMode, configure_logging
    from weir.engine.coordinator.coordinator import StateReset

    mode = StatusMode(args.status)
    console = configure_logging(mode)
    reset = StateReset.RESET if args.reset_state else StateReset.KEEP
    if args.runner == "spark":
        if args.stage is not None or args.reset_state:
            from weir.stores.errors import ConfigError
            raise ConfigError("--stage and --reset-state are for the embedded runner")
        from weir.engine.spark.jobrunner import Trigger, run_on_spark
        result = run_on_spark(config, trigger=Trigger(args.trigger),
                              config_dir=str(Path(args.path).resolve().parent))
    elif _names_application(config):
        from weir.engine.container.preflight import refuse_task_as_application
        refuse_task_as_application(config)  # before planning: say to use task.class
        from weir.engine.app.runner import run_application
        result = run_application(config, stage=args.stage, status=mode, console=console)
    elif args.stage is not None:
        from weir.stores.errors import ConfigError
        raise ConfigError("--stage is for applications (app.class); this config names a task")
    else:
        result = run_job(config, status=mode, console=console, reset=reset)
    for line in result.summary_lines():
        print(line)
    sys.stdout.flush()
    return int(result.exit_code)
