"""Damaged input segments, on a real `weir run` job (RocksDB and LMDB): a flipped byte or a cut
below the checkpoint, damage after it in a bounded stream, a cut sealed segment.

Every case asserts: the job stops with a typed error naming the file and the offset (no
rewind, no hang), nothing was deleted or changed (input and changelog segments, checkpoint,
OFFSET files), the checkpoint did not move backwards; then the test follows the error's
advice literally (put the segment back from a backup) and checks that the job finishes with
exactly the true counts.
"""

from __future__ import annotations

import os

import pytest

from tests.reliability._input_job import InputJob, flip_byte, words

ENGINES = ["rocksdb", "lmdb"]
FIRST, REST = 2000, 1000
# Commit every few ms in the damaged run: a job that wrongly re-read old input would commit
# that position, moving the checkpoint backwards (what the issue saw: 45,669 -> 2,500).
FAST_COMMITS = "task.commit.ms=5"


def started_job(tmp_path, engine: str, **kwargs) -> InputJob:
    """A job that processed FIRST words (checkpoint at the STOP marker, offset FIRST) and has
    REST more words and the end of its bounded input waiting."""
    job = InputJob(tmp_path, engine, **kwargs)
    job.produce(words(FIRST), stop=True)
    job.produce(words(REST, seed=5), end=True)
    result = job.run()
    assert result.returncode == 0, result.stdout
    assert job.input_offset() == FIRST
    return job


def assert_stopped_untouched(job: InputJob, result, before: dict, checkpoint: bytes,
                             *needles: str) -> None:
    assert result.returncode == 1, result.stdout
    assert "total  0 in" in result.stdout, result.stdout  # not one message re-read
    assert job.files() == before  # nothing deleted, rewritten or truncated
    assert job.checkpoint_path().read_bytes() == checkpoint  # did not move backwards
    for needle in needles:
        assert needle in result.stdout, (needle, result.stdout)


def follow_advice_and_finish(job: InputJob, segment) -> None:
    """The advice: put the segment file back from a backup, run again."""
    job.restore_backup(segment)
    result = job.run()
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_flipped_byte_below_the_checkpoint_stops_the_job_at_that_offset(tmp_path, engine):
    job = started_job(tmp_path, engine)
    segment, position = job.record_position(1500)
    job.backup(segment)
    flip_byte(segment, position + 12)  # inside the record's body: its CRC fails
    before, checkpoint = job.files(), job.checkpoint_path().read_bytes()

    result = job.run(FAST_COMMITS)

    assert_stopped_untouched(job, result, before, checkpoint, "CorruptRecordError",
                             "offset 1500", str(segment), "put the segment file back")
    follow_advice_and_finish(job, segment)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_cut_below_the_checkpoint_is_an_error_not_a_rewind_to_the_oldest(tmp_path, engine):
    job = started_job(tmp_path, engine)
    segment, position = job.record_position(1500)
    job.backup(segment)
    os.truncate(segment, position + 10)  # records 1500.. are gone, 1500 torn
    before, checkpoint = job.files(), job.checkpoint_path().read_bytes()

    result = job.run(FAST_COMMITS)

    assert_stopped_untouched(job, result, before, checkpoint, "OffsetBeyondEndError",
                             f"offset {FIRST + 1} is beyond the end of the log", str(segment),
                             "nothing was reset")
    follow_advice_and_finish(job, segment)


@pytest.mark.parametrize("damage, engine", [("flip", "rocksdb"), ("cut", "lmdb")])
def test_damage_after_the_checkpoint_of_a_bounded_stream_fails_instead_of_hanging(
        tmp_path, engine, damage):
    job = started_job(tmp_path, engine)
    last = FIRST + REST  # the last record (offset 0..FIRST-1 words, FIRST is STOP)
    segment, position = job.record_position(last)
    job.backup(segment)
    if damage == "flip":
        # The last record with a bad CRC reads like a torn tail: waiting for the writer to
        # finish it would wait forever, since the stream's end marker is already written.
        flip_byte(segment, position + 12)
    else:
        os.truncate(segment, position)
    before, checkpoint = job.files(), job.checkpoint_path().read_bytes()

    result = job.run(timeout=60)

    assert result.returncode == 1, result.stdout
    assert "CorruptRecordError" in result.stdout and f"offset {last}" in result.stdout
    assert "end-of-stream marker" in result.stdout, result.stdout
    # The words before the damage were processed (their changelog records are reverted by
    # the next restore); the input itself was not touched, nothing was deleted, and a failed
    # run commits nothing, so the checkpoint stayed.
    inputs = {k: v for k, v in before.items() if k.startswith("log/words/")}
    assert {k: v for k, v in job.files().items() if k.startswith("log/words/")} == inputs
    assert set(before) <= set(job.files())
    assert job.checkpoint_path().read_bytes() == checkpoint
    follow_advice_and_finish(job, segment)


def test_a_cut_sealed_segment_names_the_offset_where_its_records_stop(tmp_path):
    job = started_job(tmp_path, "rocksdb", log_config={"segment.bytes": "8192"})
    segment, position = job.record_position(FIRST + 1)  # where the next run starts
    assert segment != job.segment(), "the start offset must be in a sealed segment"
    job.backup(segment)
    os.truncate(segment, position + 5)
    (segment.parent / (segment.name + ".idx")).unlink()  # lost with it: rebuilt by scanning
    before, checkpoint = job.files(), job.checkpoint_path().read_bytes()

    result = job.run(FAST_COMMITS)

    assert_stopped_untouched(job, result, before, checkpoint, "CorruptRecordError",
                             f"offset {FIRST + 1}", str(segment), "cut short")
    job.restore_backup(segment)  # the index is rebuilt from the restored segment
    result = job.run()
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_deleted_input_partition_directory_is_not_started_over_by_a_producer(tmp_path,
                                                                                  engine):
    # rm -rf of a processed partition's directory. A producer used to make the directory again
    # and write from offset 0; once the new records passed the checkpoint, the job resumed at
    # the old offset and skipped every new record before it, exit 0.
    import shutil

    from weir.engine.systems.filelog import PartitionMissingError

    job = started_job(tmp_path, engine)
    partition = job.base / "log" / "words" / "0"
    shutil.copytree(partition, job.base / "backup" / "words-0")
    shutil.rmtree(partition)
    checkpoint = job.checkpoint_path().read_bytes()

    with pytest.raises(PartitionMissingError, match="backup"):
        job.produce(words(3 * FIRST, seed=9), end=True)
    assert not partition.exists()

    result = job.run(FAST_COMMITS)
    assert result.returncode == 1, result.stdout
    assert "OffsetBeyondEndError" in result.stdout and "total  0 in" in result.stdout
    assert job.checkpoint_path().read_bytes() == checkpoint

    shutil.copytree(job.base / "backup" / "words-0", partition)  # the advice: the backup
    result = job.run()
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()


def test_a_deleted_sealed_segment_after_the_checkpoint_stops_the_job_at_its_first_offset(
        tmp_path):
    # A sealed segment in the middle of the unprocessed input deleted (or lost): the reader
    # used to jump over its offsets as if compaction had left a gap, and the job skipped those
    # records and ended with exit 0.
    job = started_job(tmp_path, "lmdb", log_config={"segment.bytes": "4096"})
    segment, _ = job.record_position(FIRST + REST // 2)
    assert segment != job.segment(), "the deleted segment must be a sealed one"
    base = int(segment.name.split(".")[0])
    job.backup(segment)
    segment.unlink()
    index = segment.parent / (segment.name + ".idx")
    if index.exists():
        index.unlink()

    result = job.run(FAST_COMMITS)

    assert result.returncode == 1, result.stdout
    assert "CorruptRecordError" in result.stdout and f"offset {base}" in result.stdout
    assert "missing" in result.stdout
    job.restore_backup(segment)  # the advice: put the file back (its index is rebuilt)
    result = job.run()
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()
