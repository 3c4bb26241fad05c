"""What a ``read_committed`` reader knows about the transactions of one partition.

A reader's *scout* walks the partition's frames ahead of the position the reader delivers from
and feeds every batch header and marker it meets, in offset order, to a :class:`TxnView`. The
delivering side asks the view where the **last stable offset** (LSO) is -- nothing at or after
it may be delivered -- and, at each batch header, whether the batch's transaction committed.

The rules (docs/EXACTLY-ONCE.md, section 2), per producer id ``p``:

1. a batch of ``(p, e)`` with ``e`` below the highest epoch seen for ``p`` is **fenced**
   (written by a zombie after its successor started): never visible;
2. a batch of ``(p, e)`` with ``e`` above the epoch of ``p``'s open transaction closes that one
   as aborted and opens a new one; with none open it opens one at its offset;
3. a marker of ``(p, e)`` with ``e`` below the highest epoch seen for ``p`` is ignored;
   otherwise it closes ``p``'s open transaction: as the marker says when the marker names
   that transaction's sequence number, as aborted when it names another one (the open one is
   then a zombie's, seen by a view that started after its resolution); with none open it
   changes nothing (a repeated marker of a rolled-forward commit);
4. LSO = the smallest first offset of an open transaction, else how far the scout got.

A view that starts in the middle of a partition has not seen the frames before its start: a
zombie's batch written after its successor's abort marker then looks like an open
transaction. The reader settles that from the producer state (:meth:`fence`): a newer epoch
was claimed and the producer state records that transaction as resolved.

Memory: one entry per open transaction and per transaction closed ahead of the delivery, plus
the offsets of fenced batches; entries behind the delivery are dropped as it passes them.

Example::

    >>> from weir.engine.systems.filelog._txn_format import BatchHeader, ControlType, Marker
    >>> view = TxnView(0)
    >>> view.on_batch(0, BatchHeader(7, 1, 1, 2, 50, 1000))
    >>> view.scanned = 3
    >>> view.lso(), view.outcome(7, 1, 0)
    (0, <Outcome.OPEN: 'open'>)
    >>> view.on_marker(3, Marker(7, 1, ControlType.COMMIT, 1, 1001)); view.scanned = 4
    >>> view.lso(), view.outcome(7, 1, 0)
    (4, <Outcome.COMMITTED: 'committed'>)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

from weir.engine.systems.filelog._txn_format import BatchHeader, Marker

__all__ = ["Outcome", "OpenTransaction", "TxnView"]


class Outcome(Enum):
    """What became of the transaction a batch belongs to."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    FENCED = "fenced"
    OPEN = "open"


@dataclass(slots=True)
class OpenTransaction:
    """A transaction of ``producer_id`` open in this partition since ``first_offset`` (its
    first batch seen), written at ``epoch``; ``since_ms`` is that batch's write time."""

    producer_id: int
    epoch: int
    first_offset: int
    since_ms: int
    sequence: int


class TxnView:
    """Transactions of one partition as seen from ``start`` up to :attr:`scanned`."""

    __slots__ = ("open", "max_epoch", "closed", "fenced", "scanned", "_lso")

    def __init__(self, start: int):
        self.open: dict[int, OpenTransaction] = {}
        self.max_epoch: dict[int, int] = {}
        self.closed: dict[int, deque[tuple[int, int, Outcome]]] = {}
        self.fenced: set[int] = set()
        self.scanned = start
        """Offset up to which (exclusive) every frame was fed to the view."""
        self._lso: int | None = None  # smallest first offset of an open transaction

    # -- feeding (the scout, in offset order) ------------------------------------------------
    def on_batch(self, offset: int, header: BatchHeader) -> None:
        pid, epoch = header.producer_id, header.epoch
        top = self.max_epoch.get(pid, -1)
        if epoch < top:
            self.fenced.add(offset)  # rule 1
            return
        if epoch > top:
            self.max_epoch[pid] = epoch
        current = self.open.get(pid)
        if current is not None:
            if current.epoch >= epoch:
                return  # another batch of the open transaction
            self._close(pid, offset, Outcome.ABORTED)  # rule 2: a new incarnation's batch
        self.open[pid] = OpenTransaction(pid, epoch, offset, header.timestamp, header.sequence)
        if self._lso is None or offset < self._lso:
            self._lso = offset

    def on_marker(self, offset: int, marker: Marker) -> None:
        pid, epoch = marker.producer_id, marker.epoch
        top = self.max_epoch.get(pid, -1)
        if epoch < top:
            return  # rule 3: a zombie's marker
        if epoch > top:
            self.max_epoch[pid] = epoch
        current = self.open.get(pid)
        if current is not None:
            if current.sequence == marker.sequence:
                self._close(pid, offset,
                            Outcome.COMMITTED if marker.committed else Outcome.ABORTED)
            else:  # decides another transaction: the open one is a zombie's, never committed
                self._close(pid, offset, Outcome.ABORTED)

    def fence(self, pid: int) -> None:
        """Close ``pid``'s open transaction as fenced: its producer state proves that a newer
        incarnation resolved that transaction before these batches were written (a zombie
        wrote them; the frame that fenced it lies before where this view started)."""
        if pid in self.open:
            self._close(pid, self.scanned, Outcome.FENCED)

    def _close(self, pid: int, end: int, outcome: Outcome) -> None:
        txn = self.open.pop(pid)
        self.closed.setdefault(pid, deque()).append((txn.first_offset, end, outcome))
        if self._lso == txn.first_offset:
            self._lso = min((t.first_offset for t in self.open.values()), default=None)

    # -- asking (the delivering side) --------------------------------------------------------
    def lso(self) -> int:
        """The last stable offset: nothing at or after it may be delivered yet."""
        return self.scanned if self._lso is None else min(self._lso, self.scanned)

    def blocking(self) -> OpenTransaction | None:
        """The open transaction that holds the LSO back, if one does."""
        if self._lso is None:
            return None
        return min(self.open.values(), key=lambda t: t.first_offset)

    def outcome(self, producer_id: int, epoch: int, offset: int) -> Outcome:
        """The outcome of the batch whose header is at ``offset``. Entries of the producer's
        transactions that closed before ``offset`` are dropped: the delivery asks in offset
        order."""
        if self.fenced and offset in self.fenced:
            self.fenced.discard(offset)
            return Outcome.FENCED
        queue = self.closed.get(producer_id)
        if queue:
            while queue and queue[0][1] <= offset:  # [first, end): end is the closing frame
                queue.popleft()
            if queue and queue[0][0] <= offset:
                return queue[0][2]
        return Outcome.OPEN
