"""Recreated streams, on a real `weir run` job (RocksDB and LMDB).

A stream deleted and created again gets a new identity (the file log's ``incarnation`` in
``stream.json``); checkpoints record the identity of every input partition and of every
store's changelog partition. A job whose checkpoint was written against another incarnation
stops with StreamIdentityMismatchError naming the stream, the checkpoint and the fix, instead
of resuming at offsets that now name other records (the issue lost 3 of 300,000 that way).
The tests follow the advice and check exact counts; an old checkpoint without identities
still loads and gets them at its next commit.
"""

from __future__ import annotations

import re
import shlex
import shutil

import crc32c
import orjson
import pytest

from tests.reliability._input_job import InputJob, words

N1, N2 = 1500, 800


def advised(output: str, action: str) -> list[str]:
    found = re.search(r"`(weir checkpoint " + re.escape(action) + r"[^`]*)`", output)
    assert found, f"no `weir checkpoint {action}` advice in:\n{output}"
    return shlex.split(found.group(1))[1:]


def committed_job(tmp_path, engine: str) -> InputJob:
    job = InputJob(tmp_path, engine)
    job.produce(words(N1), stop=True)
    result = job.run()
    assert result.returncode == 0, result.stdout
    assert job.input_offset() == N1
    return job


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_a_recreated_input_log_is_refused_and_reset_counts_the_new_records_exactly(
        tmp_path, engine):
    job = committed_job(tmp_path, engine)
    shutil.rmtree(tmp_path / "log")  # the whole file log is gone, the checkpoints stay
    job.create_streams()
    job.sent = [[]]
    job.produce(words(N1 + N2, seed=9), end=True)  # new records under the old offsets
    checkpoint = job.checkpoint_path().read_bytes()

    result = job.run()

    assert result.returncode == 1, result.stdout
    assert "StreamIdentityMismatchError" in result.stdout
    assert "input stream 'filelog.words' partition 0" in result.stdout
    assert str(job.checkpoint_path()) in result.stdout and "created again" in result.stdout
    assert job.checkpoint_path().read_bytes() == checkpoint
    reset = job.weir(*advised(result.stdout, "reset"))
    assert reset.returncode == 0, reset.stdout
    result = job.run_to_end()
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()  # every new record counted once, nothing skipped


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_a_recreated_changelog_is_refused_and_the_old_one_put_back_restores_exactly(
        tmp_path, engine):
    job = committed_job(tmp_path, engine)
    job.produce(words(N2, seed=4), end=True)
    changelog = tmp_path / "log" / "counts-changelog"
    backup = tmp_path / "backup-changelog"
    shutil.copytree(changelog, backup)
    shutil.rmtree(changelog)
    shutil.rmtree(tmp_path / "state")  # a new machine: only the changelog could restore it
    checkpoint = job.checkpoint_path().read_bytes()

    result = job.run()  # creates an empty changelog stream again: another incarnation

    assert result.returncode == 1, result.stdout
    assert "StreamIdentityMismatchError" in result.stdout
    assert "the changelog of store 'counts'" in result.stdout
    assert "filelog.counts-changelog" in result.stdout and "weir checkpoint reset" in result.stdout
    assert job.checkpoint_path().read_bytes() == checkpoint
    assert not (tmp_path / "state" / "counts" / "Partition_0" / "OFFSET").exists()
    # The advice: put the old changelog's files back from a backup.
    shutil.move(changelog, tmp_path / "recreated-changelog")
    shutil.copytree(backup, changelog)
    result = job.run_to_end()
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()


def test_a_checkpoint_without_identities_loads_and_records_them_from_its_next_commit(
        tmp_path):
    job = committed_job(tmp_path, "rocksdb")
    job.produce(words(N2, seed=4), end=True)
    path = job.checkpoint_path()
    doc = orjson.loads(path.read_bytes())
    body = doc["checkpoint"]
    for entry in body["input_offsets"]:
        entry.pop("identity")
    body.pop("changelog_identities")
    crc = f"{crc32c.crc32c(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)):08x}"
    path.write_bytes(orjson.dumps({"format": 1, "crc32c": crc, "checkpoint": body}))
    assert job.checkpoint().input_identities == {}

    result = job.run()

    assert result.returncode == 0, result.stdout
    assert "records no stream identity" in result.stdout
    assert job.totals() == job.truth()
    checkpoint = job.checkpoint()
    assert checkpoint.input_identities[("filelog", "words", 0)]
    assert checkpoint.changelog_identities["counts"]
    assert orjson.loads(path.read_bytes())["format"] == 2
