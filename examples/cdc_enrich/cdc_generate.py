"""The CDC example's data: a product change stream, model versions, clicks.

:func:`products_cdc` gives the change events of a product table (inserts, then updates and
deletes), :func:`model_version` one version of the category model, :func:`clicks` the clicks;
:class:`Truth` keeps the final product table and every model version, to check the job's
output against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["CATEGORIES", "PARTITIONS", "Truth", "products_cdc", "model_version", "clicks"]

CATEGORIES = ["books", "garden", "kitchen", "toys", "tools"]
PARTITIONS = 2


@dataclass
class Truth:
    products: dict[str, dict] = field(default_factory=dict)
    models: dict[int, dict[str, float]] = field(default_factory=dict)


def products_cdc(truth: Truth, n: int, seed: int = 1) -> list[tuple[str, dict | None]]:
    """``n`` inserts, then updates of a third of them and deletes of a tenth."""
    rnd = random.Random(seed)
    events: list[tuple[str, dict | None]] = []
    for i in range(n):
        sku = f"sku{i:06d}"
        row = {"name": f"product {i}", "category": rnd.choice(CATEGORIES),
               "price": rnd.randrange(100, 10_000)}
        events.append((sku, row))
        truth.products[sku] = {"name": row["name"], "category": row["category"]}
    for i in rnd.sample(range(n), n // 3):
        sku = f"sku{i:06d}"
        row = {"name": f"product {i} (v2)", "category": rnd.choice(CATEGORIES), "price": 1}
        events.append((sku, row))
        truth.products[sku] = {"name": row["name"], "category": row["category"]}
    for i in rnd.sample(range(n), n // 10):
        sku = f"sku{i:06d}"
        events.append((sku, None))
        truth.products.pop(sku, None)
    return events


def model_version(truth: Truth, version: int) -> list[tuple[str, dict]]:
    """Category weights of ``version`` (plus a ``version`` row)."""
    rnd = random.Random(100 + version)
    weights = {c: round(rnd.uniform(0.5, 2.0), 3) for c in CATEGORIES}
    truth.models[version] = weights
    return ([("version", version)]  # type: ignore[list-item]
            + [(c, {"weight": w, "version": version}) for c, w in weights.items()])


def clicks(n: int, products: int, first: int = 0, seed: int = 2) -> list[tuple[str, dict]]:
    """``n`` clicks (keys ``c<i>``) on random products, some unknown."""
    rnd = random.Random(seed + first)
    return [(f"c{i}", {"sku": f"sku{rnd.randrange(int(products * 1.05)):06d}",
                       "user": f"u{rnd.randrange(500)}"})
            for i in range(first, first + n)]
