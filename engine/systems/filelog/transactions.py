"""The transactional producer of the file log: every record it sends belongs to a transaction
of its transactional id, which commits or aborts as a whole.

See docs/EXACTLY-ONCE.md for the design; in short:

* ``init_transactions`` takes the transactional id's owner lock, claims the next epoch (which
  **fences** every older incarnation; producer ids, epochs and producer states are
  :mod:`weir.engine.systems.filelog.producer_state`'s) and finishes the previous incarnation's
  transaction from what is durable: roll forward when the decision (the checkpoint) names it,
  abort otherwise.
* A :class:`TransactionalProducer` collects each partition's records into **batches**, hands
  them to the partition writers (registering the partition in the producer state first),
  **prepares** (fsync, state ``prepared`` naming the decision), and **commits** or **aborts**
  with a marker per partition. The decision itself -- the checkpoint rename -- is its user's.
* A transaction whose producer is gone is completed by a reader held back by it
  (:mod:`weir.engine.systems.filelog.abandoned`).

Example::

    >>> import tempfile
    >>> from weir.engine.systems.api import StreamSpec
    >>> from weir.engine.systems.filelog.admin import FileLogAdmin
    >>> from weir.engine.systems.filelog.settings import FileLogSettings
    >>> settings = FileLogSettings("filelog", tempfile.mkdtemp())
    >>> FileLogAdmin(settings).create_stream(StreamSpec("out", 1))
    True
    >>> producer = TransactionalProducer(settings, "job-1/Partition 0")
    >>> producer.init_transactions().resolved is None
    True
    >>> producer.send("t", OutgoingMessageEnvelope(SystemStream("filelog", "out"), b"v", key=b"k",
    ...                                            partition=0))
    >>> txn = producer.prepare()      # flushed, fsynced, state 'prepared'
    >>> producer.commit()             # the commit marker: visible to read_committed readers
    >>> (txn.epoch, txn.sequence)
    (0, 1)
    >>> producer.stop()
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weir.stores._crc import crc32c as _crc

from weir.engine.errors import (ProducerFencedError, StreamNotFoundError, SystemError_,
                                TransactionalIdInUseError)
from weir.engine.model import NO_TIMESTAMP, OutgoingMessageEnvelope, SystemStream, partition_for
from weir.engine.systems.api import SystemProducerBase

from weir.engine.systems.filelog import _shared
from weir.engine.systems.filelog._files import FileLock, LockBusy
from weir.engine.systems.filelog._sync import sync_writers
from weir.engine.systems.filelog._format import NULL_LEN
from weir.engine.systems.filelog._txn_format import MAX_EPOCH, ControlType
from weir.engine.systems.filelog.producer_state import (ProducerState, TxnId, TxnRecord, TxnState,
                                                        _claim_epoch, _current_epoch, _dir,
                                                        _id_path, _lock_path, _producer_id,
                                                        _save_state, _superseded,
                                                        decided_by_checkpoint,
                                                        load_producer_state)
from weir.engine.systems.filelog.settings import FileLogSettings
from weir.engine.systems.filelog.stream import StreamMeta, load_meta, mark_transactional
from weir.engine.systems.filelog.writer import PartitionWriter

__all__ = [
    "InitResult",
    "TransactionalProducer",
]

_log = logging.getLogger(__name__)

_LOCK_POLL_S = 0.05

# record framing, as writer.append does it (a batch's records are plain records)
_TS_KLEN = struct.Struct("<qI").pack
_U32 = struct.Struct("<I").pack
_LEN_CRC = struct.Struct("<II").pack
_NULL = _U32(NULL_LEN)


@dataclass(frozen=True)
class InitResult:
    """What ``init_transactions`` found and did: the previous incarnation's transaction (if
    it was unfinished) and whether it was rolled forward (``"committed"``) or aborted."""

    producer_id: int
    epoch: int
    previous: TxnRecord | None = None
    resolved: str | None = None


# -- the producer ---------------------------------------------------------------------------

class _Output:
    __slots__ = ("meta", "count", "next_rr")

    def __init__(self, meta: StreamMeta):
        self.meta, self.count, self.next_rr = meta, meta.partitions, 0


class _Batch:
    __slots__ = ("parts", "count", "nbytes", "max_ts")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.count = 0
        self.nbytes = 0
        self.max_ts = -1


class TransactionalProducer(SystemProducerBase):
    """A ``SystemProducer`` of a file log system whose every record belongs to a transaction
    of ``transactional_id`` (see the module docstring). ``send``/``send_batch`` from several
    threads are safe; the transaction calls (``prepare``, ``commit``, ``abort``) are made by
    one caller while no send is in flight (the task's commit)."""

    def __init__(self, settings: FileLogSettings, transactional_id: str):
        if not transactional_id:
            raise SystemError_("a transactional producer needs a transactional id")
        self.settings = settings
        self.system = settings.system
        self.root = settings.root
        self.transactional_id = transactional_id
        self._guard = threading.RLock()
        self._outputs: dict[SystemStream, _Output] = {}
        self._batches: dict[tuple[str, int], _Batch] = {}
        self._writers: dict[tuple[str, int], PartitionWriter] = {}
        self._marked: set[str] = set()
        self._state: ProducerState | None = None
        self._owner: FileLock | None = None
        self._fenced: ProducerFencedError | None = None
        self._txn: TxnRecord | None = None
        self._sequence = 0
        self._batch_size = settings.batch_size

    # -- identity ------------------------------------------------------------------------
    @property
    def producer_id(self) -> int:
        self._require_init()
        return self._state.producer_id

    @property
    def epoch(self) -> int:
        self._require_init()
        return self._state.epoch

    def state(self) -> ProducerState | None:
        """The producer state as it is on disk now (None when the id was never used)."""
        try:
            with open(_id_path(self.root, self.transactional_id), "rb") as f:
                pid = int(f.read().strip())
        except (FileNotFoundError, ValueError):
            return None
        return load_producer_state(self.root, pid)

    def _require_init(self) -> None:
        if self._state is None:
            raise SystemError_(f"producer '{self.transactional_id}': call init_transactions() "
                               f"before using it")

    def _check_fence(self, where: str) -> None:
        """Raise ProducerFencedError when a newer incarnation claimed an epoch."""
        if self._fenced is not None:
            raise self._fenced
        state = self._state
        if _superseded(self.root, state.producer_id, state.epoch):
            current = _current_epoch(self.root, state.producer_id)
            self._fenced = ProducerFencedError(self.transactional_id, state.epoch, current,
                                               producer_id=state.producer_id, where=where)
            raise self._fenced

    # -- init ----------------------------------------------------------------------------
    def init_transactions(self, decide: Callable[[TxnId], bool] | None = None) -> InitResult:
        """Become the one live incarnation of the transactional id: take its owner lock
        (waiting up to ``producer.init.timeout.ms``), claim the next epoch (fencing every
        older incarnation), and finish the previous incarnation's unfinished transaction --
        rolled forward when it was committed, or prepared and ``decide`` (default: the
        decision record named in the state) says so; aborted otherwise."""
        if self._state is not None:
            raise SystemError_(f"producer '{self.transactional_id}' is initialised already")
        os.makedirs(_dir(self.root), exist_ok=True)
        pid = _producer_id(self.root, self.transactional_id)
        self._owner = self._take_owner_lock(pid)
        try:
            return self._init(pid, decide)
        except BaseException:
            self._owner.release()
            self._owner = None
            self._state = None
            raise

    def _take_owner_lock(self, pid: int) -> FileLock:
        lock = FileLock(_lock_path(self.root, pid))
        started = time.monotonic()
        deadline = started + self.settings.init_timeout_ms / 1000.0
        while True:
            try:
                lock.acquire(f"transactional producer {self.transactional_id}")
                return lock
            except LockBusy as busy:
                if time.monotonic() >= deadline:
                    raise TransactionalIdInUseError(self.transactional_id, busy.holder,
                                                    busy.path,
                                                    time.monotonic() - started) from None
                time.sleep(_LOCK_POLL_S)

    def _init(self, pid: int, decide: Callable[[TxnId], bool] | None) -> InitResult:
        state = load_producer_state(self.root, pid) or ProducerState(self.transactional_id, pid)
        epoch = _claim_epoch(self.root, pid)
        previous = state.transaction
        resolved = None
        if previous is not None and previous.open:
            committed = self._decide(pid, previous, decide)
            resolved = "committed" if committed else "aborted"
            state.epoch = max(epoch, state.epoch)
            self._state = state
            self._finish(previous, committed, epoch if epoch >= 0 else MAX_EPOCH)
            state.record_outcome(previous, committed)
            _log.info("producer '%s': %s transaction %d (epoch %d) of the previous "
                      "incarnation in %d partition(s)", self.transactional_id,
                      "rolled forward" if committed else "aborted", previous.sequence,
                      previous.epoch, len(previous.partitions))
        elif previous is not None and previous.state is TxnState.COMMITTED and epoch >= 0:
            # Its commit markers were written and fsynced; write them again (harmless, rule 3
            # of docs/EXACTLY-ONCE.md): a marker lost from the end of a segment (cut off as a
            # torn record, a truncated file) would otherwise leave the committed transaction
            # open, and this incarnation's first batch there would close it as aborted.
            self._state = state
            self._finish(previous, True, epoch)
        if epoch < 0:  # the producer id used up its epochs: continue under a new one
            old = pid
            pid = _producer_id(self.root, self.transactional_id, renew=True)
            self._owner.release()
            self._owner = self._take_owner_lock(pid)
            epoch = _claim_epoch(self.root, pid)
            state = ProducerState(self.transactional_id, pid, last_committed=None)
            _log.info("producer '%s': producer id %d used up its epochs; now %d",
                      self.transactional_id, old, pid)
        state.epoch = epoch
        state.owner = {"pid": os.getpid(), "host": socket.gethostname(),
                       "since_ms": time.time_ns() // 1_000_000}
        state.timeout_ms = self.settings.transaction_timeout_ms
        self._sequence = previous.sequence if previous is not None else 0
        _save_state(self.root, state)
        self._state = state
        return InitResult(pid, epoch, previous if resolved else None, resolved)

    def _decide(self, pid: int, txn: TxnRecord, decide: Callable[[TxnId], bool] | None) -> bool:
        if txn.state is TxnState.COMMITTING:
            return True
        if txn.state is not TxnState.PREPARED:
            return False
        tid = TxnId(self.system, self.transactional_id, pid, txn.epoch, txn.sequence)
        if decide is not None:
            return bool(decide(tid))
        return decided_by_checkpoint(txn.decision, tid)

    def _finish(self, txn: TxnRecord, committed: bool, epoch: int) -> None:
        """Write the markers of ``txn`` (with ``epoch``) into every partition it wrote, then
        fsync those partitions at once (:func:`._sync.sync_writers`)."""
        type_ = ControlType.COMMIT if committed else ControlType.ABORT
        marked = []
        for stream, partition in txn.partitions:
            try:
                writer = self._writer(stream, partition)
            except StreamNotFoundError:
                _log.warning("producer '%s': stream '%s' is gone; no marker for transaction "
                             "%d written there", self.transactional_id, stream, txn.sequence)
                continue
            with writer.mutex:
                writer.append_marker(self._state.producer_id, epoch, type_, txn.sequence)
                writer.write_buffered()
            marked.append(writer)
        sync_writers(marked)

    # -- SystemProducer -------------------------------------------------------------------
    def register(self, source: str) -> None:
        """Sources are not told apart: every record sent belongs to the transaction."""

    def start(self) -> None:
        """Nothing to start: ``init_transactions`` makes the producer usable."""

    def send(self, source: str, envelope: OutgoingMessageEnvelope) -> None:
        out = self._outputs.get(envelope.system_stream)
        if out is None:
            out = self._output(envelope.system_stream)
        partition = envelope.partition
        if partition is None:
            partition = self._choose(out, envelope)
        elif not isinstance(partition, int) or not 0 <= partition < out.count:
            raise SystemError_(f"stream '{self.system}.{out.meta.name}' has partitions "
                               f"0..{out.count - 1}, not {partition!r}")
        key, value = envelope.key, envelope.message
        timestamp = NO_TIMESTAMP if envelope.timestamp is None else envelope.timestamp
        try:
            if key is None:
                body = _TS_KLEN(timestamp, NULL_LEN)
            else:
                body = _TS_KLEN(timestamp, len(key)) + key
            body = body + _NULL if value is None else body + _U32(len(value)) + value
        except TypeError:
            raise SystemError_(
                f"stream '{self.system}.{out.meta.name}': the file log takes bytes keys and "
                f"messages, got key {type(key).__name__} and message {type(value).__name__}; "
                f"configure serdes for this stream (systems.{self.system}.streams."
                f"{out.meta.name}.samza.key.serde / .msg.serde)") from None
        frame = _LEN_CRC(len(body), _crc(body))
        slot = (out.meta.name, partition)
        with self._guard:
            if self._fenced is not None:
                raise self._fenced
            batch = self._batches.get(slot)
            if batch is None:
                self._require_open()
                batch = self._batches[slot] = _Batch()
            batch.parts.append(frame)
            batch.parts.append(body)
            batch.count += 1
            batch.nbytes += len(body) + 8
            if timestamp > batch.max_ts:
                batch.max_ts = timestamp
            if batch.nbytes >= self._batch_size:
                self._hand(slot, batch)
                del self._batches[slot]

    def send_batch(self, source: str, stream: SystemStream, partition: int,
                   items: Iterable[tuple[bytes | None, bytes | None]], *,
                   require_keys: bool = False) -> int:
        """Send raw ``(key, value)`` records to one partition, in order (a store's changelog
        write-down); see ``FileLogProducer.send_batch``."""
        out = self._outputs.get(stream) or self._output(stream)
        if not isinstance(partition, int) or not 0 <= partition < out.count:
            raise SystemError_(f"stream '{self.system}.{out.meta.name}' has partitions "
                               f"0..{out.count - 1}, not {partition!r}")
        slot = (out.meta.name, partition)
        head, u32, len_crc, null, crc = _TS_KLEN, _U32, _LEN_CRC, _NULL, _crc
        limit = self._batch_size
        n = 0
        with self._guard:
            if self._fenced is not None:
                raise self._fenced
            batch = self._batches.get(slot)
            if batch is None:
                self._require_open()
                batch = self._batches[slot] = _Batch()
            parts = batch.parts
            try:
                for key, value in items:
                    if key is None:
                        if require_keys:
                            raise SystemError_(
                                f"stream '{self.system}.{out.meta.name}' partition {partition}: "
                                f"record {n} of the batch has a null key; every record of "
                                f"this batch needs a key")
                        body = head(NO_TIMESTAMP, NULL_LEN)
                    else:
                        body = head(NO_TIMESTAMP, len(key)) + key
                    body = body + null if value is None else body + u32(len(value)) + value
                    parts.append(len_crc(len(body), crc(body)))
                    parts.append(body)
                    batch.count += 1
                    batch.nbytes += len(body) + 8
                    n += 1
                    if batch.nbytes >= limit:
                        self._hand(slot, batch)
                        self._require_open()
                        batch = self._batches[slot] = _Batch()
                        parts = batch.parts
            except TypeError as exc:
                raise SystemError_(
                    f"stream '{self.system}.{out.meta.name}': the file log takes bytes keys "
                    f"and messages ({exc}); a batch sent with send_batch must hold bytes keys "
                    f"and bytes or None values") from None
        return n

    def flush(self, source: str | None = None) -> None:
        """Hand every open batch to its partition writer and write the writers' buffers out
        to the files, without fsync: the records stay uncommitted, and :meth:`prepare`
        fsyncs every partition of the transaction at once before anything can commit them
        (a flush of a transactional producer acknowledges nothing)."""
        with self._guard:
            self._hand_all()
            for slot in self._txn_partitions():
                writer = self._writers[slot]
                with writer.mutex:
                    if not writer.closed:
                        writer.write_buffered()

    def stop(self) -> None:
        """Abort an ongoing transaction (a task that failed does not commit), leave a prepared
        one to the decision (the next start, or a reader after the timeout, completes it),
        then release the partitions and the transactional id."""
        errors: list[BaseException] = []
        with self._guard:
            txn = self._txn
            if self._state is not None and self._fenced is None and txn is not None:
                try:
                    if txn.state is TxnState.ONGOING:
                        self.abort()
                    elif txn.state is TxnState.COMMITTED:
                        self._state.transaction = txn
                        _save_state(self.root, self._state)
                except Exception as exc:  # noqa: BLE001 - release the rest, then report
                    errors.append(exc)
            self._batches.clear()
            for writer in self._writers.values():
                try:
                    _shared.release(writer)
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)
            self._writers.clear()
            if self._owner is not None:
                self._owner.release()
                self._owner = None
        if errors and not isinstance(errors[0], ProducerFencedError):
            raise errors[0]

    # -- the transaction ------------------------------------------------------------------
    def _require_open(self) -> None:
        """A record is about to join the transaction: make sure there is one."""
        self._require_init()
        if self._fenced is not None:
            raise self._fenced
        txn = self._txn
        if txn is None or txn.state is not TxnState.ONGOING:
            if txn is not None and txn.state is TxnState.PREPARED:
                raise SystemError_(f"producer '{self.transactional_id}': transaction "
                                   f"{txn.sequence} is prepared; commit or abort it before "
                                   f"sending more")
            self._sequence += 1
            self._txn = TxnRecord(self._sequence, self._state.epoch, TxnState.ONGOING,
                                  [], time.time_ns() // 1_000_000)

    def _txn_partitions(self) -> list[tuple[str, int]]:
        txn = self._txn
        return list(txn.partitions) if txn is not None else []

    def _hand_all(self) -> None:
        for slot, batch in list(self._batches.items()):
            if batch.count:
                self._hand(slot, batch)
        self._batches.clear()

    def _hand(self, slot: tuple[str, int], batch: _Batch) -> None:
        """Give a full batch to its partition writer (registering the partition first)."""
        txn = self._txn
        if slot not in self._writers or slot not in txn.partitions:
            self._register(slot)
        writer = self._writers[slot]
        state = self._state
        with writer.mutex:
            writer.append_batch(state.producer_id, state.epoch, txn.sequence, batch.parts,
                                batch.count, batch.nbytes, batch.max_ts)

    def _register(self, slot: tuple[str, int]) -> None:
        """Record in the producer state that the transaction writes ``slot``, before any of
        its bytes can reach the partition (so a successor can finish it there)."""
        self._check_fence(f" (adding {slot[0]}#{slot[1]} to transaction {self._txn.sequence})")
        stream, partition = slot
        if stream not in self._marked:
            mark_transactional(self.root, stream, self.system)
            self._marked.add(stream)
        if slot not in self._writers:
            self._writer(stream, partition)
        txn = self._txn
        if slot not in txn.partitions:
            txn.partitions.append(slot)
            state = self._state
            state.transaction = txn
            _save_state(self.root, state)

    def _writer(self, stream: str, partition: int) -> PartitionWriter:
        slot = (stream, partition)
        writer = self._writers.get(slot)
        if writer is not None and not writer.closed:
            return writer
        meta = load_meta(self.root, stream, self.system)
        writer = _shared.acquire_for_producer(self.settings, meta, partition)
        self._writers[slot] = writer
        return writer

    def prepare(self, decision: Mapping[str, Any] | None = None) -> TxnId | None:
        """Make the transaction's records durable: hand every batch to its writer, flush and
        fsync every partition of the transaction, and record ``prepared`` (naming
        ``decision``, e.g. ``{"kind": "weir-checkpoint", "path": ..., "task": ...}``) in the
        producer state (fsynced). Returns the transaction to name in the decision record, or
        None when nothing was written since the last commit."""
        with self._guard:
            self._require_init()
            self._hand_all()
            txn = self._txn
            if txn is None or txn.state is not TxnState.ONGOING or not txn.partitions:
                if txn is not None and txn.state is TxnState.PREPARED:
                    raise SystemError_(f"producer '{self.transactional_id}': transaction "
                                       f"{txn.sequence} is prepared already; commit or abort it")
                if txn is None or txn.state is TxnState.ONGOING:
                    self._txn = None  # nothing was sent since the last commit
                return None
            self._check_fence(f" (preparing transaction {txn.sequence})")
            sync_writers([self._writers[slot] for slot in txn.partitions])
            txn.state = TxnState.PREPARED
            txn.decision = dict(decision) if decision else None
            self._state.transaction = txn
            _save_state(self.root, self._state)
            state = self._state
            return TxnId(self.system, self.transactional_id, state.producer_id, txn.epoch,
                         txn.sequence)

    def commit(self) -> None:
        """The decision committed the prepared transaction: write a commit marker into each
        of its partitions (always fsynced). Without a decision record (``prepare()`` named
        none) the producer state records the decision first (``committing``). The state is
        marked complete when the next transaction starts (or at stop)."""
        with self._guard:
            txn = self._txn
            if txn is None or txn.state is not TxnState.PREPARED:
                if txn is not None and txn.state is TxnState.ONGOING and txn.partitions:
                    raise SystemError_(f"producer '{self.transactional_id}': transaction "
                                       f"{txn.sequence} is ongoing; prepare it first")
                return  # nothing was sent since the last commit
            self._check_fence(f" (committing transaction {txn.sequence})")
            if txn.decision is None:
                # no decision record outside: the producer state is it (durable before any
                # marker, so a successor rolls a half-marked commit forward, never back)
                txn.state = TxnState.COMMITTING
                _save_state(self.root, self._state)
            self._finish(txn, True, self._state.epoch)
            self._state.record_outcome(txn, True)

    def abort(self) -> None:
        """Drop the batches not handed yet and write an abort marker into every partition
        the transaction wrote; record the outcome."""
        with self._guard:
            self._batches.clear()
            txn = self._txn
            if txn is None or txn.state in (TxnState.COMMITTED, TxnState.ABORTED):
                return
            if not txn.partitions:  # nothing reached a partition: nothing to mark
                self._txn = None
                return
            self._check_fence(f" (aborting transaction {txn.sequence})")
            self._finish(txn, False, self._state.epoch)
            self._state.record_outcome(txn, False)
            self._state.transaction = txn
            _save_state(self.root, self._state)

    def newest_offset(self, stream: str, partition: int) -> int | None:
        """The offset of the last frame this process's writer of the partition wrote out (for a
        changelog partition, whose task is its only writer, the partition's last frame) when
        the producer has that writer open, else None. Call it after a flush."""
        writer = self._writers.get((stream, partition))
        if writer is None or writer.closed:
            return None
        with writer.mutex:
            return writer.upcoming - 1

    # -- helpers ---------------------------------------------------------------------------
    def _output(self, stream: SystemStream) -> _Output:
        if stream.system != self.system:
            raise SystemError_(f"{stream} belongs to system '{stream.system}', not to this "
                               f"'{self.system}' producer")
        out = self._outputs[stream] = _Output(load_meta(self.root, stream.stream, self.system))
        return out

    def _choose(self, out: _Output, envelope: OutgoingMessageEnvelope) -> int:
        key = envelope.partition_key if envelope.partition_key is not None else envelope.key
        if key is None:
            out.next_rr = (out.next_rr + 1) % out.count
            return out.next_rr
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise SystemError_(f"stream '{self.system}.{out.meta.name}': the partition key must "
                               f"be bytes (serialized), got {type(key).__name__}")
        return partition_for(bytes(key), out.count)

    def __repr__(self) -> str:
        epoch = self._state.epoch if self._state is not None else "-"
        return f"TransactionalProducer({self.transactional_id!r}, epoch={epoch})"
