"""The directories a running job keeps its state in (``job.data.dir``, ``task.checkpoint.path``,
the store base directories) may not change while it runs: config written to its coordinator
stream that moves one is refused, naming the key, both directories and the fix, and the job
runs on where it was. Between runs they may change: a job whose data was moved with them
resumes exactly; one pointed at a directory without its checkpoints is refused by the
restore, as before."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from weir.engine.cli import main
from weir.engine.config.job import load_config
from weir.engine.coordinator import (CoordinatorStreamStore, ImmutableSettingError,
                                     JobCoordinator, StateDirectories,
                                     check_running_directories)
from weir.engine.coordinator.messages import CoordinatorMessage
from weir.stores.config import Config

from tests.engine.coordinator._helpers import create_inputs, job_config
from tests.reliability._input_job import InputJob, words


def _write(config, key: str, value: str) -> None:
    with CoordinatorStreamStore.for_job(config, source="coordinator-stream-writer") as store:
        store.write([CoordinatorMessage.set_config(key, value, source="w")])


def _offsets(config) -> int:
    with CoordinatorStreamStore.for_job(config, source="t") as store:
        store.bootstrap()
        return store.next_offset


# -- the check ----------------------------------------------------------------------------------

_JOB = {"job.name": "j"}


@pytest.mark.parametrize("old, new, key, was, now", [
    ({"job.data.dir": "a"}, {"job.data.dir": "b"}, "job.data.dir", "/w/a", "/w/b"),
    ({}, {"job.data.dir": "b"}, "job.data.dir", "/w/weir-data/j-1", "/w/b"),
    ({"job.data.dir": "a"}, {"job.data.dir": "a", "task.checkpoint.path": "/cp"},
     "task.checkpoint.path", "/w/a/checkpoints", "/cp"),
    ({"job.data.dir": "a"}, {"job.data.dir": "a", "job.logged.store.base.dir": "s"},
     "job.logged.store.base.dir", "/w/a/state", "/w/s"),
    ({"job.data.dir": "a"}, {"job.data.dir": "a", "job.non-logged.store.base.dir": "s"},
     "job.non-logged.store.base.dir", "/w/a/state", "/w/s"),
])
def test_a_change_that_moves_a_directory_of_the_running_job_is_refused_naming_it(
        old, new, key, was, now):
    old, new = Config({**_JOB, **old}), Config({**_JOB, **new}, origins={key: "somewhere"})
    running = StateDirectories.of(old, cwd=Path("/w"), environ={})
    with pytest.raises(ImmutableSettingError) as info:
        check_running_directories(running, old, new, cwd=Path("/w"), environ={})
    assert info.value.key == key and (info.value.old, info.value.new) == (was, now)
    message = str(info.value)
    assert f"config key '{key}' (set at somewhere)" in message and "the job runs" in message
    assert "'Moving a job's data'" in message and "--reset-state" not in message
    put_back = "--delete" if old.get(key) is None else f"--value {old.get(key)}"
    assert f"weir coordinator set-config <config> --key {key} {put_back}`" in message


@pytest.mark.parametrize("old, new", [
    ({"job.data.dir": "a"}, {"job.data.dir": "./a/"}),  # the same directory, written otherwise
    ({"job.data.dir": "a", "task.checkpoint.path": "/cp", "job.logged.store.base.dir": "/s",
      "job.non-logged.store.base.dir": "/s"},
     {"job.data.dir": "b", "task.checkpoint.path": "/cp", "job.logged.store.base.dir": "/s",
      "job.non-logged.store.base.dir": "/s"}),  # every directory set: job.data.dir moves none
    ({}, {"task.commit.ms": "5"}),
])
def test_a_change_that_moves_no_directory_passes(old, new):
    old, new = Config({**_JOB, **old}), Config({**_JOB, **new})
    running = StateDirectories.of(old, cwd=Path("/w"), environ={})
    check_running_directories(running, old, new, cwd=Path("/w"), environ={})


def test_directories_resolve_against_the_running_jobs_working_directory_and_environment():
    old = Config({**_JOB, "job.logged.store.base.dir": "s"})
    new = Config({**_JOB, "job.logged.store.base.dir": "t"})
    env = {"LOGGED_STORE_BASE_DIR": "/env"}  # wins over the key: the change moves nothing
    running = StateDirectories.of(old, cwd=Path("/w"), environ=env)
    check_running_directories(running, old, new, cwd=Path("/w"), environ=env)
    with pytest.raises(ImmutableSettingError, match="/w/s"):
        check_running_directories(StateDirectories.of(old, cwd=Path("/w"), environ={}), old,
                                  new, cwd=Path("/w"), environ={})


# -- the job coordinator and `weir coordinator set-config` ---------------------------------------

def test_a_directory_change_while_running_is_refused_and_the_model_keeps_its_directories(
        tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    with JobCoordinator(config) as coordinator:
        coordinator.start()
        _write(config, "task.checkpoint.path", str(tmp_path / "elsewhere"))

        assert coordinator.catch_up_once() is None
        assert coordinator.snapshot.version == 1
        assert coordinator.model.config["task.checkpoint.path"] == str(tmp_path / "checkpoints")
        refused = coordinator.health()["refused-config"]
        assert "task.checkpoint.path" in refused and str(tmp_path / "elsewhere") in refused
        assert coordinator.counters.config_refused == 1
        # the helper's job sets every directory: job.data.dir alone moves none of them
        _write(config, "task.checkpoint.path", str(tmp_path / "checkpoints"))
        _write(config, "job.data.dir", str(tmp_path / "data"))
        assert coordinator.catch_up_once().new.version == 2


def test_set_config_refuses_a_directory_change_while_the_job_runs_and_writes_nothing(
        tmp_path, capsys):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    args = ["coordinator", "set-config", "--job", str(tmp_path / "job.properties"),
            "--key", "job.logged.store.base.dir", "--value", str(tmp_path / "moved")]
    with JobCoordinator(config) as coordinator:
        coordinator.start()
        before = _offsets(config)
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "config key 'job.logged.store.base.dir'" in err and "the job runs" in err
        assert f"--value {tmp_path / 'state'}`" in err
        assert _offsets(config) == before
    # stopped: the change is written (the next `weir run` submits the file's value again)
    assert main(args) == 0
    assert _offsets(config) == before + 1


# -- a running `weir run` process -------------------------------------------------------------

N1, N2 = 300, 200


class _Lines:
    """The output lines of a running process, read on a thread."""

    def __init__(self, process):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process) -> None:
        for line in process.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} in {timeout} s:\n{''.join(self.lines)}")

    def text(self) -> str:
        self._thread.join(timeout=60)
        return "".join(self.lines)


def test_a_running_job_refuses_a_new_data_dir_in_its_stream_and_ends_exactly_where_it_was(
        tmp_path):
    job = InputJob(tmp_path, "rocksdb")
    job.produce(words(N1))  # no STOP, no end: the job keeps running
    first = job.start("task.commit.ms=200", "job.coordinator.catchup.interval.ms=100")
    output = _Lines(first)
    config = load_config(job.config_path, [f"systems.filelog.root={tmp_path / 'log'}"])
    try:
        deadline = time.monotonic() + 60
        while job.input_offset() < N1 - 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert job.input_offset() == N1 - 1  # running: it has committed its input
        refused = job.weir("coordinator", "set-config", "--job", "job.properties", "--key",
                           "job.data.dir", "--value", "elsewhere")
        assert refused.returncode == 2, refused.stdout
        assert "config key 'job.data.dir'" in refused.stdout
        assert f"changes from '{tmp_path.resolve()}'" in refused.stdout
        assert "--key job.data.dir --value .`" in refused.stdout

        _write(config, "job.data.dir", "elsewhere")  # as a tool that does not check would
        line = output.wait_for("config change refused")
        assert "job.data.dir" in line and str(tmp_path.resolve() / "elsewhere") in line
        assert first.poll() is None  # running on, in its directories

        job.produce(words(N2, seed=2), end=True)
        first.wait(timeout=90)
        text = output.text()
        assert first.returncode == 0, text
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGKILL)
            first.wait()
    assert "job model version 2" not in text
    assert not (tmp_path / "elsewhere").exists()
    assert job.totals() == job.truth()


def test_between_runs_a_job_whose_data_was_moved_resumes_exactly_from_the_new_directory(
        tmp_path):
    job = InputJob(tmp_path, "rocksdb")
    job.produce(words(N1), stop=True)
    assert job.run().returncode == 0
    job.produce(words(N2, seed=2), end=True)

    empty = job.run("job.data.dir=empty")  # no checkpoint there, the changelog has state
    assert empty.returncode == 1, empty.stdout
    assert "job.data.dir changed since the last run (. -> empty)" in empty.stdout
    assert "StateWithoutCheckpointError" in empty.stdout and "count every message twice" \
        in empty.stdout
    assert job.totals() == {0: {}}  # nothing was processed there

    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("checkpoints", "state"):
        (tmp_path / name).rename(moved / name)
    result = job.run("job.data.dir=moved")
    assert result.returncode == 0, result.stdout
    assert "ended (end-of-stream)" in result.stdout
    assert job.totals() == job.truth()
