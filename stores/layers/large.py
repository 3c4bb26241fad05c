"""The large-message guard: values over ``stores.<s>.changelog.max.message.size.bytes``.

A changelog record must fit what its system accepts (Kafka's default is 1 MiB, Samza's
``changelog.max.message.size.bytes``), and one huge value makes every restore of the store
slow. What happens to a value over the limit (``StoreSpec.large_messages``):

* ``FAIL_AT_WRITE`` (default for a logged store): :class:`RecordTooLargeError` naming the store,
  the key and the sizes when the value is written down to the engine and the changelog (a
  flush, a cache eviction). Nothing of that batch is written. This layer sits directly above the
  changelog layer, on serialized bytes.
* ``FAIL_AT_PUT`` (``disallow.large.messages``): the same error at ``put``, where the task can see
  it: :class:`PutSizeCheck` sits above the cache and serializes each value once more to measure it.
* ``DROP`` (``drop.large.messages``): the value is neither stored nor logged; the layer counts
  it (:attr:`LargeMessageLayer.dropped`) and logs a warning (the first time, then at every power
  of ten). A read served by the object cache can still see the value until the key is evicted.

Deletes and reads pass through untouched.

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> layer = LargeMessageLayer(MemoryEngine("s"), max_bytes=4, drop=True)
    >>> layer.write_batch([(b"a", b"1234"), (b"b", b"12345")]); layer.dropped, layer.get(b"b")
    (1, None)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from weir.stores.api import FlushScope
from weir.stores.engines._base import BytesEngine, BytesIterator, BytesSnapshot
from weir.stores.errors import StoreError
from weir.stores.layers._columns import columns_writer

__all__ = ["LargeMessageLayer", "PutSizeCheck", "RecordTooLargeError"]

_log = logging.getLogger(__name__)


class RecordTooLargeError(StoreError):
    """A value is larger than the store's ``changelog.max.message.size.bytes``. Names the store
    and the key; ``size`` and ``limit`` are in bytes."""

    def __init__(self, store: str, key: object, size: int, limit: int):
        shown = repr(key)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(
            f"the value of key {shown} is {size:,} bytes, over the limit of {limit:,} bytes "
            f"(stores.{store}.changelog.max.message.size.bytes); nothing of it was written. "
            f"Keep values smaller (split them), raise the limit if the changelog's system "
            f"accepts larger records, or set stores.{store}.drop.large.messages=true to drop "
            f"such values (counted and logged)", store=store)
        self.key, self.size, self.limit = key, size, limit


class LargeMessageLayer:
    """A bytes layer that refuses (or drops) values over ``max_bytes``; see the module
    docstring."""

    def __init__(self, inner: BytesEngine, *, max_bytes: int, drop: bool):
        self.name: str = inner.name
        self._inner = inner
        self.max_bytes = max_bytes
        self.drop = drop
        self.dropped = 0
        """Values dropped so far (``DROP`` mode)."""
        self._write_inner = columns_writer(inner)
        self.get = inner.get
        self.get_all = inner.get_all
        self.range = inner.range
        self.prefix = inner.prefix
        self.all = inner.all
        self.snapshot = inner.snapshot

    get: Callable[[bytes], bytes | None]
    get_all: Callable[[Sequence[bytes]], dict[bytes, bytes]]
    range: Callable[[bytes | None, bytes | None], BytesIterator]
    prefix: Callable[[bytes], BytesIterator]
    all: Callable[[], BytesIterator]
    snapshot: Callable[[bytes | None, bytes | None], BytesSnapshot]

    @property
    def inner(self) -> BytesEngine:
        return self._inner

    def _too_large(self, key: bytes, value: bytes) -> bool:
        """True when the value must be dropped; raises when it must be refused."""
        if self.drop:
            self.dropped += 1
            n = self.dropped
            if n & (n - 1) == 0 or n % 1000 == 0:
                _log.warning("store '%s': dropped a value of %d bytes for key %r, over the "
                             "limit of %d bytes (drop.large.messages); %d dropped so far",
                             self.name, len(value), key[:64], self.max_bytes, n)
            return True
        raise RecordTooLargeError(self.name, key, len(value), self.max_bytes)

    def put(self, key: bytes, value: bytes) -> None:
        if value is not None and len(value) > self.max_bytes and self._too_large(key, value):
            return
        self._inner.put(key, value)

    def put_all(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        items = list(items)
        self.write_columns([k for k, _ in items], [v for _, v in items], deletes=False)

    def delete(self, key: bytes) -> None:
        self._inner.delete(key)

    def delete_all(self, keys: Iterable[bytes]) -> None:
        self._inner.delete_all(keys)

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        items = items if isinstance(items, list) else list(items)
        self.write_columns([k for k, _ in items], [v for _, v in items])

    def write_columns(self, keys: list[bytes], values: list[bytes | None], *,
                      deletes: bool = True) -> None:
        limit = self.max_bytes
        # The common case, checked in C: no value over the limit (None and b"" filtered out).
        if max(map(len, filter(None, values)), default=0) > limit:
            kept = [i for i, (k, v) in enumerate(zip(keys, values))
                    if v is None or len(v) <= limit or not self._too_large(k, v)]
            keys, values = [keys[i] for i in kept], [values[i] for i in kept]
            if not keys:
                return
        self._write_inner(keys, values, deletes=deletes)

    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        self._inner.flush(scope)

    def close(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def __repr__(self) -> str:
        mode = "drop" if self.drop else "refuse"
        return f"<LargeMessageLayer {self.name!r} {mode} > {self.max_bytes} over {self._inner!r}>"


class PutSizeCheck:
    """A typed layer that refuses a value over ``max_bytes`` at ``put`` (``FAIL_AT_PUT``): it
    serializes the value once to measure it; everything else is the inner store's."""

    def __init__(self, inner: Any, *, serialize: Callable[[Any], bytes], max_bytes: int):
        self._inner = inner
        self._serialize = serialize
        self.max_bytes = max_bytes
        self.name: str = inner.name

    @property
    def inner(self) -> Any:
        return self._inner

    def _check(self, key: Any, value: Any) -> None:
        if value is None:
            return
        size = len(self._serialize(value))
        if size > self.max_bytes:
            raise RecordTooLargeError(self.name, key, size, self.max_bytes)

    def put(self, key: Any, value: Any) -> None:
        self._check(key, value)
        self._inner.put(key, value)

    def put_all(self, items: Any) -> None:
        items = list(items.items()) if isinstance(items, Mapping) else list(items)
        for key, value in items:
            self._check(key, value)
        self._inner.put_all(items)

    def write_batch(self, items: Iterable[tuple[Any, Any]]) -> None:
        items = items if isinstance(items, list) else list(items)
        for key, value in items:
            self._check(key, value)
        self._inner.write_batch(items)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"<PutSizeCheck {self.name!r} > {self.max_bytes} over {self._inner!r}>"
