"""Tasks and extractors for the adjunct store tests (named in configs as ``module:Class``)."""

from __future__ import annotations

import threading

from weir.engine.model import OutgoingMessageEnvelope, SystemStream

__all__ = ["Enrich", "SEEN", "UpperSku", "Versions", "CountingManager"]

SEEN: dict[str, list] = {}
"""Per task name: the streams of every envelope ``process`` saw (tests check no adjunct
message reached a task); reset by the tests."""
LOCK = threading.Lock()


class Enrich:
    """Joins each click ``{"sku": ..}`` to store ``products``; sends ``{"sku", "name",
    "products_seen"}`` to ``<system>.enriched`` (partition of the click). ``products_seen``
    is the number of products in the store when the click is processed."""

    def init(self, context):
        self.products = context.store("products")
        self.task = str(context.task_name)
        self.context = context

    def process(self, envelope, collector, coordinator):
        with LOCK:
            SEEN.setdefault(self.task, []).append(envelope.ssp.stream)
        if "write" in envelope.message:  # a task trying to write its adjunct store
            self.products.put(envelope.message["sku"], {"name": "written by the task"})
        sku = envelope.message["sku"]
        product = self.products.get(sku)
        with self.products.all() as it:
            seen = sum(1 for _ in it)
        ssp = envelope.ssp
        collector.send(OutgoingMessageEnvelope(
            SystemStream(ssp.system, "enriched"),
            {"sku": sku, "name": product["name"] if product else None, "products_seen": seen},
            key=sku, partition=ssp.partition))


class Versions:
    """Reads model ``weights`` twice per click (start and end of process); sends
    ``{"first": .., "last": ..}`` to ``<system>.scored``: one version must give both."""

    def init(self, context):
        self.model = context.store("model")

    def process(self, envelope, collector, coordinator):
        first = self.model.get("version")
        with self.model.all() as it:
            rows = dict(it)
        last = self.model.get("version")
        versions = {v["version"] for k, v in rows.items() if k != "version"}
        ssp = envelope.ssp
        collector.send(OutgoingMessageEnvelope(
            SystemStream(ssp.system, "scored"),
            {"first": first, "last": last, "rows": sorted(versions), "click": envelope.key},
            key=envelope.key,
            partition=ssp.partition))


class UpperSku:
    """Extractor factory: key = the value's ``sku`` upper-cased, value = the name only;
    a value without ``sku`` is rejected (KeyError)."""

    def __init__(self, config, store):
        self.store = store

    def get_key(self, envelope):
        return envelope.message["sku"].upper() if envelope.message is not None else envelope.key

    def get_value(self, envelope):
        return None if envelope.message is None else {"name": envelope.message["name"]}


def CountingManager(task_name, feeds, views):
    """A manager factory (``job.adstore.manager.factory``) counting what it applies."""
    from weir.engine.adjunct import AdjunctDataStoreManager

    class Counting(AdjunctDataStoreManager):
        applied = 0

        def apply(self, envelope):
            type(self).applied += 1
            CountingManager.applied += 1
            super().apply(envelope)

    return Counting(task_name, feeds, views)


CountingManager.applied = 0


class AsyncEnrich(Enrich):
    """Enrich as a coroutine task (``async def process``)."""

    async def process(self, envelope, collector, coordinator):
        Enrich.process(self, envelope, collector, coordinator)


class CallbackEnrich(Enrich):
    """Enrich as a callback task (``process_async`` completing its callback)."""

    process = None

    def process_async(self, envelope, collector, coordinator, callback):
        Enrich.process(self, envelope, collector, coordinator)
        callback.complete()
