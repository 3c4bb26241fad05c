"""The store-validity table: what a start finds of a local store (none / invalid / valid) and
what it then does, cell by cell (persistent: found x bootstrap; in-memory: bootstrap or not),
plus each rule of "valid"."""

from __future__ import annotations

import pytest

from weir.recovery.offset_file import StoreOffset
from weir.recovery.validity import (Found, LocalState, StartFrom, StoreDecision,
                                    check_local_store, decide)

NOW = 10_000_000
DAY = 86_400_000
CHANGELOG = "filelog.counts-changelog"
IDENTITY = "a" * 32


def local(offset: int = 40, *, age_ms: int = 1000, changelog: str = CHANGELOG,
          engine: str = "rocksdb", identity: str | None = IDENTITY) -> StoreOffset:
    return StoreOffset("counts", changelog, offset, NOW - age_ms, engine, None, identity)


def check(state=None, *, oldest=0, target=50, files=True, identity=IDENTITY,
          staleness_ms=DAY):
    return check_local_store(local() if state is None else state, changelog=CHANGELOG,
                             engine="rocksdb", identity=identity, oldest=oldest, target=target,
                             staleness_ms=staleness_ms, now_ms=NOW, files=files)


# -- the decision table, one test per cell --------------------------------------------------

def test_persistent_no_store_bootstrap_creates_and_restores_from_the_start_before_processing():
    assert decide(persistent=True, found=Found.NONE, bootstrap=True) == \
        StoreDecision(set_aside=False, start=StartFrom.START, blocking=True)


def test_persistent_invalid_store_bootstrap_sets_it_aside_and_restores_from_the_start_first():
    assert decide(persistent=True, found=Found.INVALID, bootstrap=True) == \
        StoreDecision(set_aside=True, start=StartFrom.START, blocking=True)


def test_persistent_valid_store_bootstrap_continues_from_its_offset_before_processing():
    assert decide(persistent=True, found=Found.VALID, bootstrap=True) == \
        StoreDecision(set_aside=False, start=StartFrom.LOCAL, blocking=True)


def test_persistent_no_store_not_bootstrap_creates_and_fills_from_the_start_alongside():
    assert decide(persistent=True, found=Found.NONE, bootstrap=False) == \
        StoreDecision(set_aside=False, start=StartFrom.START, blocking=False)


def test_persistent_invalid_store_not_bootstrap_sets_it_aside_and_fills_alongside():
    assert decide(persistent=True, found=Found.INVALID, bootstrap=False) == \
        StoreDecision(set_aside=True, start=StartFrom.START, blocking=False)


def test_persistent_valid_store_not_bootstrap_continues_from_its_offset_alongside():
    assert decide(persistent=True, found=Found.VALID, bootstrap=False) == \
        StoreDecision(set_aside=False, start=StartFrom.LOCAL, blocking=False)


def test_in_memory_store_bootstrap_is_always_restored_from_the_start_before_processing():
    for found in (None, Found.NONE, Found.INVALID, Found.VALID):
        assert decide(persistent=False, found=found, bootstrap=True) == \
            StoreDecision(set_aside=False, start=StartFrom.START, blocking=True)


def test_in_memory_store_not_bootstrap_continues_from_the_last_offset_alongside():
    assert decide(persistent=False, found=None, bootstrap=False) == \
        StoreDecision(set_aside=False, start=StartFrom.LOCAL, blocking=False)


def test_a_persistent_store_needs_to_know_what_was_found():
    with pytest.raises(ValueError, match="none, invalid, valid"):
        decide(persistent=True, found=None, bootstrap=True)


# -- what was found ---------------------------------------------------------------------------

def test_no_files_and_no_offset_file_is_no_store():
    found = check(LocalState.MISSING, files=False)
    assert found.found is Found.NONE and "no local store" in found.reason


def test_a_fresh_offset_file_inside_the_range_of_the_same_changelog_is_valid():
    found = check()
    assert (found.found, found.offset) == (Found.VALID, 40)


@pytest.mark.parametrize("state, needle", [
    (LocalState.MISSING, "no OFFSET file"),
    (LocalState.CORRUPT, "corrupt"),
    (LocalState.FOREIGN, "commit marker differs"),
    (LocalState.UNREADABLE, "cannot open"),
    (LocalState.CLEANED, "clean.on.container.start"),
    (local(-1), "-1"),
    (local(engine="lmdb"), "lmdb engine"),
    (local(changelog="filelog.other"), "filelog.other"),
    (local(identity="b" * 32), "another incarnation"),
    (local(age_ms=DAY), "stale"),
    (local(60), "uncommitted"),
])
def test_files_that_cannot_be_trusted_are_invalid_and_the_reason_says_why(state, needle):
    found = check(state)
    assert found.found is Found.INVALID and needle in found.reason


def test_an_offset_whose_following_records_are_gone_is_outside_the_range():
    found = check(local(10), oldest=20)
    assert found.found is Found.INVALID and "records in between are gone" in found.reason


def test_an_unknown_identity_on_either_side_is_not_held_against_the_store():
    assert check(local(identity=None)).found is Found.VALID
    assert check(identity=None).found is Found.VALID


def test_staleness_is_measured_against_the_configured_limit():
    assert check(local(age_ms=5_000), staleness_ms=6_000).found is Found.VALID
    assert check(local(age_ms=6_000), staleness_ms=6_000).found is Found.INVALID


def test_an_offset_file_written_by_another_task_makes_the_store_invalid():
    import dataclasses

    theirs = dataclasses.replace(local(), task="Partition 1")
    found = check_local_store(theirs, changelog=CHANGELOG, engine="rocksdb", identity=IDENTITY,
                              oldest=0, target=50, staleness_ms=DAY, now_ms=NOW,
                              task="Partition 0")
    assert found.found is Found.INVALID and "'Partition 1', not 'Partition 0'" in found.reason
    mine = dataclasses.replace(local(), task="Partition 0")
    assert check_local_store(mine, changelog=CHANGELOG, engine="rocksdb", identity=IDENTITY,
                             oldest=0, target=50, staleness_ms=DAY, now_ms=NOW,
                             task="Partition 0").found is Found.VALID
