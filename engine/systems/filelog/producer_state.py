"""Producer ids, epochs and producer states: the file log's record of its transactional
producers and their transactions, the fence check, and what decides a prepared transaction.

See docs/EXACTLY-ONCE.md for the design; in short:

* A **transactional id** (Kafka's ``transactional.id``; a task's is ``<job>-<id>/<task>``)
  maps to a **producer id** and an **epoch**, kept under the log's root::

      <root>/.transactions/ids/<quoted transactional id>   the producer id
      <root>/.transactions/<pid>.json                       the producer state (CRC-checked)
      <root>/.transactions/<pid>.lock                       held by the live producer
      <root>/.transactions/<pid>.epoch-<n>                  epoch n was claimed (O_EXCL)

  The newest claimed epoch is the producer's epoch: claiming one (``init_transactions``)
  **fences** every older incarnation. A fence check is one ``stat`` of the next epoch's claim.
* The producer state records the producer's transaction (:class:`TxnRecord`: ongoing,
  prepared naming its decision record, committing, committed or aborted, and the partitions
  it wrote), its last committed transaction and its recent aborts.
* A prepared transaction is committed exactly when its decision record, the checkpoint file,
  names it (:func:`decided_by_checkpoint`).

The transactional producer (:mod:`weir.engine.systems.filelog.transactions`) and the
completion of a dead producer's transaction (:mod:`weir.engine.systems.filelog.abandoned`)
keep their state through this module.

Example::

    >>> import tempfile
    >>> from weir.engine.systems.filelog.settings import FileLogSettings
    >>> from weir.engine.systems.filelog.transactions import TransactionalProducer
    >>> settings = FileLogSettings("filelog", tempfile.mkdtemp())
    >>> producer = TransactionalProducer(settings, "job-1/Partition 0")
    >>> result = producer.init_transactions()
    >>> producer.stop()
    >>> state = load_producer_state(settings.root, result.producer_id)
    >>> (state.transactional_id, state.epoch, state.transaction)
    ('job-1/Partition 0', 0, None)
    >>> [s.producer_id for s in producer_states(settings.root)] == [result.producer_id]
    True
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import quote, unquote

import orjson

from weir.stores.filesafety import atomic_write, fsync_dir, json_checksum, publish_once

from weir.engine.errors import ProducerStateCorruptError, SystemError_

from weir.engine.systems.filelog._files import FileLock, LockBusy
from weir.engine.systems.filelog._txn_format import MAX_EPOCH, MAX_PRODUCER_ID

__all__ = [
    "TRANSACTIONS_DIR",
    "CHECKPOINT_EXTRAS_KEY",
    "TxnState",
    "TxnRecord",
    "TxnId",
    "ProducerState",
    "load_producer_state",
    "producer_state_path",
    "producer_states",
    "decided_by_checkpoint",
    "is_resolved_elsewhere",
    "producers_of",
    "producer_owner",
    "move_producer_aside",
]

TRANSACTIONS_DIR = ".transactions"
CHECKPOINT_EXTRAS_KEY = "transactions"
"""The key of a checkpoint's ``extras`` listing the transactions the checkpoint commits."""

_STATE_FORMAT = 1
_RECENT_ABORTS = 16


class TxnState(Enum):
    """Where a producer's transaction stands in its producer state."""

    ONGOING = "ongoing"
    PREPARED = "prepared"
    COMMITTING = "committing"
    """Decided committed by the producer itself (no external decision record): markers may be
    missing; whoever finishes it rolls it forward."""
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass
class TxnRecord:
    """A transaction in a producer state: its number, epoch and state, the partitions it
    wrote (``(stream, partition)``), when it started, and once prepared what decides it."""

    sequence: int
    epoch: int
    state: TxnState
    partitions: list[tuple[str, int]] = field(default_factory=list)
    started_ms: int = 0
    decision: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"sequence": self.sequence, "epoch": self.epoch, "state": self.state.value,
                "partitions": [[s, p] for s, p in self.partitions],
                "started_ms": self.started_ms, "decision": self.decision}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> "TxnRecord":
        return cls(int(raw["sequence"]), int(raw["epoch"]), TxnState(raw["state"]),
                   [(str(s), int(p)) for s, p in raw.get("partitions") or []],
                   int(raw.get("started_ms", 0)), raw.get("decision"))

    @property
    def open(self) -> bool:
        """Not finished: ongoing, or prepared (and maybe decided, its markers maybe missing).
        ``committed`` and ``aborted`` are recorded once every marker is written."""
        return self.state in (TxnState.ONGOING, TxnState.PREPARED, TxnState.COMMITTING)


@dataclass(frozen=True)
class TxnId:
    """A transaction as a checkpoint names it."""

    system: str
    transactional_id: str
    producer_id: int
    epoch: int
    sequence: int

    def to_extras(self) -> dict[str, Any]:
        return {"system": self.system, "transactional_id": self.transactional_id,
                "producer_id": self.producer_id, "epoch": self.epoch,
                "sequence": self.sequence}

    def matches(self, entry: Mapping[str, Any]) -> bool:
        return (entry.get("transactional_id") == self.transactional_id
                and entry.get("producer_id") == self.producer_id
                and entry.get("epoch") == self.epoch
                and entry.get("sequence") == self.sequence)


@dataclass
class ProducerState:
    """The producer state of one transactional id (see the module docstring)."""

    transactional_id: str
    producer_id: int
    epoch: int = -1
    owner: dict[str, Any] = field(default_factory=dict)
    timeout_ms: int = 60_000
    transaction: TxnRecord | None = None
    last_committed: tuple[int, int] | None = None
    aborted: list[tuple[int, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "epoch": self.epoch, "owner": self.owner, "timeout_ms": self.timeout_ms,
                "transaction": self.transaction.to_json() if self.transaction else None,
                "last_committed": list(self.last_committed) if self.last_committed else None,
                "aborted": [list(a) for a in self.aborted]}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> "ProducerState":
        txn = raw.get("transaction")
        last = raw.get("last_committed")
        return cls(str(raw["transactional_id"]), int(raw["producer_id"]), int(raw["epoch"]),
                   dict(raw.get("owner") or {}), int(raw.get("timeout_ms", 60_000)),
                   TxnRecord.from_json(txn) if txn else None,
                   (int(last[0]), int(last[1])) if last else None,
                   [(int(e), int(s)) for e, s in raw.get("aborted") or []])

    def record_outcome(self, txn: TxnRecord, committed: bool) -> None:
        txn.state = TxnState.COMMITTED if committed else TxnState.ABORTED
        if committed:
            self.last_committed = (txn.epoch, txn.sequence)
        elif (txn.epoch, txn.sequence) not in self.aborted:
            self.aborted = (self.aborted + [(txn.epoch, txn.sequence)])[-_RECENT_ABORTS:]

    def was_aborted(self, epoch: int, sequence: int) -> bool:
        """Whether the transaction ``(epoch, sequence)`` is known to have been aborted."""
        if (epoch, sequence) in self.aborted:
            return True
        txn = self.transaction
        return (txn is not None and txn.state is TxnState.ABORTED and txn.epoch == epoch
                and txn.sequence == sequence)


# -- the files --------------------------------------------------------------------------------

def _dir(root: str) -> str:
    return os.path.join(root, TRANSACTIONS_DIR)


def _state_path(root: str, producer_id: int) -> str:
    return os.path.join(_dir(root), f"{producer_id}.json")


def producer_state_path(root: str, producer_id: int) -> str:
    """Where the producer state of ``producer_id`` lives under the log's ``root``."""
    return _state_path(root, producer_id)


def _lock_path(root: str, producer_id: int) -> str:
    return os.path.join(_dir(root), f"{producer_id}.lock")


def _epoch_path(root: str, producer_id: int, epoch: int) -> str:
    return os.path.join(_dir(root), f"{producer_id}.epoch-{epoch}")


def _id_path(root: str, transactional_id: str) -> str:
    return os.path.join(_dir(root), "ids", quote(transactional_id, safe=""))


def _encode_state(state: ProducerState) -> bytes:
    body = state.to_json()
    checksum = json_checksum({"format": _STATE_FORMAT, "state": body})
    return orjson.dumps({"format": _STATE_FORMAT, "crc32c": checksum,
                         "state": body}, option=orjson.OPT_INDENT_2) + b"\n"


def load_producer_state(root: str, producer_id: int) -> ProducerState | None:
    """The producer state of ``producer_id`` under ``root`` (None when there is none)."""
    path = _state_path(root, producer_id)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        doc = orjson.loads(data)
        if json_checksum({"format": doc["format"], "state": doc["state"]}) != doc["crc32c"]:
            raise ValueError("checksum mismatch")
        if doc["format"] > _STATE_FORMAT:
            raise ValueError(f"format {doc['format']} is newer than this Weir reads")
        return ProducerState.from_json(doc["state"])
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise ProducerStateCorruptError(path, str(exc)) from None


def producer_states(root: str) -> list[ProducerState]:
    """Every producer state under ``root`` (for tools)."""
    try:
        names = os.listdir(_dir(root))
    except FileNotFoundError:
        return []
    out = []
    for name in sorted(names):
        stem, dot, ext = name.partition(".")
        if ext == "json" and stem.isdigit():
            state = load_producer_state(root, int(stem))
            if state is not None:
                out.append(state)
    return out


def _save_state(root: str, state: ProducerState) -> None:
    atomic_write(_state_path(root, state.producer_id), _encode_state(state))


def _current_epoch(root: str, producer_id: int) -> int:
    """The newest claimed epoch of ``producer_id`` (-1 before the first claim)."""
    prefix = f"{producer_id}.epoch-"
    best = -1
    try:
        names = os.listdir(_dir(root))
    except FileNotFoundError:
        return -1
    for name in names:
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            best = max(best, int(name[len(prefix):]))
    return best


def _superseded(root: str, producer_id: int, epoch: int) -> bool:
    """Whether a newer epoch than ``epoch`` was claimed: two ``stat`` calls. The claim of the
    next epoch exists, or ``epoch``'s own claim is gone (claims are pruned only from two
    epochs behind the newest)."""
    return (os.path.exists(_epoch_path(root, producer_id, epoch + 1))
            or not os.path.exists(_epoch_path(root, producer_id, epoch)))


def _claim_epoch(root: str, producer_id: int) -> int:
    """Claim the epoch after the newest one (O_EXCL: two claimers never get the same), and
    remove claims older than the previous one. Returns the claimed epoch, or -1 when the
    producer id has used up its epochs."""
    while True:
        epoch = _current_epoch(root, producer_id) + 1
        if epoch > MAX_EPOCH:
            return -1
        try:
            fd = os.open(_epoch_path(root, producer_id, epoch),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        os.close(fd)
        fsync_dir(_dir(root))
        for old in range(max(0, epoch - 8), epoch - 1):
            try:
                os.unlink(_epoch_path(root, producer_id, old))
            except FileNotFoundError:
                pass
        return epoch


def _producer_id(root: str, transactional_id: str, *, renew: bool = False) -> int:
    """The producer id of ``transactional_id`` under ``root``, allocated on first use (a
    random u32 claimed with O_EXCL: no counter to lock). ``renew`` allocates a new one (the
    old one used up its epochs)."""
    os.makedirs(os.path.join(_dir(root), "ids"), exist_ok=True)
    id_path = _id_path(root, transactional_id)
    if not renew:
        try:
            with open(id_path, "rb") as f:
                return int(f.read().strip())
        except FileNotFoundError:
            pass
        except ValueError:
            raise ProducerStateCorruptError(id_path, "not a producer id") from None
    rng = random.SystemRandom()
    while True:
        pid = rng.randint(1, MAX_PRODUCER_ID)
        state = ProducerState(transactional_id, pid)
        if not publish_once(_state_path(root, pid), _encode_state(state)):
            continue  # taken
        if renew:
            atomic_write(id_path, str(pid).encode())
            return pid
        if publish_once(id_path, str(pid).encode()):
            return pid
        os.unlink(_state_path(root, pid))  # another process mapped the id first: use its
        with open(id_path, "rb") as f:
            return int(f.read().strip())


def is_resolved_elsewhere(root: str, producer_id: int, epoch: int, sequence: int) -> bool:
    """Whether transaction ``sequence`` of ``producer_id`` written at ``epoch`` is known
    resolved: a newer epoch was claimed, and the producer state does not have that transaction
    open any more (its markers were written before the state said so). Batches of it that a
    reader finds open are then a zombie's."""
    if not _superseded(root, producer_id, epoch):
        return False
    try:
        state = load_producer_state(root, producer_id)
    except ProducerStateCorruptError:
        return False
    if state is None:
        return False
    txn = state.transaction
    return not (txn is not None and txn.open and txn.epoch == epoch
                and txn.sequence == sequence)


# -- a reset (docs/RECOVERY.md, "weir checkpoint reset") -------------------------------------

def producers_of(root: str, prefix: str) -> list[tuple[str, int]]:
    """``(transactional id, producer id)`` of every producer under ``root`` whose
    transactional id starts with ``prefix`` (a job's: ``<job.name>-<job.id>/``), in id order;
    their states are not read (a damaged one is the caller's to report)."""
    ids = os.path.join(_dir(root), "ids")
    try:
        names = sorted(os.listdir(ids))
    except FileNotFoundError:
        return []
    quoted = quote(prefix, safe="")
    out = []
    for name in names:
        if not name.startswith(quoted) or name.endswith(".tmp"):
            continue
        path = os.path.join(ids, name)
        try:
            with open(path, "rb") as f:
                pid = int(f.read().strip())
        except ValueError:
            raise ProducerStateCorruptError(path, "not a producer id") from None
        out.append((unquote(name), pid))
    return out


def producer_owner(root: str, producer_id: int) -> dict[str, Any] | None:
    """The live process holding ``producer_id``'s owner lock (its recorded pid, host, role),
    or None when no process holds it. Takes and releases the lock to find out."""
    path = _lock_path(root, producer_id)
    if not os.path.exists(path):
        return None
    lock = FileLock(path)
    try:
        lock.acquire("checking the producer is not live")
    except LockBusy as busy:
        return dict(busy.holder)
    lock.release()
    return None


def move_producer_aside(root: str, transactional_id: str, producer_id: int,
                        target: str) -> list[str]:
    """Move every file of one producer -- its id mapping, state, owner lock and epoch claims
    -- from ``<root>/.transactions`` into ``target`` (the same layout), so that the
    transactional id starts afresh as a new producer. Nothing is deleted. The caller holds
    what keeps the producer from running (the job's locks) and has checked
    :func:`producer_owner`. Returns the files moved."""
    source = _dir(root)
    os.makedirs(os.path.join(target, "ids"), exist_ok=True)
    prefix = f"{producer_id}."
    names = [os.path.join("ids", quote(transactional_id, safe=""))]
    names += sorted(n for n in os.listdir(source)
                    if n.startswith(prefix) and not os.path.isdir(os.path.join(source, n)))
    moved = []
    for name in names:
        try:
            os.rename(os.path.join(source, name), os.path.join(target, name))
        except FileNotFoundError:
            continue
        moved.append(name)
    for directory in (os.path.join(target, "ids"), target, os.path.join(source, "ids"),
                      source):
        fsync_dir(directory)
    return moved


# -- decisions ------------------------------------------------------------------------------

def decided_by_checkpoint(decision: Mapping[str, Any] | None, txn: TxnId) -> bool:
    """Whether the decision record named in a prepared transaction's state commits it: the
    checkpoint file ``decision["path"]`` lists ``txn`` in its ``extras["transactions"]``. A
    missing file, or one naming another transaction, means not committed."""
    if not decision or decision.get("kind") != "weir-checkpoint":
        return False
    from weir.recovery.checkpoint import decode_checkpoint_file
    from weir.recovery.errors import RecoveryError
    path = str(decision.get("path", ""))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return False
    try:
        checkpoint = decode_checkpoint_file(data, source=path).checkpoint
    except RecoveryError as exc:
        raise SystemError_(f"cannot decide transaction {txn.sequence} of producer "
                           f"'{txn.transactional_id}': its decision record {path} is "
                           f"unreadable ({exc})") from exc
    entries = checkpoint.extras.get(CHECKPOINT_EXTRAS_KEY) or []
    return any(txn.matches(entry) for entry in entries if isinstance(entry, Mapping))
