"""The restore decision table (pure) and the OFFSET file it reads."""

from __future__ import annotations

import pytest

from weir.recovery.offset_file import (OffsetFileCorruptError, StoreOffset, read_offset_file,
                                  remove_offset_file, write_offset_file)
from weir.recovery.restore import Action, CheckpointedOffset, LocalState, Repair, plan_restore
from weir.stores.changelog import NO_OFFSET

NOW = 10_000_000
DAY = 86_400_000
CHANGELOG = "filelog.counts-changelog"
ABSENT = CheckpointedOffset.ABSENT


def local(offset: int, *, age_ms: int = 1000, changelog: str = CHANGELOG,
          engine: str = "rocksdb") -> StoreOffset:
    return StoreOffset("counts", changelog, offset, NOW - age_ms, engine)


def plan(*, checkpointed=50, oldest=0, newest=80, local_state=None, persistent=True,
         logged=True, staleness_ms=DAY, repair=Repair.NONE, **task):
    return plan_restore(store="counts", persistent=persistent, logged=logged,
                        changelog=CHANGELOG, engine="rocksdb", checkpointed=checkpointed, oldest=oldest,
                        newest=newest, local=local_state if local_state is not None
                        else LocalState.MISSING, staleness_ms=staleness_ms, now_ms=NOW,
                        repair=repair, **task)


def test_local_copy_at_the_checkpoint_is_reused_and_later_records_trimmed():
    p = plan(local_state=local(50))
    assert (p.action, p.replays, p.target, p.trims) == (Action.REUSE, False, 50, True)


def test_local_copy_behind_the_checkpoint_catches_up_from_offset_plus_one():
    p = plan(local_state=local(20))
    assert (p.action, p.start, p.target) == (Action.CATCH_UP, 21, 50)


def test_local_copy_ahead_of_the_checkpoint_is_rebuilt():
    p = plan(local_state=local(60))
    assert (p.action, p.start, p.target, p.wipes) == (Action.REBUILD, 0, 50, True)
    assert "uncommitted" in p.reason


@pytest.mark.parametrize("state, needle", [
    (LocalState.MISSING, "no OFFSET file"),
    (LocalState.CORRUPT, "corrupt"),
    (local(50, age_ms=DAY), "stale"),
    (local(50, changelog="filelog.other"), "filelog.other"),
    (local(50, engine="lmdb"), "lmdb engine"),
])
def test_unusable_local_copies_are_rebuilt_from_the_oldest_offset(state, needle):
    p = plan(local_state=state, oldest=3)
    assert (p.action, p.start, p.target) == (Action.REBUILD, 3, 50)
    assert needle in p.reason


def test_catch_up_is_impossible_when_the_changelog_lost_the_records_after_the_local_offset():
    p = plan(local_state=local(10), oldest=30)
    assert p.action is Action.REBUILD and "gone" in p.reason


def test_no_checkpoint_restores_the_whole_changelog_without_trimming():
    p = plan(checkpointed=ABSENT)
    assert (p.action, p.start, p.target, p.trims) == (Action.REBUILD, 0, 80, False)
    assert plan(checkpointed=ABSENT, local_state=local(80)).action is Action.REUSE


def test_checkpoint_of_an_empty_changelog_restores_nothing_and_trims_everything():
    p = plan(checkpointed=NO_OFFSET)
    assert (p.replays, p.target, p.trims) == (False, NO_OFFSET, True)


def test_an_offset_file_saying_minus_one_proves_nothing_and_the_store_is_rebuilt():
    p = plan(checkpointed=NO_OFFSET, local_state=local(NO_OFFSET))
    assert p.action is Action.REBUILD and p.proven is None
    assert "proves nothing" in p.reason


def test_empty_changelog_without_checkpoint_gives_an_empty_store():
    p = plan(checkpointed=ABSENT, newest=NO_OFFSET)
    assert (p.replays, p.trims, p.target) == (False, False, NO_OFFSET)


@pytest.mark.parametrize("newest", [80, NO_OFFSET])
def test_changelog_ending_before_the_checkpoint_stops_even_with_a_local_copy_at_the_checkpoint(
        newest):
    for local_state in (LocalState.MISSING, local(90), local(95)):
        p = plan(checkpointed=90, newest=newest, local_state=local_state)
        assert p.action is Action.STOP and not p.replays and not p.trims and not p.wipes
        assert f"changelog records {newest + 1}..90 are missing" in p.reason
    assert plan(checkpointed=90, newest=newest, local_state=local(90)).proven == 90


def test_keep_local_repair_reuses_a_local_copy_proven_at_the_checkpoint_and_realigns():
    p = plan(checkpointed=90, newest=80, local_state=local(90, age_ms=2 * DAY),
             repair=Repair.KEEP_LOCAL)
    assert (p.action, p.replays, p.trims, p.realign, p.state_offset) == (
        Action.REUSE, False, False, 90, 90)


@pytest.mark.parametrize("local_state", [LocalState.MISSING, LocalState.FOREIGN, local(85),
                                         local(90, engine="lmdb")])
def test_keep_local_repair_refuses_a_local_copy_not_proven_at_the_checkpoint(local_state):
    p = plan(checkpointed=90, newest=80, local_state=local_state, repair=Repair.KEEP_LOCAL)
    assert p.action is Action.STOP and "keep-local needs" in p.reason


def test_accept_loss_repair_rebuilds_what_the_changelog_holds_and_pads_to_the_checkpoint():
    p = plan(checkpointed=90, oldest=3, newest=80, repair=Repair.ACCEPT_LOSS)
    assert (p.action, p.start, p.target, p.realign, p.lost) == (Action.REBUILD, 3, 80, 90,
                                                                 (81, 90))


def test_checkpoint_before_the_oldest_record_reuses_only_a_copy_proven_at_it():
    p = plan(checkpointed=5, oldest=10, newest=80, local_state=local(5))
    assert (p.action, p.target, p.trims) == (Action.REUSE, 5, True)
    assert "every record up to the checkpoint is gone" in p.warning
    assert plan(checkpointed=5, oldest=10, newest=80).action is Action.STOP
    lossy = plan(checkpointed=5, oldest=10, newest=80, repair=Repair.ACCEPT_LOSS)
    assert (lossy.action, lossy.replays, lossy.trims, lossy.lost) == (Action.REBUILD, False,
                                                                      True, (None, 5))


def test_a_local_copy_past_the_changelogs_end_is_reported_with_a_warning():
    p = plan(checkpointed=50, newest=60, local_state=local(70))
    assert p.action is Action.REBUILD and "records 61..70 are gone" in p.warning


def test_in_memory_logged_store_always_replays():
    p = plan(persistent=False, local_state=local(50))
    assert (p.action, p.start, p.target, p.trims) == (Action.REPLAY, 0, 50, True)


@pytest.mark.parametrize("persistent, action", [(True, Action.KEEP), (False, Action.EMPTY)])
def test_stores_without_changelog_are_not_restored(persistent, action):
    p = plan(logged=False, persistent=persistent)
    assert (p.action, p.replays, p.trims) == (action, False, False)


# -- the OFFSET file ----------------------------------------------------------------------------

def test_offset_file_round_trips(tmp_path):
    written = write_offset_file(tmp_path, "counts", CHANGELOG, 1234, engine="lmdb", now_ms=NOW)
    assert read_offset_file(tmp_path) == written == StoreOffset("counts", CHANGELOG, 1234, NOW,
                                                                "lmdb")


def test_missing_offset_file_reads_as_none(tmp_path):
    assert read_offset_file(tmp_path) is None


def test_removing_the_offset_file_is_idempotent(tmp_path):
    write_offset_file(tmp_path, "counts", CHANGELOG, 1, engine="rocksdb")
    assert remove_offset_file(tmp_path) is True
    assert remove_offset_file(tmp_path) is False
    assert read_offset_file(tmp_path) is None


@pytest.mark.parametrize("mangle", [
    lambda b: b[:10],
    lambda b: b.replace(b'"offset":1234', b'"offset":1235'),
    lambda b: b"not json",
])
def test_damaged_offset_file_is_reported_corrupt_naming_it(tmp_path, mangle):
    write_offset_file(tmp_path, "counts", CHANGELOG, 1234, engine="rocksdb")
    path = tmp_path / "OFFSET"
    path.write_bytes(mangle(path.read_bytes()))
    with pytest.raises(OffsetFileCorruptError, match=str(path)):
        read_offset_file(tmp_path)


# -- the compaction-lag rule (Samza's SAMZA-2356) --------------------------------------------

HOUR = 3_600_000


def lag_plan(age_ms, *, lag_ms=4 * HOUR, local_state=None, persistent=True, checkpointed=50):
    return plan_restore(store="counts", persistent=persistent, logged=True, changelog=CHANGELOG,
                        engine="rocksdb", checkpointed=checkpointed, oldest=0, newest=80,
                        local=local_state if local_state is not None else LocalState.MISSING,
                        staleness_ms=DAY, now_ms=NOW, checkpoint_age_ms=age_ms,
                        min_compaction_lag_ms=lag_ms)


def test_a_checkpoint_older_than_nine_tenths_of_the_lag_restores_to_the_newest_offset():
    p = lag_plan(int(0.9 * 4 * HOUR) + 1)
    assert (p.action, p.target, p.trims) == (Action.REBUILD, 80, False)
    assert "0.9 x the changelog's minimum compaction lag" in p.warning
    assert "at-least-once" in p.warning


def test_a_younger_checkpoint_restores_to_the_checkpointed_offset():
    p = lag_plan(int(0.9 * 4 * HOUR))
    assert (p.target, p.trims, p.warning) == (50, True, None)


def test_the_lag_rule_applies_to_in_memory_replays_and_catch_ups():
    assert lag_plan(5 * HOUR, persistent=False).target == 80
    p = lag_plan(5 * HOUR, local_state=local(20))
    assert (p.action, p.start, p.target) == (Action.CATCH_UP, 21, 80)


def test_a_local_copy_proven_at_the_checkpoint_needs_no_changelog_and_keeps_its_target():
    p = lag_plan(5 * HOUR, local_state=local(50))
    assert (p.action, p.target, p.trims, p.warning) == (Action.REUSE, 50, True, None)


def test_without_a_write_time_or_a_lag_the_rule_does_not_apply():
    assert lag_plan(None).target == 50
    assert lag_plan(5 * HOUR, lag_ms=None).target == 50
    assert lag_plan(5 * HOUR, checkpointed=NO_OFFSET).target == NO_OFFSET


# -- clean.on.container.start, retain.existing.state, identities, no store --------------------

def test_clean_on_start_rebuilds_a_valid_local_copy():
    p = plan_restore(store="counts", persistent=True, logged=True, changelog=CHANGELOG,
                     engine="rocksdb", checkpointed=50, oldest=0, newest=80, local=local(50),
                     staleness_ms=DAY, now_ms=NOW, clean=True)
    assert (p.action, p.start, p.target, p.wipes) == (Action.REBUILD, 0, 50, True)
    assert "clean.on.container.start" in p.reason


def test_clean_on_start_empties_a_store_without_changelog():
    p = plan(logged=False, checkpointed=ABSENT)
    assert p.action is Action.KEEP
    p = plan_restore(store="counts", persistent=True, logged=False, changelog="",
                     engine="rocksdb", checkpointed=ABSENT, oldest=NO_OFFSET, newest=NO_OFFSET,
                     local=LocalState.MISSING, staleness_ms=DAY, now_ms=NOW, clean=True)
    assert (p.action, p.wipes, p.replays) == (Action.REBUILD, True, False)


def test_a_local_copy_of_another_changelog_incarnation_is_rebuilt():
    p = plan_restore(store="counts", persistent=True, logged=True, changelog=CHANGELOG,
                     engine="rocksdb", checkpointed=50, oldest=0, newest=80,
                     local=StoreOffset("counts", CHANGELOG, 50, NOW - 1000, "rocksdb", None,
                                       "a" * 32),
                     staleness_ms=DAY, now_ms=NOW, identity="b" * 32)
    assert p.action is Action.REBUILD and "another incarnation" in p.reason


def test_no_local_store_is_created_and_says_so():
    p = plan_restore(store="counts", persistent=True, logged=True, changelog=CHANGELOG,
                     engine="rocksdb", checkpointed=50, oldest=0, newest=80,
                     local=LocalState.MISSING, staleness_ms=DAY, now_ms=NOW, files=False)
    assert p.action is Action.REBUILD and p.reason.startswith("no local store")


def test_offset_files_record_the_changelog_identity(tmp_path):
    written = write_offset_file(tmp_path, "counts", CHANGELOG, 7, engine="lmdb",
                                identity="c" * 32)
    assert read_offset_file(tmp_path) == written and written.identity == "c" * 32
    write_offset_file(tmp_path, "counts", CHANGELOG, 8, engine="lmdb")
    assert read_offset_file(tmp_path).identity is None


def test_an_offset_file_written_by_another_task_proves_nothing(tmp_path):
    # Two tasks' store directories swapped (a backup put back in the wrong place): each
    # OFFSET file still matched its own files, so the copy of 'Partition 1' was reused or
    # caught up as the state of 'Partition 0'.
    write_offset_file(tmp_path, "counts", CHANGELOG, 50, engine="rocksdb", now_ms=NOW - 1000,
                      task="Partition 1")
    found = read_offset_file(tmp_path)
    assert found.task == "Partition 1"
    for offset in (50, 20):
        p = plan(local_state=StoreOffset("counts", CHANGELOG, offset, NOW - 1000, "rocksdb",
                                         task="Partition 1"), task="Partition 0")
        assert (p.action, p.start, p.target) == (Action.REBUILD, 0, 50)
        assert "'Partition 1'" in p.reason and p.proven is None
    same = plan(local_state=StoreOffset("counts", CHANGELOG, 50, NOW - 1000, "rocksdb",
                                        task="Partition 0"), task="Partition 0")
    assert same.action is Action.REUSE
    older = plan(local_state=local(50), task="Partition 0")  # no task recorded: not checked
    assert older.action is Action.REUSE
