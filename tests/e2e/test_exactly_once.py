"""Exactly-once output under SIGKILL: the README's word count and the currency join, killed at
random points with ``task.processing.guarantee=exactly_once``, then run to the end.

Read committed, every output holds each result exactly once: the word count emits the counts
1..n of every word, each once, in order, no gap, no duplicate; the currency join emits one
amount per transaction and per currency totals whose counts only grow. With the guarantee off
(the default) nothing transactional is written: the streams stay format 1, no producer state
exists, and the outputs are what at-least-once gives.

CI runs ``WEIR_EXACTLY_ONCE_KILLS`` kills per example (default 3, a few seconds);
``WEIR_EXACTLY_ONCE_FULL=1`` runs 20 on a larger input.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from weir.engine.config.job import JobConfig, load_config
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from tests._processes import committed_messages, read_partitions, start_weir
from tests.e2e._words_input import produce_words

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("WEIR_EXACTLY_ONCE_FULL") == "1"
KILLS = 20 if FULL else int(os.environ.get("WEIR_EXACTLY_ONCE_KILLS", "3"))
PARTITIONS = 4


# -- running `weir run` and killing it ------------------------------------------------------------

def _start(workdir: Path, example: str) -> subprocess.Popen:
    return _start_file(workdir, "job.properties", example)


def _committed(workdir: Path, inputs: list[str]) -> int:
    """Messages the checkpoints cover, over every task and input."""
    job = JobConfig.from_config(load_config(workdir / "job.properties"), cwd=workdir)
    return committed_messages(job.checkpoint_dir, PARTITIONS, inputs)


def _kill_at(workdir: Path, example: str, inputs: list[str], target: int,
             rng: random.Random) -> bool:
    """Start the job, SIGKILL it once its checkpoints cover ``target`` messages (plus a random
    delay). False when it finished first."""
    proc = _start(workdir, example)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if _committed(workdir, inputs) >= target:
            break
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.25))
    proc.send_signal(signal.SIGKILL)
    output, _ = proc.communicate(timeout=60)
    if proc.returncode == -signal.SIGKILL:
        return True
    assert proc.returncode == 0, output
    return False


def _kill_and_finish(workdir: Path, example: str, inputs: list[str], total: int,
                     seed: str) -> int:
    rng = random.Random(seed)
    targets = sorted(rng.uniform(0.03, 0.95) * total for _ in range(KILLS))
    killed = sum(_kill_at(workdir, example, inputs, int(t), rng) for t in targets)
    final = _start(workdir, example)
    output, _ = final.communicate(timeout=300)
    assert final.returncode == 0, output
    print(f"{example}: SIGKILLed {killed} of {KILLS} runs mid-stream, then ran it to the end")
    return killed


# -- the README's word count ----------------------------------------------------------------------

def _word_count(tmp_path: Path, guarantee: str, messages: int) -> tuple[SystemRegistry, Counter]:
    text = (ROOT / "examples" / "word_count" / "job.properties").read_text()
    text += "\n# the test: more commits, so the kills fall between many of them\ntask.commit.ms=200\n"
    if guarantee:
        text += f"task.processing.guarantee={guarantee}\n"
    (tmp_path / "job.properties").write_text(text)
    config = load_config(tmp_path / "job.properties", [f"systems.filelog.root={tmp_path}/log"])
    (tmp_path / "job.properties").write_text(text + f"systems.filelog.root={tmp_path}/log\n")
    registry = SystemRegistry(config)
    admin = registry.admin("filelog")
    admin.create_stream(StreamSpec("words", PARTITIONS, bounded=True))
    admin.create_stream(StreamSpec("word-counts", PARTITIONS))
    return registry, produce_words(registry, messages, 800, 2024, PARTITIONS)


def test_word_count_killed_at_random_points_emits_every_count_exactly_once(tmp_path):
    messages = 200_000 if FULL else 60_000
    registry, truth = _word_count(tmp_path, "exactly_once", messages)
    killed = _kill_and_finish(tmp_path, "word_count", ["words"], messages, "word-count")
    assert killed >= 1
    emitted = defaultdict(list)
    for envs in read_partitions(registry, "word-counts").values():
        for env in envs:
            assert env.key == env.message["word"]
            emitted[env.message["word"]].append(env.message["count"])
    wrong = {w: (c[:5], truth[w]) for w, c in emitted.items()
             if c != list(range(1, truth[w] + 1))}
    assert not wrong, f"{len(wrong)} words are not 1..n exactly once, e.g. " \
                      f"{next(iter(wrong.items()))}"
    assert emitted.keys() == truth.keys()
    assert sum(len(c) for c in emitted.values()) == messages
    assert json.loads((tmp_path / "log" / "word-counts" / "stream.json").read_text())[
        "format"] == 2


def test_word_count_without_the_guarantee_writes_nothing_transactional(tmp_path):
    messages = 30_000
    registry, truth = _word_count(tmp_path, "", messages)
    _kill_and_finish(tmp_path, "word_count", ["words"], messages, "at-least-once")
    last = {}
    count = 0
    for envs in read_partitions(registry, "word-counts").values():
        for env in envs:
            last[env.message["word"]] = env.message["count"]
            count += 1
    assert last == dict(truth)       # the state is exact, as before
    assert count >= messages         # outputs at least once, as before
    for stream in ("words", "word-counts", "word-count-counts"):
        meta = json.loads((tmp_path / "log" / stream / "stream.json").read_text())
        assert meta["format"] == 1
    assert not (tmp_path / "log" / ".transactions").exists()


# -- the currency join ----------------------------------------------------------------------------

def test_currency_join_killed_at_random_points_emits_every_amount_exactly_once(tmp_path):
    sys.path.insert(0, str(ROOT / "examples" / "currency_join"))
    try:
        from generate import generate
    finally:
        sys.path.pop(0)
    transactions, replay = (60_000, 20_000) if FULL else (16_000, 6_000)
    text = (ROOT / "examples" / "currency_join" / "job.properties").read_text()
    text += (f"\njob.data.dir={tmp_path}\nsystems.filelog.root={tmp_path}/log\n"
             f"task.commit.ms=200\ntask.window.ms=300\n"
             f"task.processing.guarantee=exactly_once\n")
    (tmp_path / "job.properties").write_text(text)
    config = load_config(tmp_path / "job.properties")
    truth = generate(config, transactions=transactions, replay=replay)
    inputs = ["transactions", "transactions-replay"]
    killed = _kill_and_finish(tmp_path, "currency_join", inputs, transactions + replay,
                              "currency")
    assert killed >= 1
    registry = SystemRegistry(config)
    amounts = [env for envs in read_partitions(registry, "amounts").values() for env in envs]
    ids = Counter(env.key for env in amounts)
    assert max(ids.values()) == 1, ids.most_common(3)                 # no duplicate
    assert ids.keys() == truth.amounts.keys()                         # none missing
    assert {env.key: env.message["amount"] for env in amounts} == truth.amounts
    last = {}
    for envs in read_partitions(registry, "currency-totals").values():
        counts = defaultdict(list)
        for env in envs:
            counts[env.key].append(env.message["count"])
            last[env.key] = {"total": env.message["total"], "count": env.message["count"]}
        for code, seen in counts.items():
            # every window sends a grown count; on_end_of_stream sends the last one again, in
            # every run that reaches the end of the inputs (a run killed after its final
            # commit, before it exited, reached it too: the hook runs again after a restart)
            body = list(seen)
            while len(body) > 1 and body[-1] == body[-2]:
                body.pop()
            assert body == sorted(set(body)), (code, seen)
    assert last == truth.totals


# -- the same job started twice at once -----------------------------------------------------------

def test_two_copies_of_a_job_started_at_once_never_count_twice(tmp_path):
    """A hostile operator starts the word count twice at the same moment, the second copy with
    its own job.data.dir (so the job lock does not see the first): same tasks, same
    transactional ids, same log. Whichever copy takes the job's run lock (beside the coordinator
    stream) first runs; the other is refused at start with JobAlreadyRunningError, nothing
    written. A copy that starts after the other ended has no checkpoint but the first's
    committed state is there, so it stops with a typed error (or TransactionalIdInUseError
    while the other's producers are still there): never does it count on top of the first's
    state. (Each copy keeps its job and container locks in its own data directory, so they
    never meet there.)"""
    messages = 30_000
    registry, truth = _word_count(tmp_path, "exactly_once", messages)
    other = tmp_path / "other"
    other.mkdir()
    (other / "job.properties").write_text((tmp_path / "job.properties").read_text()
                                          + f"job.data.dir={tmp_path}/other-data\n")
    first, second = _start(tmp_path, "word_count"), _start(other, "word_count")
    outputs = [p.communicate(timeout=300)[0] for p in (first, second)]
    codes = [first.returncode, second.returncode]
    assert 0 in codes, outputs
    for code, output in zip(codes, outputs):
        if code != 0:
            assert ("already runs: its job coordinator" in output  # JobAlreadyRunningError
                    or "StateWithoutCheckpointError" in output
                    or "TransactionalIdInUseError" in output), output
    emitted = defaultdict(list)
    for envs in read_partitions(registry, "word-counts").values():
        for env in envs:
            emitted[env.message["word"]].append(env.message["count"])
    assert {w: c for w, c in emitted.items() if c != list(range(1, truth[w] + 1))} == {}
    assert emitted.keys() == truth.keys()


# -- a pipeline of two jobs -----------------------------------------------------------------------

_CHECK_JOB = """job.name=count-check
task.class=tests.e2e._count_check:CountCheck
task.inputs=filelog.word-counts
task.commit.ms=200
task.processing.guarantee=exactly_once
systems.filelog.root={root}
systems.filelog.samza.key.serde=string
systems.filelog.samza.msg.serde=json
systems.filelog.default.stream.samza.offset.default=oldest
stores.seen.factory=rocksdb
stores.seen.key.serde=string
stores.seen.msg.serde=int64
stores.seen.changelog=filelog.count-check-seen
"""


def _start_file(workdir: Path, properties: str, example: str) -> subprocess.Popen:
    return start_weir(workdir, properties, paths=[ROOT / "examples" / example])


def _checks(registry: SystemRegistry) -> list:
    return [env for envs in read_partitions(registry, "word-count-checks").values() for env in envs]


def test_a_pipeline_of_two_exactly_once_jobs_killed_at_random_points_is_exactly_once(
        tmp_path):
    """The word count feeds a second job through its output stream (read committed); both
    are SIGKILLed at random points while they run side by side. The second job's output holds
    every count of the first exactly once: per word, seen == count, 1..n."""
    messages = 40_000
    registry, truth = _word_count(tmp_path, "exactly_once", messages)
    (tmp_path / "check.properties").write_text(_CHECK_JOB.format(root=tmp_path / "log"))
    registry.admin("filelog").create_stream(StreamSpec("word-count-checks", PARTITIONS))
    rng = random.Random("pipeline")
    killed = 0
    for _ in range(KILLS):
        before = _committed(tmp_path, ["words"])
        first = _start_file(tmp_path, "job.properties", "word_count")
        second = _start_file(tmp_path, "check.properties", "word_count")
        # The handshake: the first job has committed more input in this run (so both run side
        # by side, however long they took to start), then a random moment.
        deadline = time.monotonic() + 120
        while (_committed(tmp_path, ["words"]) <= before and first.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 1.0))
        for proc in rng.sample([first, second], 2):
            proc.send_signal(signal.SIGKILL)
            time.sleep(rng.uniform(0.0, 0.3))
        for proc in (first, second):
            output, _ = proc.communicate(timeout=60)
            killed += proc.returncode == -signal.SIGKILL
            assert proc.returncode in (0, -signal.SIGKILL), output
    first = _start_file(tmp_path, "job.properties", "word_count")
    second = _start_file(tmp_path, "check.properties", "word_count")
    output, _ = first.communicate(timeout=300)
    assert first.returncode == 0, output
    deadline = time.monotonic() + 300
    while len(_checks(registry)) < messages and time.monotonic() < deadline \
            and second.poll() is None:
        time.sleep(0.5)
    second.send_signal(signal.SIGTERM)          # the second job reads an unbounded stream
    output, _ = second.communicate(timeout=120)
    assert second.returncode == 0, output
    print(f"pipeline: SIGKILLed {killed} of {2 * KILLS} runs")
    assert killed >= 1
    seen = defaultdict(list)
    for env in _checks(registry):
        assert env.message["seen"] == env.message["count"], env.message
        seen[env.message["word"]].append(env.message["count"])
    assert {w: c for w, c in seen.items() if c != list(range(1, truth[w] + 1))} == {}
    assert seen.keys() == truth.keys()
