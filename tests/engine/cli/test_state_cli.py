"""``weir state list | show | dump | verify | rebuild | export | import | repair`` on a real job
directory (file log, RocksDB and LMDB stores, checkpoint files or a checkpoint stream)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.reliability._input_job import InputJob, words
from weir.engine.cli import main
from weir.recovery.job_lock import JobLock

WORDS_1, WORDS_2 = words(300), words(200, seed=2)


@pytest.fixture(scope="module", params=["rocksdb", "lmdb"])
def ran(tmp_path_factory, request):
    base = tmp_path_factory.mktemp(f"state-{request.param}")
    job = InputJob(base, request.param)
    job.produce(WORDS_1, stop=True)
    job.produce(WORDS_2, stop=True)
    for _ in range(2):
        assert job.run().returncode == 0
    return base, request.param


@pytest.fixture
def job(ran, tmp_path, monkeypatch):
    source, engine = ran
    base = tmp_path / "job"
    shutil.copytree(source, base)
    monkeypatch.chdir(base)
    job = InputJob(base, engine, create=False)
    job.sent = [WORDS_1 + WORDS_2]
    return job


def weir(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_each_store_with_offsets_keys_and_what_the_next_start_does(job, capsys):
    code, out, err = weir(capsys, "state", "list", "job.properties", "--json")
    assert code == 0, err
    (row,) = json.loads(out)["stores"]
    assert (row["task"], row["store"], row["engine"]) == ("Partition 0", "counts", job.engine)
    assert row["keys"] == len(job.truth()[0])
    assert row["offset_file"]["offset"] == row["checkpoint_changelog_offset"] >= 0
    assert row["changelog_newest"] == row["checkpoint_changelog_offset"]
    assert row["status"] == "at the checkpoint: used as is" and row["size_bytes"] > 0
    code, out, _ = weir(capsys, "state", "list", "job.properties")
    assert code == 0 and "at the checkpoint" in out and "counts" in out


def test_show_prints_typed_entries_with_prefix_and_limit(job, capsys):
    code, out, err = weir(capsys, "state", "show", "job.properties", "--store", "counts",
                          "--prefix", "w1", "--limit", "3", "--json")
    assert code == 0, err
    entries = json.loads(out)["entries"]
    truth = job.truth()[0]
    assert len(entries) == 3
    assert all(e["key"].startswith("w1") and e["value"] == truth[e["key"]] for e in entries)
    code, out, _ = weir(capsys, "state", "show", "job.properties", "--store", "counts")
    assert code == 0 and "at most 20 per task" in out


def test_dump_prints_every_entry_as_json_lines(job, capsys):
    code, out, err = weir(capsys, "state", "dump", "job.properties", "--store", "counts")
    assert code == 0, err
    dumped = {d["key"]: d["value"] for d in map(json.loads, out.splitlines())}
    assert dumped == job.truth()[0]


def _tamper(job, key: bytes, value: bytes | None) -> None:
    from weir.engine.config.job import JobConfig, load_config
    from weir.engine.container.container import store_specs
    from weir.stores.builder import open_engine

    config = load_config(job.base / "job.properties")
    (spec,) = store_specs(config, JobConfig.from_config(config))
    engine = open_engine(spec, job.base / "state" / "counts" / "Partition_0", logged=True)
    if value is None:
        engine.delete(key)
    else:
        engine.put(key, value)
    engine.flush()
    engine.close()


def test_verify_passes_for_a_store_matching_its_changelog(job, capsys):
    code, out, err = weir(capsys, "state", "verify", "job.properties", "--json")
    assert code == 0, err
    (result,) = json.loads(out)["stores"]
    assert result["result"] == "same" and result["keys"] == len(job.truth()[0])


def test_verify_exits_1_naming_the_first_differing_keys_and_rebuild_fixes_it(job, capsys):
    from weir.stores.serdes import Int64Serde

    _tamper(job, b"w03", Int64Serde().to_bytes(99999))
    _tamper(job, b"zz-extra", Int64Serde().to_bytes(1))
    code, out, _ = weir(capsys, "state", "verify", "job.properties", "--json")
    assert code == 1
    (result,) = json.loads(out)["stores"]
    assert result["result"] == "differs"
    assert result["differences"] == [{"key": "w03", "why": "values differ"},
                                     {"key": "zz-extra", "why": "only in the local store"}]
    code, out, _ = weir(capsys, "state", "verify", "job.properties")
    assert code == 1 and "weir state rebuild" in out

    code, out, err = weir(capsys, "state", "rebuild", "job.properties", "--json")
    assert code == 0, err
    (done,) = json.loads(out)["rebuilt"]
    assert done["records"] > 0 and ".rebuild-" in done["kept"]
    code, _, _ = weir(capsys, "state", "verify", "job.properties")
    assert code == 0
    job.produce(words(10, seed=4), stop=True)
    job.sent = [WORDS_1 + WORDS_2 + words(10, seed=4)]
    assert job.run().returncode == 0  # the rebuilt store is used by the next start
    code, out, _ = weir(capsys, "state", "dump", "job.properties", "--store", "counts")
    assert {d["key"]: d["value"] for d in map(json.loads, out.splitlines())} == job.truth()[0]


@pytest.mark.parametrize("action", [("list",), ("show", "--store", "counts"),
                                    ("verify",), ("rebuild",), ("export", "--out", "x.snap")])
def test_state_commands_refuse_while_the_job_is_locked(job, capsys, action):
    before = job.files()
    with JobLock.acquire(job.base / "checkpoints", job="reliability-count", role="weir run"):
        code, _, err = weir(capsys, "state", action[0], "job.properties", *action[1:])
    assert code == 2 and "is locked by weir run" in err
    assert job.files() == before


def test_export_then_import_into_an_empty_job_resumes_with_exact_state(job, capsys):
    code, out, err = weir(capsys, "state", "export", "job.properties", "--out", "job.weirsnap",
                          "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["checkpoints"] == ["Partition 0"]
    assert summary["stores"] == [{"task": "Partition 0", "store": "counts",
                                  "records": len(job.truth()[0]), "from": "changelog"}]
    # import refuses a job that still has state, and changes nothing
    before = job.files()
    code, _, err = weir(capsys, "state", "import", "job.properties", "--in", "job.weirsnap")
    assert code == 2 and "already has state" in err and "weir checkpoint reset" in err
    assert job.files() == before

    assert weir(capsys, "checkpoint", "reset", "job.properties", "--yes")[0] == 0
    code, out, err = weir(capsys, "state", "import", "job.properties", "--in", "job.weirsnap")
    assert code == 0, err
    assert "imported" in out
    assert job.checkpoint().input_offsets[("filelog", "words", 0)] == 501
    code, out, _ = weir(capsys, "state", "dump", "job.properties", "--store", "counts")
    assert out == ""  # no local store yet: the next start restores it from the changelog
    more = words(50, seed=9)
    job.produce(more, stop=True)
    job.sent = [WORDS_1 + WORDS_2 + more]
    assert job.run().returncode == 0
    code, out, _ = weir(capsys, "state", "dump", "job.properties", "--store", "counts")
    assert {d["key"]: d["value"] for d in map(json.loads, out.splitlines())} == job.truth()[0]


def test_import_refuses_a_damaged_snapshot(job, capsys):
    assert weir(capsys, "state", "export", "job.properties", "--out", "job.weirsnap")[0] == 0
    data = bytearray((job.base / "job.weirsnap").read_bytes())
    (job.base / "cut.weirsnap").write_bytes(bytes(data[:len(data) // 2]))
    assert weir(capsys, "checkpoint", "reset", "job.properties", "--yes")[0] == 0
    before = job.files()
    code, _, err = weir(capsys, "state", "import", "job.properties", "--in", "cut.weirsnap")
    assert code == 2 and "nothing was imported" in err
    assert job.files() == before


def test_state_repair_and_the_old_store_repair_name_are_the_same_command(capsys):
    for prefix in (("state",), ("store",)):
        with pytest.raises(SystemExit) as exit_:
            main([*prefix, "repair", "--help"])
        assert exit_.value.code == 0
        assert "--keep-local" in capsys.readouterr().out


def test_state_commands_refuse_while_the_job_runs_with_other_directories(job, capsys):
    # A run of the job started with another job.data.dir holds a free-looking job lock
    # elsewhere; the run lock beside the coordinator stream still names it.
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from weir.engine.config.job import load_config\n"
         "from weir.engine.coordinator.guard import StateDirectories\n"
         "from weir.engine.coordinator.run_lock import RunLock\n"
         "from weir.engine.coordinator.settings import CoordinatorSettings\n"
         "from weir.engine.systems.registry import SystemRegistry\n"
         "config = load_config('job.properties', ['job.data.dir=elsewhere'])\n"
         "lock = RunLock.acquire(SystemRegistry(config), CoordinatorSettings.from_config(config),\n"
         "                       StateDirectories.of(config))\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n"],
        cwd=job.base, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = job.files()
        code, _, err = weir(capsys, "state", "rebuild", "job.properties")
        assert code == 2, err
        assert "is in use: its job coordinator" in err and f"pid {holder.pid}" in err
        assert "`weir state rebuild` needs the job stopped" in err
        assert job.files() == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # Once the run is gone the command works, and a run of the job waits for nothing.
    code, _, err = weir(capsys, "state", "verify", "job.properties")
    assert code == 0, err
