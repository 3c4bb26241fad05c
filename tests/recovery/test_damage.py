"""The changelog errors restore raises and the next steps they advise (recovery/damage.py)."""

from __future__ import annotations

import pytest

from weir.recovery.damage import Damage, DamageKind, changelog_error, repair_command
from weir.recovery.errors import (ChangelogDamagedError, ChangelogMismatchError,
                                  ChangelogStateError)

TASK, STORE, CHANGELOG = "Partition 0", "counts", "filelog.counts-changelog"


def damage(kind=DamageKind.ENDS_EARLY, **kw) -> Damage:
    values = dict(kind=kind, task=TASK, store=STORE, changelog=CHANGELOG, partition=0,
                  offset=81, oldest=0, newest=80, checkpointed=120, directory="/state/c/P_0")
    values.update(kw)
    return Damage(**values)


def test_every_changelog_error_names_the_store_partition_offset_and_says_nothing_changed():
    for d in (damage(), damage(DamageKind.STARTS_LATE, oldest=200, newest=300, offset=200),
              damage(DamageKind.UNREADABLE, offset=40, path="/log/0/0040.log", position=7,
                     detail="CorruptRecordError: bad CRC")):
        error = changelog_error(d)
        assert isinstance(error, ChangelogStateError)
        text = str(error)
        assert "store 'counts' of task 'Partition 0'" in text
        assert "filelog.counts-changelog partition 0" in text
        assert "What to do (nothing was changed):" in text
        assert (error.task, error.store, error.partition) == (TASK, STORE, 0)
        assert error.advice and all(step in text for step in error.advice)


def test_a_changelog_ending_early_with_a_proven_local_copy_offers_to_keep_it():
    error = changelog_error(damage(proven=120))
    assert isinstance(error, ChangelogMismatchError)
    assert "changelog records 81..120 are missing" in str(error)
    assert (error.offset, error.checkpointed, error.newest, error.local_offset) == (81, 120,
                                                                                    80, 120)
    assert repair_command(TASK, STORE, "keep-local") in error.advice[1]
    assert "nothing is lost" in error.advice[1] and "accept-loss" not in str(error)


def test_without_a_proven_copy_the_loss_is_counted_and_keep_local_is_not_offered():
    error = changelog_error(damage(proven=None, unproven="no OFFSET file"))
    assert "proves no offset: no OFFSET file" in str(error)
    assert "--keep-local" not in str(error)
    assert "loses the effect of those 40 changelog records" in error.advice[1]
    assert "restored from changelog records 0..80" in error.advice[1]


def test_a_changelog_damaged_at_its_end_must_be_cut_before_anything_is_appended():
    error = changelog_error(damage(proven=120, damaged_end=True, path="/log/0/0070.log",
                                   position=412, detail="CorruptRecordError: bad CRC"))
    text = str(error)
    assert "The record at offset 81 is damaged (file /log/0/0070.log, byte 412)" in text
    assert error.advice[1].startswith("Otherwise cut changelog filelog.counts-changelog "
                                      "partition 0 at offset 81")
    assert "/log/0/0070.log at byte 412" in error.advice[1]
    assert error.advice[1].index("cut") < error.advice[1].index("--keep-local")


def test_damage_after_the_checkpoint_is_safe_to_cut():
    error = changelog_error(damage(DamageKind.UNREADABLE, offset=130, newest=150,
                                   path="/log/0/0125.log", position=99, detail="bad CRC"))
    assert isinstance(error, ChangelogDamagedError)
    assert "Only records after the checkpoint (130..150" in error.advice[1]
    assert "nothing is lost" in error.advice[1]


def test_damage_before_the_checkpoint_names_the_records_whose_effect_a_cut_would_lose():
    error = changelog_error(damage(DamageKind.UNREADABLE, offset=40, newest=150, proven=None,
                                   unproven="no OFFSET file", path="/log/0/0030.log",
                                   position=5, detail="bad CRC"))
    assert error.advice[0].startswith("Put the damaged segment file /log/0/0030.log")
    assert "changelog records 40..120" in error.advice[1]
    assert repair_command(TASK, STORE, "accept-loss") in error.advice[1]


def test_an_offset_the_system_did_not_name_is_reported_as_where_reading_stopped():
    error = changelog_error(damage(DamageKind.UNREADABLE, offset=40, newest=150,
                                   offset_exact=False, detail="StoreError: corrupt batch"))
    assert "failed at or after offset 40" in str(error)
    assert "at its damaged record" in error.advice[1]


def test_a_changelog_that_starts_after_the_checkpoint_offers_a_backup_or_an_empty_store():
    error = changelog_error(damage(DamageKind.STARTS_LATE, oldest=200, newest=300, offset=200))
    assert isinstance(error, ChangelogMismatchError)
    assert "now starts at offset 200, after the checkpoint's offset 120" in str(error)
    assert "The store starts empty" in error.advice[1]


@pytest.mark.parametrize("task, expected", [
    ("Partition 0", "--task 'Partition 0'"),
    ("t'1", "--task 't'\"'\"'1'"),
])
def test_repair_commands_quote_task_names_for_the_shell(task, expected):
    assert expected in repair_command(task, "counts", "keep-local")
