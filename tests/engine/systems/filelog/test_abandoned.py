"""Completing a transaction whose producer is gone (``filelog/abandoned.py``): a
``read_committed`` reader held back by it past the producer's ``transaction.timeout.ms`` aborts
it, or rolls it forward when its checkpoint committed it; a live producer is never overruled
(docs/EXACTLY-ONCE.md)."""

from __future__ import annotations

import time

from weir.engine.model import SystemStreamPartition
from weir.engine.systems.filelog import FileLogConsumer
from weir.engine.systems.filelog.abandoned import complete_abandoned
from weir.recovery.checkpoint import FileCheckpointManager

from tests.engine.systems.filelog.conftest import SYSTEM
from tests.engine.systems.filelog.test_transactions import (_child, _commit, _plain, _producer,
                                                            _send, _values)


def _poll_all(log, wait_s: float):
    consumer = FileLogConsumer(log.settings)
    ssp = SystemStreamPartition(SYSTEM, "s", 0)
    consumer.register(ssp, 0)
    consumer.start()
    got = []
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            for env in consumer.poll([ssp], 0.05).get(ssp, []):
                got.append(env.message)
            if got and got[-1] == b"after":
                break
        return got, consumer.held_back_by(ssp)
    finally:
        consumer.stop()


def test_a_reader_aborts_the_open_transaction_of_a_dead_producer_after_its_timeout(log):
    log.create()
    _child(log, """
        p.send("t", OutgoingMessageEnvelope(out, b"never", key=b"k", partition=0))
        p.flush()
    """)
    _plain(log, b"after")
    got, held = _poll_all(log, 0.1)
    assert got == [] and held is not None  # within the timeout: held back
    got, held = _poll_all(log, 5.0)
    assert got == [b"after"] and held is None


def test_a_reader_rolls_forward_a_dead_producers_transaction_its_checkpoint_committed(
        log, tmp_path):
    log.create()
    checkpoints = FileCheckpointManager(tmp_path / "cp")
    checkpoints.register("T")
    checkpoints.start()
    path = str(checkpoints.path_for("T"))
    _child(log, f"""
        from weir.recovery.checkpoint import Checkpoint, FileCheckpointManager
        p.send("t", OutgoingMessageEnvelope(out, b"committed", key=b"k", partition=0))
        txn = p.prepare({{"kind": "weir-checkpoint", "path": {path!r}, "task": "T"}})
        m = FileCheckpointManager({str(tmp_path / "cp")!r}); m.register("T"); m.start()
        m.write("T", Checkpoint({{}}, {{}}, {{"transactions": [txn.to_extras()]}}))
    """)
    _plain(log, b"after")
    got, held = _poll_all(log, 5.0)
    assert got == [b"committed", b"after"] and held is None


def test_a_live_producer_is_never_overruled(log):
    log.create()
    producer = _producer(log)
    _send(producer, b"open")
    producer.flush()
    state = producer.state()
    assert "left alone" in complete_abandoned(log.settings, "s", 0, state.producer_id,
                                              producer.epoch)
    assert _values(log) == []
    _commit(producer)
    assert _values(log) == [b"open"]
    producer.stop()
