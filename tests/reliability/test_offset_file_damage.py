"""OFFSET file and local store damage in a real job (`weir run` in child processes), on RocksDB
and LMDB.

Each test runs the counting job of ``_store_job.py`` until it commits (its store's ``OFFSET``
file then vouches for the files), damages the ``OFFSET`` file or the store's files, and runs the
job to the end of its input. Whatever the damage, the restart must give exactly the counts a
direct count over the input gives: an ``OFFSET`` file that cannot be trusted, or files it was
not written for, mean a rebuild from the changelog -- with the old files set aside until the
rebuild succeeded, and kept (the log says where) when they looked damaged.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.reliability._store_job import STOP, StoreJob, flip_byte, words

pytestmark = pytest.mark.slow

ENGINES = ["rocksdb", "lmdb"]
FIRST = words(2000, seed=3)
SECOND = words(800, seed=4)


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """Per engine, a job that processed FIRST, committed at its STOP, and kept a copy of its
    store directory from half-way (its OFFSET file included)."""
    made: dict[str, StoreJob] = {}

    def get(engine: str) -> StoreJob:
        if engine not in made:
            job = StoreJob(tmp_path_factory.mktemp(engine), engine)
            job.feed(FIRST[:1000] + [STOP])
            assert job.run().returncode == 0
            shutil.copytree(job.store_dir, job.root / "half-way")
            job.feed(FIRST[1000:] + [STOP])
            assert job.run().returncode == 0
            made[engine] = job
        return made[engine]
    return get


def runs_exactly(job: StoreJob, *, kept: bool) -> str:
    """Feed SECOND, run to the end: the totals are exact, the checkpoint moved forward, and a
    copy of the old files was kept only when ``kept``. Returns the job's log."""
    before = job.checkpoint()
    job.feed(SECOND, end=True)
    mark = job.totals_mark()
    result = job.run()
    text = result.stdout + result.stderr
    assert result.returncode == 0, text
    assert job.totals(mark) == job.truth()
    assert job.checkpoint()[0] == len(job.fed) - 1 > before[0]
    siblings = sorted(p.name for p in job.store_dir.parent.iterdir())
    assert not any(name.endswith(".restore-aside") for name in siblings)
    assert any(".kept-" in name for name in siblings) == kept, siblings
    return text


def offset_file(job: StoreJob):
    return job.store_dir / "OFFSET"


def rewrite_offset_without_checksum(job: StoreJob) -> None:
    doc = json.loads(offset_file(job).read_text())
    doc["offset"] -= 100  # an operator's edit; the checksum no longer matches
    offset_file(job).write_text(json.dumps(doc))


DAMAGE = {
    "flipped": lambda job: flip_byte(offset_file(job), 30),
    "truncated": lambda job: offset_file(job).write_bytes(offset_file(job).read_bytes()[:40]),
    "deleted": lambda job: offset_file(job).unlink(),
    "wrong offset": rewrite_offset_without_checksum,
}


# Every kind of OFFSET damage takes the same path (the file proves nothing: rebuild), so by
# default each kind runs on one engine, both engines covered; WEIR_RELIABILITY_FULL=1 runs the
# whole matrix.
_PAIRS = ([(e, d) for e in ENGINES for d in DAMAGE] if os.environ.get("WEIR_RELIABILITY_FULL")
          else [(ENGINES[i % 2], d) for i, d in enumerate(DAMAGE)])


@pytest.mark.parametrize("engine, damage", _PAIRS)
def test_damaged_offset_file_means_a_rebuild_with_exact_state(templates, tmp_path, engine,
                                                              damage):
    job = templates(engine).clone(tmp_path / "job")
    DAMAGE[damage](job)
    text = runs_exactly(job, kept=False)
    assert "rebuild" in text


@pytest.mark.parametrize("engine", ENGINES)
def test_offset_file_put_back_beside_older_files_is_not_trusted(templates, tmp_path, engine):
    job = templates(engine).clone(tmp_path / "job")
    current = offset_file(job).read_bytes()  # valid, and it names the checkpoint's offset
    shutil.rmtree(job.store_dir)
    shutil.copytree(job.root / "half-way", job.store_dir)  # the files of an earlier commit
    offset_file(job).write_bytes(current)
    text = runs_exactly(job, kept=True)
    assert "commit marker" in text


@pytest.mark.parametrize("engine", ENGINES)
def test_deleted_store_directory_is_rebuilt_from_the_changelog(templates, tmp_path, engine):
    job = templates(engine).clone(tmp_path / "job")
    shutil.rmtree(job.store_dir)
    runs_exactly(job, kept=False)


@pytest.mark.parametrize("engine", ENGINES)
def test_partly_deleted_store_directory_is_rebuilt_and_its_rest_kept(templates, tmp_path,
                                                                     engine):
    job = templates(engine).clone(tmp_path / "job")
    if engine == "lmdb":
        (job.store_dir / "data.mdb").unlink()  # LMDB would start an empty database silently
    else:
        for sst in job.store_dir.glob("*.sst"):
            sst.unlink()
    runs_exactly(job, kept=True)


@pytest.mark.parametrize("engine", ENGINES)
def test_two_tasks_store_directories_swapped_are_rebuilt_not_taken_for_each_others(tmp_path,
                                                                                   engine):
    # A backup put back in the wrong place: task 0's directory holds task 1's files and
    # OFFSET file, and the other way round. Each OFFSET file still matched the files beside
    # it, so each task reused or caught up the other's counts (exit 0, hundreds of counts
    # wrong). Now neither copy proves anything for the task it sits in: both are rebuilt from
    # their own changelog partitions, and the misplaced files are kept, not deleted.
    from tests.reliability._input_job import InputJob
    from tests.reliability._input_job import words as input_words

    job = InputJob(tmp_path, engine, partitions=2)
    job.produce(input_words(3000, keys=40), stop=True)
    job.produce(input_words(600, seed=8, keys=40), end=True)
    assert job.run().returncode == 0
    base = tmp_path / "state" / "counts"
    (base / "Partition_0").rename(base / "swap")
    (base / "Partition_1").rename(base / "Partition_0")
    (base / "swap").rename(base / "Partition_1")

    result = job.run()

    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()
    assert "written by task 'Partition 1', not 'Partition 0'" in result.stdout
    kept = sorted(p.name for p in base.iterdir() if ".kept-" in p.name)
    assert len(kept) == 2, kept  # each task's misplaced copy is kept for its owner
