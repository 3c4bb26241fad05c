"""Walking a built store's layers down to its bytes engine: :func:`layers_of`.

Every layer :func:`weir.stores.builder.build_store` composes declares ``inner`` (the store it
wraps); a bytes engine (:class:`~weir.stores.engines._base.BytesEngineBase`) ends the stack.
Restore finds the engine under a store this way, the container the object cache whose metrics
it reports.

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> from weir.stores.layers.cached import CachedLayer
    >>> from weir.stores.layers.serialized import SerializedLayer
    >>> from weir.stores.serdes import StringSerde
    >>> store = CachedLayer(SerializedLayer(MemoryEngine("s"), StringSerde(), StringSerde()),
    ...                     capacity=10, write_batch_size=5)
    >>> [type(layer).__name__ for layer in layers_of(store)]
    ['CachedLayer', 'SerializedLayer', 'MemoryEngine']
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from weir.stores.engines._base import BytesEngineBase
from weir.stores.layers.cached import CachedLayer
from weir.stores.layers.large import LargeMessageLayer, PutSizeCheck
from weir.stores.layers.locked import LockedLayer
from weir.stores.layers.logged import LoggedLayer
from weir.stores.layers.serialized import SerializedLayer

__all__ = ["LAYERS", "layers_of"]

LAYERS: tuple[type, ...] = (PutSizeCheck, CachedLayer, SerializedLayer, LargeMessageLayer,
                            LoggedLayer, LockedLayer)
"""The layers that wrap an ``inner`` store (each declares the ``inner`` property)."""


def layers_of(store: Any) -> Iterator[Any]:
    """``store``, then each layer under it, down to its bytes engine (the last one yielded).
    The walk ends early at an object that is neither a layer nor an engine (a caller's own
    wrapper): it is the last one yielded then."""
    layer = store
    while True:
        yield layer
        if isinstance(layer, BytesEngineBase) or not isinstance(layer, LAYERS):
            return
        layer = layer.inner
