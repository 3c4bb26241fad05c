"""The embedded runner and ``weir run``: real processes on the file log, real signals.

Covers: bounded inputs end the job with exit 0 and a summary; ``job.container.count`` > 1 runs
each container in its own OS process; SIGTERM (to a single-container job or to the parent of
several) stops with a final commit that covers everything processed; a failing task gives a
non-zero exit naming the container, task, SSP and offset, and stops the other containers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("weir.engine.systems.filelog", reason="the file log system is not built yet")

from weir.engine.model import SystemStream  # noqa: E402
from weir.engine.container.runner import ExitCode, run_job  # noqa: E402
from weir.engine.container.status import StatusMode  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from tests._processes import produce as shared_produce  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.recovery.checkpoint import FileCheckpointManager  # noqa: E402
from weir.stores.config import Config  # noqa: E402

from tests.engine.container.test_container import emitted_counts, words  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
WEIR = [sys.executable, "-m", "weir"]
PARTITIONS = 2
WORDS = SystemStream("filelog", "words")


def write_job(tmp_path: Path, task: str = "CountWords", **extra: str) -> Path:
    lines = {
        "job.name": "runner-test",
        "task.class": f"tests.engine._jobs:{task}",
        "task.inputs": "filelog.words",
        "systems.filelog.factory": "filelog",
        "systems.filelog.root": "log",
        "job.data.dir": "job",
        "systems.filelog.samza.key.serde": "string",
        "systems.filelog.samza.msg.serde": "string",
        "systems.filelog.streams.counts-out.samza.msg.serde": "int64",
        "systems.filelog.default.stream.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "int64",
        "stores.counts.changelog": "filelog.counts-changelog",
        "task.shutdown.ms": "5000",
        "job.container.count": "1",  # in-process unless a test asks for processes
    }
    lines.update(extra)
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def config_of(tmp_path: Path, **extra: str) -> Config:
    cfg = dict(line.split("=", 1) for line in
               (tmp_path / "job.properties").read_text().splitlines())
    cfg.update({"systems.filelog.root": str(tmp_path / "log"),
                "job.data.dir": str(tmp_path / "job")})
    cfg.update(extra)
    return Config(cfg)


def produce(tmp_path: Path, items: list[str], *, create: bool = True, end: bool = True,
            first: int = 0) -> None:
    registry = SystemRegistry(config_of(tmp_path))
    admin = registry.admin("filelog")
    if create:
        admin.create_stream(StreamSpec("words", PARTITIONS, bounded=True))
        admin.create_stream(StreamSpec("counts-out", PARTITIONS))
    shared_produce(registry, "words", items, partitions=PARTITIONS, first=first, end=end,
                   serialize=True)


def weir_run(tmp_path: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([*WEIR, "run", "job.properties", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def checkpoints(tmp_path: Path, tasks: int = PARTITIONS) -> dict[int, int]:
    mgr = FileCheckpointManager(tmp_path / "job" / "checkpoints")
    names = [f"Partition {p}" for p in range(tasks)]
    for name in names:
        mgr.register(name)
    mgr.start()
    out = {}
    for p, name in enumerate(names):
        cp = mgr.read_last(name)
        if cp is not None and ("filelog", "words", p) in cp.input_offsets:
            out[p] = cp.input_offsets[("filelog", "words", p)]
    return out


def finish_and_count(tmp_path: Path, items: list[str]) -> Counter:
    """End the input, run the job to its end in this process, return the emitted counts."""
    produce(tmp_path, [], create=False, end=True, first=len(items))
    result = run_job(config_of(tmp_path, **{"task.class": "tests.engine._jobs:CountWords"}),
                     status=StatusMode.OFF)
    assert result.exit_code is ExitCode.OK, result.summary_lines()
    return emitted_counts(SystemRegistry(config_of(tmp_path)), "filelog")


def test_a_bounded_job_exits_zero_and_prints_messages_in_and_out(tmp_path):
    write_job(tmp_path)
    items = words(400)
    produce(tmp_path, items)

    proc = weir_run(tmp_path)
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 0, err
    assert "job 'runner-test' ended (end-of-stream)" in out
    assert "filelog.words" in out and "400" in out
    assert "filelog.counts-out" in out
    assert emitted_counts(SystemRegistry(config_of(tmp_path)), "filelog") == Counter(items)


def test_containers_run_as_separate_processes_when_container_count_is_above_one(tmp_path):
    write_job(tmp_path, **{"job.container.count": "2"})
    items = words(600)
    produce(tmp_path, items)

    result = run_job(config_of(tmp_path, **{"job.container.count": "2"}), status=StatusMode.OFF)

    assert result.exit_code is ExitCode.OK, result.summary_lines()
    assert sorted(c.container_id for c in result.containers) == ["0", "1"]
    pids = {c.pid for c in result.containers}
    assert len(pids) == 2 and os.getpid() not in pids
    assert result.inputs == {WORDS: 600}
    assert emitted_counts(SystemRegistry(config_of(tmp_path)), "filelog") == Counter(items)


def test_sigterm_from_the_task_stops_the_job_with_a_final_commit(tmp_path):
    write_job(tmp_path, task="SigtermAt", **{"task.commit.ms": "-1"})
    items = words(300) + ["stop"] + words(300)
    produce(tmp_path, items, end=False)  # unbounded: only the signal stops the job

    proc = weir_run(tmp_path, "--status", "off")
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 0, err
    assert "stopped by SIGTERM" in out
    committed = checkpoints(tmp_path)
    assert committed[0] >= 150  # "stop" is message 300: partition 0, offset 150
    # The final commit covers exactly what was processed: finishing the input from the
    # checkpoint gives the exact counts (nothing lost, nothing counted twice).
    assert finish_and_count(tmp_path, items) == Counter(items)


def _run_until_status(tmp_path: Path, text: str) -> tuple[subprocess.Popen, list[str]]:
    """``weir run --status log`` of the job in ``tmp_path``, read until a stderr line contains
    ``text`` (or for at most 60 s): the running process and the lines read."""
    proc = weir_run(tmp_path, "--status", "log")
    deadline = time.monotonic() + 60
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if text in line or time.monotonic() > deadline:
            break
    return proc, seen


def test_sigterm_to_the_runner_stops_every_container_process_with_a_final_commit(tmp_path):
    write_job(tmp_path, **{"job.container.count": "2", "task.commit.ms": "-1",
                           "job.status.log.interval.ms": "100"})
    items = words(1000)
    produce(tmp_path, items, end=False)

    proc, seen = _run_until_status(tmp_path, "1,000 msgs")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 0, "".join(seen) + err
    assert "stopped by SIGTERM" in out
    assert checkpoints(tmp_path) == {0: 499, 1: 499}
    assert finish_and_count(tmp_path, items) == Counter(items)


def test_a_failing_task_exits_nonzero_naming_container_task_ssp_and_offset(tmp_path):
    write_job(tmp_path, task="FailAt", **{"job.container.count": "2"})
    items = words(101) + ["boom"] + words(100)  # "boom" is message 101: partition 1, offset 50
    produce(tmp_path, items, end=False)  # unbounded: container 0 stops only when told

    proc = weir_run(tmp_path, "--status", "off")
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 1, out + err
    assert "container 1 failed: TaskError" in out
    assert "task 'Partition 1' failed in process of filelog.words#1 offset 50" in out
    assert "ValueError: the message was boom" in out


def test_a_missing_input_stream_is_a_config_error_with_exit_code_2(tmp_path):
    write_job(tmp_path)

    proc = weir_run(tmp_path)
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 2
    assert "filelog.words" in err and "weir log create words" in err


def _container_processes(parent_pid: int) -> list[int]:
    """The container processes of runner ``parent_pid``: its multiprocessing children
    (spawned), or the children of its fork server (the default)."""
    pids = []
    for children in Path(f"/proc/{parent_pid}/task").glob("*/children"):
        for pid in children.read_text().split():
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"spawn_main" in cmdline:
                pids.append(int(pid))
            elif b"forkserver" in cmdline:
                for grand in Path(f"/proc/{pid}/task").glob("*/children"):
                    pids.extend(int(p) for p in grand.read_text().split())
    return pids


def _exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_container_processes_stop_with_a_final_commit_when_the_runner_is_killed(tmp_path):
    write_job(tmp_path, **{"job.container.count": "2", "task.commit.ms": "-1",
                           "job.status.log.interval.ms": "100"})
    items = words(1000)
    produce(tmp_path, items, end=False)  # unbounded: the containers never end by themselves

    proc, seen = _run_until_status(tmp_path, "1,000 msgs")
    children = _container_processes(proc.pid)
    assert len(children) == 2, "".join(seen)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)  # not communicate(): orphans would hold its pipes open

    deadline = time.monotonic() + 30
    while not all(_exited(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    orphans = [pid for pid in children if not _exited(pid)]
    for pid in orphans:
        os.kill(pid, signal.SIGKILL)
    proc.stdout.close()
    proc.stderr.close()
    assert orphans == [], "container processes outlived the killed runner"
    # They stopped gracefully: the final commit covers everything they processed.
    assert checkpoints(tmp_path) == {0: 499, 1: 499}


def test_an_unimportable_task_class_is_a_config_error_with_exit_code_2(tmp_path):
    write_job(tmp_path, task="NoSuchTask", **{"job.container.count": "2"})
    produce(tmp_path, words(10))

    proc = weir_run(tmp_path, "--status", "off")
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 2, out + err
    assert "task.class" in err and "NoSuchTask" in err
    assert not (tmp_path / "log" / "counts-changelog").exists()  # nothing was set up


def test_an_unknown_store_key_fails_the_run_with_one_error_and_no_ignored_warning(tmp_path):
    write_job(tmp_path, **{"stores.counts.cache.size": "10"})
    produce(tmp_path, words(4))

    proc = weir_run(tmp_path, "--status", "off")
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 2, out + err
    assert "is ignored" not in err
    assert err.count("stores.counts.cache.size") == 1
    assert "job.properties:" in err and "did you mean stores.counts.object.cache.size" in err
    assert not (tmp_path / "job").exists()  # nothing ran


class _RunnerBug(Exception):
    pass


def _run_until_runner_leaves(tmp_path: Path, monkeypatch, error: BaseException) -> list[int]:
    """Run a two-container job on an unbounded input and make the runner leave abnormally
    (``error`` from its supervision loop) once both containers report progress; return the
    containers' pids."""
    import weir.engine.container.runner as runner
    import weir.engine.container.supervisor as supervisor

    write_job(tmp_path, **{"job.container.count": "2", "job.status.log.interval.ms": "100"})
    produce(tmp_path, words(1000), end=False)  # the containers never end by themselves
    pids: list[int] = []
    real_drain = supervisor._drain

    def drain(children, events, stop_all, *, timeout):
        real_drain(children, events, stop_all, timeout=timeout)
        if not pids and all(c.progress is not None and c.progress.processed >= 500
                            for c in children.values()):
            pids.extend(c.process.pid for c in children.values())
            raise error

    monkeypatch.setattr(supervisor, "_drain", drain)
    with pytest.raises(type(error)):
        runner.run_job(config_of(tmp_path), status=StatusMode.LINE)
    monkeypatch.setattr(supervisor, "_drain", real_drain)
    return pids


def test_no_container_outlives_a_runner_that_fails_and_they_commit_first(tmp_path, monkeypatch):
    pids = _run_until_runner_leaves(tmp_path, monkeypatch, _RunnerBug("supervision broke"))

    assert len(pids) == 2 and all(_exited(pid) for pid in pids)
    # Stopped with SIGTERM, they committed everything they processed.
    assert checkpoints(tmp_path) == {0: 499, 1: 499}


def test_a_second_ctrl_c_in_the_runner_kills_the_containers_without_a_final_commit(
        tmp_path, monkeypatch):
    pids = _run_until_runner_leaves(tmp_path, monkeypatch, KeyboardInterrupt())

    assert len(pids) == 2 and all(_exited(pid) for pid in pids)
    # Killed: processing resumes from the last checkpoint, and ends exactly.
    produce(tmp_path, [], create=False, end=True, first=1000)
    assert finish_and_count(tmp_path, words(1000)) == Counter(words(1000))


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_sigterm_to_the_whole_process_group_is_a_clean_stop_with_a_final_commit(
        tmp_path, method):
    # What `kill -TERM -PGID`, `timeout` and systemd's default stop do: every process of the
    # job gets SIGTERM at once, the runner, its fork server and the containers.
    write_job(tmp_path, **{"job.container.count": "2", "task.commit.ms": "-1",
                           "job.status.log.interval.ms": "100",
                           "job.container.start.method": method})
    items = words(1200)
    produce(tmp_path, items, end=False)  # unbounded: only the signal stops the job

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([*WEIR, "run", "job.properties", "--status", "log"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "1,200 msgs" in line:
            break
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    err = "".join(seen) + err

    assert proc.returncode == 0, out + err
    assert "stopped by SIGTERM" in out
    assert "is gone" not in err and "ProcessDied" not in out + err
    for cid in ("0", "1"):  # each container's normal stop line
        assert f"container {cid}: received SIGTERM, stopping with a final commit" in err, err
    assert checkpoints(tmp_path) == {0: 599, 1: 599}
    # The final commits cover exactly what was processed: a restart that finishes the input
    # from the checkpoints gives the exact counts.
    assert finish_and_count(tmp_path, items) == Counter(items)


def test_sigterm_to_the_process_group_while_the_job_starts_stops_it_cleanly(tmp_path):
    # systemd or `timeout` stopping the job while it prepares (before its containers run):
    # the runner keeps the signal, starts no container (or stops them at once), exits 0.
    write_job(tmp_path, **{"job.container.count": "2", "task.commit.ms": "-1"})
    items = words(600)
    produce(tmp_path, items, end=False)

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([*WEIR, "run", "job.properties", "--status", "off"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "bootstrapped coordinator stream" in line:  # the job is being prepared
            break
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    err = "".join(seen) + err

    assert proc.returncode == 0, out + err
    assert "job 'runner-test' stopped by SIGTERM" in out
    assert "is gone" not in err and "ProcessDied" not in out + err
    # Whatever ran committed what it processed: the rest of the input, from the checkpoints,
    # gives the exact counts.
    assert finish_and_count(tmp_path, items) == Counter(items)
