"""The in-memory bytes engine: sorted by unsigned byte order, for tests and small stores.

Point operations are plain dict operations. Ordered access uses a sorted key list that is
brought up to date lazily, on the first range/prefix/all/snapshot after writes: a few changes
are merged in with ``bisect``, many changes trigger one re-sort. Iterators and snapshots copy
their range when they are created, so, as with RocksDB's implicit iterator snapshot, later
writes and deletes never show up in an open iterator.

Nothing is persisted: ``flush()`` does nothing and ``close()`` drops the data.

Example::

    >>> engine = MemoryEngine("counts")
    >>> engine.write_batch([(b"b", b"2"), (b"a", b"1"), (b"c", None)])
    >>> with engine.range(b"a", b"c") as it:
    ...     list(it)
    [(b'a', b'1'), (b'b', b'2')]
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

from weir.stores.api import FlushScope
from weir.stores._iterators import ClosingSnapshot, IteratorRegistry, ListIterator
from weir.stores.errors import NullKeyOrValueError, StoreClosedError
from weir.stores.engines._base import BytesEngineBase, null_argument

__all__ = ["MemoryEngine", "MemorySnapshot"]


class MemorySnapshot(ClosingSnapshot):
    """A copy of ``[lo, hi)`` taken when the snapshot was created."""

    __slots__ = ("_items",)

    def __init__(self, name: str, items: list[tuple[bytes, bytes]]):
        super().__init__(name)
        self._items = items

    def _new_iterator(self) -> ListIterator:
        return ListIterator(self._store, self._items)

    def _release(self) -> None:
        self._items = []


class MemoryEngine(BytesEngineBase):
    """A sorted in-memory key-value engine over bytes (see the module docstring)."""

    def __init__(self, name: str):
        self.name = name
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []          # sorted; exact as of the last _sync()
        self._added: set[bytes] = set()       # keys inserted since the last _sync()
        self._removed: set[bytes] = set()     # keys deleted since the last _sync()
        self._closed = False
        self._open = IteratorRegistry()

    # -- point operations ----------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        if self._closed:
            raise self._closed_error()
        value = self._data.get(key)
        if value is None and key is None:
            raise null_argument(self.name, "get")
        return value

    def get_all(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        self._check_open()
        if keys is None:
            raise null_argument(self.name, "get_all", "list")
        data, out = self._data, {}
        for k in keys:
            if k in data:
                out[k] = data[k]
            elif k is None:
                raise null_argument(self.name, "get_all")
        return out

    # Keys and values must be exactly ``bytes``, as RocksDB and LMDB require: a serde that
    # returns ``str`` fails here, in tests, and not first in production.
    def put(self, key: bytes, value: bytes) -> None:
        self._check_open()
        if type(key) is not bytes or type(value) is not bytes:
            raise self._rejected("put", key, value)
        data = self._data
        if key not in data:
            self._added.add(key)
        data[key] = value

    def put_all(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        self._apply("put_all", items, deletes=False)

    def delete(self, key: bytes) -> None:
        self._check_open()
        if type(key) is not bytes:
            raise self._rejected("delete", key, None)
        if self._data.pop(key, None) is not None:
            self._removed.add(key)

    def delete_all(self, keys: Iterable[bytes]) -> None:
        if keys is None:
            raise null_argument(self.name, "delete_all", "list")
        self._apply("delete_all", [(k, None) for k in keys], deletes=True)

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply ``(key, value)`` pairs in order (``None`` deletes); a bad pair anywhere in the
        batch writes nothing."""
        self._apply("write_batch", items, deletes=True)

    def _apply(self, op: str, items: Iterable[tuple[bytes, bytes | None]], *,
               deletes: bool) -> None:
        self._check_open()
        if items is None:
            raise null_argument(self.name, op, "list")
        items = items if isinstance(items, list) else list(items)
        for key, value in items:  # check everything before writing anything
            if type(key) is not bytes or (type(value) is not bytes
                                          and (value is not None or not deletes)):
                raise self._rejected(op, key, value)
        data, added, removed = self._data, self._added, self._removed
        for key, value in items:
            if value is None:
                if data.pop(key, None) is not None:
                    removed.add(key)
            else:
                if key not in data:
                    added.add(key)
                data[key] = value

    # -- ordered access ------------------------------------------------------------------
    def range(self, lo: bytes | None, hi: bytes | None) -> ListIterator:
        return self._open.track(ListIterator(self.name, self._copy(lo, hi)))

    def snapshot(self, lo: bytes | None, hi: bytes | None) -> MemorySnapshot:
        return self._open.track(MemorySnapshot(self.name, self._copy(lo, hi)))

    def _copy(self, lo: bytes | None, hi: bytes | None) -> list[tuple[bytes, bytes]]:
        self._check_open()
        keys = self._sync()
        start = 0 if lo is None else bisect_left(keys, lo)
        end = len(keys) if hi is None else bisect_left(keys, hi)
        data = self._data
        return [(k, data[k]) for k in keys[start:end]]

    def _sync(self) -> list[bytes]:
        """Bring the sorted key list up to date with the dict and return it."""
        added, removed = self._added, self._removed
        if not added and not removed:
            return self._keys
        keys, data = self._keys, self._data
        if len(added) + len(removed) > 64 + len(keys) // 8:
            keys = self._keys = sorted(data)
        else:
            for key in removed:
                if key not in data:
                    i = bisect_left(keys, key)
                    if i < len(keys) and keys[i] == key:
                        del keys[i]
            for key in added:
                if key in data:
                    i = bisect_left(keys, key)
                    if i == len(keys) or keys[i] != key:
                        keys.insert(i, key)
        added.clear()
        removed.clear()
        return keys

    # -- lifecycle -----------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        self._check_open()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._open.close_all()
        self._data = {}
        self._keys = []
        self._added.clear()
        self._removed.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        self._check_open()
        return len(self._data)

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _rejected(self, op: str, key: object, value: object) -> Exception:
        if key is None or (value is None and op in ("put", "put_all")):
            return NullKeyOrValueError(f"{op}: None is not a valid key or value; delete with "
                                       f"delete(), not put(k, None)", store=self.name)
        return TypeError(f"store '{self.name}': {op}: keys and values must be bytes, got key "
                         f"{type(key).__name__} and value {type(value).__name__}")

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError("store used after close(); reopen it (a task must not keep "
                                "store references past its close())", store=self.name)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._data)} keys"
        return f"<MemoryEngine {self.name!r} {state}>"

