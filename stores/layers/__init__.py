"""Store layers, each adding one concern over an inner store with the same contract.

- :class:`SerializedLayer`: typed keys/values over bytes (serdes at the edge);
- :class:`CachedLayer`: LRU object cache with dirty write-back (Samza's CachedStore); a cache
  holding every key of its store answers misses itself (:class:`MissReads`);
- :class:`LoggedLayer`: every change also appended to a ChangelogSink;
- :class:`ReadOnlyView`: reads only, writes raise ReadOnlyStoreError;
- :class:`LockedLayer`: every operation under the store's lock (stores shared between threads).

They are composed in one place, :func:`weir.stores.builder.build_store` (the lock layer by
:func:`weir.stores.builder.shared_store`).
"""

from weir.stores.layers.cached import CachedLayer, MissReads
from weir.stores.layers.locked import LockedIterator, LockedLayer, LockedSnapshot
from weir.stores.layers.logged import LoggedLayer
from weir.stores.layers.readonly import ReadOnlyView
from weir.stores.layers.serialized import SerializedLayer, SerializedSnapshot

__all__ = ["CachedLayer", "LockedIterator", "LockedLayer", "LockedSnapshot", "LoggedLayer",
           "MissReads", "ReadOnlyView", "SerializedLayer", "SerializedSnapshot"]
