"""``weir plan app.properties [--set key=value ...] [--json] [--config N]``: show an application's plan.

Plans the application of the config (``app.class``) without running it and without creating
anything: its stages (inputs, operators, stores, number of tasks, what each writes) and its
streams (kind, partitions, which stage writes and reads them, upstream task count). ``--json``
prints the same as JSON for scripts; ``--config N`` prints the job config stage ``N`` runs
with (``--config all``: the one-job config), as ``key=value`` lines.

Example::

    $ weir plan examples/pageviews/app.properties
    stage  inputs                     operators                                 tasks  writes
    0      filelog.pageviews (4)      input, filter, map, partition_by by-user  4      pageviews-1-partition_by-by-user
    ...
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan", help="show the stages and streams of an application (app.class)",
        description="Plan a high-level application: its stages, intermediate streams, "
                    "partition counts and tasks. Nothing is created or run.")
    parser.add_argument("path", help="application config (.properties, .yaml or .yml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config key (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument("--config", dest="stage_config", metavar="N|all", default=None,
                        help="print the generated job config of stage N (or of the one job)")
    parser.add_argument("--runner", choices=("embedded", "spark"), default="embedded",
                        help="spark: show the application as one Spark streaming query (its "
                             "stages, shuffles and state operators; docs/SPARK.md)")
    parser.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    from weir.engine.app.planner import is_application, plan_application
    from weir.engine.cli.run import add_config_dir_to_path
    from weir.engine.config.job import load_config
    from weir.stores.errors import ConfigError

    config = load_config(args.path, args.overrides)
    add_config_dir_to_path(args.path)
    if not is_application(config):
        raise ConfigError("names no application; `weir plan` plans configs with app.class "
                          "(a low-level job's plan is its task.inputs)", key="app.class")
    if args.runner == "spark":
        return _plan_spark(args, config)
    plan = plan_application(config)
    if args.stage_config is not None:
        stage = None if args.stage_config == "all" else int(args.stage_config)
        cfg = plan.job_config(stage)
        for key in sorted(cfg):
            print(f"{key}={cfg[key]}")
        return 0
    if args.json:
        print(json.dumps(plan.to_json(), indent=2))
        return 0
    _print_tables(plan)
    return 0


def _plan_spark(args: argparse.Namespace, config) -> int:
    from pathlib import Path

    from weir.engine.spark.apprunner import plan_app

    if args.stage_config is not None:
        from weir.stores.errors import ConfigError
        raise ConfigError("--config prints the embedded job configs; leave out --runner spark")
    app = plan_app(config, config_dir=str(Path(args.path).resolve().parent)).app
    columns = ("stage", "runs as", "inputs", "operators", "state operator / stores", "tasks",
               "writes")
    if args.json:
        print(json.dumps({"application": app.execution.app_class,
                          "checkpoint": app.source.plan.checkpoint,
                          "stages": [dict(zip(columns, row)) for row in app.rows()]}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 200)
    console.print(f"application [bold]{app.execution.app_class}[/] on Spark: one streaming "
                  f"query, {len(app.stages)} stage(s), checkpoint {app.source.plan.checkpoint}")
    table = Table()
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in app.rows():
        table.add_row(*row)
    console.print(table)
    console.print("rows go from stage to stage through Spark's shuffle (repartition on each "
                  "record's Weir partition); watermarks and end-of-stream travel with them")
    return 0


def _print_tables(plan) -> None:
    from rich.console import Console
    from rich.table import Table

    # On a terminal rich fits the tables to its width; in a pipe or a file, lines stay whole.
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 200)
    console.print(f"application [bold]{plan.app_class}[/] as '{plan.app_name}-{plan.app_id}': "
                  f"{len(plan.stages)} stage(s)")
    stages = Table()
    for column in ("stage", "inputs", "operators", "stores", "tasks", "writes"):
        stages.add_column(column, overflow="fold", no_wrap=column in ("inputs", "writes"))
    for st in plan.stages:
        inputs = "\n".join(f"{s} ({plan.streams[s].partitions})" for s in st.inputs)
        ops = "\n".join(f"{op} {op_id.rsplit('-' + op + '-', 1)[-1] if op != 'input' else op_id}"
                        for op_id, op in st.ops)
        writes = "\n".join(str(s) for s in (*st.intermediate_outputs, *st.outputs)) or "-"
        stages.add_row(str(st.index), inputs, ops, "\n".join(st.stores) or "-", str(st.tasks),
                       writes)
    console.print("stages")
    console.print(stages)
    streams = Table()
    for column in ("stream", "kind", "partitions", "written by", "read by", "upstream tasks"):
        streams.add_column(column, overflow="fold", no_wrap=column == "stream")
    for sp in plan.streams.values():
        exists = "" if sp.exists else " (to create)"
        streams.add_row(str(sp.stream), sp.kind + exists, str(sp.partitions),
                        "-" if sp.producer_stage is None else f"stage {sp.producer_stage}",
                        ", ".join(f"stage {s}" for s in sp.consumer_stages) or "-",
                        "-" if sp.upstream_tasks is None else str(sp.upstream_tasks))
    console.print("streams")
    console.print(streams)
