"""Changelog restore of one store: decide what to do, replay, trim, and realign.

The state to restore is the store's changelog **up to the checkpointed changelog offset**
(Samza's transactional restore; docs/RECOVERY.md, "Restore"). :func:`plan_restore` is the decision table, a
pure function; :func:`replay`, :func:`trim` and :func:`realign` carry it out on the store's
bytes engine (below serdes, cache and changelog logging, so restoring never re-logs).

The rule behind every row: when the changelog cannot give back the state the checkpoint covers
and no local copy proves that state, restore **stops** (:attr:`Action.STOP`; the storage manager
raises :class:`~weir.recovery.errors.ChangelogMismatchError` with the safe next steps). It never
restores "as much as there is" on its own, and it never deletes a local copy before a rebuild
succeeded. An operator may then ask for a :class:`Repair` (``weir state repair``).

Target offset (the last changelog record the restored state includes; ``C`` = checkpointed):

================================================  =============================================
checkpoint says                                   target
================================================  =============================================
nothing (no checkpoint, or store not in it)       ``newest`` (the whole changelog)
``NO_OFFSET`` (changelog was empty at commit)     ``NO_OFFSET`` (empty store)
``oldest <= C <= newest``                         ``C``
``C > newest`` (the changelog was cut, emptied,   STOP; with ``Repair.KEEP_LOCAL`` and a local
recreated, or is damaged at its end)              copy proven at ``C``: REUSE and realign the
                                                  changelog to ``C`` from it; with
                                                  ``Repair.ACCEPT_LOSS``: rebuild from
                                                  ``[oldest, newest]`` and realign to ``C``
``C < oldest`` (the records up to the checkpoint  REUSE when a local copy is proven at ``C``
are gone)                                         (with a warning); else STOP; with
                                                  ``Repair.ACCEPT_LOSS``: an empty store
================================================  =============================================

Action per store (``L`` = offset in the local ``OFFSET`` file, see :mod:`weir.recovery.offset_file`;
a local copy is *proven* at ``L`` when that file is valid, names the store's engine and
changelog (and the restoring task, when it names one), is not -1, and the engine's commit marker
still matches it):

==============================================================  ===================================
store                                                           action
==============================================================  ===================================
persistent, not logged                                          KEEP the local files as they are
in-memory, not logged                                           EMPTY
in-memory, logged                                               REPLAY ``[oldest, target]``
persistent, logged, ``L == target``, fresh, proven              REUSE (replay nothing)
persistent, logged, ``L < target``, ``L + 1 >= oldest``, fresh  CATCH_UP: replay ``(L, target]``
anything else: no/corrupt ``OFFSET``, ``L > target`` (local     REBUILD: set the files aside,
writes not committed), stale (older than                        replay ``[oldest, target]``, then
``stores.<s>.changelog.staleness.ms``), other changelog or      remove the set-aside copy (or keep
engine, files the ``OFFSET`` file does not describe, records    it and say where, when the local
after ``L`` already deleted from the changelog                  files were damaged)
==============================================================  ===================================

Trim: whatever the action, every key written to the changelog **after** the target (by a run
that crashed before its next checkpoint) gets one more changelog record carrying its restored
value (a tombstone if absent). After that the changelog's latest value of every key equals the
store, so a later restore can never resurrect an uncommitted write.

Realign (repairs only): when the changelog ends at ``N < C``, records ``N+1..C`` are written so
that the changelog's state at ``C`` equals the store: first a record for every key whose value
differs between the store and the changelog's state at ``N`` (a tombstone for a key the store
lacks), then copies of the last of those records (no-ops) until offset ``C``. The differing keys
can only be keys written in the lost records, so they always fit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from weir.stores.changelog import NO_OFFSET, ChangelogSink, ChangelogSource
from weir.stores.engines._base import BytesEngine
from weir.stores.units import human_bytes

from weir.recovery.errors import StoreRepairError
from weir.recovery.offset_file import StoreOffset
from weir.recovery.validity import (Found, LocalState, StartFrom, check_local_store, decide,
                                    proof_problem)

__all__ = [
    "Action",
    "ReadPath",
    "COMPACTION_LAG_FRACTION",
    "CheckpointedOffset",
    "LocalState",
    "PAD_KEY",
    "Repair",
    "RestorePlan",
    "RestoreStats",
    "plan_restore",
    "proof_problem",
    "realign",
    "replay",
    "trim",
]


class Action(Enum):
    """What restore does with a store's local copy."""

    REUSE = "reuse"
    CATCH_UP = "catch-up"
    REBUILD = "rebuild"
    REPLAY = "replay"
    KEEP = "keep"
    EMPTY = "empty"
    STOP = "stop"
    """The changelog cannot back the checkpoint and nothing proves the state: restore refuses
    (the storage manager raises ``ChangelogMismatchError``)."""


class Repair(Enum):
    """A repair an operator asked for (``weir state repair``); only acts when the changelog
    does not reach the checkpoint (the rows marked STOP in the module docstring)."""

    NONE = "none"
    KEEP_LOCAL = "keep-local"
    """Keep the local copy its ``OFFSET`` file proves at the checkpoint, and rewrite the
    changelog records it is missing from it. Nothing is lost."""
    ACCEPT_LOSS = "accept-loss"
    """Restore what the changelog still holds up to the checkpoint and pad it to the
    checkpoint's offset; the effect of the missing records is lost (the error said which)."""


class CheckpointedOffset(Enum):
    """The checkpoint has no changelog offset for the store (no checkpoint, or a new store)."""

    ABSENT = "absent"


PAD_KEY = b"\x00"
"""The key of the padding tombstones :func:`realign` writes when neither the store nor the
changelog has a key to repeat (an empty store over an empty changelog): deleting a key nobody
wrote changes no state."""


@dataclass(frozen=True)
class RestorePlan:
    """The decision for one store. Replay covers ``[start, target]`` (nothing when
    ``start > target``); records in ``(target, newest]`` are trimmed; with ``realign`` set the
    changelog is then written up to that offset (see the module docstring) and the store holds
    the state at ``realign``. ``proven`` is the offset the local copy is proven at (None when
    it proves nothing); ``lost`` the range of changelog offsets whose effect an
    ``ACCEPT_LOSS`` repair gives up (``(None, C)``: every record up to ``C``)."""

    store: str
    action: Action
    start: int
    target: int
    newest: int
    reason: str
    warning: str | None = None
    realign: int | None = None
    proven: int | None = None
    lost: tuple[int | None, int] | None = None
    repair: Repair = Repair.NONE
    """The repair this plan carries out (``NONE``: an ordinary restore)."""

    @property
    def replays(self) -> bool:
        return self.start <= self.target and self.start != NO_OFFSET

    @property
    def trims(self) -> bool:
        return (self.action not in (Action.KEEP, Action.EMPTY, Action.STOP)
                and self.newest > self.target)

    @property
    def wipes(self) -> bool:
        """The local files are set aside and the store rebuilt (they are removed only after
        the rebuild succeeded)."""
        return self.action is Action.REBUILD

    @property
    def state_offset(self) -> int:
        """The changelog offset whose state the store holds once the plan is carried out."""
        return self.realign if self.realign is not None else self.target


class ReadPath(Enum):
    """How a restore read the changelog records it replayed (in :class:`RestoreStats`)."""

    NONE = "nothing read"
    """Nothing was replayed (or the stats were made by hand)."""
    RECORDS = "read record by record"
    """Through the source's records (its system's consumer): it has no bulk reader."""
    BULK = "read by the bulk reader"
    """The changelog's files read directly, below the consumer (the source's bulk reader)."""
    WORKERS = "read by the bulk reader in worker processes"
    """The bulk reader, in restore worker processes (large replays)."""


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
    realigned: int = 0
    """Changelog records written by a repair's realign."""
    repair: Repair = Repair.NONE
    read_path: ReadPath = ReadPath.NONE
    """How the replayed records were read (the bulk reader, or record by record)."""

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        span = (f"offsets {self.start}..{self.target}" if self.records else "no records")
        trimmed = (f", reverted {self.trimmed_records:,} uncommitted changelog records "
                   f"({self.trimmed_keys:,} keys)" if self.trimmed_keys else "")
        realigned = (f", rewrote {self.realigned:,} changelog records" if self.realigned
                     else "")
        path = f" ({self.read_path.value})" if self.read_path is not ReadPath.NONE else ""
        return (f"restored store '{self.store}' of task '{self.task}' ({self.action.value}, "
                f"{span}): {self.records:,} records, {human_bytes(self.bytes)}, "
                f"{self.seconds:.2f} s, {self.records_per_second:,.0f} records/s{path}"
                f"{trimmed}{realigned}")




# -- the decision table -------------------------------------------------------------------------

def plan_restore(*, store: str, persistent: bool, logged: bool, changelog: str, engine: str,
                 checkpointed: int | CheckpointedOffset, oldest: int, newest: int,
                 local: StoreOffset | LocalState, staleness_ms: int, now_ms: int,
                 repair: Repair = Repair.NONE, identity: str | None = None,
                 files: bool = True, clean: bool = False,
                 checkpoint_age_ms: int | None = None,
                 min_compaction_lag_ms: int | None = None,
                 task: str | None = None) -> RestorePlan:
    """Decide how to restore one store (see the module docstring for the table).

    ``changelog`` (``system.stream``) and ``engine`` are the store's configured changelog and
    engine, compared with those recorded in the ``OFFSET`` file (and ``task``, the task
    restoring, with the task that wrote it); ``identity`` the changelog
    partition's identity now (None: unknown); ``oldest``/``newest`` are the changelog's
    current bounds; ``files`` whether the store directory holds any file; ``clean`` asks for a
    fresh store (``stores.<s>.clean.on.container.start``, or a store without changelog when
    existing state is not retained); ``checkpoint_age_ms`` and ``min_compaction_lag_ms`` drive
    the compaction-lag rule; ``repair`` is what an operator asked for.
    """
    if not logged:
        if persistent and clean:
            return RestorePlan(store, Action.REBUILD, NO_OFFSET, NO_OFFSET, NO_OFFSET,
                               "no changelog and a fresh store is asked for at every start "
                               "(clean.on.container.start, or existing state not retained): "
                               "starts empty")
        action = Action.KEEP if persistent else Action.EMPTY
        reason = ("no changelog: local files used as they are" if persistent
                  else "no changelog: starts empty")
        return RestorePlan(store, action, NO_OFFSET, NO_OFFSET, NO_OFFSET, reason)
    if persistent and clean:
        local = LocalState.CLEANED
    first = oldest if newest != NO_OFFSET else NO_OFFSET
    problem = (proof_problem(local, changelog, engine, identity, task) if persistent
               else "it is in memory")
    proven = local.offset if problem is None and isinstance(local, StoreOffset) else None
    if isinstance(checkpointed, int) and checkpointed != NO_OFFSET:
        if newest == NO_OFFSET or checkpointed > newest:
            return _changelog_ends_early(store, persistent, checkpointed, first, newest,
                                         proven, problem, repair)
        if checkpointed < oldest:
            return _changelog_starts_late(store, persistent, checkpointed, oldest, newest,
                                          proven, problem, repair)
    if checkpointed is CheckpointedOffset.ABSENT:
        target = newest
    elif checkpointed == NO_OFFSET:
        target = NO_OFFSET
    else:
        target = int(checkpointed)
    warning = _lost_tail_warning(store, proven, newest, target)
    lag_target, lag_warning = _compaction_lag_rule(store, target, newest, checkpoint_age_ms,
                                                   min_compaction_lag_ms)
    if not persistent:
        decision = decide(persistent=False, found=None, bootstrap=True)
        assert decision.start is StartFrom.START
        return RestorePlan(store, Action.REPLAY, first, lag_target, newest,
                           "in-memory store: replayed from the changelog",
                           _join(warning, lag_warning))
    check = check_local_store(local, changelog=changelog, engine=engine, identity=identity,
                              oldest=oldest, target=target, staleness_ms=staleness_ms,
                              now_ms=now_ms, files=files, task=task)
    decision = decide(persistent=True, found=check.found, bootstrap=True)
    if decision.start is StartFrom.START:
        reason = check.reason if check.found is Found.INVALID else f"{check.reason}: created"
        return RestorePlan(store, Action.REBUILD, first, lag_target, newest, reason,
                           _join(warning, lag_warning), proven=proven)
    assert isinstance(local, StoreOffset)
    if local.offset == target:
        return RestorePlan(store, Action.REUSE, local.offset + 1, target, newest,
                           f"local copy is at the target offset {target}", warning,
                           proven=proven)
    return RestorePlan(store, Action.CATCH_UP, local.offset + 1, lag_target, newest,
                       f"local copy is at offset {local.offset}, behind {target}",
                       _join(warning, lag_warning), proven=proven)


COMPACTION_LAG_FRACTION = 0.9
"""Samza's rule (SAMZA-2356): a checkpoint older than this fraction of the changelog's
minimum compaction lag may name values compaction has already removed."""


def _compaction_lag_rule(store: str, target: int, newest: int, age_ms: int | None,
                         lag_ms: int | None) -> tuple[int, str | None]:
    """The target a replay from the changelog uses: ``newest`` instead of the checkpointed
    ``target`` when the checkpoint is older than 0.9 x the changelog's minimum compaction
    lag (compaction may have removed committed values superseded by later records)."""
    if (age_ms is None or lag_ms is None or target == NO_OFFSET or target >= newest
            or age_ms <= COMPACTION_LAG_FRACTION * lag_ms):
        return target, None
    return newest, (
        f"store '{store}': the checkpoint is {age_ms / 1000:,.0f} s old, more than "
        f"{COMPACTION_LAG_FRACTION} x the changelog's minimum compaction lag "
        f"({lag_ms / 1000:,.0f} s): compaction may have removed committed values that "
        f"records {target + 1}..{newest} superseded, so the store is restored to the "
        f"changelog's newest offset {newest} instead of the checkpoint's {target} (Samza's "
        f"rule). Those records' writes are kept and their input is processed again: for "
        f"this store, at-least-once. Commit more often than the lag (task.commit.ms) to "
        f"never need this")


def _join(*warnings: str | None) -> str | None:
    parts = [w for w in warnings if w]
    return "; ".join(parts) if parts else None


def _lost_tail_warning(store: str, proven: int | None, newest: int, target: int) -> str | None:
    if proven is None or proven <= newest:
        return None
    return (f"store '{store}': the local copy's OFFSET file says changelog offset {proven}, but "
            f"the changelog ends at {newest}: records {newest + 1}..{proven} are gone from it "
            f"(cut or damaged). They come after the target offset {target}, so no committed "
            f"state is lost")


def _changelog_ends_early(store: str, persistent: bool, checkpointed: int, first: int,
                          newest: int, proven: int | None, problem: str | None,
                          repair: Repair) -> RestorePlan:
    missing = f"changelog records {newest + 1}..{checkpointed}"
    if repair is Repair.KEEP_LOCAL:
        if persistent and proven == checkpointed:
            return RestorePlan(
                store, Action.REUSE, checkpointed + 1, checkpointed, newest,
                f"repair: keeping the local copy (proven at offset {checkpointed}) and "
                f"rewriting {missing} from it", realign=checkpointed, proven=proven,
                repair=repair)
        why = problem if problem is not None else f"it is proven at offset {proven}"
        return RestorePlan(store, Action.STOP, NO_OFFSET, checkpointed, newest,
                           f"keep-local needs a local copy proven at the checkpoint's offset "
                           f"{checkpointed}, but {why}", proven=proven)
    if repair is Repair.ACCEPT_LOSS:
        return RestorePlan(
            store, Action.REBUILD if persistent else Action.REPLAY, first, newest, newest,
            f"repair: restoring the changelog's records up to {newest} and padding it to "
            f"{checkpointed}; the effect of {missing} is lost", realign=checkpointed,
            proven=proven, lost=(newest + 1, checkpointed), repair=repair)
    return RestorePlan(store, Action.STOP, NO_OFFSET, checkpointed, newest,
                       f"the changelog ends at offset {newest} but the checkpoint covers "
                       f"offset {checkpointed}: {missing} are missing", proven=proven)


def _changelog_starts_late(store: str, persistent: bool, checkpointed: int, oldest: int,
                           newest: int, proven: int | None, problem: str | None,
                           repair: Repair) -> RestorePlan:
    gone = (f"the changelog now starts at offset {oldest}, after the checkpoint's offset "
            f"{checkpointed}: every record up to the checkpoint is gone")
    if persistent and proven == checkpointed:
        return RestorePlan(
            store, Action.REUSE, checkpointed + 1, checkpointed, newest,
            f"local copy is at the target offset {checkpointed}", proven=proven,
            warning=(f"store '{store}': {gone} (retention, or the changelog was recreated); "
                     "the local copy proves the checkpoint's state and is reused, but a "
                     "rebuild from this changelog could not give it back"))
    if repair is Repair.ACCEPT_LOSS:
        return RestorePlan(
            store, Action.REBUILD if persistent else Action.REPLAY, oldest, checkpointed,
            newest, f"repair: {gone}; the store starts empty and records {oldest}..{newest} "
            "are reverted", proven=proven, lost=(None, checkpointed), repair=repair)
    return RestorePlan(store, Action.STOP, NO_OFFSET, checkpointed, newest, gone,
                       proven=proven)


# -- carrying it out ----------------------------------------------------------------------------

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
    sink.append_all(items)
    sink.flush()
    return len(keys)


def _digest(value: bytes) -> bytes:
    return hashlib.blake2b(value, digest_size=16).digest()


def realign(engine: BytesEngine, source: ChangelogSource, sink: ChangelogSink, *, store: str,
            oldest: int, newest: int, target: int) -> int:
    """Write changelog records ``newest+1..target`` so that the changelog's state at ``target``
    equals what ``engine`` holds (see the module docstring); returns how many were written.

    Reads the changelog's records ``[oldest, newest]`` (memory: a 16-byte digest per key).
    Raises :class:`StoreRepairError`, writing nothing, when more keys differ than there are
    offsets to fill: then the store is not the state those offsets held.
    """
    gap = target - newest
    if gap <= 0:
        return 0
    logged: dict[bytes, bytes | None] = {}
    if newest != NO_OFFSET:
        for _, key, value in source.read(oldest, newest):
            logged[key] = None if value is None else _digest(value)
    writes: list[tuple[bytes, bytes | None]] = []
    some_key: tuple[bytes, bytes | None] | None = None
    missing = object()
    with engine.all() as items:
        for key, value in items:
            if some_key is None:
                some_key = (key, value)
            if logged.pop(key, missing) != _digest(value):
                writes.append((key, value))
                if len(writes) > gap:
                    break
    writes.extend((key, None) for key, digest in logged.items() if digest is not None)
    if len(writes) > gap:
        raise StoreRepairError(
            f"store '{store}': the local copy differs from the changelog's state at offset "
            f"{newest} in more than {gap} keys, but only records {newest + 1}..{target} are "
            f"missing: it is not the state at offset {target} its OFFSET file claims. Nothing "
            f"was written; use the accept-loss repair or restore the changelog from a backup")
    if writes:
        pad = writes[-1]
    elif some_key is not None:
        pad = some_key
    else:
        pad = (next(iter(logged), PAD_KEY), None)
    writes.extend([pad] * (gap - len(writes)))
    sink.append_all(writes)
    sink.flush()
    reached = source.newest_offset()
    if reached != target:
        raise StoreRepairError(
            f"store '{store}': after writing records {newest + 1}..{target} the changelog's "
            f"newest offset is {reached}, not {target}: something else wrote to it at the same "
            f"time. Stop every other writer of this changelog partition and run the repair "
            f"again")
    return gap
