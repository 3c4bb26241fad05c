"""Completing a transaction whose producer is gone (docs/EXACTLY-ONCE.md).

:func:`complete_abandoned` takes the producer's owner lock (a live owner keeps it: then
nothing is done), claims a new epoch (fencing any zombie) and writes the transaction's markers:
rolled forward when the producer state records it committed, or prepared and named by its
decision record (the checkpoint); aborted otherwise. A ``read_committed`` reader held back by
the transaction for longer than the producer's ``transaction.timeout.ms`` calls it through
:class:`AbandonedTransactions`, the hook its consumer gives it; ``weir log transactions
--resolve`` calls it for every open transaction. Producer ids, epochs and producer states are
:mod:`weir.engine.systems.filelog.producer_state`'s.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from weir.engine.errors import PartitionLockedError, ProducerStateCorruptError, StreamNotFoundError

from weir.engine.systems.filelog import _shared
from weir.engine.systems.filelog._files import FileLock, LockBusy
from weir.engine.systems.filelog._txn_format import MAX_EPOCH, ControlType
from weir.engine.systems.filelog.producer_state import (TxnId, TxnState, _claim_epoch, _lock_path,
                                                        _save_state, decided_by_checkpoint,
                                                        load_producer_state)
from weir.engine.systems.filelog.settings import FileLogSettings
from weir.engine.systems.filelog.stream import load_meta

__all__ = [
    "complete_abandoned",
    "AbandonedTransactions",
]

_log = logging.getLogger(__name__)


def complete_abandoned(settings: FileLogSettings, stream: str, partition: int,
                       producer_id: int, epoch: int, sequence: int = 0) -> str:
    """Complete the transaction of ``producer_id`` (at ``epoch``) that is open in ``stream``
    partition ``partition`` when its owner is gone: take the owner lock (a live owner keeps
    it: then nothing is done), claim a new epoch (fencing any zombie), decide -- a transaction
    the state records as committed, or prepared and named by its decision record, is rolled
    forward; anything else is aborted -- and write the markers. Returns what it did (for logs
    and tools)."""
    root = settings.root
    lock = FileLock(_lock_path(root, producer_id))
    try:
        lock.acquire("completing an abandoned transaction")
    except LockBusy as busy:
        holder = busy.holder
        return (f"left alone: its producer is alive (pid {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')})")
    try:
        state = load_producer_state(root, producer_id)
        new_epoch = _claim_epoch(root, producer_id)
        if new_epoch < 0:
            new_epoch = MAX_EPOCH
        txn = state.transaction if state is not None else None
        committed = False
        partitions = [(stream, partition)]
        name = state.transactional_id if state is not None else f"producer {producer_id}"
        if txn is not None and txn.open and txn.epoch == epoch:
            tid = TxnId(settings.system, state.transactional_id, producer_id, txn.epoch,
                        txn.sequence)
            committed = (txn.state is TxnState.COMMITTING
                         or (txn.state is TxnState.PREPARED
                             and decided_by_checkpoint(txn.decision, tid)))
            partitions = list(dict.fromkeys(list(txn.partitions) + partitions))
            sequence = txn.sequence
        elif state is not None and state.last_committed == (epoch, sequence):
            # The state records this transaction committed (its checkpoint decided it and the
            # markers were written): its marker here is gone (cut off, truncated). Write the
            # commit again; aborting it would drop records a checkpoint counts as sent.
            committed = True
        type_ = ControlType.COMMIT if committed else ControlType.ABORT
        skipped = []
        for s, p in partitions:
            try:
                writer = _shared.acquire_for_producer(
                    settings, load_meta(root, s, settings.system), p)
            except (PartitionLockedError, StreamNotFoundError) as exc:
                skipped.append(f"{s}#{p} ({exc.__class__.__name__})")
                continue
            try:
                with writer.mutex:
                    writer.append_marker(producer_id, new_epoch, type_, sequence)
                    writer.flush(sync=True)
            finally:
                _shared.release(writer)
        if state is not None:
            state.epoch = max(state.epoch, new_epoch)
            if txn is not None and txn.open and txn.epoch == epoch:
                state.record_outcome(txn, committed)
            _save_state(root, state)
        what = "rolled forward" if committed else "aborted"
        done = (f"{what} transaction {sequence} of '{name}' (epoch {epoch}) in "
                f"{len(partitions) - len(skipped)} partition(s)")
        if skipped:
            done += f"; not in {', '.join(skipped)}: another live process writes there"
        _log.warning("stream '%s' partition %d: %s: its producer was gone for longer than its "
                     "transaction timeout", stream, partition, done)
        return done
    finally:
        lock.release()


class AbandonedTransactions:
    """The hook a ``read_committed`` consumer gives its readers: when one is held back by a
    transaction for longer than that producer's ``transaction.timeout.ms``, try
    :func:`complete_abandoned` (at most once per second per producer), and say once per
    transaction when a live producer holds readers back."""

    def __init__(self, settings: FileLogSettings, stream: str, partition: int):
        self.settings, self.stream, self.partition = settings, stream, partition
        self._next_try: dict[tuple[int, int], float] = {}
        self._timeouts: dict[int, tuple[float, int]] = {}
        self._told: set[tuple[int, int]] = set()

    def __call__(self, txn: Any) -> None:
        key = (txn.producer_id, txn.epoch)
        now = time.monotonic()
        if now < self._next_try.get(key, 0.0):
            return
        self._next_try[key] = now + 1.0
        timeout = self._timeout(txn.producer_id, now)
        if time.time_ns() // 1_000_000 - txn.since_ms < timeout:
            return
        try:
            done = complete_abandoned(self.settings, self.stream, self.partition,
                                      txn.producer_id, txn.epoch, txn.sequence)
        except Exception as exc:  # noqa: BLE001 - the reader goes on waiting; say why
            _log.warning("stream '%s' partition %d: cannot complete the transaction of "
                         "producer %d that holds readers back: %s", self.stream,
                         self.partition, txn.producer_id, exc)
            return
        if done.startswith("left alone") and key not in self._told:
            self._told.add(key)
            _log.warning("stream '%s' partition %d: read_committed readers are held back at "
                         "offset %d by an open transaction of producer %d, %s", self.stream,
                         self.partition, txn.first_offset, txn.producer_id, done)

    def _timeout(self, producer_id: int, now: float) -> int:
        cached = self._timeouts.get(producer_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            state = load_producer_state(self.settings.root, producer_id)
        except ProducerStateCorruptError:
            state = None
        timeout = state.timeout_ms if state is not None else self.settings.transaction_timeout_ms
        self._timeouts[producer_id] = (now + 5.0, timeout)
        return timeout
