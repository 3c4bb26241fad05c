"""``weir log``: create, fill, read, list, describe and delete streams of any configured system.

The file log is the default: ``--root DIR`` points at its directory (else
``systems.filelog.root`` from ``--config``, else the file log's default root,
``./weir-data/log``). With ``--config job.properties --system NAME`` the commands work on any
system of a job config, through the same :class:`~weir.engine.systems.registry.SystemRegistry`
and per-stream serdes the job uses.

Examples::

    weir log create orders --partitions 3 --root ./data/log
    printf '{"user": "ann", "amount": 3}\\n' | weir log produce orders --format json --key-field user --root ./data/log
    weir log tail orders --from oldest --max 10 --root ./data/log
    weir log list --root ./data/log
    weir log describe orders --root ./data/log
    weir log delete orders --yes --root ./data/log

One module per job: :mod:`~weir.engine.cli.log.lifecycle` (create, delete),
:mod:`~weir.engine.cli.log.produce`, :mod:`~weir.engine.cli.log.tail`,
:mod:`~weir.engine.cli.log.inspection` (describe, list),
:mod:`~weir.engine.cli.log.transactions`; what they share:
:mod:`~weir.engine.cli.log.target` (where the stream lives),
:mod:`~weir.engine.cli.log.stream_info` (what a system tells about a stream) and
:mod:`~weir.engine.cli.log.text` (text in and out).
"""

from __future__ import annotations

import argparse
from typing import Any

from weir.engine.cli.log.inspection import describe_stream, list_streams
from weir.engine.cli.log.lifecycle import create_stream, delete_stream
from weir.engine.cli.log.produce import produce_records
from weir.engine.cli.log.tail import tail_stream
from weir.engine.cli.log.target import DEFAULT_SYSTEM
from weir.engine.cli.log.text import InputFormat
from weir.engine.cli.log.transactions import show_transactions

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "log", help="create, produce to, tail, list, describe and delete streams",
        description="Create, produce to, tail, list, describe and delete streams (file log by "
                    "default).")
    actions = parser.add_subparsers(dest="log_command", metavar="ACTION", required=True)

    target = argparse.ArgumentParser(add_help=False)
    group = target.add_argument_group("where the stream lives")
    group.add_argument("--root", metavar="DIR",
                       help="file log directory (sets systems.<system>.root; default: the "
                            "value in --config, else ./weir-data/log)")
    group.add_argument("--config", metavar="FILE", help="job config (.properties or .yaml)")
    group.add_argument("--system", help=f"system name in the config (default {DEFAULT_SYSTEM})")
    group.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key (repeatable)")

    p = actions.add_parser("create", parents=[target], help="create a stream")
    p.add_argument("stream")
    p.add_argument("--partitions", type=_positive_int, default=1, metavar="N",
                   help="number of partitions, fixed for the stream's life (default: %(default)s)")
    p.add_argument("--compact", action="store_true", help="keep the latest value per key")
    p.add_argument("--bounded", action="store_true", help="the stream ends (see produce --end)")
    p.set_defaults(func=create_stream)

    p = actions.add_parser("produce", parents=[target],
                           help="append records read from stdin or a file")
    p.add_argument("stream")
    p.add_argument("--file", metavar="F", help="read this file instead of stdin")
    p.add_argument("--format", choices=[f.value for f in InputFormat], default="lines",
                   help="lines: one message per line; kv: key=value; json: one JSON value per line")
    p.add_argument("--key-field", metavar="K", help="with --format json: the key is this field")
    p.add_argument("--partition", type=_non_negative_int, metavar="N",
                   help="send every record to partition N (default: by key, keyless round-robin)")
    p.add_argument("--end", action="store_true", help="end the (bounded) stream afterwards")
    p.add_argument("--seal", action="store_true",
                   help="afterwards, write a seal marker (the end of one version of a bounded "
                        "dataset, for versioned adjunct stores) to --partition or every "
                        "partition; stdin is not read when it is a terminal. A seal of a version "
                        "without records repeats the previous one and switches nothing")
    p.add_argument("--seal-empty", action="store_true",
                   help="like --seal, for a version that is empty on purpose: versioned "
                        "adjunct stores switch to it although it holds no record")
    p.add_argument("--force", action="store_true",
                   help="write to one of a job's own streams (__samza_*: its coordinator or "
                        "checkpoint stream), whose records change what the job believes about "
                        "its config, changelog partitions or checkpoints; stop the job first")
    p.set_defaults(func=produce_records)

    p = actions.add_parser("tail", parents=[target], help="print records")
    p.add_argument("stream")
    p.add_argument("--partition", type=_non_negative_int, metavar="N", help="only partition N")
    p.add_argument("--from", dest="start", default="oldest", metavar="oldest|newest|upcoming|OFFSET",
                   help="where to start in each partition (default oldest)")
    p.add_argument("--follow", action="store_true", help="keep waiting for new records")
    p.add_argument("--max", type=_positive_int, metavar="N", help="stop after N records")
    p.add_argument("--read-uncommitted", action="store_true",
                   help="also show records of transactions that did not commit (flagged "
                        "aborted, fenced or open); by default only committed and plain "
                        "records, and transaction markers")
    p.set_defaults(func=tail_stream)

    p = actions.add_parser("transactions", parents=[target],
                           help="show producers and the transactions open in a stream",
                           description="Show the transactional producers of the file log and "
                                       "the transactions open in each partition of STREAM "
                                       "(what holds read_committed readers back). With "
                                       "--resolve, complete the ones whose producer is gone: "
                                       "roll forward those its checkpoint committed, abort "
                                       "the rest.")
    p.add_argument("stream")
    p.add_argument("--resolve", action="store_true",
                   help="complete transactions whose producer process is gone")
    p.set_defaults(func=show_transactions)

    p = actions.add_parser("describe", parents=[target], help="show partitions and offsets")
    p.add_argument("stream")
    p.set_defaults(func=describe_stream)

    p = actions.add_parser("list", parents=[target],
                           help="list the streams: partitions, records, size, policy, ended")
    p.add_argument("--json", action="store_true", help="one JSON object per stream, for scripts")
    p.set_defaults(func=list_streams)

    p = actions.add_parser("delete", parents=[target],
                           help="delete a stream and its files (needs --yes)",
                           description="Delete a stream and every record in it. Refused without "
                                       "--yes, and while any process writes to the stream.")
    p.add_argument("stream")
    p.add_argument("--yes", action="store_true", help="really delete (it cannot be undone)")
    p.set_defaults(func=delete_stream)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value
