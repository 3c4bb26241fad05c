"""Batching: keep serving the SSP chosen last, up to ``batch_size`` envelopes in a row.

Serving one SSP for a while keeps its task's stores and caches warm. The first envelope of a
batch is picked by the wrapped chooser; while the batch lasts, the next envelope of that SSP
is kept aside and returned directly, without asking the wrapped chooser. After
``batch_size`` envelopes in a row (or when the wrapped chooser picks another SSP) the wrapped
chooser decides again.

As in Samza (docs/CHOOSER.md, "Samza quirks: copied or fixed": copied on purpose) the batch is not
reset when the wrapped chooser has nothing: an SSP whose buffer ran dry and is refilled by the
next poll continues its batch. The batch limit still bounds how long it keeps the lead.

In :class:`~weir.engine.chooser.DefaultChooser` a BatchingChooser sits *inside* each priority tier,
so a batch never delays an envelope of a higher priority.

Example::

    >>> from weir.engine.chooser import RoundRobinChooser
    >>> from weir.engine.model import IncomingMessageEnvelope as Env, SystemStreamPartition as SSP
    >>> c = BatchingChooser(RoundRobinChooser(), batch_size=2)
    >>> a, b = SSP("m", "a", 0), SSP("m", "b", 0)
    >>> c.update(Env(a, 0, None, b"")); c.update(Env(b, 0, None, b""))
    >>> c.choose().ssp.stream
    'a'
    >>> c.update(Env(a, 1, None, b"")); c.choose().ssp.stream   # a again: same batch
    'a'
    >>> c.update(Env(a, 2, None, b"")); c.choose().ssp.stream   # batch of 2 done: b's turn
    'b'
"""

from __future__ import annotations

from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
from weir.engine.chooser.base import ChooserError, MessageChooser, _second_envelope_error

__all__ = ["BatchingChooser", "DEFAULT_BATCH_SIZE"]

DEFAULT_BATCH_SIZE = 100
"""The batch size of a BatchingChooser built without one (Samza's class default)."""


class BatchingChooser:
    """Wraps one chooser; ``batch_resets`` counts finished batches and ``batched`` is the
    length of the current batch (Samza's ``batch-resets`` and ``batched-envelopes``)."""

    __slots__ = ("_wrapped", "_batch_size", "_preferred_ssp", "_preferred", "_count",
                 "batch_resets")

    def __init__(self, wrapped: MessageChooser, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ChooserError(f"BatchingChooser: batch_size must be at least 1, got {batch_size}")
        self._wrapped = wrapped
        self._batch_size = batch_size
        self._preferred_ssp: SystemStreamPartition | None = None
        self._preferred: IncomingMessageEnvelope | None = None
        self._count = 0
        self.batch_resets = 0

    @property
    def wrapped(self) -> MessageChooser:
        return self._wrapped

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def batched(self) -> int:
        return self._count

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        self._wrapped.register(ssp, offset)

    def start(self) -> None:
        self._wrapped.start()

    def stop(self) -> None:
        self._wrapped.stop()

    def update(self, envelope: IncomingMessageEnvelope) -> None:
        if envelope.ssp == self._preferred_ssp:
            if self._preferred is not None:
                raise _second_envelope_error("BatchingChooser", envelope)
            self._preferred = envelope
        else:
            self._wrapped.update(envelope)

    def choose(self) -> IncomingMessageEnvelope | None:
        envelope = self._preferred
        if envelope is None:
            envelope = self._wrapped.choose()
            if envelope is not None:
                self._preferred_ssp = envelope.ssp
                self._count = 1
                if self._batch_size == 1:  # a batch of one: the wrapped chooser picks every time
                    self._reset()
            return envelope
        self._preferred = None
        self._count += 1
        if self._count >= self._batch_size:
            self._reset()
        return envelope

    def _reset(self) -> None:
        self._count = 0
        self._preferred_ssp = None
        self.batch_resets += 1
