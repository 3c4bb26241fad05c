"""The changelog layer: every change to the store is also appended to a ChangelogSink.

Puts append ``(key, value)``, deletes append ``(key, None)`` (a tombstone), in the order they
are applied, and always **before** the write reaches the engine (as Samza's ``LoggedStore``), so
the changelog never misses a change the engine has. Reads pass straight through.

Engines that cannot hold every key (LMDB: 1 to 511 bytes) say so with ``key_size_limits``;
a put of a key outside them is refused by the engine before anything is logged, and a delete
of such a key (never present) is not logged, so the changelog only holds changes the engine
can replay.

Batches (write-downs, ``put_all``, ``delete_all``) go to the sink in one call when it offers
one: ``append_columns(keys, values)`` (as :class:`weir.testing.FileChangelog` does), else
``append_all(pairs)``, else one ``append`` per change.

``flush()`` flushes the engine, then the sink: when it returns, the changelog holds every change
durably, which is what a commit needs before it writes a checkpoint. ``close()`` flushes the
same way, then closes the engine; the sink is not closed (the store does not own it).

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> class ListSink:
    ...     def __init__(self): self.records = []
    ...     def append(self, key, value): self.records.append((key, value))
    ...     def flush(self): pass
    >>> sink = ListSink(); store = LoggedLayer(MemoryEngine("s"), sink)
    >>> store.put(b"a", b"1"); store.delete(b"a"); sink.records
    [(b'a', b'1'), (b'a', None)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from weir.stores.api import closed_store_error
from weir.stores.changelog import ChangelogSink
from weir.stores.engines._base import BytesEngine, BytesIterator, BytesSnapshot
from weir.stores.layers._columns import columns_writer

__all__ = ["LoggedLayer"]


def _batch_appender(sink: ChangelogSink) -> Callable[[list[bytes], list[bytes | None]], None]:
    """The sink's cheapest way to take a batch given as two parallel lists."""
    append_columns = getattr(sink, "append_columns", None)
    if callable(append_columns):
        return append_columns
    append_all = getattr(sink, "append_all", None)
    if callable(append_all):
        return lambda keys, values: append_all(list(zip(keys, values)))
    append = sink.append

    def append_each(keys: list[bytes], values: list[bytes | None]) -> None:
        for key, value in zip(keys, values):
            append(key, value)

    return append_each


class LoggedLayer:
    """A bytes layer that mirrors every change into a changelog sink."""

    def __init__(self, inner: BytesEngine, sink: ChangelogSink):
        self.name: str = inner.name
        self._inner = inner
        self._sink = sink
        self._append = sink.append
        self._append_columns = _batch_appender(sink)
        self._write_inner = columns_writer(inner)
        self._key_limits: tuple[int, int] | None = getattr(inner, "key_size_limits", None)
        self.get = inner.get
        self.get_all = inner.get_all
        self.range = inner.range
        self.prefix = inner.prefix
        self.all = inner.all
        self.snapshot = inner.snapshot

    @property
    def inner(self) -> BytesEngine:
        return self._inner

    @property
    def sink(self) -> ChangelogSink:
        return self._sink

    # -- reads pass through ----------------------------------------------------------------
    # Bound in __init__ to the engine's own methods, so a read costs no frame of this layer:
    # get, get_all, range, prefix, all, snapshot.
    get: Callable[[bytes], bytes | None]
    get_all: Callable[[Sequence[bytes]], dict[bytes, bytes]]
    range: Callable[[bytes | None, bytes | None], BytesIterator]
    prefix: Callable[[bytes], BytesIterator]
    all: Callable[[], BytesIterator]
    snapshot: Callable[[bytes | None, bytes | None], BytesSnapshot]

    # -- writes: changelog first, then the engine --------------------------------------------
    # The closed check comes first so a write to a closed store does not reach the changelog.
    def put(self, key: bytes, value: bytes) -> None:
        self._check_open()
        if self._key_limits is not None and not self._fits(key):
            self._inner.put(key, value)  # the engine refuses it with its own error
            return
        self._append(key, value)
        self._inner.put(key, value)

    def put_all(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        self._check_open()
        items = list(items)
        keys, values = self._loggable([k for k, _ in items], [v for _, v in items])
        self._append_columns(keys, values)
        self._inner.put_all(items)

    def delete(self, key: bytes) -> None:
        self._check_open()
        if self._key_limits is None or self._fits(key):
            self._append(key, None)
        self._inner.delete(key)

    def delete_all(self, keys: Iterable[bytes]) -> None:
        self._check_open()
        keys = list(keys)
        logged, nones = self._loggable(keys, [None] * len(keys))
        self._append_columns(logged, nones)
        self._inner.delete_all(keys)

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        items = items if isinstance(items, list) else list(items)
        self.write_columns([k for k, _ in items], [v for _, v in items])

    def write_columns(self, keys: list[bytes], values: list[bytes | None], *,
                      deletes: bool = True) -> None:
        """``write_batch`` in columns (see :mod:`weir.stores.layers._columns`)."""
        self._check_open()
        logged_keys, logged_values = self._loggable(keys, values)
        self._append_columns(logged_keys, logged_values)
        self._write_inner(keys, values, deletes=deletes)

    # -- lifecycle -------------------------------------------------------------------------
    def flush(self) -> None:
        self._inner.flush()
        self._sink.flush()

    def close(self) -> None:
        if self._inner.closed:
            return
        try:
            self._inner.flush()
            self._sink.flush()
        finally:
            self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def _fits(self, key: object) -> bool:
        low, high = self._key_limits  # type: ignore[misc]
        return type(key) is not bytes or low <= len(key) <= high

    def _loggable(self, keys: list[bytes],
                  values: list[bytes | None]) -> tuple[list[bytes], list[bytes | None]]:
        """The changes of a batch that may be logged. A put of a key the engine cannot hold is
        refused here (by the engine, with its own error) before anything is logged; deletes of
        such keys are dropped from the log (the key can never be present)."""
        if self._key_limits is None or not keys:
            return keys, values
        low, high = self._key_limits
        try:  # the common case, checked in C: every key fits
            if low <= min(map(len, keys)) and max(map(len, keys)) <= high:
                return keys, values
        except TypeError:
            pass  # a key without a length: the engine names it below
        fits = self._fits
        for key, value in zip(keys, values):
            if value is not None and not fits(key):
                self._inner.put(key, value)  # raises the engine's error naming the key
        kept = [i for i, key in enumerate(keys) if fits(key)]
        return [keys[i] for i in kept], [values[i] for i in kept]

    def _check_open(self) -> None:
        if self._inner.closed:
            raise closed_store_error(self.name)

    def __repr__(self) -> str:
        return f"<LoggedLayer {self.name!r} sink={type(self._sink).__name__} over {self._inner!r}>"
