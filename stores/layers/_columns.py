"""Column-wise batch writes between layers (internal).

A write-down moves hundreds of entries at once. Building one ``(key, value)`` tuple per entry
in every layer is what a Python process pays most for, and not only in time: thousands of live
tuples trigger the garbage collector's full collections, which walk every object in the
process. Layers therefore hand batches down as two parallel lists, ``keys`` and ``values``
(``None`` value = delete), through ``write_columns(keys, values)``; a bytes engine without its
own declares the default of :class:`~weir.stores.engines._base.BytesEngineBase`,
``write_batch(zip(keys, values))``, whose result tuple is reused from one entry to the next.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["columns_writer", "has_none"]

_IS_NONE = functools.partial(operator.is_, None)


def has_none(values: list[Any]) -> bool:
    """Whether ``values`` holds a ``None`` (identity test in C; no ``__eq__`` is called)."""
    return any(map(_IS_NONE, values))


def columns_writer(store: Any) -> Callable[..., None]:
    """``store.write_columns``: every layer has it, and every bytes engine
    (:class:`~weir.stores.engines._base.BytesEngineBase`; by default ``write_batch(zip(...))``).

    The writer is called as ``write(keys, values, deletes=...)``; ``deletes=False`` promises
    that no value is ``None``, which spares the receiver a scan for deletes.
    """
    return store.write_columns
