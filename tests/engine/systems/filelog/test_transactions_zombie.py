"""A zombie writer cannot add records: a producer process paused with SIGSTOP at a random
point, its locks gone (as on a filesystem whose locks do not reach the other machine, or
lock files removed by hand), resumed after its replacement started and committed.

Read committed afterwards: every record of the replacement is there; each transaction of the
zombie is there whole or not at all; none of the zombie's transactions after the one it was
in when it was paused is there; and the zombie stopped with ProducerFencedError naming its
epoch and the replacement's.
"""

from __future__ import annotations

import glob
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import defaultdict

import pytest

from weir.engine.systems.filelog.settings import IsolationLevel

from tests.engine.systems.filelog.conftest import SYSTEM

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
PER_TXN = 20

_PRODUCER = """
import os, sys
sys.path.insert(0, {root!r})
from weir.stores.config import Config
from weir.engine.errors import ProducerFencedError
from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.systems.filelog import FileLogSettings
from weir.engine.systems.filelog.transactions import TransactionalProducer
settings = FileLogSettings.from_config("{system}", Config({{
    "systems.{system}.root": {log!r}, "systems.{system}.producer.batch.size": "200"}}))
producer = TransactionalProducer(settings, "job-1/Partition 0")
producer.init_transactions()
out = SystemStream("{system}", "s")
progress = open({progress!r}, "a", buffering=1)
"""

_ZOMBIE = _PRODUCER + """
txn = 0
try:
    while True:
        txn += 1
        for i in range({per_txn}):
            producer.send("t", OutgoingMessageEnvelope(out, b"A-%d-%d" % (txn, i), key=b"k",
                                                       partition=i % 2))
        producer.flush()
        producer.prepare()
        producer.commit()
        progress.write("committed %d\\n" % txn)
except ProducerFencedError as exc:
    progress.write("fenced %d %d %s\\n" % (exc.epoch, exc.current, exc.transactional_id))
    os._exit(3)
"""

_REPLACEMENT = _PRODUCER + """
for i in range({per_txn}):
    producer.send("t", OutgoingMessageEnvelope(out, b"B-%d" % i, key=b"k", partition=i % 2))
producer.prepare()
producer.commit()
producer.stop()
progress.write("replacement done\\n")
"""


def _script(template: str, log, progress: str) -> str:
    return textwrap.dedent(template.format(root=ROOT, system=SYSTEM, log=log.root,
                                           progress=progress, per_txn=PER_TXN))


def _lines(path: str) -> list[str]:
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def _values(log) -> list[bytes]:
    out = []
    for partition in range(2):
        reader = log.admin.reader("s", partition, 0, isolation=IsolationLevel.READ_COMMITTED)
        try:
            out.extend(r.value for r in reader.read_records(10**7))
        finally:
            reader.close()
    return out


@pytest.mark.parametrize("seed", range(int(os.environ.get("WEIR_ZOMBIE_ROUNDS", "3"))))
def test_a_paused_zombie_resumed_after_its_replacement_cannot_add_records(log, tmp_path, seed):
    rng = random.Random(seed)
    log.create(partitions=2)
    progress = str(tmp_path / "zombie.progress")
    zombie = subprocess.Popen([sys.executable, "-c", _script(_ZOMBIE, log, progress)])
    try:
        wanted = rng.randint(3, 12)
        deadline = time.monotonic() + 60
        while len(_lines(progress)) < wanted and time.monotonic() < deadline:
            assert zombie.poll() is None, _lines(progress)
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.02))
        zombie.send_signal(signal.SIGSTOP)
        committed_before = [int(line.split()[1]) for line in _lines(progress)
                            if line.startswith("committed")]
        last_before = max(committed_before)
        # the locks stop protecting: gone, as if on another machine
        for lock in glob.glob(f"{log.root}/.transactions/*.lock") + \
                glob.glob(f"{log.root}/s/*/.*.lock"):
            os.unlink(lock)
        replacement = subprocess.run(
            [sys.executable, "-c", _script(_REPLACEMENT, log, progress)], timeout=60)
        assert replacement.returncode == 0
        zombie.send_signal(signal.SIGCONT)
        assert zombie.wait(timeout=60) == 3
    finally:
        if zombie.poll() is None:
            zombie.send_signal(signal.SIGCONT)
            zombie.kill()
            zombie.wait()
    fenced = [line for line in _lines(progress) if line.startswith("fenced")]
    assert fenced and fenced[0] == "fenced 0 1 job-1/Partition 0", fenced

    values = _values(log)
    assert len(values) == len(set(values))
    assert {v for v in values if v.startswith(b"B-")} == {b"B-%d" % i for i in range(PER_TXN)}
    zombie_txns: dict[int, set[int]] = defaultdict(set)
    for value in values:
        if value.startswith(b"A-"):
            _, txn, i = value.split(b"-")
            zombie_txns[int(txn)].add(int(i))
    assert all(items == set(range(PER_TXN)) for items in zombie_txns.values()), \
        {t: len(i) for t, i in zombie_txns.items()}                     # whole or nothing
    assert set(committed_before) <= set(zombie_txns)                     # kept what it had
    assert max(zombie_txns) <= last_before + 1                           # added nothing later
