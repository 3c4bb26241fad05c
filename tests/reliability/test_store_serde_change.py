"""A store's serde changed under existing state, on a real `weir run` job (RocksDB and LMDB).

The run stops at the first message that reads an old value, with a task error that names the
store's serde settings and never offers ``task.ignored.exceptions`` (it used to: followed
literally, with ``SerdeError`` listed, the job dropped every message that read an old key and
committed past them, exit 0). Listing the class anyway skips nothing; putting the setting back
finishes the job with exact counts.
"""

from __future__ import annotations

import json

import pytest

from tests.reliability._input_job import InputJob, words

ENGINES = ["rocksdb", "lmdb"]


def positions(job: InputJob) -> dict:
    """The checkpoint without its write time: input and changelog offsets, control state."""
    body = json.loads(job.checkpoint_path().read_bytes())["checkpoint"]
    body.pop("written_at_ms", None)
    return body


@pytest.mark.parametrize("engine", ENGINES)
def test_a_changed_store_serde_stops_the_job_and_is_never_skipped(tmp_path, engine):
    job = InputJob(tmp_path, engine)
    job.produce(words(500), stop=True)
    job.produce(words(300, seed=3), end=True)
    assert job.run().returncode == 0
    checkpoint = positions(job)

    changed = "stores.counts.msg.serde=json"
    for listed in ("", "task.ignored.exceptions=weir.stores.errors.SerdeError"):
        result = job.run(changed, *([listed] if listed else []), "task.commit.ms=5")
        assert result.returncode == 1, result.stdout
        assert "StoredDataError" in result.stdout and "msg.serde" in result.stdout
        assert "list the exception class in task.ignored.exceptions" not in result.stdout
        # nothing skipped, nothing committed past it (a commit of the same offsets may happen)
        assert positions(job) == checkpoint

    result = job.run()  # the advice: the serde settings the state was written with
    assert result.returncode == 0, result.stdout
    assert job.totals() == job.truth()
