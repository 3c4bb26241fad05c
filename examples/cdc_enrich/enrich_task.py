"""The CDC enrichment task (``task.class=enrich_task:CdcEnrichTask``).

Per click ``{"sku", "user"}``: look the product up in the adjunct store ``products`` (filled
from the ``products-cdc`` change stream), score it with the ``model`` version served for this
call (one version for the whole call, even while a new one is switched in), and send
``{"sku", "name", "score", "model_version"}`` to ``enriched`` (key: the click id). A click on a
deleted or unknown product gets ``name`` None and score 0.
"""

from __future__ import annotations

from weir import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream

__all__ = ["CdcEnrichTask", "ENRICHED", "score"]

ENRICHED = SystemStream("filelog", "enriched")


def score(weight: float, user: str) -> float:
    """The click's score: the category weight times a per-user factor."""
    return round(weight * (1 + (sum(map(ord, user)) % 7) / 10), 6)


class CdcEnrichTask(StreamTask, InitableTask):
    def init(self, context):
        self.products = context.store("products")
        self.model = context.store("model")

    def process(self, envelope, collector, coordinator):
        click = envelope.message
        product = self.products.get(click["sku"])
        if product is None:
            name, weight, version = None, 0.0, self.model.get("version")
        else:
            row = self.model.get(product["category"]) or {"weight": 0.0, "version": None}
            name, weight, version = product["name"], row["weight"], row["version"]
        collector.send(OutgoingMessageEnvelope(
            ENRICHED, {"sku": click["sku"], "name": name, "score": score(weight, click["user"]),
                       "model_version": version},
            key=envelope.key, partition=envelope.ssp.partition))
