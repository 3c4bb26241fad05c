"""Shared writers under SIGKILL, with real processes and files: three writer processes append
to one partition while the test kills one at random moments (and restarts it), and each
writer kills itself at a chosen point of its work with some probability (see
``_shared_stress_writer.py``: half a write-out written, a write-out written but not
acknowledged, a sealed segment's index written but the next segment not created, the next
segment created but maintenance not run, in the middle of maintenance, after a tail hint).
Small segments, now and then a record bigger than the segment and the buffer, zstd
compression at the rolls. A reader follows the partition while it is written.

Afterwards: offsets run 0..n-1; no record appears twice; each writer incarnation's records
are a prefix of what it appended, in order; every acknowledged record is there; the
following reader saw exactly the same records at the same offsets; reads that seek into the
middle (through the indexes) give the same records.

Transactional producers of three processes interleave batches and markers in one partition
the same way (commit or abort at random, SIGKILLed at random, each restarted): read committed
gives every committed transaction whole and no aborted one, each exactly once; read
uncommitted gives every transaction's records whole; seeks agree.

CI runs a few seconds per case; ``WEIR_SHARING_STRESS=1`` runs 20 s per case and more cases.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from weir.engine.systems.filelog import PartitionWriter, WriterSharing
from weir.engine.systems.filelog.settings import IsolationLevel

from tests.engine.systems.filelog.conftest import Log

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
LONG = os.environ.get("WEIR_SHARING_STRESS") == "1"
SECONDS = 20.0 if LONG else 3.0
CONFIG = {"segment_bytes": "4096", "producer_buffer_bytes": "2000", "compression": "zstd"}
POINTS = (["none", "partial", "written", "index", "created", "maintain", "hint"] if LONG
          else ["partial", "index"])


class _Killer:
    """Runs ``names`` as restartable child processes; kills one at random now and then."""

    def __init__(self, rng: random.Random, command):
        self.rng, self.command = rng, command
        self.procs: dict[str, subprocess.Popen] = {}
        self.incarnation: dict[str, int] = {}
        self.kills = 0
        self.failures: list[str] = []

    def start(self, name: str) -> None:
        self.incarnation[name] = self.incarnation.get(name, -1) + 1
        self.procs[name] = subprocess.Popen(self.command(name, self.incarnation[name]))

    def run(self, names: list[str], seconds: float, progressed) -> None:
        """Kill and restart for ``seconds``, and on (up to a minute) until ``progressed()``
        (a loaded machine may start the processes slower than they are killed)."""
        for name in names:
            self.start(name)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline or (not progressed()
                                                  and time.monotonic() < deadline + 60):
                time.sleep(self.rng.uniform(0.05, 0.4))
                for name in names:
                    code = self.procs[name].poll()
                    if code is not None:  # killed itself at a crash point
                        if code != -signal.SIGKILL:
                            self.failures.append(f"{name} exited with {code}")
                        self.start(name)
                if self.rng.random() < 0.5 and progressed():
                    name = self.rng.choice(names)
                    self.procs[name].send_signal(signal.SIGKILL)
                    self.procs[name].wait()
                    self.kills += 1
                    self.start(name)
        finally:
            for proc in self.procs.values():
                proc.send_signal(signal.SIGKILL)
                proc.wait()


def _follow(log: Log, stop: threading.Event, seen: list, errors: list) -> None:
    reader = log.admin.reader("s", 0, 0)
    try:
        while not stop.is_set():
            got = reader.read_records(1000)
            seen.extend((r.offset, r.value) for r in got)
            if not got:
                time.sleep(0.005)
    except Exception as exc:  # noqa: BLE001 - reported by the test
        errors.append(repr(exc))
    finally:
        reader.close()


@pytest.mark.parametrize("point", POINTS)
def test_shared_writers_killed_at_random_points_keep_every_acknowledged_record_once(
        tmp_path, point):
    root = str(tmp_path / "log")
    log = Log(root, **CONFIG)
    log.create()
    rng = random.Random(point)
    script = os.path.join(HERE, "_shared_stress_writer.py")
    killer = _Killer(rng, lambda name, inc: [
        sys.executable, script, REPO, root, name, str(inc), str(rng.randrange(10**9)),
        str(tmp_path / f"acks-{name}"), point, "0.05", json.dumps(CONFIG)])
    stop, seen, errors = threading.Event(), [], []
    follower = threading.Thread(target=_follow, args=(log, stop, seen, errors))
    follower.start()
    names = ["w0", "w1", "w2"]
    try:
        killer.run(names, SECONDS, lambda: any(
            (tmp_path / f"acks-{name}").exists() for name in names))
        time.sleep(0.1)
    finally:
        stop.set()
        follower.join()
    assert not killer.failures and not errors, (killer.failures, errors)
    meta = log.admin.stream_meta("s")
    with PartitionWriter(root, meta, 0, log.settings.for_stream("s", meta.config),
                         system=log.settings.system, sharing=WriterSharing.SHARED) as last:
        last.append(b"last", b"last")  # after cutting off whatever torn tail is left

    records = log.read()
    values = [r.value for r in records]
    assert [r.offset for r in records] == list(range(len(records)))
    assert len(set(values)) == len(values)
    assert values[-1] == b"last"
    written: dict[tuple[str, int], list[int]] = collections.defaultdict(list)
    for value in values[:-1]:
        name, inc, seq, _ = value.split(b":", 3)
        written[(name.decode(), int(inc))].append(int(seq))
    for key, seqs in written.items():
        assert seqs == list(range(len(seqs))), key
    acked = 0
    for name in names:
        path = tmp_path / f"acks-{name}"
        for line in (path.read_text().split() if path.exists() else []):
            inc, seq = map(int, line.split(":"))
            assert len(written[(name, inc)]) > seq, (name, inc, seq)
            acked += 1
    assert acked > 0
    assert seen == [(r.offset, r.value) for r in records][:len(seen)]
    for offset in sorted(rng.sample(range(len(values)), min(40, len(values)))):
        assert [r.value for r in log.read(offset=offset, max_records=3)] == \
            values[offset:offset + 3], offset


# -- transactional producers ---------------------------------------------------------------

def _read(log: Log, isolation: IsolationLevel, offset: int = 0, max_records: int = 10**7):
    reader = log.admin.reader("s", 0, offset, isolation=isolation)
    out: list = []
    try:
        while len(out) < max_records:
            got = reader.read_records(max_records - len(out))
            if not got:
                return out
            out.extend(got)
        return out
    finally:
        reader.close()


@pytest.mark.parametrize("seed", range(3 if LONG else 1))
def test_transactional_producers_of_three_processes_sharing_a_partition_are_exactly_once(
        tmp_path, seed):
    config = {"segment_bytes": "2048", "producer_batch_size": "3", "compression": "zstd"}
    root = str(tmp_path / "log")
    log = Log(root, **config)
    log.create()
    rng = random.Random(seed)
    script = os.path.join(HERE, "_txn_stress_producer.py")
    tids = [f"job-1/Partition {i}" for i in range(3)]

    def progress(tid: str) -> str:
        return str(tmp_path / ("progress-" + tid.replace("/", "_").replace(" ", "_")))

    killer = _Killer(rng, lambda tid, inc: [
        sys.executable, script, REPO, root, tid, str(inc), str(rng.randrange(10**9)),
        progress(tid), json.dumps(config)])
    killer.run(tids, SECONDS * 2, lambda: any(os.path.exists(progress(t)) for t in tids))
    assert not killer.failures, killer.failures
    finish = (f"import sys; sys.path.insert(0, {REPO!r})\n"
              f"from weir.engine.systems.filelog.transactions import TransactionalProducer\n"
              f"from tests.engine.systems.filelog.conftest import Log\n"
              f"log = Log({root!r}, **{config!r})\n"
              f"for t in {tids!r}:\n"
              f"    p = TransactionalProducer(log.settings, t); p.init_transactions(); p.stop()\n")
    subprocess.run([sys.executable, "-c", finish], check=True, timeout=60)

    committed = _read(log, IsolationLevel.READ_COMMITTED)
    uncommitted = _read(log, IsolationLevel.READ_UNCOMMITTED)
    values = [r.value for r in committed]
    assert len(set(values)) == len(values)
    assert [r.offset for r in committed] == sorted(r.offset for r in committed)

    def txn_of(value: bytes) -> tuple[str, int, int]:
        tid, inc, txn, _ = value.split(b":", 3)
        return tid.decode(), int(inc), int(txn)

    visible: dict[tuple, list[int]] = collections.defaultdict(list)
    for value in values:
        visible[txn_of(value)].append(int(value.split(b":")[3]))
    sizes = collections.Counter(txn_of(r.value) for r in uncommitted)
    for txn, items in visible.items():      # whole, in order
        assert items == list(range(sizes[txn])), txn
    outcomes = {}
    for tid in tids:
        if os.path.exists(progress(tid)):
            for line in open(progress(tid)):
                what, inc, txn = line.split()
                outcomes[(tid, int(inc), int(txn))] = what
    assert "C" in outcomes.values()
    for txn, what in outcomes.items():
        if what == "C":
            assert txn in visible, txn       # committed: there
        elif what == "A":
            assert txn not in visible, txn   # aborted: never visible
    assert set(visible) <= set(outcomes)     # nothing visible that was not ended
    offsets = [r.offset for r in uncommitted]
    for offset in sorted(rng.sample(offsets, min(30, len(offsets)))):
        assert [r.value for r in _read(log, IsolationLevel.READ_COMMITTED, offset, 3)] == \
            [r.value for r in committed if r.offset >= offset][:3]
        assert [r.value for r in _read(log, IsolationLevel.READ_UNCOMMITTED, offset, 3)] == \
            [r.value for r in uncommitted if r.offset >= offset][:3]
