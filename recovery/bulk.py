"""Fast changelog replay: large de-duplicated, sorted runs bulk-loaded below serdes and cache.

Restore does not put records into a store one by one. It reads the changelog in large batches
(``read_batches`` of the source: for the file log, the segment files directly, parsed straight
into one dict), keeps the last value of each key (a key written many times is written once),
and when about
``budget_bytes`` of records are collected -- or the range ends -- writes them as one *run*:
keys sorted, values in the same order (``None``: a tombstone), through the engine's bulk load:

===========  =========================================================================
engine       bulk load of a run (``load_sorted``), measured in bench/RESULTS.md
===========  =========================================================================
RocksDB      one SST file (``SstFileWriter``) and ``ingest_external_file``; 1.4-1.5x sorted
             write batches (which it replaced), into an empty and into a filled store
LMDB         one write transaction of ``putmulti``; append mode into an empty store
memory       a sorted write batch
===========  =========================================================================

The first run into an empty store leaves tombstones out (there is nothing to delete); every
later run carries them as deletes. A run is one engine transaction (an SST ingest, an LMDB
commit), so ``budget_bytes`` bounds both memory and transaction size.

:func:`replay_runs` does all of it in the calling thread; the restore worker processes
(:mod:`weir.recovery._workers`) run the same :class:`RunBuilder` where the changelog's files can
be read from another process, and hand their runs over as files: the engine's own (RocksDB's
SST files) or, for an engine without, *run files* (:func:`write_run_file`: the sorted keys
and values with :mod:`marshal`), which the restore thread loads with :func:`load_run_files`.

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> class Batch:
    ...     def __init__(self, pairs, last):
    ...         self.pairs, self.last, self.records, self.nbytes = pairs, last, len(pairs), 4
    >>> engine = MemoryEngine("s")
    >>> replay_runs(engine, [Batch([(b"b", b"1"), (b"a", b"2")], 1), Batch([(b"b", None)], 2)],
    ...             empty=True, budget_bytes=1 << 20)
    (3, 8)
    >>> list(engine.all())
    [(b'a', b'2')]
"""

from __future__ import annotations

import functools
import marshal
import operator
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


__all__ = ["DEFAULT_BUDGET_BYTES", "RUN_FILE_MAGIC", "RunBuilder", "RunFileError", "load_run",
           "load_run_files", "read_run_file", "replay_runs", "write_run_file"]

RUN_FILE_MAGIC = b"WEIR-RUN-1\n"
"""First bytes of a run file (:func:`write_run_file`)."""

DEFAULT_BUDGET_BYTES = 128 << 20
"""Record bytes collected before a run is written (``job.container.restore.batch.bytes``)."""

_IS_NONE = functools.partial(operator.is_, None)

Progress = Callable[[int, int, int], None]
"""``progress(last_offset, records, nbytes)``: a batch of ``records`` (``nbytes`` key and value
bytes) up to ``last_offset`` was read."""


class RunBuilder:
    """Collects changelog batches into one de-duplicated run (the last value of each key).

    A reader may store its records straight into :attr:`pairs` (the file log's
    ``read_changelog(..., into=builder.pairs)``); other batches are merged into it."""

    __slots__ = ("pairs", "pending_bytes")

    def __init__(self) -> None:
        self.pairs: dict[bytes, bytes | None] = {}
        self.pending_bytes = 0

    def add(self, batch: Any) -> None:
        """Take a batch (``.pairs``: a dict or ``(key, value)`` list, ``.nbytes``)."""
        if batch.pairs is not self.pairs:
            self.pairs.update(batch.pairs)
        self.pending_bytes += batch.nbytes

    def __len__(self) -> int:
        return len(self.pairs)

    def take(self, *, drop_tombstones: bool) -> tuple[list[bytes], list[bytes | None], bool]:
        """The run as ``(sorted keys, values, has_deletes)``; the builder is empty after (the
        same dict, cleared). ``drop_tombstones`` leaves deleted keys out (a run into an empty
        store)."""
        pairs = self.pairs
        self.pending_bytes = 0
        has_deletes = any(map(_IS_NONE, pairs.values()))
        if has_deletes and drop_tombstones:
            for key in [k for k, v in pairs.items() if v is None]:
                del pairs[key]
            has_deletes = False
        keys = sorted(pairs)
        values = list(map(pairs.__getitem__, keys))
        pairs.clear()
        return keys, values, has_deletes


def load_run(engine: Any, keys: list[bytes], values: list[bytes | None], *,
             deletes: bool) -> None:
    """Write one sorted run into ``engine`` with its bulk load (``load_sorted``: one write
    batch for engines without a faster one)."""
    if not keys:
        return
    engine.load_sorted(keys, values, deletes=deletes)


class RunFileError(Exception):
    """A staging run file that cannot be read back (cut short, or not a run file)."""


def write_run_file(path: str | Path, keys: list[bytes], values: list[bytes | None], *,
                   deletes: bool) -> None:
    """Write one sorted run to ``path``: :data:`RUN_FILE_MAGIC`, then ``(keys, values,
    deletes)`` with :mod:`marshal` (lists of bytes in C, ~1 GB/s). A restore worker's staging
    file for an engine that takes no files of its own (``WorkerRestore.SORTED_RUNS``); it
    lives only until the restore thread has loaded it (a killed restore's staging directory
    is removed at the next start), so it needs no format stability across versions."""
    with open(path, "wb") as out:
        out.write(RUN_FILE_MAGIC)
        marshal.dump((keys, values, bool(deletes)), out)


def read_run_file(path: str | Path) -> tuple[list[bytes], list[bytes | None], bool]:
    """The ``(keys, values, deletes)`` of a run file; :class:`RunFileError` when it is not a
    whole run file."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(RUN_FILE_MAGIC):
        raise RunFileError(f"{path} is not a Weir run file (it does not start with "
                           f"{RUN_FILE_MAGIC!r})")
    try:
        keys, values, deletes = marshal.loads(memoryview(data)[len(RUN_FILE_MAGIC):])
    except (EOFError, ValueError, TypeError) as exc:
        raise RunFileError(f"run file {path} is cut short or damaged ({exc}); the restore "
                           f"that wrote it did not finish") from exc
    if not (isinstance(keys, list) and isinstance(values, list) and len(keys) == len(values)):
        raise RunFileError(f"run file {path} does not hold a run of keys and values")
    return keys, values, deletes


def load_run_files(engine: Any, paths: Iterable[str | Path]) -> None:
    """Load run files into ``engine`` in order (a later run overrides an earlier one), each
    removed once loaded."""
    for path in paths:
        keys, values, deletes = read_run_file(path)
        load_run(engine, keys, values, deletes=deletes)
        del keys, values
        os.unlink(path)


def replay_runs(engine: Any, batches: Iterable[Any], *, empty: bool, budget_bytes: int,
                progress: Progress | None = None,
                builder: RunBuilder | None = None) -> tuple[int, int]:
    """Apply changelog ``batches`` (``.pairs``, ``.last``, ``.records``, ``.nbytes``) to
    ``engine`` in runs of about ``budget_bytes``; ``empty``: the engine holds nothing yet;
    ``builder``: the one whose :attr:`RunBuilder.pairs` the batches' reader fills. Returns
    ``(records, bytes)`` read."""
    builder = builder if builder is not None else RunBuilder()
    records = nbytes = 0
    first = empty
    for batch in batches:
        builder.add(batch)
        records += batch.records
        nbytes += batch.nbytes
        if progress is not None:
            progress(batch.last, batch.records, batch.nbytes)
        if builder.pending_bytes >= budget_bytes:
            keys, values, deletes = builder.take(drop_tombstones=first)
            load_run(engine, keys, values, deletes=deletes)
            first = False
    if len(builder):
        keys, values, deletes = builder.take(drop_tombstones=first)
        load_run(engine, keys, values, deletes=deletes)
    return records, nbytes
