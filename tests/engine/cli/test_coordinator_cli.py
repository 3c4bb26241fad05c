"""``weir coordinator set-config`` and ``show`` against a real coordinator stream."""

from __future__ import annotations

import orjson
import pytest

from weir.engine.cli import main
from weir.engine.coordinator import CoordinatorStreamStore, JobCoordinator

from tests.engine.coordinator._helpers import STREAM, create_inputs, job_config, write_job


def submitted(tmp_path, **extra):
    config = job_config(tmp_path, **extra)
    create_inputs(config, 2)
    with JobCoordinator(config) as coordinator:
        coordinator.start()
        coordinator.record_locality("0", "worker-1")
    return config


def offsets(config) -> int:
    with CoordinatorStreamStore.for_job(config, source="t") as store:
        store.bootstrap()
        return store.next_offset


def cli(tmp_path, *args):
    return main(["coordinator", *args, "--job", str(tmp_path / "job.properties")])


def test_set_config_writes_one_message_as_the_writer_tool(tmp_path, capsys):
    config = submitted(tmp_path)
    before = offsets(config)

    assert cli(tmp_path, "set-config", "--key", "task.commit.ms", "--value", "1234") == 0

    out = capsys.readouterr().out
    assert f"wrote task.commit.ms=1234 to filelog.{STREAM} at offset {before}" in out
    with CoordinatorStreamStore.for_job(config, source="t") as store:
        store.bootstrap()
        msg = store.entries("set-config")["task.commit.ms"]
        assert (msg.value("value"), msg.source, store.next_offset) == (
            "1234", "coordinator-stream-writer", before + 1)


def test_set_config_refuses_a_bad_value_naming_the_key_and_writes_nothing(tmp_path, capsys):
    config = submitted(tmp_path)
    before = offsets(config)

    assert cli(tmp_path, "set-config", "--key", "task.commit.ms", "--value", "soon") == 2

    assert "config key 'task.commit.ms'" in capsys.readouterr().err
    assert offsets(config) == before


@pytest.mark.parametrize("key, value, needle", [
    ("task.max.concurrency", "0", "must be >= 1"),
    ("task.class", "no_such_module:Task", "task.class"),
    ("stores.counts.msg.serde", "no-such-serde", "stores.counts.msg.serde"),
])
def test_set_config_refuses_a_value_the_job_would_refuse_and_writes_nothing(
        tmp_path, capsys, key, value, needle):
    # Each parses as its type, but a job cannot run with it: it used to be written, and the
    # running job stopped (exit 2) when its coordinator read it back.
    config = submitted(tmp_path)
    before = offsets(config)

    assert cli(tmp_path, "set-config", "--key", key, "--value", value) == 2

    err = capsys.readouterr().err
    assert needle in err and "nothing was written" in err
    assert offsets(config) == before


def test_set_config_refuses_an_immutable_change_with_the_fix(tmp_path, capsys):
    config = submitted(tmp_path)
    before = offsets(config)

    code = cli(tmp_path, "set-config", "--key", "job.systemstreampartition.grouper.factory",
               "--value", "ssp")

    err = capsys.readouterr().err
    assert code == 2 and "'partition' (the job's state was built with it) to 'ssp'" in err and "--reset-state" in err
    assert offsets(config) == before


def test_set_config_accepts_only_the_set_config_type(tmp_path, capsys):
    submitted(tmp_path)

    assert cli(tmp_path, "set-config", "--type", "set-changelog", "--key", "a", "--value", "1") == 2
    assert "possible values are {set-config}" in capsys.readouterr().err


def test_set_config_delete_removes_a_key(tmp_path, capsys):
    config = submitted(tmp_path, **{"task.window.ms": "1000"})

    assert cli(tmp_path, "set-config", "--key", "task.window.ms", "--delete") == 0

    with CoordinatorStreamStore.for_job(config, source="t") as store:
        store.bootstrap()
        assert "task.window.ms" not in store.config()


def test_a_job_that_never_ran_has_no_stream_and_the_error_says_so(tmp_path, capsys):
    write_job(tmp_path)

    assert cli(tmp_path, "show") == 2
    assert "it was never run; start it with `weir run" in capsys.readouterr().err


def test_show_prints_config_changelog_partitions_and_locality_as_tables(tmp_path, capsys):
    submitted(tmp_path)

    assert cli(tmp_path, "show") == 0

    out = capsys.readouterr().out
    assert f"Config in filelog.{STREAM}" in out and "task.inputs" in out
    assert "job-submission@" in out
    assert "Partition 1" in out and "worker-1" in out
    assert "2 tasks, 1 container localities" in out


def test_show_json_is_machine_readable(tmp_path, capsys):
    config = submitted(tmp_path, **{"job.container.count": "1"})

    assert cli(tmp_path, "show", "--json") == 0

    data = orjson.loads(capsys.readouterr().out)
    assert data["config"] == dict(config)
    assert data["changelog"] == {"Partition 0": 0, "Partition 1": 1}
    assert data["task-containers"] == {"Partition 0": "0", "Partition 1": "0"}
    assert data["input-partitions"] == {"filelog.words": 2}
    assert data["locality"]["0"]["host"] == "worker-1"
