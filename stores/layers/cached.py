"""The write-back LRU cache layer (Samza's ``CachedStore``).

``CachedLayer`` works over any store with the store contract (``get``, ``get_all``,
``write_batch``, ``range`` ... ``close``): over the typed :class:`SerializedLayer` it caches
Python objects (what :func:`weir.stores.builder.build_store` does, see docs/STORES.md for why), over
a bytes engine it caches bytes. Semantics, from Samza:

- ``get`` serves hits from the cache; a miss reads the inner store and caches the result, also
  when the key is absent (a *negative entry*: the cache maps the key to ``None``, exactly what
  ``get`` returns for an absent key; ``None`` can never be a stored value).
- A *complete* cache answers misses without reading the inner store
  (``MissReads.SKIP_WHEN_COMPLETE``, the default): when the first key enters the cache, the
  inner store is looked at once (one iterator step); if it is empty, every key the store
  will hold passes through the cache, so a key the cache does not hold is absent, and a miss
  costs a negative entry instead of an engine read, until the first eviction (from then on
  an uncached key may be in the inner store, and misses read it). A job's first run, or any
  store whose keys fit its cache, never reads its engine for a new key. Like the cache's
  other entries this relies on one rule that already holds: once the cache holds a key,
  nothing writes below it (restore and bootstrap bulk loads finish before the first read).
- Eviction is least-recently-used, where *use* is a read (``get``/``get_all``) or the insert of
  a key; overwriting a cached key does not refresh it (that costs a linked-list move on the
  hottest path, and a read-modify-write has just refreshed the key with its read). Recency is
  tracked from the moment the cache first fills: until then nothing can be evicted, and a
  hit is a single C call (``get`` is the cache dict's own ``__getitem__``). Evicting a dirty
  key only writes it down early: nothing is lost.
- ``put``/``delete`` only touch the cache and mark the key dirty. Dirty entries are written
  down, each key once with its latest value (``None`` = delete), oldest-dirtied first, in one
  batch when: the number of dirty keys reaches ``write_batch_size``; the least recently used
  entry must be evicted and is dirty (then *all* dirty entries go down first); before
  ``range``/``prefix``/``all``/``snapshot`` (so iterators see every write); and on
  ``flush``/``close``, which then flush/close the inner store.
- A key written many times between two write-downs reaches the inner store, and so the
  changelog, once: the cache deduplicates the changelog.

Because the cache holds objects, a value returned by ``get`` or passed to ``put`` is shared
with the cache: mutate a copy, or ``put`` the object again after changing it. Keys must be
hashable (``put`` of a list key raises ``SerdeError`` with a hint, ``get`` a plain
``TypeError``), and keys equal in Python (``1 == 1.0 == True``) share one cache entry. Not
thread-safe: one task's thread at a time.

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> engine = MemoryEngine("s")
    >>> store = CachedLayer(engine, capacity=4, write_batch_size=2)
    >>> store.put(b"a", b"1"); engine.get(b"a") is None     # still only in the cache
    True
    >>> store.put(b"b", b"2"); engine.get(b"a")             # 2 dirty keys: written down
    b'1'
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any

from weir.stores.api import FlushScope
from weir.stores.api import (checked_keys, checked_pairs, closed_store_error, null_key_error,
                   null_value_error)
from weir.stores.errors import SerdeError, StoreError
from weir.stores.layers._columns import columns_writer
from weir.stores.layers.serialized import SerializedLayer

__all__ = ["CachedLayer", "MissReads"]

_UNCACHED: Any = object()
"""``dict.get`` default meaning "no cache entry" (distinct from a negative entry, ``None``)."""
_END: Any = object()
"""``next`` default of the emptiness probe."""


class MissReads(Enum):
    """Whether a cache miss always reads the inner store (see the module docs)."""

    ALWAYS = "always"
    """Every miss reads the inner store."""
    SKIP_WHEN_COMPLETE = "skip-when-complete"
    """A store found empty when its first key enters the cache answers misses from the cache
    (the key is absent) until the cache first evicts."""


class _KeySet(Enum):
    """What the cache knows about the inner store's keys."""

    UNKNOWN = "unknown"     # not looked at yet (no key has entered the cache)
    COMPLETE = "complete"   # every key of the store is in the cache
    PARTIAL = "partial"     # the store may hold keys the cache does not


class _Cache(OrderedDict):
    """The LRU map (least recent first). A lookup of an uncached key reads through ``miss``,
    except in a complete cache with room left: there the key is absent, and the lookup
    caches a negative entry in this one frame (the miss path of a store filling up, so of
    every new key of a large key space)."""

    __slots__ = ("miss", "complete_below", "skips")

    def __init__(self) -> None:
        super().__init__()
        # The capacity while the cache is complete (every key of the store is cached), else
        # 0: a lookup of an uncached key is answered absent while ``len(self)`` is below it.
        self.complete_below = 0
        self.skips = 0  # lookups answered absent here (misses that skipped the inner store)

    def __missing__(self, key: Any) -> Any:
        if len(self) < self.complete_below and key is not None:
            self[key] = None
            self.skips += 1
            return None
        return self.miss(key)


class CachedLayer:
    """An LRU object cache with dirty write-back over an inner store (see module docs)."""

    get: Callable[[Any], Any]
    """The value of ``key``, or None when absent (bound per instance, see ``__init__``)."""
    put: Callable[[Any, Any], None]
    """Insert or replace; only the cache changes until the next write-down (bound per
    instance, see :meth:`_bind_put`)."""

    def __init__(self, inner: Any, *, capacity: int, write_batch_size: int,
                 miss_reads: MissReads = MissReads.SKIP_WHEN_COMPLETE):
        if not isinstance(miss_reads, MissReads):
            raise TypeError(f"miss_reads must be a MissReads, got {miss_reads!r}")
        if write_batch_size < 1:
            raise ValueError(f"write_batch_size must be >= 1, got {write_batch_size}")
        if capacity < write_batch_size:
            raise ValueError(f"cache capacity ({capacity}) cannot be less than the write batch "
                             f"size ({write_batch_size})")
        self.name: str = inner.name
        self._inner = inner
        self._capacity = capacity
        self._batch_size = write_batch_size
        self._cache = _Cache()
        self._cache.miss = self._get_miss
        self._dirty: dict[Any, Any] = {}   # key -> latest value or None (delete); oldest first
        self._dirty_deletes = False         # whether _dirty holds a delete
        self._closed = False
        self._full = False
        self._write_inner = columns_writer(inner)
        self._keys = (_KeySet.UNKNOWN if miss_reads is MissReads.SKIP_WHEN_COMPLETE
                      else _KeySet.PARTIAL)
        self._misses = 0                    # keys read that were not cached
        self._skipped = 0                   # ... of them, answered absent by a complete cache
        self._misses_at_full = 0            # ... of them, before the cache first filled
        self._evictions = 0
        self._read_hits: Callable[[], int] = lambda: 0   # hits since the cache first filled
        # Until the cache first fills nothing is evicted, so recency need not be tracked and
        # ``get`` is the dict's own lookup: a hit costs one C call, a miss reads through
        # ``_Cache.__missing__``. ``_insert`` switches ``get`` to the closure of
        # ``_bind_get_lru`` on the first eviction.
        self.get = self._cache.__getitem__
        self.put = self._bind_put()

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def write_batch_size(self) -> int:
        return self._batch_size

    @property
    def cached_count(self) -> int:
        """Entries in the cache, negative entries included."""
        return len(self._cache)

    @property
    def dirty_count(self) -> int:
        """Keys changed in the cache and not yet written down."""
        return len(self._dirty)

    @property
    def complete(self) -> bool:
        """Whether the cache holds every key of the store (misses skip the inner store)."""
        return self._keys is _KeySet.COMPLETE

    def stats(self) -> dict[str, Any]:
        """The cache's metrics: ``entries``/``capacity``, ``misses`` (reads of uncached
        keys), ``reads-skipped`` (of those, answered absent without reading the inner store
        because the cache was complete), ``evictions``, whether it has ever been ``full``,
        whether it is ``complete``, and ``hits`` and
        ``hit-rate`` of the point reads since it first filled (None before: until then
        nothing is evicted, every miss is a key's first read, and hits are not counted so
        that a hit stays one C call)."""
        hits = self._read_hits()
        misses = self._miss_count()
        misses_full = misses - self._misses_at_full
        reads = hits + misses_full
        return {"entries": len(self._cache), "capacity": self._capacity,
                "write-batch-size": self._batch_size, "dirty": len(self._dirty),
                "misses": misses, "reads-skipped": self._skipped + self._cache.skips,
                "complete": self._keys is _KeySet.COMPLETE,
                "evictions": self._evictions, "full": self._full,
                "hits": hits if self._full else None,
                "hit-rate": round(hits / reads, 4) if self._full and reads else None}

    def _miss_count(self) -> int:
        """Keys read that were not cached: those counted on the miss paths of this layer and
        those the cache map answered absent itself (``_Cache.__missing__``)."""
        return self._misses + self._cache.skips

    # -- point reads -----------------------------------------------------------------------
    # A closed store has an empty cache, so every access on it takes a miss path, and the
    # miss paths check for close: the hit path needs no check of its own.
    def _bind_get_lru(self) -> Callable[[Any], Any]:
        """``get`` once the cache has filled, as a closure (cells, not attributes): a hit
        becomes the most recent entry; a miss reads the inner store and takes the place of
        the least recent entry, all in this one frame."""
        cache, dirty, capacity, name = self._cache, self._dirty, self._capacity, self.name
        lookup, move_to_end, inner_get = cache.get, cache.move_to_end, self._inner.get
        hits = 0

        def get(key: Any) -> Any:
            nonlocal hits
            value = lookup(key, _UNCACHED)
            if value is not _UNCACHED:
                move_to_end(key)
                hits += 1
                return value
            if self._closed:
                raise closed_store_error(name)
            if key is None:
                raise null_key_error(name)
            value = inner_get(key)
            self._misses += 1
            if len(cache) >= capacity:
                victim = next(iter(cache))
                if victim in dirty:
                    self._write_dirty()
                del cache[victim]
                self._evictions += 1
            cache[key] = value
            return value

        def read_hits() -> int:
            return hits

        self._read_hits = read_hits
        return get

    def _get_miss(self, key: Any) -> Any:
        if self._closed:
            raise closed_store_error(self.name)
        if key is None:
            raise null_key_error(self.name)
        keys = self._keys
        if keys is _KeySet.UNKNOWN:
            keys = self._probe()
        if keys is _KeySet.COMPLETE:
            value = None  # every key of the store is cached: this one is absent
            self._skipped += 1
        else:
            value = self._inner.get(key)
        self._misses += 1
        cache = self._cache
        if len(cache) < self._capacity:
            cache[key] = value
        else:
            self._insert(key, value)
        return value

    def get_all(self, keys: Iterable[Any]) -> dict[Any, Any]:
        keys = checked_keys(keys, self.name)
        self._check_open()
        cache = self._cache
        result: dict[Any, Any] = {}
        misses = []
        for key in keys:
            try:
                value = cache.get(key, _UNCACHED)
            except TypeError:
                raise self._unhashable(key) from None
            if value is _UNCACHED:
                misses.append(key)
                continue
            if self._full:
                cache.move_to_end(key)
            if value is not None:
                result[key] = value
        if misses:
            if self._keys is _KeySet.UNKNOWN:
                self._probe()
            if self._keys is _KeySet.COMPLETE:
                found: dict[Any, Any] = {}
                self._skipped += len(misses)
            else:
                found = self._inner.get_all(misses)
            self._misses += len(misses)
            for key in misses:
                value = found.get(key)
                if key not in cache:
                    self._insert(key, value)
                if value is not None:
                    result[key] = value
        return result

    # -- writes ----------------------------------------------------------------------------
    def _bind_put(self) -> Callable[[Any, Any], None]:
        """Build ``put`` as a closure over the cache, the dirty map and the batch size.

        ``put`` is the hottest write path (a read-modify-write is one C-level ``get`` and one
        ``put``); a closure reads its state from cells instead of instance attributes, which
        saves ~15% of the call. The dirty map is therefore cleared in place, never replaced.
        """
        cache, dirty, batch_size = self._cache, self._dirty, self._batch_size
        name = self.name

        def put(key: Any, value: Any) -> None:
            if value is None:
                raise null_value_error(name)
            try:
                hit = key in cache
            except TypeError:
                raise self._unhashable(key) from None
            if hit:
                cache[key] = value  # recency is refreshed by reads and inserts (module docs)
            else:
                self._insert_written(key, value)
            dirty[key] = value  # an existing dirty key keeps its place: first-dirtied order
            if len(dirty) >= batch_size:
                self._write_dirty()

        return put

    def delete(self, key: Any) -> None:
        cache = self._cache
        try:
            hit = key in cache
        except TypeError:
            raise self._unhashable(key) from None
        if hit:
            cache[key] = None
        else:
            self._insert_written(key, None)
        dirty = self._dirty
        dirty[key] = None
        self._dirty_deletes = True
        if len(dirty) >= self._batch_size:
            self._write_dirty()

    def put_all(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        pairs = checked_pairs(items, self.name)
        self._check_open()
        for key, value in pairs:
            self.put(key, value)

    def delete_all(self, keys: Iterable[Any]) -> None:
        keys = checked_keys(keys, self.name)
        self._check_open()
        for key in keys:
            self.delete(key)

    def write_batch(self, items: Iterable[tuple[Any, Any]]) -> None:
        """Puts and deletes (``None`` value) in order, through the cache."""
        self._check_open()
        for key, value in items:
            if value is None:
                self.delete(key)
            else:
                self.put(key, value)

    def _insert_written(self, key: Any, value: Any) -> None:
        """Insert a key that is not cached yet, on the write path."""
        if self._closed:
            raise closed_store_error(self.name)
        if key is None:
            raise null_key_error(self.name)
        if self._keys is _KeySet.UNKNOWN:
            self._probe()
        self._insert(key, value)

    def _probe(self) -> "_KeySet":
        """Look once whether the inner store is empty, as the first key enters the cache:
        then the cache is complete (see the module docs). The bytes below the serdes are
        looked at (nothing is deserialized); a store that cannot be listed is taken as
        possibly holding keys (its misses read it, and report its errors there)."""
        inner = self._inner
        below = inner.inner if isinstance(inner, SerializedLayer) else inner
        try:
            iterator = below.all()
            try:
                empty = next(iterator, _END) is _END
            finally:
                iterator.close()
        except Exception:  # noqa: BLE001 - the conservative answer; reads report the error
            empty = False
        self._keys = _KeySet.COMPLETE if empty else _KeySet.PARTIAL
        if self._keys is _KeySet.COMPLETE:
            self._cache.complete_below = self._capacity
        return self._keys

    def _insert(self, key: Any, value: Any) -> None:
        cache = self._cache
        if len(cache) >= self._capacity:
            self._keys = _KeySet.PARTIAL  # an evicted key may be in the inner store
            cache.complete_below = 0
            if not self._full:
                self._full = True
                self._misses_at_full = self._miss_count()
                self.get = self._bind_get_lru()
            victim = next(iter(cache))
            if victim in self._dirty:
                self._write_dirty()
            del cache[victim]
            self._evictions += 1
        cache[key] = value

    def _write_dirty(self) -> None:
        """Write every dirty entry down in one batch, oldest-dirtied first."""
        dirty = self._dirty
        if not dirty:
            return
        self._write_inner(list(dirty), list(dirty.values()), deletes=self._dirty_deletes)
        # Cleared only after the write succeeded: on failure nothing is lost from the cache.
        dirty.clear()
        self._dirty_deletes = False

    # -- ordered reads: write dirty entries down, then read the inner store ------------------
    def range(self, lo: Any, hi: Any) -> Any:
        self._check_open()
        self._write_dirty()
        return self._inner.range(lo, hi)

    def prefix(self, prefix: Any) -> Any:
        self._check_open()
        if prefix is None:
            raise null_key_error(self.name)
        self._write_dirty()
        return self._inner.prefix(prefix)

    def all(self) -> Any:
        self._check_open()
        self._write_dirty()
        return self._inner.all()

    def snapshot(self, lo: Any, hi: Any) -> Any:
        self._check_open()
        self._write_dirty()
        return self._inner.snapshot(lo, hi)

    # -- lifecycle -------------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        """Write the dirty entries down, then flush the inner store."""
        self._check_open()
        self._write_dirty()
        self._inner.flush(scope)

    def close(self) -> None:
        """Flush, then close the inner store. A second close does nothing."""
        if self._closed:
            return
        try:
            self._write_dirty()
        finally:
            self._closed = True
            self._cache.complete_below = 0  # every lookup takes the miss path, which raises
            self._cache.clear()
            self._dirty.clear()
            self._dirty_deletes = False
            self._inner.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise closed_store_error(self.name)

    def _unhashable(self, key: Any) -> StoreError:
        if self._closed:
            return closed_store_error(self.name)
        return SerdeError(
            f"key {key!r} of type {type(key).__name__} is not hashable, and a store with an "
            f"object cache needs hashable keys: use a tuple instead of a list, or disable the "
            f"cache with stores.{self.name}.object.cache.size=0", store=self.name, key=key)

    def __repr__(self) -> str:
        return (f"<CachedLayer {self.name!r} {len(self._cache)}/{self._capacity} cached, "
                f"{len(self._dirty)} dirty, over {self._inner!r}>")
