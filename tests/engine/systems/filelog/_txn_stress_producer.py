"""A transactional producer process of the sharing stress tests (killed with SIGKILL).

Runs transactions of 1..30 records ``b"<tid>:<incarnation>:<txn>:<i>"`` to partition 0 of
stream ``s`` (small batches, so a transaction's batches interleave with the other processes'
batches and markers), committing or aborting each at random, and logs to ``<progress>``
``C <inc> <txn>`` after a commit returned, ``A <inc> <txn>`` after an abort returned and
``P <inc> <txn>`` before commit/abort is called (in doubt from there until the outcome line).
``init_transactions`` with no decision aborts what an earlier incarnation left open.

Usage: python _txn_stress_producer.py <repo> <root> <tid> <incarnation> <seed> <progress>
       <config json>
"""

import json
import os
import random
import sys

sys.path.insert(0, sys.argv[1])

from weir.engine.model import OutgoingMessageEnvelope, SystemStream  # noqa: E402
from weir.engine.systems.filelog.transactions import TransactionalProducer  # noqa: E402
from tests.engine.systems.filelog.conftest import SYSTEM, Log  # noqa: E402

root, tid, inc, seed, progress_path, config = (sys.argv[2], sys.argv[3], int(sys.argv[4]),
                                                int(sys.argv[5]), sys.argv[6],
                                                json.loads(sys.argv[7]))
rng = random.Random(seed)
log = Log(root, **config)
producer = TransactionalProducer(log.settings, tid)
producer.init_transactions()
out = SystemStream(SYSTEM, "s")
progress = os.open(progress_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
txn = 0
while True:
    txn += 1
    for i in range(rng.randint(1, 30)):
        producer.send("t", OutgoingMessageEnvelope(
            out, b"%s:%d:%d:%d:" % (tid.encode(), inc, txn, i) + b"x" * rng.randint(0, 150),
            key=b"k%d" % i, partition=0))
        if rng.random() < 0.1:
            producer.flush()
    commit = rng.random() < 0.7
    if commit:
        producer.prepare()
    os.write(progress, b"P %d %d\n" % (inc, txn))
    if commit:
        producer.commit()
        os.write(progress, b"C %d %d\n" % (inc, txn))
    else:
        producer.abort()
        os.write(progress, b"A %d %d\n" % (inc, txn))
