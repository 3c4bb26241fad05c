"""The staged view of a replica's engine that a task writes through during one micro-batch.

Reads see the replica (the state of version ``batch - 1``) with the batch's own writes on top;
writes go to an in-memory buffer, never to the replica. At the end of the batch the buffer *is*
the version's changelog (the last value written per key, ``None`` for a delete): it is
published, and only when the version is ours is it applied to the replica. A losing attempt
(a retry or a speculative copy whose version another attempt published first) drops its buffer
and applies the published changelog instead, so the replica never holds writes of an attempt
that did not become the version.

Ranges and snapshots merge the buffer (copied, in key order, when they are created) with the
engine's own iterator, so they show the store exactly as the task left it, like the engines'
own iterators do.

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> replica = MemoryEngine("counts"); replica.put(b"a", b"1"); replica.put(b"b", b"2")
    >>> staged = StagedEngine(replica)
    >>> staged.put(b"c", b"3"); staged.delete(b"a")
    >>> with staged.all() as it:
    ...     list(it)
    [(b'b', b'2'), (b'c', b'3')]
    >>> staged.changes(), replica.get(b"a")
    (([b'a', b'c'], [None, b'3']), b'1')
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from weir.stores._iterators import ClosingSnapshot, GeneratorIterator, IteratorRegistry
from weir.stores.api import FlushScope
from weir.stores.engines._base import BytesEngine, BytesEngineBase, is_empty_range, null_argument
from weir.stores.errors import StoreClosedError, StoreError

__all__ = ["StagedEngine"]

_MISSING = object()


def _merge(buffered: list[tuple[bytes, bytes | None]],
           inner: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    """Merge sorted buffered entries (``None`` = deleted) over a sorted inner iterator."""
    i, n = 0, len(buffered)
    for key, value in inner:
        while i < n and buffered[i][0] < key:
            bk, bv = buffered[i]
            i += 1
            if bv is not None:
                yield bk, bv
        if i < n and buffered[i][0] == key:
            bv = buffered[i][1]
            i += 1
            if bv is not None:
                yield key, bv
            continue
        yield key, value
    while i < n:
        bk, bv = buffered[i]
        i += 1
        if bv is not None:
            yield bk, bv


class _MergedIterator(GeneratorIterator):
    __slots__ = ("_inner",)

    def __init__(self, name: str, buffered: list[tuple[bytes, bytes | None]], inner) -> None:
        super().__init__(name, _merge(buffered, iter(inner)))
        self._inner = inner

    def _release(self) -> None:
        self._inner.close()


class _MergedSnapshot(ClosingSnapshot):
    __slots__ = ("_buffered", "_inner")

    def __init__(self, name: str, buffered: list[tuple[bytes, bytes | None]], inner) -> None:
        super().__init__(name)
        self._buffered = buffered
        self._inner = inner

    def _new_iterator(self) -> _MergedIterator:
        return _MergedIterator(self._store, self._buffered, self._inner.iterator())

    def _release(self) -> None:
        self._inner.close()
        self._buffered = []


class StagedEngine(BytesEngineBase):
    """A bytes engine over ``inner`` that buffers every write (see the module docstring)."""

    def __init__(self, inner: BytesEngine):
        self.name = inner.name
        self._inner = inner
        self._buf: dict[bytes, bytes | None] = {}
        self._seen: dict[bytes, bool] = {}  # keys read from the replica: present or not
        self._closed = False
        self._open = IteratorRegistry()
        self._limits: tuple[int, int] | None = inner.key_size_limits

    @property
    def key_size_limits(self) -> tuple[int, int] | None:
        return self._limits

    @property
    def inner(self) -> BytesEngine:
        return self._inner

    # -- reads ---------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        if self._closed:
            raise self._closed_error()
        value = self._buf.get(key, _MISSING)
        if value is _MISSING:
            if key is None:
                raise null_argument(self.name, "get")
            found = self._inner.get(key)
            self._seen[key] = found is not None
            return found
        return value  # type: ignore[return-value]

    def get_all(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        if self._closed:
            raise self._closed_error()
        if keys is None:
            raise null_argument(self.name, "get_all", "list")
        buf = self._buf
        if not buf:
            out = self._inner.get_all(keys)
            self._note(keys, out)
            return out
        below = [k for k in keys if k not in buf]
        out = self._inner.get_all(below) if below else {}
        self._note(below, out)
        for k in keys:
            v = buf.get(k, _MISSING)
            if v is not _MISSING and v is not None:
                out[k] = v
        return out

    def _note(self, keys: Sequence[bytes], found: Mapping[bytes, bytes]) -> None:
        seen = self._seen
        if len(seen) < 1_000_000:  # a bound on memory; beyond it existed() asks the replica
            for k in keys:
                seen[k] = k in found

    def _slice(self, lo: bytes | None, hi: bytes | None) -> list[tuple[bytes, bytes | None]]:
        if not self._buf:
            return []
        keys = sorted(k for k in self._buf if (lo is None or k >= lo) and (hi is None or k < hi))
        buf = self._buf
        return [(k, buf[k]) for k in keys]

    def range(self, lo: bytes | None, hi: bytes | None):
        if self._closed:
            raise self._closed_error()
        if is_empty_range(lo, hi):
            return self._inner.range(lo, hi)
        return self._open.track(_MergedIterator(self.name, self._slice(lo, hi),
                                                self._inner.range(lo, hi)))

    def snapshot(self, lo: bytes | None, hi: bytes | None):
        if self._closed:
            raise self._closed_error()
        return self._open.track(_MergedSnapshot(self.name, self._slice(lo, hi),
                                                self._inner.snapshot(lo, hi)))

    # -- writes --------------------------------------------------------------------------
    def _check_key(self, op: str, key: object) -> None:
        if key is None:
            raise null_argument(self.name, op)
        if type(key) is not bytes:
            raise TypeError(f"store '{self.name}': {op}: keys are bytes, got "
                            f"{type(key).__name__}")
        if self._limits is not None and not self._limits[0] <= len(key) <= self._limits[1]:
            low, high = self._limits
            raise StoreError(f"{op}: key of {len(key)} bytes; this engine holds keys of "
                             f"{low} to {high} bytes", store=self.name)

    def put(self, key: bytes, value: bytes) -> None:
        if self._closed:
            raise self._closed_error()
        self._check_key("put", key)
        if value is None:
            raise null_argument(self.name, "put", "value")
        if type(value) is not bytes:
            raise TypeError(f"store '{self.name}': put: values are bytes, got "
                            f"{type(value).__name__}")
        self._buf[key] = value

    def delete(self, key: bytes) -> None:
        if self._closed:
            raise self._closed_error()
        if key is None:
            raise null_argument(self.name, "delete")
        self._buf[key] = None

    def put_all(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        if items is None:
            raise null_argument(self.name, "put_all", "list")
        items = list(items)
        for k, v in items:
            self._check_key("put_all", k)
            if v is None:
                raise null_argument(self.name, "put_all", "value")
        if self._closed:
            raise self._closed_error()
        self._buf.update(items)

    def delete_all(self, keys: Iterable[bytes]) -> None:
        if self._closed:
            raise self._closed_error()
        if keys is None:
            raise null_argument(self.name, "delete_all", "list")
        for k in keys:
            if k is None:
                raise null_argument(self.name, "delete_all")
            self._buf[k] = None

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        items = list(items)
        self.write_columns([k for k, _ in items], [v for _, v in items])

    def write_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                      deletes: bool = True) -> None:
        if self._closed:
            raise self._closed_error()
        if len(keys) != len(values):
            raise ValueError(f"store '{self.name}': write_columns got {len(keys)} keys and "
                             f"{len(values)} values")
        limits = self._limits
        for k in keys:
            if type(k) is not bytes or (limits is not None
                                        and not limits[0] <= len(k) <= limits[1]):
                self._check_key("write_batch", k)
        self._buf.update(zip(keys, values))

    # -- the version -----------------------------------------------------------------------
    def changes(self) -> tuple[list[bytes], list[bytes | None]]:
        """The buffered writes, ascending by key: the version's changelog of this store."""
        buf = self._buf
        keys = sorted(buf)
        return keys, [buf[k] for k in keys]

    @property
    def changed(self) -> int:
        return len(self._buf)

    def row_delta(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> int:
        """How many keys the replica gains (puts of absent keys) minus loses (deletes of
        present keys) with these changes; asks the replica only for keys never read."""
        seen = self._seen
        unknown = [k for k in keys if k not in seen]
        present = self._inner.get_all(unknown) if unknown else {}
        delta = 0
        for k, v in zip(keys, values):
            existed = seen[k] if k in seen else k in present
            if v is None:
                delta -= existed
            else:
                delta += not existed
        return delta

    def discard(self) -> None:
        self._buf = {}
        self._seen = {}

    # -- lifecycle -------------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        if self._closed:
            raise self._closed_error()

    def close(self) -> None:
        """Close this view and its iterators; the replica's engine stays open."""
        if self._closed:
            return
        self._closed = True
        self._open.close_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError("the micro-batch of this store is over; stores are handed out "
                                "per batch", store=self.name)

    def __repr__(self) -> str:
        return f"<StagedEngine {self.name!r} {len(self._buf)} staged over {self._inner!r}>"

