"""``weir log produce``: append records read from standard input or a file to a stream (keyed
records by key, keyless ones round-robin, or all to ``--partition``), then optionally seal the
dataset and end the stream."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any

from weir.stores.errors import WeirError

from weir.engine.errors import EngineError
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, partition_for
from weir.engine.cli.log.target import existing_stream
from weir.engine.cli.log.text import (InputFormat, InputLineError, encode_key, encode_message,
                                      parse_line)

__all__ = ["produce_records"]

_SOURCE = "weir-log"
_FLUSH_EVERY = 50_000


def produce_records(args: argparse.Namespace) -> int:
    """``weir log produce STREAM``; prints one summary line."""
    fmt = InputFormat(args.format)
    if args.key_field and fmt is not InputFormat.JSON:
        raise EngineError("--key-field needs --format json (kv lines carry their key)")
    reg, ss, admin, count = existing_stream(args)
    _check_own_stream(ss, args.force)
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
    from weir.stores.adjunct import SealKind
    seal = SealKind.EMPTY if args.seal_empty else SealKind.DATASET if args.seal else None
    if seal is not None and not args.file and sys.stdin.isatty():
        stream_in = iter(())  # `weir log produce model --seal`: only the marker
    interrupted = False
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
        if seal is not None:
            from weir.engine.adjunct.seal import seal_dataset
            sealed = seal_dataset(reg, system, ss.stream,
                                  None if args.partition is None else [args.partition],
                                  kind=seal)
        if args.end:
            _end_stream(producer, admin, ss)
    except KeyboardInterrupt:
        # Ctrl-C: what was read so far is written (the producer flushes as it stops); say how
        # much, and that the stream was neither sealed nor ended.
        interrupted = True
    finally:
        if args.file:
            stream_in.close()
        producer.stop()
    seconds = time.perf_counter() - started
    spread = ", ".join(f"p{p}={n:,}" for p, n in sorted(per_partition.items()))
    if interrupted:
        print(f"interrupted: produced {produced:,} record(s) to {ss} in {seconds:.2f} s"
              f"{f'; {spread}' if spread else ''}; the stream was not "
              f"{'sealed or ' if seal is not None else ''}ended", file=sys.stderr)
        return 130
    print(f"produced {produced:,} record(s) to {ss} in {seconds:.2f} s"
          f"{f' ({produced / seconds:,.0f} records/s)' if produced and seconds > 0 else ''}"
          f"{f'; {spread}' if spread else ''}{f'; {skipped:,} blank line(s) skipped' if skipped else ''}"
          f"{_sealed_text(sealed, seal is SealKind.EMPTY)}"
          f"{'; stream ended' if args.end else ''}")
    return 0


def _sealed_text(sealed: dict[int, int], empty: bool) -> str:
    if not sealed:
        return ""
    where = ", ".join(f"p{p}@{o}" for p, o in sorted(sealed.items()))
    return f"; sealed{' (empty on purpose)' if empty else ''} {where}"


INTERNAL_PREFIX = "__samza_"
"""The names of the streams a job keeps for itself (Samza's): its coordinator stream
(``__samza_coordinator_<job>_<id>``) and its checkpoint stream
(``__samza_checkpoint_ver_1_for_<job>_<id>``)."""


def _check_own_stream(ss: SystemStream, force: bool) -> None:
    """A job's own streams take records only with ``--force``: a record there is read as
    the job's config, changelog assignment or checkpoint (issue 23, point 2: a hand-written
    ``set-changelog`` record pointed a task at another task's changelog partition)."""
    if ss.stream.startswith(INTERNAL_PREFIX) and not force:
        raise EngineError(
            f"{ss} is one of a job's own streams (its coordinator or checkpoint stream): what "
            f"is written there is taken as the job's config, its tasks' changelog partitions "
            f"or their checkpoints at its next start, so a wrong record runs it on the wrong "
            f"state. Nothing was written. Change a job's config with `weir coordinator "
            f"set-config` and its checkpoints with `weir checkpoint`; to write here anyway "
            f"(the job stopped, a backup of the stream kept), add --force")


def _end_stream(producer: Any, admin: Any, ss: SystemStream) -> None:
    for target in (producer, admin):
        for name in ("end_stream", "close_stream"):
            end = getattr(target, name, None)
            if callable(end):
                end(ss.stream)
                return
    raise EngineError(f"system '{ss.system}' cannot end streams (no end_stream on its producer "
                      f"or admin); only bounded streams of filelog and memory can be ended")
