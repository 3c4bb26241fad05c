"""Task of the adjunct benchmark (bench/adjunct.py), named in its configs as ``module:Class``."""

from __future__ import annotations

from weir.engine.task import InitableTask, StreamTask

__all__ = ["Lookup"]


class Lookup(StreamTask, InitableTask):
    """One read of store ``products`` per message (the message key); counts the hits."""

    hits = 0

    def init(self, context):
        self.get = context.store("products").get

    def process(self, envelope, collector, coordinator):
        if self.get(envelope.key) is not None:
            Lookup.hits += 1
