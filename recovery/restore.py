"""Changelog restore of one store: decide what to do, replay, and trim uncommitted records.

The state to restore is the store's changelog **up to the checkpointed changelog offset**
(transactional restore, SAMZA-REFERENCE 4.7). :func:`plan_restore` is the decision table, a
pure function; :func:`replay` and :func:`trim` carry it out on the store's bytes engine (below
serdes, cache and changelog logging, so restoring never re-logs).

Target offset (the last changelog record the restored state includes):

================================================  =============================================
checkpoint says                                   target
================================================  =============================================
nothing (no checkpoint, or store not in it)       ``newest`` (the whole changelog)
``NO_OFFSET`` (changelog was empty at commit)     ``NO_OFFSET`` (empty store)
``oldest <= C <= newest``                         ``C``
``C`` outside ``[oldest, newest]``, or the        ``newest``, with a warning (the changelog was
changelog is empty                                recreated or lost records; Samza does the same)
================================================  =============================================

Action per store (``L`` = offset in the local ``OFFSET`` file, see :mod:`weir.recovery.offset_file`):

==============================================================  ===================================
store                                                           action
==============================================================  ===================================
persistent, not logged                                          KEEP the local files as they are
in-memory, not logged                                           EMPTY
in-memory, logged                                               REPLAY ``[oldest, target]``
persistent, logged, ``L == target``, fresh, same changelog      REUSE (replay nothing)
and engine
persistent, logged, ``L < target``, ``L + 1 >= oldest``, fresh  CATCH_UP: replay ``(L, target]``
anything else: no/corrupt ``OFFSET``, ``L > target`` (local     REBUILD: wipe the directory,
writes not committed), stale (older than                        replay ``[oldest, target]``
``stores.<s>.changelog.staleness.ms``), other changelog,
records after ``L`` already deleted from the changelog
==============================================================  ===================================

Trim: whatever the action, every key written to the changelog **after** the target (by a run
that crashed before its next checkpoint) gets one more changelog record carrying its restored
value (a tombstone if absent). After that the changelog's latest value of every key equals the
store, so a later restore can never resurrect an uncommitted write.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from weir.stores.changelog import NO_OFFSET, ChangelogSink, ChangelogSource
from weir.stores.engines._base import BytesEngine
from weir.stores.locking import LOCK_FILE_NAME, DirectoryLock

from weir.recovery.offset_file import StoreOffset

__all__ = [
    "Action",
    "CheckpointedOffset",
    "LocalState",
    "RestorePlan",
    "RestoreStats",
    "plan_restore",
    "replay",
    "trim",
    "wipe_store_directory",
]


class Action(Enum):
    """What restore does with a store's local copy."""

    REUSE = "reuse"
    CATCH_UP = "catch-up"
    REBUILD = "rebuild"
    REPLAY = "replay"
    KEEP = "keep"
    EMPTY = "empty"


class CheckpointedOffset(Enum):
    """The checkpoint has no changelog offset for the store (no checkpoint, or a new store)."""

    ABSENT = "absent"


class LocalState(Enum):
    """A persistent store's ``OFFSET`` file when it gives no offset."""

    MISSING = "missing"
    CORRUPT = "corrupt"


@dataclass(frozen=True)
class RestorePlan:
    """The decision for one store. Replay covers ``[start, target]`` (nothing when
    ``start > target``); records in ``(target, newest]`` are trimmed."""

    store: str
    action: Action
    start: int
    target: int
    newest: int
    reason: str
    warning: str | None = None

    @property
    def replays(self) -> bool:
        return self.start <= self.target and self.start != NO_OFFSET

    @property
    def trims(self) -> bool:
        return self.action not in (Action.KEEP, Action.EMPTY) and self.newest > self.target

    @property
    def wipes(self) -> bool:
        return self.action is Action.REBUILD


@dataclass(frozen=True)
class RestoreStats:
    """What one store's restore did; :meth:`summary` is the one-line report."""

    task: str
    store: str
    action: Action
    records: int
    bytes: int
    seconds: float
    start: int
    target: int
    trimmed_keys: int
    reason: str = ""
    trimmed_records: int = 0
    """Changelog records after the checkpoint (written by a run that crashed before its next
    commit) whose changes the trim reverted; ``trimmed_keys`` counts the keys they touched."""

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        span = (f"offsets {self.start}..{self.target}" if self.records else "no records")
        trimmed = (f", reverted {self.trimmed_records:,} uncommitted changelog records "
                   f"({self.trimmed_keys:,} keys)" if self.trimmed_keys else "")
        return (f"restored store '{self.store}' of task '{self.task}' ({self.action.value}, "
                f"{span}): {self.records:,} records, {_human_bytes(self.bytes)}, "
                f"{self.seconds:.2f} s, {self.records_per_second:,.0f} records/s{trimmed}")


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


# -- the decision table -------------------------------------------------------------------------

def plan_restore(*, store: str, persistent: bool, logged: bool, changelog: str, engine: str,
                 checkpointed: int | CheckpointedOffset, oldest: int, newest: int,
                 local: StoreOffset | LocalState, staleness_ms: int, now_ms: int) -> RestorePlan:
    """Decide how to restore one store (see the module docstring for the table).

    ``changelog`` (``system.stream``) and ``engine`` are the store's configured changelog and
    engine, compared with those recorded in the ``OFFSET`` file; ``oldest``/``newest`` are the
    changelog's current bounds.
    """
    if not logged:
        action = Action.KEEP if persistent else Action.EMPTY
        reason = ("no changelog: local files used as they are" if persistent
                  else "no changelog: starts empty")
        return RestorePlan(store, action, NO_OFFSET, NO_OFFSET, NO_OFFSET, reason)
    target, warning = _target(store, checkpointed, oldest, newest)
    first = oldest if newest != NO_OFFSET else NO_OFFSET
    if not persistent:
        return RestorePlan(store, Action.REPLAY, first, target, newest,
                           "in-memory store: replayed from the changelog", warning)
    rebuild = _rebuild_reason(local, changelog, engine, target, oldest, staleness_ms, now_ms)
    if rebuild is not None:
        return RestorePlan(store, Action.REBUILD, first, target, newest, rebuild, warning)
    assert isinstance(local, StoreOffset)
    if local.offset == target:
        return RestorePlan(store, Action.REUSE, local.offset + 1, target, newest,
                           f"local copy is at the target offset {target}", warning)
    return RestorePlan(store, Action.CATCH_UP, local.offset + 1, target, newest,
                       f"local copy is at offset {local.offset}, behind {target}", warning)


def _target(store: str, checkpointed: int | CheckpointedOffset, oldest: int,
            newest: int) -> tuple[int, str | None]:
    if checkpointed is CheckpointedOffset.ABSENT:
        return newest, None
    if checkpointed == NO_OFFSET:
        return NO_OFFSET, None
    if newest == NO_OFFSET:
        return NO_OFFSET, (
            f"store '{store}': the checkpoint covers changelog offset {checkpointed} but the "
            "changelog is empty (recreated or deleted?); the store starts empty")
    if checkpointed < oldest or checkpointed > newest:
        return newest, (
            f"store '{store}': checkpointed changelog offset {checkpointed} is outside the "
            f"changelog's range {oldest}..{newest} (recreated, truncated or expired by "
            "retention?); restoring the whole changelog, which may include writes made after "
            "that checkpoint")
    return checkpointed, None


def _rebuild_reason(local: StoreOffset | LocalState, changelog: str, engine: str, target: int,
                    oldest: int, staleness_ms: int, now_ms: int) -> str | None:
    if local is LocalState.MISSING:
        return ("no OFFSET file (new store, or changed after its last flush, e.g. by a run "
                "that crashed)")
    if local is LocalState.CORRUPT:
        return "OFFSET file is corrupt"
    assert isinstance(local, StoreOffset)
    if local.engine != engine:
        return f"local files were written by the {local.engine} engine, the store now uses {engine}"
    if local.changelog != changelog:
        return f"local copy was logged to {local.changelog}, the store now logs to {changelog}"
    age = local.age_ms(now_ms)
    if age >= staleness_ms:
        return (f"local copy is stale: OFFSET written {age / 1000:.0f} s ago, limit "
                f"{staleness_ms / 1000:.0f} s (stores.<store>.changelog.staleness.ms)")
    if local.offset > target:
        return (f"local copy is at offset {local.offset}, past the committed offset {target} "
                "(it holds uncommitted writes)")
    if local.offset + 1 < oldest and local.offset + 1 <= target:
        return (f"local copy is at offset {local.offset} but the changelog now starts at "
                f"{oldest}: the records in between are gone")
    return None


# -- carrying it out ----------------------------------------------------------------------------

def wipe_store_directory(directory: Path, *, store: str) -> None:
    """Delete a store's local files, refusing (``StoreLockedError``) while a live process has
    the store open. The directory itself is kept."""
    directory = Path(directory)
    if not directory.exists():
        directory.mkdir(parents=True)
        return
    with DirectoryLock.acquire(directory, store=store):
        for child in directory.iterdir():
            if child.name == LOCK_FILE_NAME:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()


def replay(engine: BytesEngine, source: ChangelogSource, start: int, end: int, *,
           batch_size: int, batch_bytes: int = 64 << 20,
           on_batch: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Apply changelog records ``start..end`` (inclusive) to ``engine``; ``(records, bytes)``.

    Records go down in batches of up to ``batch_size`` distinct keys or about ``batch_bytes``
    of records (a key written several times in a batch is written once, with its last value),
    sorted by key. ``on_batch`` gets the offset of the last record of each batch written.
    """
    if start > end or start == NO_OFFSET:
        return 0, 0
    records = nbytes = 0
    batch: dict[bytes, bytes | None] = {}
    flush_at = batch_bytes
    last = start
    write_batch = engine.write_batch
    for offset, key, value in source.read(start, end):
        batch[key] = value
        records += 1
        nbytes += len(key) + (len(value) if value is not None else 0)
        if len(batch) >= batch_size or nbytes >= flush_at:
            write_batch(sorted(batch.items()))
            batch.clear()
            flush_at = nbytes + batch_bytes
            if on_batch is not None:
                on_batch(offset)
        last = offset
    if batch:
        write_batch(sorted(batch.items()))
    if on_batch is not None:
        on_batch(last)
    return records, nbytes


def trim(engine: BytesEngine, source: ChangelogSource, sink: ChangelogSink, *, after: int,
         newest: int) -> int:
    """Revert changelog records ``after+1..newest``: append, for each key they touch, the value
    ``engine`` holds now (a tombstone if absent); flush the sink. Returns the key count."""
    if newest <= after:
        return 0
    keys = dict.fromkeys(key for _, key, _ in source.read(after + 1, newest))
    if not keys:
        return 0
    get = engine.get
    items: Iterable[tuple[bytes, bytes | None]] = [(key, get(key)) for key in keys]
    append_all = getattr(sink, "append_all", None)
    if callable(append_all):
        append_all(items)
    else:
        for key, value in items:
            sink.append(key, value)
    sink.flush()
    return len(keys)
