"""Which tasks an envelope goes to: the run loop's routing table of input partitions.

Each input SSP goes to the one task that reads it (``single``, the inline path's per-message
lookup) or, for an SSP several tasks read (a broadcast input), to each of them in the loop's
task order (``shared``). A task stops reading an SSP when its source is drained or an
intermediate stream ended (:meth:`SspRoutes.release`); once no task reads it, the source is
told to stop polling it (its optional ``release(ssps)``) and envelopes of it still arriving
are skipped quietly. Envelopes of an SSP no task reads are skipped and counted
(``skipped-envelopes``), with one warning per SSP. Only the loop thread touches the table.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from weir.engine.metrics import Counter
from weir.engine.model import EnvelopeKind, IncomingMessageEnvelope
from weir.engine.runloop.source import EnvelopeSource
from weir.engine.runloop.worker import Worker

__all__ = ["SspRoutes"]

log = logging.getLogger("weir.runloop")

_MESSAGE = EnvelopeKind.MESSAGE


class SspRoutes:
    """The workers of each input SSP of one run loop (``name``) over ``source``."""

    def __init__(self, workers: Iterable[Worker], source: EnvelopeSource, skipped: Counter,
                 name: str):
        owners: dict[Any, list[Worker]] = {}
        for w in workers:
            for ssp in w.inst.ssps:
                owners.setdefault(ssp, []).append(w)
        self.single = {s: ws[0] for s, ws in owners.items() if len(ws) == 1}
        self.shared = {s: tuple(ws) for s, ws in owners.items() if len(ws) > 1}
        self._source = source
        self._skipped = skipped
        self._name = name
        self._released: set = set()
        self._warned: set = set()

    def owners(self, env: IncomingMessageEnvelope) -> tuple[Worker, ...] | list[Worker]:
        """The workers an envelope goes to; envelopes of a shared SSP before a task's
        starting offset are skipped for that task (docs/CHOOSER.md, "Starting offsets")."""
        w = self.single.get(env.ssp)
        if w is not None:
            return (w,)
        ws = self.shared.get(env.ssp)
        if ws is None:
            self._skipped.count += 1
            if env.ssp in self._released:  # drained or ended: deliberately not read
                return ()
            if env.ssp not in self._warned:
                self._warned.add(env.ssp)
                log.warning("run loop '%s': no task consumes %s; skipping its envelopes",
                            self._name, env.ssp)
            return ()
        if env.kind is not _MESSAGE:
            return ws
        out = [w for w in ws if w.inst.is_caught_up(env)]
        for w in ws:
            if w not in out:
                w.inst.metrics.skipped.count += 1
        return out

    def release(self, w: Worker, ssps) -> None:
        """``w`` stops reading ``ssps`` (drained sources, ended intermediate partitions): the
        loop skips their envelopes and, once no task reads one, the source stops polling it."""
        gone = []
        for ssp in ssps:
            if self.single.get(ssp) is w:
                del self.single[ssp]
                gone.append(ssp)
            elif ssp in self.shared:
                rest = tuple(x for x in self.shared[ssp] if x is not w)
                if len(rest) > 1:
                    self.shared[ssp] = rest
                else:
                    del self.shared[ssp]
                    if rest:
                        self.single[ssp] = rest[0]
                    else:
                        gone.append(ssp)
        if gone:
            self._released.update(gone)
            self._source.release(gone)
