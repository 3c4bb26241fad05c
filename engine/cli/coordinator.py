"""``weir coordinator``: read and write a job's coordinator stream (docs/COORDINATOR.md).

* ``weir coordinator set-config job.properties --key K --value V`` writes one config
  value (Samza's coordinator stream writer tool). The value is checked against the key's
  declaration and the immutable-settings guard before anything is written; a running job
  picks it up within ``job.coordinator.catchup.interval.ms`` and restarts the containers
  whose model changed. A value the job could not run with (one ``weir run`` would refuse:
  ``task.max.concurrency=0``, a ``task.class`` that does not import, an unknown serde) is
  refused too, so a running job is never stopped by a set-config. ``--delete`` writes a delete of the key instead.
* ``weir coordinator show job.properties [--json]`` prints the config the stream holds
  (with who wrote each value and when), the tasks' changelog partitions and containers, and
  the containers' locality.

The job's config is the first argument, as for every other command; ``--job CONFIG`` (the
earlier form) is still accepted, with a deprecation warning.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

import orjson
from rich.table import Table

from weir.engine.cli._console import console as _console

__all__ = ["register", "WRITER_SOURCE"]

WRITER_SOURCE = "coordinator-stream-writer"
"""The ``source`` of messages written by ``weir coordinator set-config`` (Samza's)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "coordinator", help="show or change a job's coordinator stream (config, changelog "
                            "partitions, locality)",
        description="Read and write a job's coordinator stream.")
    sub = parser.add_subparsers(dest="coordinator_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: (parser.print_help(), 0)[1])

    def job_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("path", nargs="?", metavar="CONFIG",
                       help="the job's config (.properties or .yaml): names the job and where "
                            "its coordinator stream lives")
        p.add_argument("--job", dest="job_option", metavar="CONFIG",
                       help="deprecated: the config as an option (give it as the first "
                            "argument, as for every other command)")
        p.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="override a key of that config (repeatable)")

    setc = sub.add_parser("set-config", help="write one config value (a running job applies it)",
                          description="Write a set-config message; a running job picks it up, "
                                      "bumps its job model version and restarts the containers "
                                      "whose model changed.")
    job_args(setc)
    setc.add_argument("--type", default="set-config",
                      help="message type; only set-config is accepted (as Samza's tool)")
    setc.add_argument("--key", required=True, help="the config key")
    group = setc.add_mutually_exclusive_group(required=True)
    group.add_argument("--value", help="the new value")
    group.add_argument("--delete", action="store_true", help="delete the key instead")
    setc.set_defaults(func=_set_config)

    show = sub.add_parser("show", help="print config, changelog partitions and locality",
                          description="Print what the job's coordinator stream holds.")
    job_args(show)
    show.add_argument("--json", action="store_true", help="print JSON instead of tables")
    show.set_defaults(func=_show)


def _config_path(args: argparse.Namespace) -> str:
    """The job's config: the argument, or the deprecated ``--job`` (with a warning)."""
    from weir.engine.errors import EngineError
    if args.path and args.job_option and args.path != args.job_option:
        raise EngineError(f"two configs given ({args.path} and --job {args.job_option}); "
                          f"give one, as the first argument")
    if args.job_option and not args.path:
        print(f"weir: warning: --job is deprecated; write `weir coordinator "
              f"{args.coordinator_command} {args.job_option} ...`", file=sys.stderr)
        args.path, args.job_option = args.job_option, None
        return args.path
    if not args.path:
        raise EngineError(f"give the job's config: `weir coordinator {args.coordinator_command} "
                          f"job.properties ...`")
    return args.path


def _open(args: argparse.Namespace):
    from weir.engine.config.job import load_config
    from weir.engine.coordinator.errors import CoordinatorError
    from weir.engine.coordinator.settings import CoordinatorSettings
    from weir.engine.coordinator.stream import CoordinatorStreamStore
    from weir.engine.systems.registry import SystemRegistry

    config = load_config(_config_path(args), args.overrides)
    settings = CoordinatorSettings.from_config(config)
    store = CoordinatorStreamStore(SystemRegistry(config), settings, source=WRITER_SOURCE)
    if not store.exists():
        raise CoordinatorError(f"job '{settings.job_name}' (id {settings.job_id}) has no "
                               f"coordinator stream {settings.system}.{settings.stream}: it was "
                               f"never run; start it with `weir run {_config_path(args)}`")
    store.bootstrap()
    return config, settings, store


def _set_config(args: argparse.Namespace) -> int:
    from weir.stores.config import Config, find_declared
    from weir.stores.errors import ConfigError

    from weir.engine.config.job import load_all_declarations
    from weir.engine.config.streams import all_input_streams
    from weir.engine.coordinator.guard import check_immutable_settings
    from weir.engine.coordinator.messages import CoordinatorMessage, MessageType
    from weir.engine.coordinator.state import CoordinatorState
    from weir.engine.systems.registry import SystemRegistry

    if args.type != MessageType.SET_CONFIG.value:
        raise ConfigError(f"type {args.type!r} is invalid; the possible values are "
                          f"{{set-config}}", origin="--type")
    _, settings, store = _open(args)
    with store:
        state = CoordinatorState.from_store(store)
        current = state.config
        values = dict(current)
        if args.delete:
            if args.key not in values:
                print(f"{args.key} is not set in {settings.stream}; nothing written")
                return 0
            del values[args.key]
        else:
            if values.get(args.key) == args.value:
                print(f"{args.key} is already {args.value!r} in {settings.stream}; nothing written")
                return 0
            values[args.key] = args.value
        origins = dict(current.origins)
        origins[args.key] = "weir coordinator set-config"
        new = Config(values, origins=origins)
        load_all_declarations()
        decl = find_declared(args.key)
        if decl is not None and not args.delete:
            decl.parse(new, args.key)
        elif decl is None:
            print(f"warning: {args.key} is not a key Weir declares (see docs/CONFIG.md); "
                  f"writing it anyway", file=sys.stderr)
        registry = SystemRegistry(new)
        counts = registry.partition_counts(all_input_streams(new))
        check_immutable_settings(state, new, counts)
        _check_running_directories(registry, settings, current, new)
        _check_runnable(_config_path(args), new)
        message = (CoordinatorMessage.delete(MessageType.SET_CONFIG, args.key, source=WRITER_SOURCE)
                   if args.delete else
                   CoordinatorMessage.set_config(args.key, args.value, source=WRITER_SOURCE))
        store.write([message])
        offset = store.next_offset - 1
    what = f"delete of {args.key}" if args.delete else f"{args.key}={args.value}"
    print(f"wrote {what} to {settings.system}.{settings.stream} at offset {offset}; a running "
          f"job applies it within job.coordinator.catchup.interval.ms, restarting the "
          f"containers whose job model changes (each commits first)")
    return 0


def _check_running_directories(registry, settings, current, new) -> None:
    """While the job runs (its job coordinator holds the run lock), refuse a change that would
    move the directories it keeps its state in, resolved as the running job resolves them
    (its working directory and environment, from the run lock's record)."""
    from weir.engine.coordinator.guard import check_running_directories
    from weir.engine.coordinator.run_lock import read_run_record

    running = read_run_record(registry, settings)
    if running is None or running.directories is None:
        return
    check_running_directories(running.directories, current, new, cwd=running.cwd,
                              environ=running.environ)


def _check_runnable(path: str, config) -> None:
    """Refuse (before anything is written) a config the job would refuse when its coordinator
    reads it back: every setting a container builds (``weir run``'s preflight), and the task
    class, imported as ``weir run`` imports it (the config's directory first on sys.path)."""
    from weir.stores.errors import ConfigError

    from weir.engine.cli.run import add_config_dir_to_path
    from weir.engine.container.settings import JobSettings
    from weir.engine.systems.registry import SystemRegistry
    from weir.engine.task import load_task_factory

    add_config_dir_to_path(path)
    try:
        load_task_factory(config)
        JobSettings.from_config(config, SystemRegistry(config))
    except ConfigError as exc:
        raise ConfigError(f"{exc}; the job could not run with this value, so nothing was "
                          f"written") from None


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _show(args: argparse.Namespace) -> int:
    from weir.engine.coordinator.messages import MessageType
    from weir.engine.coordinator.state import CoordinatorState

    _, settings, store = _open(args)
    with store:
        state = CoordinatorState.from_store(store)
        config_msgs = store.entries(MessageType.SET_CONFIG)
        name = f"{settings.system}.{settings.stream}"
        if args.json:
            counts = {str(ss): n for ss, n in sorted(state.partition_counts.items())}
            print(orjson.dumps({
                "stream": name, "messages-read": store.messages_read,
                "next-offset": store.next_offset,
                "config": {k: state.config[k] for k in sorted(state.config)},
                "changelog": {t: state.changelog[t] for t in sorted(state.changelog)},
                "task-containers": {t: state.task_containers[t] for t in sorted(state.task_containers)},
                "input-partitions": counts,
                "locality": {c: loc.to_dict() for c, loc in sorted(state.locality.items())},
            }, option=orjson.OPT_INDENT_2).decode())
            return 0
        console = _console()
        table = Table(title=f"Config in {name}", title_justify="left")
        for col in ("key", "value", "written by", "when", "offset"):
            table.add_column(col, overflow="fold", style="bold" if col == "key" else None)
        for key in sorted(state.config):
            msg = config_msgs[key]
            table.add_row(key, state.config[key], f"{msg.source}@{msg.host}" if msg.host else msg.source,
                          _when(msg.timestamp), str(msg.offset))
        console.print(table)
        tasks = sorted(set(state.changelog) | set(state.task_containers))
        table = Table(title="Tasks: changelog partition and container", title_justify="left")
        for col in ("task", "changelog partition", "container"):
            table.add_column(col, overflow="fold")
        for task in tasks:
            cl = state.changelog.get(task)
            table.add_row(task, "-" if cl is None else str(cl), state.task_containers.get(task, "-"))
        console.print(table)
        table = Table(title="Locality", title_justify="left")
        for col in ("container", "host", "recorded"):
            table.add_column(col)
        for cid, loc in sorted(state.locality.items()):
            table.add_row(cid, loc.host, _when(loc.written_ms))
        console.print(table)
        console.print(f"{name}: {store.messages_read:,} messages read, next offset "
                      f"{store.next_offset:,}; {len(state.config)} config keys, {len(tasks)} "
                      f"tasks, {len(state.locality)} container localities")
    return 0
