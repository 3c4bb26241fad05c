"""What restore says when a store's changelog cannot back its checkpoint, and the safe next steps.

:func:`changelog_error` turns a :class:`Damage` (what is wrong, where, and what the local copy
proves) into a :class:`~weir.recovery.errors.ChangelogMismatchError` or
:class:`~weir.recovery.errors.ChangelogDamagedError` whose message names the store, the task, the
changelog partition, the first offset that is missing or cannot be read (with its file and byte
position when the changelog's system knows them), and steps that keep the state exact when
followed literally, safest first:

* restore the damaged file from a backup (always exact when a backup exists);
* when only records after the checkpoint are damaged, cut the changelog there (those records
  hold writes the job makes again from its input: nothing is lost);
* when the local copy's ``OFFSET`` file proves the checkpoint's state, keep it:
  ``weir state repair <job config> --task T --store S --keep-local`` rewrites the missing
  changelog records from it (nothing is lost);
* otherwise ``--accept-loss``, which says exactly which changelog records' effect is lost.

Nothing here deletes or changes anything; the caller has already put every file back.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import Enum

from weir.stores.changelog import NO_OFFSET

from weir.recovery.errors import ChangelogDamagedError, ChangelogMismatchError, ChangelogStateError

__all__ = ["Damage", "DamageKind", "changelog_error", "repair_command"]

CUT_HELP = "docs/RECOVERY.md, 'Cutting a damaged changelog'"


class DamageKind(Enum):
    ENDS_EARLY = "ends-early"
    """The changelog's newest offset is below the checkpoint's changelog offset."""
    STARTS_LATE = "starts-late"
    """The changelog's oldest offset is above the checkpoint's changelog offset."""
    UNREADABLE = "unreadable"
    """Reading a record (or the changelog's bounds) failed."""
    UNWRITABLE = "unwritable"
    """Appending the records restore writes (trim, realign) failed."""


@dataclass(frozen=True)
class Damage:
    """Everything a changelog error says. ``offset``: the first offset missing or unreadable
    (None when the system did not say); ``checkpointed``: None without a checkpoint offset;
    ``proven``: the offset the local copy's ``OFFSET`` file proves (None: nothing), with
    ``unproven`` saying why not; ``damaged_end``: the changelog is damaged right after its
    newest offset (nothing can be appended before the damage is cut off)."""

    kind: DamageKind
    task: str
    store: str
    changelog: str
    partition: int | None
    offset: int | None
    oldest: int
    newest: int
    checkpointed: int | None
    directory: str | None = None
    proven: int | None = None
    unproven: str | None = None
    path: str | None = None
    position: int | None = None
    detail: str | None = None
    damaged_end: bool = False
    offset_exact: bool = True
    """False when ``offset`` is only where reading stopped (the system's error named no
    offset): the damaged record is at or after it."""


def repair_command(task: str, store: str, choice: str) -> str:
    """The ``weir state repair`` command line for ``choice`` (``keep-local``/``accept-loss``)."""
    return (f"weir state repair <job config> --task {shlex.quote(task)} "
            f"--store {shlex.quote(store)} --{choice}")


def _partition(d: Damage) -> str:
    part = f" partition {d.partition}" if d.partition is not None else ""
    return f"{d.changelog}{part}"


def _where(d: Damage) -> str:
    if d.path is None:
        return ""
    at = f", byte {d.position}" if d.position is not None else ""
    return f" (file {d.path}{at})"


def _cut(d: Damage, offset: int | None) -> str:
    """The cut step: remove the damaged record and every later one from the changelog."""
    where = ""
    if d.path is not None:
        at = f" at byte {d.position}" if d.position is not None else ""
        where = f"; the damaged record is in {d.path}{at}"
    target = f"at offset {offset}" if offset is not None else "at its damaged record"
    return (f"cut changelog {_partition(d)} {target} (remove that record and every later one"
            f"{where}; {CUT_HELP} says how)")


def _local(d: Damage) -> str:
    if d.directory is None:
        return "The store is in memory, so no local copy can prove its state."
    if d.proven is not None:
        return f"The local copy in {d.directory} is proven at offset {d.proven} by its OFFSET file."
    return f"The local copy in {d.directory} proves no offset: {d.unproven}."


def changelog_error(d: Damage) -> ChangelogStateError:
    """The typed error for ``d``, with its message and advice."""
    head = f"store '{d.store}' of task '{d.task}': "
    if d.kind is DamageKind.ENDS_EARLY:
        return _ends_early(d, head)
    if d.kind is DamageKind.STARTS_LATE:
        return _starts_late(d, head)
    return _unreadable(d, head)


def _fields(d: Damage, advice: list[str]) -> dict:
    return dict(task=d.task, store=d.store, changelog=d.changelog, partition=d.partition,
                offset=d.offset, path=d.path, position=d.position, checkpointed=d.checkpointed,
                newest=d.newest, local_directory=d.directory, local_offset=d.proven,
                advice=tuple(advice))


def _ends_early(d: Damage, head: str) -> ChangelogMismatchError:
    c, n = d.checkpointed, d.newest
    assert c is not None
    first_missing = n + 1
    ends = "is empty" if n == NO_OFFSET else f"ends at offset {n}"
    text = (f"{head}its changelog {_partition(d)} {ends} but the checkpoint covers offset {c}: "
            f"changelog records {first_missing}..{c} are missing (the changelog was cut, "
            f"emptied or recreated, or is damaged at its end).")
    if d.damaged_end:
        text += (f" The record at offset {first_missing} is damaged{_where(d)}: {d.detail}. "
                 "Nothing can be appended to the partition until that damage is cut off.")
    text += " " + _local(d)
    advice = [f"If a backup of changelog {_partition(d)} holds records {first_missing}..{c}, "
              "put the damaged or missing segment files back from it and start the job "
              "again: nothing is lost."]
    prefix = ""
    if d.damaged_end:
        prefix = f"Otherwise {_cut(d, first_missing)}; then "
    if d.proven == c:
        advice.append(
            f"{prefix or 'Otherwise '}keep the local copy (nothing is lost): run "
            f"`{repair_command(d.task, d.store, 'keep-local')}`. It rewrites changelog records "
            f"{first_missing}..{c} from the local copy; then start the job.")
    else:
        advice.append(
            f"{prefix or 'Otherwise '}accept the loss: run "
            f"`{repair_command(d.task, d.store, 'accept-loss')}`. The store is restored from "
            f"changelog records {d.oldest if n != NO_OFFSET else 0}..{n} and records "
            f"{first_missing}..{c} are rewritten as no-ops: the state loses the effect of "
            f"those {c - n:,} changelog records, and their input messages are not processed "
            f"again (the input stays at the checkpoint).")
    return ChangelogMismatchError(text, **_fields(d, advice))


def _starts_late(d: Damage, head: str) -> ChangelogMismatchError:
    c = d.checkpointed
    assert c is not None
    text = (f"{head}its changelog {_partition(d)} now starts at offset {d.oldest}, after the "
            f"checkpoint's offset {c}: every record up to the checkpoint is gone (deleted by "
            f"retention, or the changelog was recreated). {_local(d)}")
    advice = [f"If a backup of changelog {_partition(d)} holds its records up to offset {c}, "
              "put its segment files back and start the job again: nothing is lost.",
              f"Otherwise accept the loss: run "
              f"`{repair_command(d.task, d.store, 'accept-loss')}`. The store starts empty "
              f"(the effect of every changelog record up to offset {c} is lost) and records "
              f"{d.oldest}..{d.newest} are reverted; the input stays at the checkpoint."]
    return ChangelogMismatchError(text, **_fields(d, advice))


def _unreadable(d: Damage, head: str) -> ChangelogDamagedError:
    verb = "reading" if d.kind is DamageKind.UNREADABLE else "appending to"
    at = ""
    if d.offset is not None:
        at = f" at offset {d.offset}" if d.offset_exact else f" at or after offset {d.offset}"
    text = (f"{head}{verb} its changelog {_partition(d)} failed{at}{_where(d)}: {d.detail}. "
            f"{_local(d)}")
    advice = [f"Put the damaged segment file{' ' + d.path if d.path else ''} of changelog "
              f"{_partition(d)} back from a backup and start the job again: nothing is lost."]
    c = d.checkpointed
    cut_at = d.offset if d.offset_exact else None
    if d.offset is None:
        advice.append("Otherwise find the damaged record with `weir log tail` on the "
                      "changelog partition; start the job again afterwards and its error names "
                      "the offset to cut at.")
    elif c is not None and d.offset > c:
        advice.append(
            f"Or {_cut(d, cut_at)}, and start the job again. Only records after the "
            f"checkpoint ({d.offset}..{d.newest}, written by a run that stopped before its "
            f"next commit) are dropped, and the job makes those writes again from its input: "
            f"nothing is lost.")
    elif c is not None:
        lost = f"{d.offset}..{c}" if d.offset_exact else f"from about offset {d.offset} to {c}"
        keep = (" and keep the local copy with "
                f"`{repair_command(d.task, d.store, 'keep-local')}` (nothing is lost)"
                if d.proven == c else
                f"; accepting the loss of the effect of changelog records {lost} is then "
                f"`{repair_command(d.task, d.store, 'accept-loss')}`")
        advice.append(
            f"Otherwise {_cut(d, cut_at)}; the next start names the records the changelog then "
            f"misses{keep}.")
    else:
        advice.append(
            f"Otherwise {_cut(d, cut_at)} and start the job again: the store is restored "
            f"from the records before the cut; the effect of the records after it (up to "
            f"{d.newest}) is lost.")
    return ChangelogDamagedError(text, **_fields(d, advice))
