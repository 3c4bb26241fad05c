"""Changelog damage in a real job (`weir run` in child processes) on RocksDB and LMDB.

Each test runs the counting job of ``_store_job.py`` until it commits, damages its changelog
(a flipped byte or a cut, in the active segment, a sealed segment or a zstd-compressed one,
below or above the checkpoint, with or without a SIGKILL that leaves the local copy unproven),
and starts it again. The restart must stop with a typed error naming the damage, with nothing
deleted and no checkpoint moved; following the error's advice literally (a backup put back,
the documented cut, the ``weir state repair`` command it names) must give exactly the state a
direct count over the input gives, or, for ``--accept-loss``, exactly the state the error said
would remain.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter

import pytest

from tests.reliability._store_job import STOP, StoreJob, cut_changelog, flip_byte, words

pytestmark = pytest.mark.slow

ENGINES = ["rocksdb", "lmdb"]
FIRST = words(3000, seed=1)
SECOND = words(1500, seed=2)
CRASH = ("task.commit.ms=600000", "systems.filelog.producer.buffer.bytes=512")


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """Per engine and compression, a job that processed FIRST and committed at its STOP."""
    made: dict[tuple[str, str], StoreJob] = {}

    def get(engine: str, compression: str = "none") -> StoreJob:
        if (engine, compression) not in made:
            job = StoreJob(tmp_path_factory.mktemp(f"{engine}-{compression}"), engine,
                           compression=compression,
                           segment_bytes=8192 if compression == "none" else 4096)
            job.feed((FIRST if compression == "none" else FIRST[:1200]) + [STOP])
            result = job.run()
            assert result.returncode == 0, result.stderr
            made[engine, compression] = job
        return made[engine, compression]
    return get


def fails_safely(job: StoreJob, before: dict, checkpoint: tuple[int, int], *kinds: str) -> str:
    """Run the job: it must fail with one of ``kinds`` of error, leaving the store's files and
    the checkpoint as they were. Returns the error text."""
    result = job.run()
    text = result.stdout + result.stderr
    assert result.returncode == 1, text
    assert any(kind in text for kind in kinds), text
    assert "nothing was changed" in text
    assert job.tree() == before
    assert job.checkpoint() == checkpoint
    return text


def damage_location(text: str) -> tuple[str, int]:
    found = re.search(r"the damaged record is in (\S+) at byte (\d+)", text)
    assert found, text
    return found.group(1), int(found.group(2))


def finishes_exactly(job: StoreJob, expected: dict[str, int], checkpoint: tuple[int, int]):
    mark = job.totals_mark()
    result = job.run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert job.totals(mark) == expected
    done = job.checkpoint()
    assert done[0] >= checkpoint[0] and done[0] == len(job.fed) - 1  # never backwards
    return result


@pytest.mark.parametrize("engine", ENGINES)
def test_flipped_byte_in_the_active_segment_keeps_the_local_copy_and_rewrites_the_changelog(
        templates, tmp_path, engine):
    job = templates(engine).clone(tmp_path / "job")
    checkpoint, before = job.checkpoint(), job.tree()
    active = job.segments()[-1]
    assert active.name.endswith(".log") and checkpoint[1] >= int(active.name.split(".")[0])
    flip_byte(active, active.stat().st_size // 2)
    job.feed(SECOND, end=True)
    text = fails_safely(job, before, checkpoint, "ChangelogMismatchError",
                        "ChangelogDamagedError")
    assert "proven at offset" in text and "--keep-local" in text
    path, position = damage_location(text)  # the advice: cut at the damage, then keep-local
    cut_changelog(job.changelog_dir, path, position, tmp_path / "cut")
    repaired = job.follow(text, "keep-local")
    assert repaired.returncode == 0, repaired.stderr
    finishes_exactly(job, job.truth(), checkpoint)


@pytest.mark.parametrize("engine", ENGINES)
def test_cut_active_segment_is_a_mismatch_and_the_local_copy_is_kept(templates, tmp_path,
                                                                     engine):
    job = templates(engine).clone(tmp_path / "job")
    checkpoint, before = job.checkpoint(), job.tree()
    active = job.segments()[-1]
    with open(active, "r+b") as f:
        f.truncate(active.stat().st_size // 3)  # a lost tail, e.g. no fsync before power loss
    job.feed(SECOND, end=True)
    text = fails_safely(job, before, checkpoint, "ChangelogMismatchError")
    newest = job.changelog_newest()
    assert f"changelog records {newest + 1}..{checkpoint[1]} are missing" in text
    assert job.follow(text, "keep-local").returncode == 0
    finishes_exactly(job, job.truth(), checkpoint)


@pytest.mark.parametrize("engine", ENGINES)
def test_flipped_byte_in_a_sealed_segment_after_a_crash_is_fixed_by_the_backup(
        templates, tmp_path, engine):
    job = templates(engine).clone(tmp_path / "job")
    checkpoint = job.checkpoint()
    job.feed(SECOND)
    job.run_and_kill(checkpoint[1] + 400, *CRASH)  # the local copy is now unproven
    before = job.tree()
    sealed = job.segments()[2]
    backup = tmp_path / "backup.log"
    shutil.copy2(sealed, backup)
    flip_byte(sealed, sealed.stat().st_size // 2)
    job.feed([], end=True)
    text = fails_safely(job, before, checkpoint, "ChangelogDamagedError")
    assert "back from a backup" in text
    shutil.copy2(backup, sealed)  # the first advice
    finishes_exactly(job, job.truth(), checkpoint)


@pytest.mark.parametrize("engine", ENGINES)
def test_damage_after_the_checkpoint_is_cut_and_nothing_is_lost(templates, tmp_path, engine):
    job = templates(engine).clone(tmp_path / "job")
    checkpoint = job.checkpoint()
    job.feed(SECOND)
    job.run_and_kill(checkpoint[1] + 1000, *CRASH)
    before = job.tree()
    later = [s for s in job.segments()[:-1] if int(s.name.split(".")[0]) > checkpoint[1] + 1]
    assert later, "no sealed segment holds only uncommitted records"
    flip_byte(later[0], later[0].stat().st_size // 2)
    job.feed([], end=True)
    text = fails_safely(job, before, checkpoint, "ChangelogDamagedError")
    assert "Only records after the checkpoint" in text and "nothing is lost" in text
    path, position = damage_location(text)
    cut_changelog(job.changelog_dir, path, position, tmp_path / "cut")
    finishes_exactly(job, job.truth(), checkpoint)


@pytest.mark.parametrize("engine", ENGINES)
def test_damaged_zstd_segment_without_a_proven_copy_loses_exactly_what_the_error_says(
        templates, tmp_path, engine):
    job = templates(engine, "zstd").clone(tmp_path / "job")
    checkpoint = job.checkpoint()
    second = SECOND[:600]
    job.feed(second)
    job.run_and_kill(checkpoint[1] + 200, *CRASH)
    before = job.tree()
    compressed = [s for s in job.segments() if s.name.endswith(".zst")]
    assert len(compressed) >= 4
    victim = compressed[len(compressed) // 2]
    flip_byte(victim, victim.stat().st_size // 2)
    job.feed([], end=True)
    text = fails_safely(job, before, checkpoint, "ChangelogDamagedError")
    path, position = damage_location(text)
    cut_changelog(job.changelog_dir, path, position, tmp_path / "cut")  # moves it aside whole
    newest = job.changelog_newest()
    assert newest == int(victim.name.split(".")[0]) - 1
    text = fails_safely(job, before, checkpoint, "ChangelogMismatchError")
    lost = checkpoint[1] - newest
    assert f"loses the effect of those {lost:,} changelog records" in text
    assert "--keep-local" not in text
    remains = job.changelog_state(newest)  # what the error said would remain
    assert job.follow(text, "accept-loss").returncode == 0
    expected = Counter(remains)
    expected.update(second)
    finishes_exactly(job, dict(expected), checkpoint)
