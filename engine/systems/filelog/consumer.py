"""The file log's SystemConsumer: one tailing :class:`PartitionReader` per registered SSP.

``poll(ssps, timeout)`` returns up to ``fetch.max.records`` envelopes per SSP. When nothing is
ready it waits, up to ``timeout`` seconds, for a change in the partitions' directories
(Linux inotify, :mod:`._watch`): a record written by any process wakes it at once. It also
looks every 100 ms (or ``systems.<system>.consumer.poll.max.sleep.ms`` when that is longer)
without a change: a file changed from another machine raises no event here, and a reader
held back by a transaction waits on time. An idle consumer looks that often however often it
is polled (the first look of a poll that follows an empty one waits for its turn, unless
something changed since). Where inotify cannot be used (not Linux, the per-user inotify
limits reached) it polls as before: it looks again after 0.5 ms, 1 ms, 2 ms ... up to
``max.sleep.ms``, the wait growing across polls that find nothing and starting over when one
finds records. A poll may return empty before its ``timeout`` when its next look would come
after it. A bounded stream that has
ended yields one end-of-stream envelope (offset = the partition's upcoming offset) after its
last record, then nothing.

Transactions (docs/EXACTLY-ONCE.md): ``systems.<system>.consumer.isolation.level`` (or
:meth:`FileLogConsumer.set_isolation_level`) chooses ``read_committed`` (the default: plain
records and committed transactions, up to the last stable offset) or ``read_uncommitted``. A
``read_committed`` reader held back by a transaction whose producer is gone for longer than
its ``transaction.timeout.ms`` completes that transaction
(:class:`~weir.engine.systems.filelog.abandoned.AbandonedTransactions`). Tools call
:meth:`FileLogConsumer.annotate_transactions`: markers then arrive as envelopes whose message
is a :class:`TransactionMarker`, and (read_uncommitted) records of transactions that did not
commit carry an :class:`UncommittedValue`.

Example::

    >>> # consumer = FileLogSystemFactory().get_consumer("filelog", config)
    >>> # consumer.register(SystemStreamPartition("filelog", "clicks", 0), 0); consumer.start()
    >>> # batch = consumer.poll({ssp}, timeout=0.1)   # {ssp: [IncomingMessageEnvelope, ...]}
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass

from weir.engine.errors import SystemError_
from weir.engine.model import EnvelopeFactory, IncomingMessageEnvelope, SystemStreamPartition
from weir.engine.systems.api import SystemConsumerBase

from weir.engine.systems.filelog._txn_format import Marker as TransactionMarker
from weir.engine.systems.filelog._txn_view import OpenTransaction, Outcome
from weir.engine.systems.filelog.reader import PartitionReader
from weir.engine.systems.filelog.settings import CONSUMER_RESET, FileLogSettings, IsolationLevel
from weir.engine.systems.filelog.stream import load_meta, partition_dir
from weir.engine.systems.filelog._watch import EVERYTHING, NOTHING, DirectoryWatch
from weir.engine.systems.filelog.abandoned import AbandonedTransactions

__all__ = ["FileLogConsumer", "TransactionMarker", "UncommittedValue"]


@dataclass(frozen=True, slots=True)
class UncommittedValue:
    """The message of an annotated record whose transaction did not commit: its value and
    what became of the transaction (aborted, fenced, or still open)."""

    value: bytes | None
    outcome: Outcome


def _marker_envelope(ssp: SystemStreamPartition, offset: int,
                     marker: TransactionMarker) -> IncomingMessageEnvelope:
    return IncomingMessageEnvelope(ssp, offset, None, marker, marker.timestamp, 0)


def _flagged_envelope(ssp: SystemStreamPartition, offset: int, key, value, ts: int, size: int,
                      outcome: Outcome) -> IncomingMessageEnvelope:
    return IncomingMessageEnvelope(ssp, offset, key, UncommittedValue(value, outcome), ts, size)

_FIRST_SLEEP_S = 0.0005
_WATCHED_LOOK_S = 0.1
"""A consumer woken by inotify looks at least this often anyway (see the module docstring)."""


class _Input:
    __slots__ = ("reader", "fetch_max", "done", "at_end", "make")

    def __init__(self, reader: PartitionReader, fetch_max: int, make: EnvelopeFactory):
        self.reader, self.fetch_max, self.done = reader, fetch_max, False
        self.make = make  # builds each record's envelope (set_envelope_factory)
        # Watched consumers only: the last look read everything there was, and no partition
        # directory changed since, so a look would find nothing new (see _watched_poll).
        self.at_end = False


class FileLogConsumer(SystemConsumerBase):
    """``SystemConsumer`` of a file log system. It takes an envelope factory per SSP
    (:meth:`set_envelope_factory`): the parse loop then hands each record to it directly."""

    takes_envelope_factory = True

    def __init__(self, settings: FileLogSettings):
        self.settings = settings
        self.system = settings.system
        self._offsets: dict[SystemStreamPartition, int] = {}
        self._makes: dict[SystemStreamPartition, EnvelopeFactory] = {}
        self._inputs: dict[SystemStreamPartition, _Input] = {}
        self._started = False
        self._max_sleep = max(settings.poll_max_sleep_ms / 1000.0, _FIRST_SLEEP_S)
        self._watched_look = max(self._max_sleep, _WATCHED_LOOK_S)
        # The wait between two looks at empty partitions; it keeps growing across polls that
        # find nothing (an idle job settles at max.sleep.ms) and starts over when one finds
        # records.
        self._sleep = _FIRST_SLEEP_S
        self._next_look = 0.0  # when a waiting poll looks first (0: at once)
        self._isolation = settings.isolation_level
        self._annotate = False
        # Wakes a waiting poll when a partition directory changes; None: poll on a schedule.
        self._watch: DirectoryWatch | None = None

    def set_isolation_level(self, level: IsolationLevel | str) -> None:
        """Read committed or uncommitted (before ``start``); overrides
        ``systems.<system>.consumer.isolation.level``. Restore always reads committed."""
        if self._started:
            raise SystemError_(f"set_isolation_level() after start() on the '{self.system}' "
                               f"consumer; set it before start")
        self._isolation = IsolationLevel(level)

    @property
    def isolation_level(self) -> IsolationLevel:
        return self._isolation

    def annotate_transactions(self, enabled: bool = True) -> None:
        """Tools (``weir log tail``): deliver markers, and flag records of transactions that
        did not commit (read_uncommitted). Before ``start``."""
        if self._started:
            raise SystemError_(f"annotate_transactions() after start() on the '{self.system}' "
                               f"consumer")
        self._annotate = enabled

    def held_back_by(self, ssp: SystemStreamPartition) -> OpenTransaction | None:
        """The open transaction that holds ``ssp``'s read_committed reader back, if one
        does."""
        state = self._inputs.get(ssp)
        return state.reader.held_back_by() if state is not None else None

    def set_envelope_factory(self, ssp: SystemStreamPartition, make: EnvelopeFactory) -> None:
        """Build ``ssp``'s data records' envelopes with ``make`` (see
        :meth:`SystemConsumerBase.set_envelope_factory`); ``ssp`` must be registered."""
        if ssp not in self._offsets:
            raise SystemError_(f"{ssp} was not registered with the '{self.system}' consumer; "
                               f"register(ssp, offset) it before set_envelope_factory()")
        self._makes[ssp] = make
        state = self._inputs.get(ssp)
        if state is not None:
            state.make = make

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        """Read ``ssp`` from ``offset`` (the first record to deliver). Registering an SSP twice
        keeps the lower offset, as Samza does for an SSP shared by several tasks."""
        if ssp.system != self.system:
            raise SystemError_(f"{ssp} belongs to system '{ssp.system}', not to this "
                               f"'{self.system}' consumer")
        if offset < 0:
            raise SystemError_(f"{ssp}: offsets are non-negative record numbers, got {offset}")
        known = self._offsets.get(ssp)
        if known is None or offset < known:
            self._offsets[ssp] = offset
            if self._started:
                self._open(ssp, offset)

    def start(self) -> None:
        if self._watch is None and self._offsets:
            self._watch = DirectoryWatch.open()
        for ssp, offset in self._offsets.items():
            if ssp not in self._inputs:
                self._open(ssp, offset)
        self._started = True

    def _open(self, ssp: SystemStreamPartition, offset: int) -> None:
        meta = load_meta(self.settings.root, ssp.stream, self.system)
        if not 0 <= ssp.partition < meta.partitions:
            raise SystemError_(f"{ssp}: stream '{ssp.stream}' has partitions "
                               f"0..{meta.partitions - 1}")
        old = self._inputs.pop(ssp, None)
        if old is not None:
            old.reader.close()
        committed = self._isolation is IsolationLevel.READ_COMMITTED
        reader = PartitionReader(
            self.settings.root, ssp.stream, ssp.partition, offset,
            read_bytes=self.settings.consumer_read_bytes,
            reset=self.settings.auto_offset_reset,
            reset_key=CONSUMER_RESET.key(system=self.system), isolation=self._isolation,
            annotate=self._annotate, make_marker=_marker_envelope,
            make_flagged=_flagged_envelope,
            on_held_back=(AbandonedTransactions(self.settings, ssp.stream, ssp.partition)
                          if committed else None),
            system=self.system)
        fetch_max = self.settings.for_stream(ssp.stream, meta.config).fetch_max_records
        self._inputs[ssp] = _Input(reader, fetch_max,
                                   self._makes.get(ssp, IncomingMessageEnvelope))
        watch = self._watch
        if watch is not None and not watch.add(partition_dir(self.settings.root, ssp.stream,
                                                             ssp.partition), ssp):
            watch.close()  # one partition without a watch: the consumer polls on a schedule
            self._watch = None

    def poll(self, ssps: Collection[SystemStreamPartition], timeout: float
             ) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        if not self._started:
            raise SystemError_(f"poll() before start() on the '{self.system}' consumer")
        if self._watch is not None:
            return self._watched_poll(ssps, timeout)
        if timeout <= 0:
            return self._look(ssps)
        now = time.monotonic()
        deadline = now + timeout
        if self._next_look > now:
            # An earlier poll found nothing: wait for the look it scheduled, not look at
            # once (an idle job looks once per wait step, not at every poll).
            time.sleep(min(self._next_look, deadline) - now)
        while True:
            result = self._look(ssps)
            if result:
                self._sleep, self._next_look = _FIRST_SLEEP_S, 0.0
                return result
            # Nothing: the next look comes one wait step later, and the step doubles (up to
            # max.sleep.ms) for as long as looks find nothing, across polls.
            now = time.monotonic()
            sleep = self._sleep
            self._sleep = min(sleep * 2, self._max_sleep)
            self._next_look = now + sleep
            if self._next_look >= deadline:
                return result  # the next poll makes that look
            time.sleep(sleep)

    def _watched_poll(self, ssps: Collection[SystemStreamPartition], timeout: float
                      ) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        """``poll`` with a watch. A partition read to its end is not read again until its
        directory changed (or the look every :data:`_WATCHED_LOOK_S`, which reads them all);
        with nothing to read, sleep until a change wakes it, that look is due, or the
        ``timeout`` passed."""
        watch = self._watch
        now = time.monotonic()
        deadline = now + timeout
        self._changed(watch.drain(), now)
        while True:
            result = self._look(ssps)
            if result or now >= deadline:
                return result
            until = min(self._next_look, deadline)
            changed = watch.wait(until - now) if until > now else NOTHING
            now = time.monotonic()
            if not changed and now < self._next_look and now >= deadline:
                return {}  # nothing changed and no look at everything is due: time is up
            self._changed(changed, now)

    def _changed(self, changed: frozenset, now: float) -> None:
        """Read again the inputs whose directories ``changed`` -- every input when a look at
        everything is due (every :data:`_WATCHED_LOOK_S`)."""
        inputs = self._inputs
        if now >= self._next_look or changed is EVERYTHING:
            for state in inputs.values():
                state.at_end = False
            self._next_look = now + self._watched_look
            return
        for ssp in changed:
            state = inputs.get(ssp)
            if state is not None:
                state.at_end = False

    def _look(self, ssps: Collection[SystemStreamPartition]
              ) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        """Read what is there now: up to ``fetch.max.records`` per SSP."""
        inputs = self._inputs
        watched = self._watch is not None
        result: dict[SystemStreamPartition, list[IncomingMessageEnvelope]] = {}
        for ssp in ssps:
            state = inputs.get(ssp)
            if state is None:
                raise SystemError_(f"{ssp} was not registered with this consumer; "
                                   f"register(ssp, offset) it before start()")
            if state.done or state.at_end:
                continue
            envelopes: list[IncomingMessageEnvelope] = []
            reader = state.reader
            got = reader.read(state.fetch_max, state.make, ssp, envelopes)
            if reader.ended:
                envelopes.append(IncomingMessageEnvelope.end_of_stream(ssp, reader.end_offset))
                state.done = True
            elif watched and got < state.fetch_max:
                state.at_end = True
            if envelopes:
                result[ssp] = envelopes
        return result

    def position(self, ssp: SystemStreamPartition) -> int:
        """The next offset ``poll`` will deliver for ``ssp``."""
        state = self._inputs.get(ssp)
        return state.reader.position if state is not None else self._offsets[ssp]

    def stop(self) -> None:
        for state in self._inputs.values():
            state.reader.close()
        self._inputs.clear()
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self._started = False
