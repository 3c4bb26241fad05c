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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from weir.stores.config import Config
from weir.stores.errors import WeirError

from weir.engine.errors import EngineError, StreamNotFoundError
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition, partition_for
from weir.engine.systems.api import CleanupPolicy, OffsetType, StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.engine.cli.log_text import (
    InputFormat,
    InputLineError,
    encode_key,
    encode_message,
    format_record,
    format_timestamp,
    is_marker,
    parse_line,
)

__all__ = ["register"]

DEFAULT_SYSTEM = "filelog"
_SOURCE = "weir-log"
_FLUSH_EVERY = 50_000
_FOLLOW_POLL_S = 0.5
_READ_POLL_S = 0.2


# -- wiring ---------------------------------------------------------------------------------

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
    p.set_defaults(func=_create)

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
                        "partition; stdin is not read when it is a terminal")
    p.set_defaults(func=_produce)

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
    p.set_defaults(func=_tail)

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
    p.set_defaults(func=_transactions)

    p = actions.add_parser("describe", parents=[target], help="show partitions and offsets")
    p.add_argument("stream")
    p.set_defaults(func=_describe)

    p = actions.add_parser("list", parents=[target],
                           help="list the streams: partitions, records, size, policy, ended")
    p.add_argument("--json", action="store_true", help="one JSON object per stream, for scripts")
    p.set_defaults(func=_list)

    p = actions.add_parser("delete", parents=[target],
                           help="delete a stream and its files (needs --yes)",
                           description="Delete a stream and every record in it. Refused without "
                                       "--yes, and while any process writes to the stream.")
    p.add_argument("stream")
    p.add_argument("--yes", action="store_true", help="really delete (it cannot be undone)")
    p.set_defaults(func=_delete)


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


def _target(args: argparse.Namespace) -> tuple[SystemRegistry, str]:
    """The registry and system name the arguments point at."""
    system = args.system or DEFAULT_SYSTEM
    if args.config:
        from weir.engine.config.job import load_config
        config = load_config(args.config, args.set)
    else:
        config = Config().merged(_parse_sets(args.set), origin="--set")
    if args.root:
        config = config.merged({f"systems.{system}.root": args.root}, origin="--root")
    return SystemRegistry(config), system


def _parse_sets(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise EngineError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def _root(reg: SystemRegistry, system: str) -> str | None:
    """The directory the system keeps its streams in (the file log's root), if it has one."""
    root = getattr(reg.admin(system), "root", None)
    return root if isinstance(root, str) else None


def _where(reg: SystemRegistry, system: str) -> str:
    root = _root(reg, system)
    return f" (root {root})" if root else ""


def _existing_stream(args: argparse.Namespace) -> tuple[SystemRegistry, SystemStream, Any, int]:
    """The registry, stream, admin and partition count of ``args.stream``, which must exist
    (and have ``args.partition``, when given)."""
    reg, system = _target(args)
    ss = SystemStream(system, args.stream)
    admin = reg.admin(system)
    if not admin.stream_exists(args.stream):
        root = _root(reg, system)
        raise reg.stream_not_found(system, args.stream, f"create it with `weir log create "
                                   f"{args.stream}{' --root ' + root if root else ''}`, or "
                                   f"point --root/--config/--system at where it is")
    count = admin.partition_count(args.stream)
    partition = getattr(args, "partition", None)
    if partition is not None and partition >= count:
        raise EngineError(f"--partition {partition}: stream '{ss}' has partitions "
                          f"0..{count - 1}")
    return reg, ss, admin, count


def _end_stream(producer: Any, admin: Any, ss: SystemStream) -> None:
    for target in (producer, admin):
        for name in ("end_stream", "close_stream"):
            end = getattr(target, name, None)
            if callable(end):
                end(ss.stream)
                return
    raise EngineError(f"system '{ss.system}' cannot end streams (no end_stream on its producer "
                      f"or admin); only bounded streams of filelog and memory can be ended")


# -- create ---------------------------------------------------------------------------------

def _create(args: argparse.Namespace) -> int:
    reg, system = _target(args)
    policy = CleanupPolicy.COMPACT if args.compact else CleanupPolicy.DELETE
    spec = StreamSpec(args.stream, args.partitions, policy, bounded=args.bounded)
    created = reg.admin(system).create_stream(spec)
    traits = ", ".join([policy.value] + (["bounded"] if args.bounded else []))
    verb = "created" if created else "already exists:"
    print(f"{verb} {system}.{args.stream} with {args.partitions} partition(s), {traits}"
          f"{_where(reg, system)}")
    return 0


# -- produce --------------------------------------------------------------------------------

def _produce(args: argparse.Namespace) -> int:
    fmt = InputFormat(args.format)
    if args.key_field and fmt is not InputFormat.JSON:
        raise EngineError("--key-field needs --format json (kv lines carry their key)")
    reg, ss, admin, count = _existing_stream(args)
    system = ss.system
    serdes = reg.serdes_for(ss)
    producer = reg.producer(system)
    producer.register(_SOURCE)
    producer.start()
    per_partition: Counter[int] = Counter()
    skipped = produced = 0
    next_partition = 0
    source = args.file or "stdin"
    started = time.perf_counter()
    stream_in = open(args.file, encoding="utf-8") if args.file else sys.stdin
    if args.seal and not args.file and sys.stdin.isatty():
        stream_in = iter(())  # `weir log produce model --seal`: only the marker
    try:
        for lineno, line in enumerate(stream_in, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                skipped += 1
                continue
            try:
                key_obj, msg_obj, is_text = parse_line(line, fmt, args.key_field)
                key = encode_key(serdes, key_obj, is_text)
                message = encode_message(serdes, msg_obj, line, is_text)
            except (ValueError, WeirError) as exc:  # bad text, or the serde refused it
                producer.flush(_SOURCE)
                raise InputLineError(source, lineno, str(exc), produced) from exc
            if args.partition is not None:
                partition = args.partition
            elif key is not None:
                partition = partition_for(key, count)
            else:
                partition, next_partition = next_partition % count, next_partition + 1
            producer.send(_SOURCE, OutgoingMessageEnvelope(ss, message, key=key, partition=partition))
            per_partition[partition] += 1
            produced += 1
            if produced % _FLUSH_EVERY == 0:
                producer.flush(_SOURCE)
        producer.flush(_SOURCE)
        sealed = {}
        if args.seal:
            from weir.engine.adjunct.seal import seal_dataset
            sealed = seal_dataset(reg, system, ss.stream,
                                  None if args.partition is None else [args.partition])
        if args.end:
            _end_stream(producer, admin, ss)
    finally:
        if args.file:
            stream_in.close()
        producer.stop()
    seconds = time.perf_counter() - started
    spread = ", ".join(f"p{p}={n}" for p, n in sorted(per_partition.items()))
    print(f"produced {produced} record(s) to {ss} in {seconds:.2f} s"
          f"{f' ({produced / seconds:,.0f} records/s)' if produced and seconds > 0 else ''}"
          f"{f'; {spread}' if spread else ''}{f'; {skipped} blank line(s) skipped' if skipped else ''}"
          f"{'; sealed ' + ', '.join(f'p{p}@{o}' for p, o in sorted(sealed.items())) if sealed else ''}"
          f"{'; stream ended' if args.end else ''}")
    return 0


# -- tail -----------------------------------------------------------------------------------

def _start_offset(text: str, md) -> int:
    try:
        kind = OffsetType(text.lower())
    except ValueError:
        try:
            offset = int(text)
        except ValueError:
            raise EngineError(f"--from {text!r}: expected oldest, newest, upcoming or an offset") from None
        if offset < 0:
            raise EngineError(f"--from {text}: offsets are >= 0")
        return max(offset, md.oldest)
    if kind is OffsetType.NEWEST and md.is_empty:
        return md.upcoming
    return md.offset_of(kind)


def _tail(args: argparse.Namespace) -> int:
    reg, ss, admin, count = _existing_stream(args)
    system = ss.system
    partitions = [args.partition] if args.partition is not None else list(range(count))
    ssps = [SystemStreamPartition(system, args.stream, p) for p in partitions]
    metadata = admin.metadata(ssps)
    details = _partition_details(admin, args.stream, count)
    ended = {ssp for ssp in ssps if getattr(details.get(ssp.partition), "ended", None) is True}
    serdes = reg.serdes_for(ss)
    consumer = reg.consumer(system)
    if callable(getattr(consumer, "annotate_transactions", None)):  # the file log
        consumer.set_isolation_level("read_uncommitted" if args.read_uncommitted
                                     else "read_committed")
        consumer.annotate_transactions()
    # Without --follow, read what exists now: up to each partition's upcoming offset, and the
    # end-of-stream marker of a partition that has ended.
    stop_at: dict[SystemStreamPartition, int] = {}
    active = []
    for ssp in ssps:
        start = _start_offset(args.start, metadata[ssp])
        consumer.register(ssp, start)
        stop_at[ssp] = metadata[ssp].upcoming
        if args.follow or ssp in ended or start < stop_at[ssp]:
            active.append(ssp)
    consumer.start()
    tail = _TailPrinter(args.max, args.follow, stop_at, serdes, ended)
    started = time.perf_counter()
    try:
        while active and not tail.done:
            got = consumer.poll(active, _FOLLOW_POLL_S if args.follow else _READ_POLL_S)
            if not args.follow and not any(got.values()):
                break  # nothing more to read now (a compacted tail leaves a gap)
            for ssp, envs in got.items():
                if tail.show(ssp, envs):
                    active.remove(ssp)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.stop()
    seconds = time.perf_counter() - started
    ends = f", {tail.ends} ended" if tail.ends else ""
    markers = f", {tail.markers} transaction marker(s)" if tail.markers else ""
    print(f"read {tail.shown} record(s) from {ss} ({len(ssps)} partition(s){ends}{markers}) "
          f"in {seconds:.2f} s", file=sys.stderr)
    return 0


class _TailPrinter:
    """Prints envelopes, and the end-of-stream marker of a partition that ended; knows when a
    partition is finished and when --max is reached. Without --follow a partition is finished
    at the upcoming offset it had when the tail started, or, if it had ended then, at its
    end-of-stream marker."""

    def __init__(self, limit: int | None, follow: bool, stop_at: dict, serdes,
                 ended: set) -> None:
        self.limit, self.follow, self.stop_at, self.serdes = limit, follow, stop_at, serdes
        self.ended = ended
        self.shown = 0
        self.ends = 0
        self.markers = 0

    @property
    def done(self) -> bool:
        return self.limit is not None and self.shown >= self.limit

    def show(self, ssp: SystemStreamPartition, envs) -> bool:
        """Print ``envs`` of ``ssp``; True when ``ssp`` needs no more polling."""
        bounded = not self.follow
        for env in envs:
            if self.done:
                return False
            if env.is_end_of_stream:
                print(format_record(env, self.serdes), flush=self.follow)
                self.ends += 1
                return True
            if bounded and env.offset >= self.stop_at[ssp]:
                return True
            print(format_record(env, self.serdes), flush=self.follow)
            if is_marker(env):
                self.markers += 1
            else:
                self.shown += 1
            if bounded and ssp not in self.ended and env.offset + 1 >= self.stop_at[ssp]:
                return True
        return False


# -- describe -------------------------------------------------------------------------------

def _describe(args: argparse.Namespace) -> int:
    reg, ss, admin, count = _existing_stream(args)
    system = ss.system
    ssps = [SystemStreamPartition(system, args.stream, p) for p in range(count)]
    metadata = admin.metadata(ssps)
    details = _partition_details(admin, args.stream, count)
    title = f"{system}.{args.stream}: {count} partition(s)" + _traits(admin, args.stream)
    table = Table(title=title + _where(reg, system))
    stable = _stable_offsets(admin, args.stream)
    columns = ["partition", "oldest", "newest", "upcoming"]
    columns += ["stable"] if stable else []
    for column in columns + ["segments", "bytes", "ended"]:
        table.add_column(column, justify="left" if column == "ended" else "right")
    total = 0
    for ssp in ssps:
        md, info = metadata[ssp], details.get(ssp.partition)
        total += md.upcoming - md.oldest
        row = [str(ssp.partition), str(md.oldest), str(md.newest), str(md.upcoming)]
        if stable:
            lso, open_txns = stable[ssp.partition]
            row.append(f"{lso} ({len(open_txns)} open)" if open_txns else str(lso))
        table.add_row(*row, _attr(info, "segments"), _attr(info, "bytes", "{:,}"),
                      {True: "yes", False: "no"}.get(getattr(info, "ended", None), "-"))
    console = _console()
    console.print(table)
    console.print(f"{total:,} offset(s) across {count} partition(s)"
                  + ("; 'stable': the last stable offset, where read_committed readers stop "
                     "while a transaction is open" if stable else ""))
    return 0


def _stable_offsets(admin: Any, stream: str) -> dict[int, Any]:
    """The file log's last stable offsets, for a stream that has held transactions."""
    meta = getattr(admin, "stream_meta", None)
    if not callable(meta) or getattr(meta(stream), "format", 1) < 2:
        return {}
    return admin.open_transactions(stream)


# -- transactions ---------------------------------------------------------------------------

def _transactions(args: argparse.Namespace) -> int:
    reg, ss, admin, count = _existing_stream(args)
    if not callable(getattr(admin, "open_transactions", None)):
        raise EngineError(f"system '{ss.system}' has no transactions (only the file log has)")
    from weir.engine.systems.filelog.transactions import (complete_abandoned, producer_states)
    states = {s.producer_id: s for s in producer_states(admin.root)}
    console = _console()
    table = Table(title=f"{ss}: open transactions" + _where(reg, ss.system))
    for column in ("partition", "stable", "producer", "transactional id", "epoch",
                   "transaction", "first offset", "open since"):
        table.add_column(column, justify="left" if column == "transactional id" else "right")
    found = admin.open_transactions(args.stream)
    open_count = 0
    done = []
    for partition, (lso, open_txns) in sorted(found.items()):
        for txn in open_txns:
            open_count += 1
            state = states.get(txn.producer_id)
            table.add_row(str(partition), str(lso), str(txn.producer_id),
                          state.transactional_id if state else "?", str(txn.epoch),
                          str(txn.sequence), str(txn.first_offset),
                          format_timestamp(txn.since_ms))
            if args.resolve:
                done.append(f"partition {partition}: " + complete_abandoned(
                    admin.settings, args.stream, partition, txn.producer_id, txn.epoch,
                    txn.sequence))
    console.print(table)
    console.print(f"{open_count} open transaction(s) in {count} partition(s) of {ss}")
    for line in done:
        console.print(line, highlight=False, soft_wrap=True)
    return 0


def _console() -> Console:
    """Standard output; as wide as the terminal, or wide enough not to wrap table rows when
    the output goes to a file or a pipe (scripts grep it)."""
    interactive = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if interactive else 200, highlight=False)


def _traits(admin: Any, stream: str) -> str:
    """``", compact, bounded"`` where the admin tells."""
    policy, bounded = _policy(admin, stream)
    if policy is None:
        return ""
    return f", {policy.value}" + (", bounded" if bounded else "")


def _policy(admin: Any, stream: str) -> tuple[CleanupPolicy | None, bool | None]:
    """The stream's cleanup policy and whether it is bounded, where the admin tells (file
    log: ``stream_meta``; memory: ``stream_spec``; else ``cleanup_policy`` alone)."""
    for name in ("stream_meta", "stream_spec"):
        describe = getattr(admin, name, None)
        if callable(describe):
            m = describe(stream)
            return m.cleanup_policy, m.bounded
    policy = getattr(admin, "cleanup_policy", None)
    return (policy(stream), None) if callable(policy) else (None, None)


@dataclass(frozen=True, slots=True)
class _PartitionFiles:
    partition: int
    segments: int
    bytes: int
    ended: bool


def _partition_details(admin: Any, stream: str, count: int) -> dict[int, Any]:
    """Segments, bytes and ended flag per partition, where the system can tell: an admin's
    ``describe(stream)`` (memory), or the file log's partition directories."""
    describe = getattr(admin, "describe", None)
    if callable(describe):
        return {info.partition: info for info in describe(stream)}
    stream_path = getattr(admin, "stream_path", None)
    if not callable(stream_path):
        return {}
    from weir.engine.systems.filelog.segment import list_segments
    from weir.engine.systems.filelog.stream import read_end_marker
    out = {}
    for p in range(count):
        directory = os.path.join(stream_path(stream), str(p))
        try:
            segments = list_segments(directory)
        except FileNotFoundError:
            segments = []
        size = sum(os.path.getsize(seg.path) for seg in segments if os.path.exists(seg.path))
        ended = os.path.isdir(directory) and read_end_marker(directory) is not None
        out[p] = _PartitionFiles(p, len(segments), size, ended)
    return out


def _attr(info: Any, name: str, fmt: str = "{}") -> str:
    value = getattr(info, name, None)
    return "-" if value is None else fmt.format(value)


# -- list -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _StreamSummary:
    """One row of ``weir log list``; ``None`` where the system cannot tell."""

    stream: str
    partitions: int
    records: int
    bytes: int | None
    cleanup_policy: CleanupPolicy | None
    bounded: bool | None
    ended_partitions: int | None

    @property
    def records_exact(self) -> bool:
        """Offsets retained = records, except in a compacted stream (compaction leaves gaps)."""
        return self.cleanup_policy is not CleanupPolicy.COMPACT

    def as_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "partitions": self.partitions, "records": self.records,
                "records_exact": self.records_exact, "bytes": self.bytes,
                "cleanup_policy": self.cleanup_policy.value if self.cleanup_policy else None,
                "bounded": self.bounded, "ended_partitions": self.ended_partitions}

    @property
    def ended_text(self) -> str:
        if self.ended_partitions is None:
            return "-"
        if self.ended_partitions == 0:
            return "no" if self.bounded is not False else "-"
        if self.ended_partitions == self.partitions:
            return "yes"
        return f"{self.ended_partitions}/{self.partitions}"


def _summary(admin: Any, system: str, stream: str) -> _StreamSummary:
    count = admin.partition_count(stream)
    metadata = admin.metadata([SystemStreamPartition(system, stream, p) for p in range(count)])
    records = sum(md.upcoming - md.oldest for md in metadata.values())
    details = _partition_details(admin, stream, count)
    sizes = [getattr(details.get(p), "bytes", None) for p in range(count)]
    ended = [getattr(details.get(p), "ended", None) for p in range(count)]
    policy, bounded = _policy(admin, stream)
    return _StreamSummary(
        stream, count, records, None if None in sizes else sum(sizes), policy, bounded,
        None if None in ended else sum(1 for e in ended if e))


def _list(args: argparse.Namespace) -> int:
    reg, system = _target(args)
    admin = reg.admin(system)
    list_streams = getattr(admin, "list_streams", None)
    if not callable(list_streams):
        raise EngineError(f"system '{system}' cannot list its streams (its admin has no "
                          f"list_streams); name a stream: `weir log describe STREAM`")
    rows = [_summary(admin, system, stream) for stream in list_streams()]
    if args.json:
        for row in rows:
            print(json.dumps(row.as_json()))
        return 0
    where = _where(reg, system)
    if not rows:
        print(f"no streams in {system}{where}; create one with `weir log create STREAM`")
        return 0
    console = _console()
    console.print(f"{system}: {len(rows)} stream(s){where}", soft_wrap=True)
    table = Table()
    for column, justify in (("stream", "left"), ("partitions", "right"), ("records", "right"),
                            ("size", "right"), ("policy", "left"), ("bounded", "left"),
                            ("ended", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for row in rows:
        table.add_row(row.stream, str(row.partitions),
                      f"{'' if row.records_exact else '<= '}{row.records:,}",
                      "-" if row.bytes is None else _human_bytes(row.bytes),
                      row.cleanup_policy.value if row.cleanup_policy else "-",
                      {True: "yes", False: "no"}.get(row.bounded, "-"), row.ended_text)
    console.print(table)
    sizes = [row.bytes for row in rows if row.bytes is not None]
    total = f"{sum(row.records for row in rows):,} record(s)"
    if sizes:
        total += f", {_human_bytes(sum(sizes))}"
    console.print(f"{total} in {len(rows)} stream(s)"
                  + ("; '<=' marks compacted streams, where compaction leaves gaps in the "
                     "offsets" if any(not row.records_exact for row in rows) else ""),
                  soft_wrap=True)
    return 0


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n:,} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


# -- delete ---------------------------------------------------------------------------------

def _delete(args: argparse.Namespace) -> int:
    reg, ss, admin, _ = _existing_stream(args)
    delete = getattr(admin, "delete_stream", None)
    if not callable(delete):
        raise EngineError(f"system '{ss.system}' cannot delete streams (its admin has no "
                          f"delete_stream); only the file log can")
    row = _summary(admin, ss.system, args.stream)
    size = "" if row.bytes is None else f", {_human_bytes(row.bytes)}"
    root = _root(reg, ss.system)
    what = (f"{ss}{f' in {root}' if root else ''}: {row.partitions} partition(s), "
            f"{row.records:,} record(s){size}")
    if not args.yes:
        raise EngineError(f"not deleting {what}; deleting a stream removes every record in "
                          f"it and cannot be undone: run again with --yes")
    delete(args.stream)
    print(f"deleted {what}")
    return 0
