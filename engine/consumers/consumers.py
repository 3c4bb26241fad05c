"""SystemConsumers: the container's multiplexer of input SSPs (docs/CHOOSER.md, "SystemConsumers").

It polls the systems' consumers, buffers what they return per SSP, hands the chooser one
envelope per SSP (deserialized, so the chooser and the task see typed keys and messages) and
answers the run loop's ``choose()`` with the chooser's pick.

* **Polling**: only SSPs whose buffer is empty and whose envelope is not in the chooser are
  fetched; SSPs that reached end-of-stream are never polled again. A poll happens when the
  chooser has nothing to give, and at least every ``task.poll.interval.ms`` while messages
  flow. When nothing is ready, ``choose()`` waits up to the no-new-messages timeout inside the
  consumers' ``poll`` (they wake as soon as data arrives), so an idle job does not spin.
* **Priorities**: the drained SSPs of every priority tier above the lowest are polled
  (without waiting) before choosing, at most every millisecond, not only at the regular
  poll: a high-priority stream's new messages are chosen within about a millisecond of
  arriving instead of after up to ``task.poll.interval.ms`` of lower-tier messages
  (:class:`~weir.engine.consumers.watches.PriorityWatch`).
* **Bootstrap gating**: the heads (newest offsets) of every registered bootstrap SSP are read
  at start, in one batched metadata call per system. ``choose()`` never asks the chooser
  while a bootstrap stream that has not reached its head has no envelope in the chooser
  (:class:`~weir.engine.chooser.BootstrapLag`); an SSP is caught up when a chosen envelope reaches
  the head, when it starts past it, or at its end-of-stream.
* **Deserialization** failures are fatal (:class:`~weir.engine.errors.DeserializationError`,
  naming SSP and offset) unless ``task.drop.deserialization.errors=true``, which drops them,
  counts them (``deserialization_errors``, in total and per partition) and logs them (the
  first at once, then at most one line per 10 s; :class:`~weir.engine.consumers.watches.DroppedMessageLog`).

Differences from Samza: a poll *appends* to an SSP's buffer instead of replacing it (quirk 5:
Samza's replace is only safe because of the empty-buffer rule); when ``choose()`` has to poll
it chooses again at once instead of returning null first; the wait of one poll round is
shared by all systems instead of applying to each.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.chooser import chooser_from_config
    >>> from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
    >>> from weir.engine.systems.api import StreamSpec
    >>> from weir.engine.systems.memory import MemorySystemFactory, reset_memory_systems
    >>> f = MemorySystemFactory()
    >>> _ = f.get_admin("mem-sc", {}).create_stream(StreamSpec("words", 1))
    >>> f.get_producer("mem-sc", {}).send("doc", OutgoingMessageEnvelope(
    ...     SystemStream("mem-sc", "words"), b"hello", partition=0))
    >>> cfg = Config({"task.inputs": "mem-sc.words"})
    >>> sc = SystemConsumers(chooser_from_config(cfg), {"mem-sc": f.get_consumer("mem-sc", {})},
    ...                      {"mem-sc": f.get_admin("mem-sc", {})}, None, cfg)
    >>> sc.register(SystemStreamPartition("mem-sc", "words", 0), 0); sc.start()
    >>> sc.choose(timeout=0).message
    b'hello'
    >>> sc.stop(); reset_memory_systems("mem-sc")
"""

from __future__ import annotations

import logging
import time
from collections import deque
from itertools import chain, repeat
from operator import call
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weir.stores.config import Config, declare

from weir.engine.consumers.watches import (TIER_POLL_INTERVAL_S, ConsumerCounters, DroppedMessageLog,
                                          PriorityWatch, Refill)
from weir.engine.chooser.base import NO_FAST_LANE, MessageChooser, chooser_capabilities
from weir.engine.chooser.bootstrapping import BootstrapLag
from weir.engine.chooser.default import chooser_from_config
from weir.engine.chooser.spec import bootstrap_streams
from weir.engine.config.serdes import SerdeManager
from weir.engine.errors import DeserializationError, EngineError
from weir.engine.model import EnvelopeKind, IncomingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.runloop.source import EnvelopeSource
from weir.engine.systems.api import (PartitionMetadata, SystemAdmin, SystemConsumer,
                                     SystemConsumerBase)

__all__ = [
    "SystemConsumers",
    "ConsumerSettings",
    "ConsumerCounters",
    "Refill",
    "TASK_POLL_INTERVAL_MS",
    "TASK_NO_NEW_MESSAGES_TIMEOUT_MS",
    "TASK_DROP_DESERIALIZATION_ERRORS",
]

_log = logging.getLogger("weir.consumers")
_COMPONENT = "consumers"
_MESSAGE = EnvelopeKind.MESSAGE
_END_OF_STREAM = EnvelopeKind.END_OF_STREAM

TASK_POLL_INTERVAL_MS = declare(
    "task.poll.interval.ms", int, 50,
    "Longest gap between two polls of the input systems while messages are flowing.",
    component=_COMPONENT)
TASK_NO_NEW_MESSAGES_TIMEOUT_MS = declare(
    "task.poll.no.new.messages.timeout.ms", int, 10,
    "How long `choose()` waits inside the consumers' poll when the chooser has nothing "
    "(Samza's fixed noNewMessagesTimeout); keeps an idle job from spinning.",
    component=_COMPONENT)
TASK_DROP_DESERIALIZATION_ERRORS = declare(
    "task.drop.deserialization.errors", bool, False,
    "Drop input messages that cannot be deserialized instead of stopping the job. Dropped "
    "messages are counted (`deserialization_errors` of the consumers' metrics, also per "
    "partition) and logged (the first at once, then at most one line per 10 s).",
    component=_COMPONENT)

_IMMEDIATE = Refill.IMMEDIATE


@dataclass(frozen=True)
class ConsumerSettings:
    """What :class:`SystemConsumers` needs from the job config, parsed once.

    >>> from weir.stores.config import Config
    >>> ConsumerSettings.from_config(Config({"task.poll.interval.ms": "250"})).poll_interval_ms
    250
    """

    poll_interval_ms: int = 50
    no_new_messages_timeout_ms: int = -1
    drop_deserialization_errors: bool = False
    bootstrap_streams: frozenset[SystemStream] = frozenset()

    @classmethod
    def from_config(cls, config: Config | Mapping[str, str]) -> "ConsumerSettings":
        config = config if isinstance(config, Config) else Config(config)
        return cls(TASK_POLL_INTERVAL_MS.get(config), TASK_NO_NEW_MESSAGES_TIMEOUT_MS.get(config),
                   bool(TASK_DROP_DESERIALIZATION_ERRORS.get(config)),
                   frozenset(bootstrap_streams(config)))


class SystemConsumers(EnvelopeSource):
    """Multiplexes the input SSPs of one container; see the module docstring.

    ``consumers`` and ``admins`` map system names to that system's consumer and admin (one
    consumer per system, shared by every SSP of it). ``serdes`` turns raw envelopes into typed
    ones: a :class:`weir.engine.config.serdes.SerdeManager` (each SSP is deserialized by its
    stream's serdes, skipped for a passthrough stream), or None to hand over bytes. ``clock``
    returns seconds (``time.monotonic``).
    """

    def __init__(self, chooser: MessageChooser, consumers: Mapping[str, SystemConsumer],
                 admins: Mapping[str, SystemAdmin], serdes: SerdeManager | None,
                 settings: ConsumerSettings | Config | Mapping[str, str],
                 *, clock: Callable[[], float] = time.monotonic) -> None:
        if serdes is not None and not isinstance(serdes, SerdeManager):
            raise TypeError(f"SystemConsumers: serdes must be a SerdeManager (the job's "
                            f"SystemRegistry.serdes) or None for bytes, got {serdes!r}")
        if not isinstance(settings, ConsumerSettings):  # a config: parsed here (tests, tools)
            settings = ConsumerSettings.from_config(settings)
        self.settings = settings
        self._chooser = chooser
        self._consumers = dict(consumers)
        self._admins = dict(admins)
        self._serdes = serdes
        self._clock = clock
        self._poll_interval = settings.poll_interval_ms / 1000.0
        self._idle_timeout = max(0, settings.no_new_messages_timeout_ms) / 1000.0
        self._drop_errors = settings.drop_deserialization_errors
        self._bootstrap: frozenset[SystemStream] = settings.bootstrap_streams
        self._registered: dict[SystemStreamPartition, int] = {}
        self._buffers: dict[SystemStreamPartition, deque[IncomingMessageEnvelope]] = {}
        self._deserializers: dict[SystemStreamPartition, Callable | None] = {}
        self._plain: set[SystemStreamPartition] = set()   # SSPs without a deserializer
        # SSPs whose consumer builds their typed envelopes (``takes_envelope_factory``): plain
        # while their buffer holds no record that failed to deserialize. ``_failures`` keeps
        # each failed record's error by offset until its turn; ``_failed_now`` the SSPs that
        # got one during the current poll.
        self._typed: set[SystemStreamPartition] = set()
        self._failures: dict[SystemStreamPartition, dict[int, Exception]] = {}
        self._failed_now: set[SystemStreamPartition] = set()
        # Per system, the SSPs to fetch: insertion-ordered (a dict used as a set) so the
        # order of polls, and therefore of round robin, is deterministic.
        self._empty: dict[str, dict[SystemStreamPartition, None]] = {}
        self._ended: set[SystemStreamPartition] = set()
        self._lag = BootstrapLag({})
        self._gating = False            # cached ``self._lag.active``: checked per message
        self._chooser_choose = chooser.choose
        self._chooser_update = chooser.update
        self._lane: Any = None          # a round-robin chooser's FIFO (see ``start``), or None
        self._next_poll = 0.0           # when the next regular poll is due (clock time)
        self._watch = PriorityWatch(chooser, (), 0.0)
        self._tier_waiting = self._watch.waiting   # its ``waiting``: checked per message
        self._started = False
        self._counters = ConsumerCounters()
        self._drop_log = DroppedMessageLog(_log, clock=clock)

    @classmethod
    def from_registry(cls, registry: Any, systems: Iterable[str], *,
                      chooser: MessageChooser | None = None,
                      clock: Callable[[], float] = time.monotonic) -> "SystemConsumers":
        """SystemConsumers over a :class:`~weir.engine.systems.registry.SystemRegistry`: one new
        consumer and the cached admin per system in ``systems``, the registry's serdes, and
        ``chooser_from_config(registry.config)`` unless a chooser is given."""
        config = registry.config
        names = list(dict.fromkeys(systems))
        return cls(chooser if chooser is not None else chooser_from_config(config),
                   {s: registry.consumer(s) for s in names}, {s: registry.admin(s) for s in names},
                   registry.serdes, config, clock=clock)

    # -- lifecycle -------------------------------------------------------------------------
    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        """Read ``ssp`` from ``offset`` (the first record to read); call once per task that
        owns the SSP, before :meth:`start`. The consumer starts from the lowest offset."""
        ssp = SystemStreamPartition(*ssp)
        if self._started:
            raise EngineError(f"{ssp}: register() after start(); register every input SSP "
                              f"before starting SystemConsumers")
        if ssp.system not in self._consumers:
            raise EngineError(f"cannot register {ssp}: there is no consumer for system "
                              f"'{ssp.system}'; configure systems.{ssp.system}.factory")
        self._chooser.register(ssp, offset)
        current = self._registered.get(ssp)
        if current is None or offset < current:
            self._registered[ssp] = offset
        self._buffers.setdefault(ssp, deque())
        deserialize = self._deserializer_for(ssp)
        consumer = self._consumers[ssp.system]
        if (deserialize is not None and isinstance(consumer, SystemConsumerBase)
                and consumer.takes_envelope_factory):
            self._typed.add(ssp)  # the consumer deserializes as it builds (see start)
            deserialize = None
        self._deserializers[ssp] = deserialize
        if deserialize is None:
            self._plain.add(ssp)

    def start(self) -> None:
        """Register with the consumers, read the bootstrap heads, start everything and poll
        once."""
        for ssp, offset in self._registered.items():
            self._consumers[ssp.system].register(ssp, offset)
        for ssp in self._typed:
            factory = self._serdes.for_stream(ssp.system_stream).envelope_factory(
                self._on_failed)
            self._consumers[ssp.system].set_envelope_factory(ssp, factory)
        self._empty = {system: {} for system in self._consumers}
        for ssp in self._registered:
            self._empty[ssp.system][ssp] = None
        for consumer in self._consumers.values():
            consumer.start()
        self._lag = BootstrapLag(self._bootstrap_heads())
        for ssp, offset in self._registered.items():
            self._lag.register(ssp, offset)
        self._lag.start()
        self._gating = self._lag.active
        self._chooser.start()
        # Bound again after start: a chooser may set up its fast paths in start().
        self._chooser_choose = self._chooser.choose
        self._chooser_update = self._chooser.update
        # The default chooser (round robin, no priorities, no bootstrap, no batching): choose
        # pops its FIFO's head and appends that SSP's next envelope itself (the fast lane).
        lane = chooser_capabilities(self._chooser).fast_lane() if not self._gating else NO_FAST_LANE
        self._lane = lane[0] if lane is not NO_FAST_LANE else None
        self._watch = PriorityWatch(self._chooser, self._registered,
                                    min(TIER_POLL_INTERVAL_S, self._poll_interval))
        self._tier_waiting = self._watch.waiting
        for ssp in self._registered:
            self._watch.drained(ssp)
        self._started = True
        self._refresh(0.0)

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._drop_log.flush()
        for consumer in self._consumers.values():
            consumer.stop()
        self._chooser.stop()

    # -- choosing --------------------------------------------------------------------------
    def choose(self, timeout: float | None = None, *,
               refill: Refill = Refill.IMMEDIATE) -> IncomingMessageEnvelope | None:
        """The next envelope to process, or None when none came within ``timeout`` seconds
        (default ``task.poll.no.new.messages.timeout.ms``). End-of-stream envelopes are
        returned like any other (``envelope.is_end_of_stream``)."""
        now = self._clock()
        if now >= self._next_poll:
            self._refresh(0.0)
        elif self._tier_waiting and now >= self._watch.next_poll:
            self._poll_waiting(now)
        lane = self._lane
        if lane and refill is _IMMEDIATE:  # fast lane: chooser.choose() + update() inline
            envelope = lane[0]
            ssp = envelope.ssp
            buffer = self._buffers[ssp]
            if buffer and envelope.kind is not _END_OF_STREAM and ssp in self._plain:
                lane.popleft()
                lane.append(buffer.popleft())  # the SSP stays held by the chooser
                self._counters.chooses += 1
                return envelope
        envelope = self._choose_gated() if self._gating else self._chooser_choose()
        if envelope is None:
            self._refresh(self._idle_timeout if timeout is None else max(0.0, timeout))
            envelope = self._choose_gated() if self._gating else self._chooser_choose()
            if envelope is None:
                if not self._started:
                    raise EngineError("SystemConsumers.choose() before start(); register the "
                                      "input SSPs and call start() first")
                self._counters.chose_null += 1
                return None
        ssp = envelope.ssp
        if envelope.kind is _END_OF_STREAM:
            self._ended.add(ssp)
        self._counters.chooses += 1
        if refill is _IMMEDIATE:
            buffer = self._buffers[ssp]
            if buffer and ssp in self._plain and not self._gating:
                self._chooser_update(buffer.popleft())   # hot path: bytes in, no bootstrap
            else:
                self._try_update(ssp)
        return envelope

    def choose_run(self, limit: int) -> list[IncomingMessageEnvelope]:
        """Up to ``limit`` envelopes: what as many ``choose()`` calls would return, in the same
        order, while the fast lane serves them (the default chooser, buffered messages, no
        poll due); an empty list when it cannot serve the next one (then call ``choose()``).
        Saves the run loop a call per message; ``limit`` bounds how long a poll can wait.

        An SSP with serdes is served too: its next buffered message is deserialized as it
        enters the chooser, as ``choose()`` does. One that fails to deserialize ends the run
        before its SSP's envelope is taken; the next ``choose()`` takes that envelope and then
        stops the job or drops the bad message exactly as it always does."""
        lane = self._lane
        if not lane or self._clock() >= self._next_poll or self._tier_waiting:
            return []
        buffers, plain = self._buffers, self._plain
        out = self._rounds(lane, limit) if limit >= 2 * len(lane) else []
        deserializers = self._deserializers
        popleft, append, take = lane.popleft, lane.append, out.append
        for _ in range(limit - len(out)):
            envelope = lane[0]
            ssp = envelope.ssp
            buffer = buffers[ssp]
            if not buffer or envelope.kind is _END_OF_STREAM:
                break
            if ssp in plain:
                nxt = buffer.popleft()
            else:
                nxt = buffer[0]
                if nxt.kind is _MESSAGE:
                    try:
                        nxt = deserializers[ssp](nxt)
                    except Exception:  # noqa: BLE001 - choose() raises or drops it
                        break
                buffer.popleft()
            popleft()
            append(nxt)  # the SSP stays held by the chooser
            take(envelope)
        self._counters.chooses += len(out)
        return out

    def _rounds(self, lane: deque, limit: int) -> list[IncomingMessageEnvelope]:
        """``choose_run``'s whole rounds of the fast lane, taken at once: while every SSP in
        the lane is plain, has no end-of-stream at the head and has ``r`` envelopes
        buffered, ``r`` rounds of single choices hand out the lane's envelopes, then the first
        ``r - 1`` of each buffer one round at a time, and leave each buffer's ``r``-th in the
        lane in the same SSP order. The same list, built in C instead of one pop and one
        append per envelope; an empty one when a condition fails (then the caller goes
        envelope by envelope)."""
        heads = list(lane)
        k = len(heads)
        ssps = [envelope.ssp for envelope in heads]
        buffers = self._buffers
        columns = [buffers[ssp] for ssp in ssps]
        rounds = min(min(map(len, columns)), limit // k)
        if (rounds < 1 or not self._plain.issuperset(ssps) or len(set(ssps)) != k
                or _END_OF_STREAM in [envelope.kind for envelope in heads]):
            return []
        taken = [list(map(call, repeat(buffer.popleft, rounds))) for buffer in columns]
        rows = list(zip(*taken))
        lane.clear()
        lane.extend(rows.pop())  # the SSPs stay held by the chooser, in the same order
        heads.extend(chain.from_iterable(rows))
        return heads

    def metrics(self) -> Callable[[], Mapping[str, Any]]:
        """The counters' ``snapshot`` (the run loop reports it under ``"consumers"``)."""
        return self.counters.snapshot

    def release(self, ssps: Iterable[SystemStreamPartition]) -> None:
        """Stop reading ``ssps`` for good (a drained source, an intermediate partition whose
        upstream tasks all ended): their buffered envelopes are dropped and they are never
        polled again. An envelope already in the chooser may still be chosen; the run loop
        skips it. Offsets are not affected: unread input stays for the next run."""
        for ssp in ssps:
            if ssp not in self._registered:
                continue
            self._ended.add(ssp)
            self._buffers[ssp].clear()
            self._empty.get(ssp.system, {}).pop(ssp, None)

    def refill(self, ssp: SystemStreamPartition) -> None:
        """Offer the chooser ``ssp``'s next buffered envelope (with ``Refill.BY_CALLER``);
        polls the SSP later if its buffer is empty. Call at most once per chosen envelope."""
        self._try_update(ssp)

    def _choose_gated(self) -> IncomingMessageEnvelope | None:
        """``choose`` while some bootstrap SSP lags: ask the chooser only when allowed."""
        lag = self._lag
        if not lag.ok_to_choose:
            self._counters.gated += 1
            return None
        envelope = self._chooser_choose()
        if envelope is not None:
            lag.on_chosen(envelope)
            self._gating = lag.active
        return envelope

    def _try_update(self, ssp: SystemStreamPartition) -> bool:
        """Hand the chooser the SSP's next envelope that deserializes; when the buffer runs
        out, mark the SSP for polling (unless it has ended)."""
        buffer = self._buffers[ssp]
        deserialize = self._deserializers[ssp]
        while buffer:
            envelope = buffer.popleft()
            if deserialize is not None and envelope.kind is _MESSAGE:
                try:
                    envelope = deserialize(envelope)
                except Exception as exc:
                    if not self._drop_errors:
                        if isinstance(exc, DeserializationError):
                            raise
                        raise DeserializationError(f"{type(exc).__name__}: {exc}", ssp=ssp,
                                                   offset=envelope.offset) from exc
                    self._count_dropped(ssp, envelope.offset, exc)
                    if self._gating:
                        self._dropped_at_head(envelope)
                    continue
            self._chooser_update(envelope)
            if self._gating:
                self._lag.on_update(envelope)
            return True
        if ssp not in self._ended:
            self._empty[ssp.system][ssp] = None
            self._watch.drained(ssp)
        return False

    # -- typed envelopes built by the consumers -------------------------------------------
    def _on_failed(self, raw: IncomingMessageEnvelope, error: Exception
                   ) -> IncomingMessageEnvelope:
        """An envelope factory's record that did not deserialize: buffered raw, its error
        kept until it enters the chooser (then raised or dropped, as ``_try_update`` does
        with a record that fails there)."""
        ssp = raw.ssp
        self._failures.setdefault(ssp, {})[raw.offset] = error
        self._failed_now.add(ssp)
        return raw

    def _typed_filled(self, ssp: SystemStreamPartition, was_empty: bool) -> None:
        """A poll filled typed ``ssp``'s buffer: it takes the checked path while a failed
        record may be in its buffer, the plain one again once a poll into an empty buffer
        brought none."""
        if ssp in self._failed_now:
            self._failed_now.discard(ssp)
            if ssp in self._plain:
                self._plain.discard(ssp)
                self._deserializers[ssp] = self._failed_check(self._failures[ssp])
        elif was_empty and ssp not in self._plain:
            self._plain.add(ssp)
            self._deserializers[ssp] = None
            self._failures.pop(ssp, None)

    @staticmethod
    def _failed_check(failed: dict[int, Exception]) -> Callable:
        """The 'deserializer' of a typed SSP with failed records: raises a failed record's
        error, hands every other envelope back as it is."""
        def check(envelope: IncomingMessageEnvelope) -> IncomingMessageEnvelope:
            error = failed.get(envelope.offset)
            if error is not None:
                raise error
            return envelope
        return check

    def _count_dropped(self, ssp: SystemStreamPartition, offset: int,
                       error: BaseException) -> None:
        counters = self._counters
        counters.deserialization_errors += 1
        by = counters.deserialization_errors_by_partition
        key = str(ssp)
        by[key] = by.get(key, 0) + 1
        self._drop_log.dropped(ssp, offset, error)

    def _dropped_at_head(self, envelope: IncomingMessageEnvelope) -> None:
        """A dropped envelope at its lagging bootstrap SSP's head catches that SSP up."""
        lag, head = self._lag, self._lag.head_of(envelope.ssp)
        if lag.is_lagging(envelope.ssp) and head is not None and envelope.offset >= head.newest:
            lag.mark_caught_up(envelope.ssp)
            self._gating = lag.active

    # -- polling ---------------------------------------------------------------------------
    def _refresh(self, timeout: float,
                 only: Iterable[SystemStreamPartition] | None = None) -> None:
        """Poll every system once for its SSPs with empty buffers (of those in ``only``,
        when given: then the regular poll stays due when it was). The first poll may wait up
        to ``timeout`` seconds; once any envelope has arrived, the rest do not wait."""
        now = self._clock()
        if only is None:
            self._next_poll = now + self._poll_interval
        else:
            only = set(only)
        deadline = now + timeout
        waited = False
        counters, watch, typed = self._counters, self._watch, self._typed
        for system, fetch in self._empty.items():
            if not fetch:
                continue
            ssps = tuple(fetch) if only is None else tuple(s for s in fetch if s in only)
            if not ssps:
                continue
            wait = max(0.0, deadline - self._clock()) if timeout > 0 and not waited else 0.0
            result = self._consumers[system].poll(ssps, wait)
            counters.polls += 1
            got = False
            for ssp, envelopes in result.items():
                if not envelopes:
                    continue
                got = True
                buffer = self._buffers[ssp]
                was_empty = not buffer
                buffer.extend(envelopes)
                if ssp in typed:
                    self._typed_filled(ssp, was_empty)
                counters.polled += len(envelopes)
                if ssp in fetch:
                    del fetch[ssp]
                    if watch.waiting:
                        watch.filled(ssp)
                    self._try_update(ssp)
            if got:
                waited = True
            else:
                counters.empty_polls += 1

    def _poll_waiting(self, now: float) -> None:
        """Poll (without waiting) the drained SSPs of tiers above the lowest, so their new
        envelopes are chosen before lower tiers' instead of after the next regular poll."""
        watch = self._watch
        watch.next_poll = now + watch.interval
        self._counters.tier_polls += 1
        self._refresh(0.0, tuple(watch.waiting))

    def _bootstrap_heads(self) -> dict[SystemStreamPartition, PartitionMetadata]:
        by_system: dict[str, list[SystemStreamPartition]] = {}
        for ssp in self._registered:
            if ssp.system_stream in self._bootstrap:
                by_system.setdefault(ssp.system, []).append(ssp)
        heads: dict[SystemStreamPartition, PartitionMetadata] = {}
        for system, ssps in by_system.items():
            admin = self._admins.get(system)
            if admin is None:
                raise EngineError(
                    f"bootstrap stream(s) {sorted({str(s.system_stream) for s in ssps})} need "
                    f"the admin of system '{system}' to read their heads; pass it to "
                    f"SystemConsumers")
            heads.update(admin.metadata(ssps))
        return heads

    def _deserializer_for(self, ssp: SystemStreamPartition) -> Callable | None:
        serdes = self._serdes
        if serdes is None:
            return None
        stream_serdes = serdes.for_stream(ssp.system_stream)
        return None if stream_serdes.is_passthrough else stream_serdes.deserialize

    # -- state -----------------------------------------------------------------------------
    @property
    def counters(self) -> ConsumerCounters:
        """The live counters, with ``buffered`` brought up to date."""
        counters = self._counters
        counters.buffered = sum(len(b) for b in self._buffers.values())
        return counters

    @property
    def chooser(self) -> MessageChooser:
        return self._chooser

    @property
    def bootstrap(self) -> BootstrapLag:
        """The bootstrap bookkeeping (lagging SSPs, per-stream lagging partitions)."""
        return self._lag

    @property
    def registered(self) -> Mapping[SystemStreamPartition, int]:
        """The lowest registered offset of each SSP."""
        return dict(self._registered)

    def is_end_of_stream(self, ssp: SystemStreamPartition) -> bool:
        """True once the SSP's end-of-stream envelope has been chosen (or it was released)."""
        return ssp in self._ended

    @property
    def all_end_of_stream(self) -> bool:
        """Every registered SSP has ended: there is nothing more to choose."""
        return len(self._ended) == len(self._registered)

    def ssps_to_poll(self) -> Iterable[SystemStreamPartition]:
        """The SSPs the next poll will fetch (buffer empty, not in the chooser, not ended)."""
        return [ssp for fetch in self._empty.values() for ssp in fetch]
