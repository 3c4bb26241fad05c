"""Is a local store usable, and what to do with it at start: the store-validity table.

Two pure functions, one per step, both tested cell by cell
(``tests/recovery/test_validity.py``):

1. :func:`check_local_store` says what was **found** for one persistent store:
   :attr:`Found.NONE` (no store: no files), :attr:`Found.INVALID` (files, but they cannot be
   trusted, with the reason), or :attr:`Found.VALID` (the files hold the changelog's state at
   a known offset ``L``). *Valid* means all of:

   * its ``OFFSET`` file is present and parses (checksum intact), names the store's engine,
     changelog and (when it names one) the restoring task, and is not -1;
   * it was written against the same incarnation (identity) of the changelog, when both are
     known: a changelog deleted and created again has other records under the same offsets;
   * it is younger than the staleness limit (``stores.<s>.changelog.staleness.ms``, Samza's
     ``stores.<s>.changelog.delete.retention.ms``, default 1 day): compaction drops tombstones
     older than the delete retention, so catching up from an old offset could miss deletes;
   * its offset is inside the changelog's current range for the offset restore brings the
     store to (the *target*): not past it (the files hold writes the checkpoint does not
     cover), and not so old that the records after it are gone (``L + 1 < oldest``);
   * ``stores.<s>.clean.on.container.start`` is not set (then every start wipes it).

   The engine's commit marker (the files are the ones the ``OFFSET`` file was written for) is
   checked once the files are open; a mismatch makes the store invalid then.

2. :func:`decide` is the decision table (docs/RECOVERY.md, "Decision table"; Samza's, for side inputs too):
   what was found, crossed with whether the store is *bootstrapped* (brought to its target
   before any message is processed) and whether it is persistent:

   ===========  ==============  ==============================================  ===========
   store        found           action                                          when
   ===========  ==============  ==============================================  ===========
   persistent   none            create, restore from the start                  bootstrap: before processing; else alongside
   persistent   invalid         set the files aside (renamed, never deleted     bootstrap: before processing; else alongside
                                before the rebuild succeeded), restore from
                                the start
   persistent   valid           continue from the local offset ``L``            bootstrap: before processing; else alongside
   in-memory    (nothing)       restore from the start                          bootstrap
   in-memory    (nothing)       continue from the last offset                   not bootstrap
   ===========  ==============  ==============================================  ===========

   A store restored from its changelog is always bootstrapped: its task may not see a
   message before its state matches the checkpoint. Stores filled from an input stream
   (adjunct data stores) may be either.

Example::

    >>> from weir.recovery.offset_file import StoreOffset
    >>> local = StoreOffset("counts", "filelog.cl", 41, 1_000, "rocksdb")
    >>> found = check_local_store(local, changelog="filelog.cl", engine="rocksdb",
    ...                           identity=None, oldest=0, target=50, staleness_ms=60_000,
    ...                           now_ms=2_000)
    >>> found.found, found.offset
    (<Found.VALID: 'valid'>, 41)
    >>> decide(persistent=True, found=found.found, bootstrap=True)
    StoreDecision(set_aside=False, start=<StartFrom.LOCAL: 'local'>, blocking=True)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from weir.recovery.offset_file import StoreOffset

__all__ = ["Found", "LocalCheck", "LocalState", "StartFrom", "StoreDecision",
           "check_local_store", "decide", "proof_problem"]


class LocalState(Enum):
    """A persistent store's local copy when its ``OFFSET`` file proves no offset."""

    MISSING = "missing"
    """No ``OFFSET`` file."""
    CORRUPT = "corrupt"
    FOREIGN = "foreign"
    """The ``OFFSET`` file is valid but does not describe the files next to it (the engine's
    commit marker differs: files lost, replaced, or an ``OFFSET`` file put back)."""
    UNREADABLE = "unreadable"
    """The engine cannot open the files."""
    CLEANED = "cleaned"
    """``stores.<s>.clean.on.container.start`` asks for a fresh store at every start."""


class Found(Enum):
    """What a start finds of a persistent store (the rows of the decision table)."""

    NONE = "none"
    """No store: no files at all (a new store, a new machine, a deleted directory)."""
    INVALID = "invalid"
    """Files that cannot be trusted (:attr:`LocalCheck.reason` says why)."""
    VALID = "valid"
    """Files holding the changelog's state at :attr:`LocalCheck.offset`."""


@dataclass(frozen=True)
class LocalCheck:
    """The verdict on one local store: what was found, why, and the offset it is proven at
    (VALID only)."""

    found: Found
    reason: str
    offset: int | None = None


class StartFrom(Enum):
    START = "start"
    """Replay the store's source from its beginning (oldest offset)."""
    LOCAL = "local"
    """Continue from the offset the local store holds (nothing to do when it is current)."""


@dataclass(frozen=True)
class StoreDecision:
    """One cell of the decision table: set the local files aside first (they are removed
    only once the rebuild succeeded), where to start reading, and whether processing waits
    for the store (bootstrap)."""

    set_aside: bool
    start: StartFrom
    blocking: bool


def decide(*, persistent: bool, found: Found | None, bootstrap: bool) -> StoreDecision:
    """The decision table (see the module docstring). ``found`` is ignored for in-memory
    stores (nothing survives their process)."""
    if not persistent:
        if bootstrap:
            return StoreDecision(False, StartFrom.START, True)
        return StoreDecision(False, StartFrom.LOCAL, False)
    if found is Found.NONE:
        return StoreDecision(False, StartFrom.START, bootstrap)
    if found is Found.INVALID:
        return StoreDecision(True, StartFrom.START, bootstrap)
    if found is Found.VALID:
        return StoreDecision(False, StartFrom.LOCAL, bootstrap)
    raise ValueError(f"a persistent store needs what was found (none, invalid, valid), "
                     f"got {found!r}")


def proof_problem(local: StoreOffset | LocalState, changelog: str, engine: str,
                  identity: str | None = None, task: str | None = None) -> str | None:
    """Why ``local`` proves no offset of a store of ``task`` (when known) logged to
    ``changelog`` (of ``identity``, when known) on ``engine``; None when its ``OFFSET`` file
    proves ``local.offset`` (the commit marker is checked by the storage manager once the
    files are open)."""
    if local is LocalState.MISSING:
        return ("no OFFSET file (new store, or changed after its last flush, e.g. by a run "
                "that crashed)")
    if local is LocalState.CORRUPT:
        return "OFFSET file is corrupt"
    if local is LocalState.FOREIGN:
        return ("the OFFSET file does not describe the files beside it (the engine's commit "
                "marker differs: files lost or replaced, or an OFFSET file put back)")
    if local is LocalState.UNREADABLE:
        return "the engine cannot open the local files"
    if local is LocalState.CLEANED:
        return "stores.<store>.clean.on.container.start is set: every start rebuilds it"
    assert isinstance(local, StoreOffset)
    if local.engine != engine:
        return f"local files were written by the {local.engine} engine, the store now uses {engine}"
    if local.changelog != changelog:
        return f"local copy was logged to {local.changelog}, the store now logs to {changelog}"
    if task is not None and local.task is not None and local.task != task:
        return (f"its OFFSET file was written by task '{local.task}', not '{task}' (a store "
                f"directory moved or restored into another task's place)")
    if local.offset < 0:
        return (f"its OFFSET file says {local.offset} (an empty changelog), which proves "
                "nothing about the files")
    if identity is not None and local.identity is not None and local.identity != identity:
        return (f"local copy was written against another incarnation of {changelog} (identity "
                f"{local.identity[:8]}, the changelog's is now {identity[:8]}): the stream was "
                "deleted and created again")
    return None


def check_local_store(local: StoreOffset | LocalState, *, changelog: str, engine: str,
                      identity: str | None, oldest: int, target: int, staleness_ms: int,
                      now_ms: int, files: bool = True, task: str | None = None) -> LocalCheck:
    """What was found of a persistent logged store (see the module docstring). ``local`` is
    its ``OFFSET`` file (or why there is none); ``files`` whether its directory holds any
    file; ``oldest`` the changelog's oldest offset and ``target`` the offset restore brings
    the store to; ``task`` the task restoring (an ``OFFSET`` file of another task proves
    nothing here)."""
    if not files and local is LocalState.MISSING:
        return LocalCheck(Found.NONE, "no local store (a new store, or its directory is gone)")
    problem = proof_problem(local, changelog, engine, identity, task)
    if problem is not None:
        return LocalCheck(Found.INVALID, problem)
    assert isinstance(local, StoreOffset)
    age = local.age_ms(now_ms)
    if age >= staleness_ms:
        return LocalCheck(Found.INVALID,
                          f"local copy is stale: OFFSET written {age / 1000:.0f} s ago, limit "
                          f"{staleness_ms / 1000:.0f} s (stores.<store>.changelog.staleness.ms)")
    if local.offset > target:
        return LocalCheck(Found.INVALID,
                          f"local copy is at offset {local.offset}, past the committed offset "
                          f"{target} (it holds uncommitted writes)")
    if local.offset + 1 < oldest and local.offset + 1 <= target:
        return LocalCheck(Found.INVALID,
                          f"local copy is at offset {local.offset} but the changelog now starts "
                          f"at {oldest}: the records in between are gone")
    return LocalCheck(Found.VALID, f"local copy is at offset {local.offset}", local.offset)
