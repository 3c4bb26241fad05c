"""The README's word count run, stopped, reset, changed and started again as an operator
would, through the ``weir`` command in child processes (issue 23): a clean stop leaves every
store reusable and ``weir state list`` predicts what the next start does; a reset between two
exactly-once runs starts the state over; a coordinator stream pointing a task at another
task's changelog partition is refused; the offline tools read a store with the engine the job
last ran with.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "word_count"
PARTITIONS = 4


def weir(workdir: Path, *args: str, check: bool = True, stdin: str | None = None
         ) -> subprocess.CompletedProcess:
    """``weir ARGS`` in ``workdir`` (the example's directory on the path, as ``weir run``
    adds it); fails the test, with the output, on a non-zero exit when ``check``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]))
    done = subprocess.run([sys.executable, "-m", "weir", *args], cwd=workdir, env=env,
                          input=stdin, capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, f"weir {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done


def word_count(tmp_path: Path, guarantee: str, words: int = 6_000) -> Path:
    """``examples/word_count`` copied to ``tmp_path`` with ``guarantee``, its input created
    bounded with ``words`` words and ended (the README's steps)."""
    text = (EXAMPLE / "job.properties").read_text()
    text += f"task.processing.guarantee={guarantee}\njob.container.count=1\n"
    (tmp_path / "job.properties").write_text(text)
    root = "./weir-data/log"
    weir(tmp_path, "log", "create", "words", "--partitions", str(PARTITIONS), "--root", root,
         "--bounded")
    weir(tmp_path, "log", "create", "word-counts", "--partitions", str(PARTITIONS), "--root",
         root)
    lines = "".join(json.dumps({"word": f"w{(i * 7919) % 1_500:04d}"}) + "\n"
                    for i in range(words))
    weir(tmp_path, "log", "produce", "words", "--format", "json", "--key-field", "word",
         "--root", root, "--end", stdin=lines)
    return tmp_path


def restore_actions(output: str) -> dict[str, str]:
    """Task -> the action of its ``restored store 'counts' ...`` summary line in a run's log."""
    marker = "restored store 'counts' of task '"
    out = {}
    for line in output.splitlines():
        if marker in line:
            task, rest = line.split(marker, 1)[1].split("' (", 1)
            out[task] = rest.split(",", 1)[0].split(")")[0]
    return out


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_a_clean_stop_leaves_every_store_reused_at_the_next_start(tmp_path, guarantee):
    job = word_count(tmp_path, guarantee)
    first = weir(job, "run", "job.properties", "--status", "off")
    assert "ended" in first.stdout + first.stderr
    listed = json.loads(weir(job, "state", "list", "job.properties", "--json").stdout)
    assert len(listed["stores"]) == PARTITIONS
    for row in listed["stores"]:
        assert row["offset_file"]["offset"] == row["checkpoint_changelog_offset"], row
        assert row["status"] == "at the checkpoint: used as is", row
    second = weir(job, "run", "job.properties", "--status", "off")
    actions = restore_actions(second.stdout + second.stderr)
    assert actions == {f"Partition {p}": "reuse" for p in range(PARTITIONS)}, second.stderr
    assert "rebuilt" not in second.stderr and "set aside" not in second.stderr


def test_weir_state_list_says_what_the_next_start_does(tmp_path):
    """A store whose OFFSET file is one past its checkpoint (what a clean exactly-once stop
    used to leave) holds no uncommitted write, but nothing proves it: the start rebuilds it,
    and ``weir state list`` says so (it used to predict a one-record revert)."""
    from weir.recovery.offset_file import read_offset_file, write_offset_file
    job = word_count(tmp_path, "exactly_once")
    weir(job, "run", "job.properties", "--status", "off")
    directory = job / "weir-data" / "word-count-1" / "state" / "counts" / "Partition_0"
    old = read_offset_file(directory)
    write_offset_file(directory, old.store, old.changelog, old.offset + 1, engine=old.engine,
                      marker=old.marker, identity=old.identity, task=old.task)
    listed = json.loads(weir(job, "state", "list", "job.properties", "--json").stdout)
    status = {row["task"]: row["status"] for row in listed["stores"]}
    assert status["Partition 0"].startswith("rebuilt from the changelog (local copy is at "
                                            f"offset {old.offset + 1}, past the committed"), status
    assert status["Partition 1"] == "at the checkpoint: used as is"
    second = weir(job, "run", "job.properties", "--status", "off")
    actions = restore_actions(second.stdout + second.stderr)
    assert actions["Partition 0"] == "rebuild" and actions["Partition 1"] == "reuse"


# -- a reset between two exactly-once runs (issue 23, point 9) -----------------------------------

def stored_counts(job: Path) -> dict[str, int]:
    """Every word's count in the job's store (``weir state dump``)."""
    dumped = weir(job, "state", "dump", "job.properties", "--store", "counts").stdout
    return {row["key"]: row["value"] for row in map(json.loads, dumped.splitlines())}


def input_counts(words: int = 6_000) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(words):
        word = f"w{(i * 7919) % 1_500:04d}"
        counts[word] = counts.get(word, 0) + 1
    return counts


@pytest.mark.parametrize("reset", ["weir checkpoint reset", "weir run --reset-state"])
def test_a_reset_between_two_exactly_once_runs_starts_the_state_over(tmp_path, reset):
    job = word_count(tmp_path, "exactly_once")
    weir(job, "run", "job.properties", "--status", "off")
    assert stored_counts(job) == input_counts()
    if reset == "weir checkpoint reset":
        weir(job, "checkpoint", "reset", "job.properties", "--yes")
        second = weir(job, "run", "job.properties", "--status", "off")
    else:
        second = weir(job, "run", "job.properties", "--status", "off", "--reset-state")
    assert "StateWithoutCheckpointError" not in second.stderr
    # counted once, from the start of the input, into the new state
    assert stored_counts(job) == input_counts()
    log = job / "weir-data" / "log"
    aside = sorted(p.name for p in log.iterdir() if p.name.startswith(".transactions.reset-"))
    assert len(aside) == 1 and len(list((log / aside[0] / "ids").iterdir())) == PARTITIONS
    # the new run's producers are new ones: the old ones' markers never reach the new changelog
    assert len(list((log / ".transactions" / "ids").iterdir())) == PARTITIONS
    # and the reset can be repeated after the second run
    weir(job, "checkpoint", "reset", "job.properties", "--yes")
    weir(job, "run", "job.properties", "--status", "off")
    assert stored_counts(job) == input_counts()


# -- a coordinator stream pointing a task at another task's changelog (issue 23, point 2) --------

def test_a_set_changelog_record_pointing_at_another_tasks_partition_is_refused(tmp_path):
    job = word_count(tmp_path, "at_least_once")
    weir(job, "run", "job.properties", "--status", "off")
    before = stored_counts(job)
    stream = "__samza_coordinator_word-count_1"
    record = ('[1,"set-changelog","Partition 0"]={"host":"vm","username":"op","source":"hand",'
              '"timestamp":1,"values":{"Partition":"1"}}\n')
    produce = ("log", "produce", stream, "--format", "kv", "--root", "./weir-data/log")
    refused = weir(job, *produce, stdin=record, check=False)
    assert refused.returncode != 0 and "--force" in refused.stderr
    weir(job, *produce, "--force", stdin=record)
    # the documented-safe deletion of a task's local store
    shutil.rmtree(job / "weir-data" / "word-count-1" / "state" / "counts" / "Partition_0")
    checkpoints = job / "weir-data" / "word-count-1" / "checkpoints"
    kept = {p.name: p.read_bytes() for p in checkpoints.iterdir() if p.is_file()}

    run = weir(job, "run", "job.properties", "--status", "off", check=False)

    assert run.returncode != 0
    message = run.stdout + run.stderr
    assert "ChangelogPartitionMismatchError" in message, message
    assert "filelog.word-count-counts#1" in message and "filelog.word-count-counts#0" in message
    assert {p.name: p.read_bytes() for p in checkpoints.iterdir() if p.is_file()} == kept
    assert not (job / "weir-data" / "word-count-1" / "state" / "counts" / "Partition_0").exists()
    # put the assignment back: the task's own partition restores the exact state
    weir(job, *produce, "--force", stdin=record.replace('"Partition":"1"', '"Partition":"0"'))
    weir(job, "run", "job.properties", "--status", "off")
    assert stored_counts(job) == before


# -- offline tools after a dynamic config change (issue 23, point 7) ---------------------------

def test_offline_tools_read_a_store_with_the_engine_the_job_last_ran_with(tmp_path):
    """`weir coordinator set-config stores.counts.factory=lmdb` while the job runs switches
    its stores to LMDB; once it stopped, `weir state list/dump` read them with LMDB (the
    coordinator stream's config, not the file's rocksdb), create nothing in the store, and an
    engine that does not match the files is a typed error."""
    job = tmp_path
    text = (EXAMPLE / "job.properties").read_text() + "job.container.count=1\n"
    (job / "job.properties").write_text(text)
    root = "./weir-data/log"
    weir(job, "log", "create", "words", "--partitions", "2", "--root", root)
    weir(job, "log", "create", "word-counts", "--partitions", "2", "--root", root)
    weir(job, "log", "produce", "words", "--format", "json", "--key-field", "word", "--root",
         root, stdin="".join(json.dumps({"word": f"w{i % 50}"}) + "\n" for i in range(500)))
    store = job / "weir-data" / "word-count-1" / "state" / "counts"
    checkpoints = job / "weir-data" / "word-count-1" / "checkpoints"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]))
    run = subprocess.Popen([sys.executable, "-m", "weir", "run", "job.properties", "--status",
                            "off"], cwd=job, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: len(list(checkpoints.glob("*.json"))) == 2, run)
        weir(job, "coordinator", "set-config", "--job", "job.properties", "--key",
             "stores.counts.factory", "--value", "lmdb")
        wait_for(lambda: all((store / f"Partition_{p}" / "data.mdb").exists()
                             and (store / f"Partition_{p}" / "OFFSET").exists()
                             for p in range(2)), run)
    finally:
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=120)
    assert run.returncode == 130, output
    files = {p: sorted(x.name for x in (store / f"Partition_{p}").iterdir()) for p in range(2)}

    listed = weir(job, "state", "list", "job.properties", "--json")
    rows = {row["task"]: row for row in json.loads(listed.stdout)["stores"]}
    assert "stores.counts.factory=lmdb" in listed.stderr  # says which config it read
    assert {row["engine"] for row in rows.values()} == {"lmdb"}
    assert sum(row["keys"] for row in rows.values()) == 50
    assert all(row["status"] == "at the checkpoint: used as is" for row in rows.values())
    dumped = weir(job, "state", "dump", "job.properties", "--store", "counts").stdout
    assert {json.loads(line)["key"] for line in dumped.splitlines()} == {
        f"w{i}" for i in range(50)}

    wrong = weir(job, "state", "dump", "job.properties", "--store", "counts", "--set",
                 "stores.counts.factory=rocksdb", check=False)
    assert wrong.returncode != 0
    assert "StoreFilesMismatchError" in wrong.stderr or "written by the lmdb engine" in \
        wrong.stderr, wrong.stderr
    assert {p: sorted(x.name for x in (store / f"Partition_{p}").iterdir())
            for p in range(2)} == files  # nothing created, nothing changed


def wait_for(condition, process: subprocess.Popen, timeout: float = 120) -> None:
    """Poll ``condition`` until it holds; fail when ``process`` exits first or time runs out
    (a bound on a hang, not a timed assertion)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        assert time.monotonic() < deadline, "the job did not get there"
        time.sleep(0.05)


# -- a look at a read-only copy of a job's data (issue 23, point 11) ---------------------------

def read_only_weir(job: Path, *args: str) -> subprocess.CompletedProcess:
    """``weir ARGS`` in a mount namespace where ``weir-data`` is mounted read only (the test
    is skipped where this process may not make one)."""
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind / /mnt && umount /mnt"],
                           capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot make a read-only mount here (needs unshare and mount rights)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]))
    script = ('mount --bind weir-data weir-data && mount -o remount,bind,ro weir-data && '
              'exec "$@"')
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-m",
                           "weir", *args], cwd=job, env=env, capture_output=True, text=True,
                          timeout=300)


def tree(directory: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in directory.rglob("*") if p.is_file()}


def test_weir_state_list_reads_a_read_only_copy_of_a_stopped_job(tmp_path):
    job = word_count(tmp_path, "at_least_once")
    weir(job, "run", "job.properties", "--status", "off")
    before = tree(job / "weir-data")

    listed = read_only_weir(job, "state", "list", "job.properties", "--json")
    dumped = read_only_weir(job, "state", "dump", "job.properties", "--store", "counts")

    assert listed.returncode == 0, listed.stderr
    assert "cannot be written here" in listed.stderr and "nothing is written" in listed.stderr
    rows = json.loads(listed.stdout)["stores"]
    assert [row["status"] for row in rows] == ["at the checkpoint: used as is"] * PARTITIONS
    assert sum(row["keys"] for row in rows) == len(input_counts())
    assert dumped.returncode == 0, dumped.stderr
    assert {json.loads(line)["key"]: json.loads(line)["value"]
            for line in dumped.stdout.splitlines()} == input_counts()
    assert tree(job / "weir-data") == before


def test_a_look_at_a_read_only_copy_is_refused_while_the_job_runs(tmp_path):
    job = tmp_path
    (job / "job.properties").write_text((EXAMPLE / "job.properties").read_text()
                                        + "job.container.count=1\n")
    weir(job, "log", "create", "words", "--partitions", "2", "--root", "./weir-data/log")
    weir(job, "log", "create", "word-counts", "--partitions", "2", "--root", "./weir-data/log")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]))
    run = subprocess.Popen([sys.executable, "-m", "weir", "run", "job.properties", "--status",
                            "off"], cwd=job, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        checkpoints = job / "weir-data" / "word-count-1" / "checkpoints"
        wait_for(lambda: len(list(checkpoints.glob("*.json"))) == 2, run)
        looked = read_only_weir(job, "state", "list", "job.properties")
    finally:
        run.send_signal(signal.SIGINT)
        run.communicate(timeout=120)
    assert looked.returncode != 0
    assert "JobLockedError" in looked.stderr or "is locked by" in looked.stderr, looked.stderr
    assert f"pid {run.pid}" in looked.stderr


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_a_job_killed_once_idle_reuses_every_store(tmp_path, guarantee):
    """A commit settles a store (its files made durable, its ``OFFSET`` file written) only once
    it stops changing: the commit after the job goes idle settles every store, so a job
    SIGKILLed while idle restores nothing at the next start, under both guarantees."""
    job = word_count(tmp_path, guarantee)
    text = (job / "job.properties").read_text() + "task.commit.ms=200\n"
    (job / "job.properties").write_text(text)
    shutil.rmtree(job / "weir-data")
    root = "./weir-data/log"
    weir(job, "log", "create", "words", "--partitions", str(PARTITIONS), "--root", root,
         "--bounded")  # not ended yet: the job waits, idle, once it has read everything
    weir(job, "log", "create", "word-counts", "--partitions", str(PARTITIONS), "--root", root)
    lines = "".join(json.dumps({"word": f"w{i % 900:04d}"}) + "\n" for i in range(4_000))
    weir(job, "log", "produce", "words", "--format", "json", "--key-field", "word",
         "--root", root, stdin=lines)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]))
    running = subprocess.Popen([sys.executable, "-m", "weir", "run", "job.properties",
                                "--status", "off"], cwd=job, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stores = job / "weir-data" / "word-count-1" / "state" / "counts"
    try:
        deadline = time.monotonic() + 240  # a bound on waiting, not a measured time
        while not all((stores / f"Partition_{p}" / "OFFSET").exists()
                      for p in range(PARTITIONS)):
            assert running.poll() is None, "the job ended before it went idle"
            assert time.monotonic() < deadline, "the stores were never settled"
            time.sleep(0.05)
    finally:
        os.killpg(running.pid, signal.SIGKILL)
        running.wait()
    weir(job, "log", "produce", "words", "--root", root, "--end", stdin="")
    second = weir(job, "run", "job.properties", "--status", "off")
    actions = restore_actions(second.stdout + second.stderr)
    assert actions == {f"Partition {p}": "reuse" for p in range(PARTITIONS)}, second.stderr
