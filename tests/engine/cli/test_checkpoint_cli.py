"""``weir checkpoint show | use-previous | reset`` on a real job directory."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.reliability._input_job import InputJob, words
from weir.engine.cli import main
from weir.recovery.job_lock import JobLock


@pytest.fixture(scope="module")
def ran_twice(tmp_path_factory):
    """A job directory whose job ran twice (a checkpoint and a previous one)."""
    base = tmp_path_factory.mktemp("ran-twice")
    job = InputJob(base, "rocksdb")
    job.produce(words(300), stop=True)
    job.produce(words(200, seed=2), stop=True)
    for _ in range(2):
        assert job.run().returncode == 0
    return base


@pytest.fixture
def job(ran_twice, tmp_path, monkeypatch):
    """A copy of that job directory, as the working directory (paths in it are relative)."""
    base = tmp_path / "job"
    shutil.copytree(ran_twice, base)
    monkeypatch.chdir(base)
    return InputJob(base, "rocksdb", create=False)


def weir(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_prints_each_task_with_offsets_changelogs_and_previous(job, capsys):
    code, out, _ = weir(capsys, "checkpoint", "show", "job.properties")
    assert code == 0
    assert "Partition 0" in out and "filelog.words#0 = 501" in out and "counts =" in out
    assert "UTC" in out and "words#0=300" in out  # the previous checkpoint


def test_show_json_has_offsets_identities_and_the_previous_checkpoint(job, capsys):
    code, out, _ = weir(capsys, "checkpoint", "show", "job.properties", "--json")
    assert code == 0
    doc = json.loads(out)
    (task,) = doc["tasks"]
    assert task["task"] == "Partition 0" and task["file"].endswith("Partition%200.json")
    (entry,) = task["checkpoint"]["input_offsets"]
    assert (entry["stream"], entry["offset"]) == ("words", 501) and entry["identity"]
    assert set(task["checkpoint"]["changelog_identities"]) == {"counts"}
    assert task["previous"]["input_offsets"][0]["offset"] == 300
    assert task["checkpoint"]["format"] == 2 and task["checkpoint"]["written_at_ms"] > 0


def test_show_marks_a_damaged_checkpoint_and_names_the_way_back(job, capsys):
    job.checkpoint_path().write_bytes(b"{not json")
    code, out, _ = weir(capsys, "checkpoint", "show", "job.properties")
    assert code == 0
    assert "damaged" in out and "weir checkpoint use-previous job.properties" in out


def test_use_previous_goes_back_one_checkpoint_and_keeps_the_replaced_file(job, capsys):
    path = job.checkpoint_path()
    replaced = path.read_bytes()
    code, out, _ = weir(capsys, "checkpoint", "use-previous", "job.properties",
                        "--task", "Partition 0")
    assert code == 0, out
    assert job.input_offset() == 300
    kept = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".replaced-")]
    assert len(kept) == 1 and kept[0].read_bytes() == replaced


def test_use_previous_without_a_previous_file_changes_nothing(job, capsys):
    job.checkpoint_path().with_name(job.checkpoint_path().name + ".prev").unlink()
    before = job.files()
    code, _, err = weir(capsys, "checkpoint", "use-previous", "job.properties")
    assert code == 2 and "no usable previous checkpoint" in err and "nothing was changed" in err
    assert job.files() == before


def test_reset_without_yes_shows_the_plan_and_changes_nothing(job, capsys):
    before = job.files()
    code, out, _ = weir(capsys, "checkpoint", "reset", "job.properties")
    assert code == 2
    assert "checkpoints" in out and "changelog of store 'counts'" in out
    assert "local store 'counts'" in out and "nothing was changed" in out
    assert job.files() == before


@pytest.mark.parametrize("action", [("reset", "--yes"), ("use-previous",)])
def test_commands_that_change_anything_refuse_while_the_job_is_locked(job, capsys, action):
    before = job.files()
    with JobLock.acquire(job.base / "checkpoints", job="reliability-count", role="weir run"):
        code, _, err = weir(capsys, "checkpoint", *action, "job.properties")
    assert code == 2 and "is locked by weir run" in err and "JOB.LOCK" in err
    assert job.files() == before


def test_reset_moves_checkpoints_stores_and_changelogs_aside_together(job, capsys):
    code, out, _ = weir(capsys, "checkpoint", "reset", "job.properties", "--yes")
    assert code == 0, out
    base = job.base
    assert job.checkpoint() is None
    aside = {p.name.split(".reset-")[0] for p in base.rglob("*.reset-*")}
    assert aside == {"checkpoints", "counts", "counts-changelog"}
    assert not (base / "state" / "counts").exists()
    assert not (base / "log" / "counts-changelog").exists()
    moved = next(base.glob("checkpoints.reset-*"))
    assert sorted(p.name for p in moved.iterdir()) == ["Partition%200.json",
                                                        "Partition%200.json.prev"]
    code, out, _ = weir(capsys, "checkpoint", "show", "job.properties")
    assert "no checkpoints" in out


# -- set ----------------------------------------------------------------------------------

def test_set_moves_an_input_offset_forward_and_keeps_the_replaced_checkpoint(job, capsys):
    code, out, err = weir(capsys, "checkpoint", "set", "job.properties",
                          "--offset", "filelog.words#0=501", "--json")
    assert code == 0, err
    assert json.loads(out)["set"] == [{"task": "Partition 0", "partition": "filelog.words#0",
                                       "was": 501, "now": 501}]
    job.produce(words(20, seed=5), stop=True)
    code, out, err = weir(capsys, "checkpoint", "set", "job.properties",
                          "--offset", "filelog.words#0=510")
    assert code == 0, err
    assert "next run reads from" in out and "511" in out
    cp = job.checkpoint()
    assert cp.input_offsets[("filelog", "words", 0)] == 510
    assert cp.changelog_offsets["counts"] >= 0  # the state stays where it was
    code, _, _ = weir(capsys, "checkpoint", "use-previous", "job.properties")
    assert code == 0 and job.checkpoint().input_offsets[("filelog", "words", 0)] == 501


def test_set_refuses_to_move_back_into_state_that_holds_the_messages(job, capsys):
    before = job.files()
    code, _, err = weir(capsys, "checkpoint", "set", "job.properties",
                        "--offset", "filelog.words#0=100")
    assert code == 2
    assert "would apply messages 101..501 again to its stores (counts)" in err
    assert "--allow-reprocess" in err and "weir checkpoint reset" in err
    assert job.files() == before


def test_set_with_allow_reprocess_moves_back(job, capsys):
    code, _, err = weir(capsys, "checkpoint", "set", "job.properties",
                        "--offset", "filelog.words#0=100", "--allow-reprocess")
    assert code == 0, err
    assert job.checkpoint().input_offsets[("filelog", "words", 0)] == 100


@pytest.mark.parametrize("offset, needle", [
    ("filelog.words#0=99999", "outside the partition"),
    ("filelog.nope#0=1", "not an input partition"),
    ("words=3", "is not SYSTEM.STREAM#PARTITION=OFFSET"),
])
def test_set_refuses_bad_offsets_and_changes_nothing(job, capsys, offset, needle):
    before = job.files()
    code, _, err = weir(capsys, "checkpoint", "set", "job.properties", "--offset", offset)
    assert code == 2 and needle in err
    assert job.files() == before


def test_set_refuses_while_the_job_is_locked(job, capsys):
    with JobLock.acquire(job.base / "checkpoints", job="reliability-count", role="weir run"):
        code, _, err = weir(capsys, "checkpoint", "set", "job.properties",
                            "--offset", "filelog.words#0=501")
    assert code == 2 and "is locked by weir run" in err


# -- the same commands on a checkpoint stream ------------------------------------------------

@pytest.fixture
def stream_job(tmp_path, monkeypatch):
    """A job that keeps its checkpoints in a stream (task.checkpoint.system), run twice."""
    monkeypatch.chdir(tmp_path)
    job = InputJob(tmp_path, "lmdb", extra="task.checkpoint.system=filelog\n")
    job.produce(words(300), stop=True)
    job.produce(words(200, seed=2), stop=True)
    for _ in range(2):
        assert job.run().returncode == 0
    return job


def test_checkpoint_commands_work_on_a_checkpoint_stream(stream_job, capsys):
    code, out, _ = weir(capsys, "checkpoint", "show", "job.properties", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["checkpoints"] == ("checkpoint stream filelog."
                                  "__samza_checkpoint_ver_1_for_reliability-count_1")
    (task,) = doc["tasks"]
    assert task["checkpoint"]["input_offsets"][0]["offset"] == 501
    assert task["previous"]["input_offsets"][0]["offset"] == 300

    code, out, err = weir(capsys, "checkpoint", "use-previous", "job.properties")
    assert code == 0, err
    code, out, _ = weir(capsys, "checkpoint", "show", "job.properties", "--json")
    assert json.loads(out)["tasks"][0]["checkpoint"]["input_offsets"][0]["offset"] == 300

    code, out, err = weir(capsys, "checkpoint", "reset", "job.properties", "--yes", "--json")
    assert code == 0, err
    moved = {m["kind"] for m in json.loads(out)["moves"]}
    assert moved == {"checkpoints", "changelog", "store"}
    aside = list((stream_job.base / "log").glob("__samza_checkpoint_*.reset-*"))
    assert len(aside) == 1
    code, out, _ = weir(capsys, "checkpoint", "show", "job.properties")
    assert "no checkpoints" in out
    # the job starts over: every message counted exactly once
    assert stream_job.run().returncode == 0
