"""``weir log tail``: print a stream's records from a start offset (``oldest``, ``newest``,
``upcoming`` or a number), what exists now or, with ``--follow``, as they come; the file log's
transaction markers, and with ``--read-uncommitted`` the records of transactions that did not
commit."""

from __future__ import annotations

import argparse
import sys
import time

from weir.engine.errors import EngineError
from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import OffsetType
from weir.engine.cli.log.stream_info import partition_details
from weir.engine.cli.log.target import existing_stream
from weir.engine.cli.log.text import format_record, is_marker

__all__ = ["tail_stream"]

_FOLLOW_POLL_S = 0.5
_READ_POLL_S = 0.2


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


def tail_stream(args: argparse.Namespace) -> int:
    """``weir log tail STREAM``: records on standard output, a summary on standard error."""
    reg, ss, admin, count = existing_stream(args)
    system = ss.system
    partitions = [args.partition] if args.partition is not None else list(range(count))
    ssps = [SystemStreamPartition(system, args.stream, p) for p in partitions]
    metadata = admin.metadata(ssps)
    details = partition_details(admin, args.stream)
    ended = {ssp for ssp in ssps
             if ssp.partition in details and details[ssp.partition].ended is True}
    serdes = reg.serdes_for(ss)
    consumer = reg.consumer(system)
    from weir.engine.systems.filelog.consumer import FileLogConsumer
    if isinstance(consumer, FileLogConsumer):  # the file log's transaction markers
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
