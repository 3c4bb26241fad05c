"""A read-only view of a store: reads pass through, writes raise ReadOnlyStoreError.

This is what a task gets for a store it may read but not write (adjunct stores, whose content
comes from their input stream). ``close()`` closes the *view* only: the store stays open for
its owner, and any later use of the view raises ``StoreClosedError``. ``flush()`` on the view
does nothing (nothing can have been written through it).

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> engine = MemoryEngine("rates"); engine.put(b"eur", b"1.1")
    >>> view = ReadOnlyView(engine)
    >>> view.get(b"eur")
    b'1.1'
    >>> view.put(b"eur", b"2")
    Traceback (most recent call last):
    ...
    weir.stores.errors.ReadOnlyStoreError: store 'rates': is read-only here (put); ...
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from weir.stores.api import FlushScope
from weir.stores.api import ReadOnlyKeyValueStore, closed_store_error
from weir.stores.errors import ReadOnlyStoreError

__all__ = ["ReadOnlyView"]


class ReadOnlyView:
    """Exposes the read side of ``store`` (a typed store or a bytes engine)."""

    def __init__(self, store: ReadOnlyKeyValueStore):
        self.name: str = store.name
        self._store = store
        self._closed = False

    # -- reads -----------------------------------------------------------------------------
    def get(self, key: Any) -> Any:
        self._check_open()
        return self._store.get(key)

    def get_all(self, keys: Iterable[Any]) -> dict[Any, Any]:
        self._check_open()
        return self._store.get_all(keys)

    def range(self, lo: Any, hi: Any) -> Any:
        self._check_open()
        return self._store.range(lo, hi)

    def prefix(self, prefix: Any) -> Any:
        self._check_open()
        return self._store.prefix(prefix)

    def all(self) -> Any:
        self._check_open()
        return self._store.all()

    def snapshot(self, lo: Any, hi: Any) -> Any:
        self._check_open()
        return self._store.snapshot(lo, hi)

    # -- writes are refused ----------------------------------------------------------------
    def put(self, key: Any, value: Any) -> None:
        raise self._refused("put")

    def put_all(self, items: Any) -> None:
        raise self._refused("put_all")

    def delete(self, key: Any) -> None:
        raise self._refused("delete")

    def delete_all(self, keys: Any) -> None:
        raise self._refused("delete_all")

    def write_batch(self, items: Any) -> None:
        raise self._refused("write_batch")

    # -- lifecycle -------------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        self._check_open()

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed or self._store.closed

    def __enter__(self) -> "ReadOnlyView":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise closed_store_error(self.name)

    def _refused(self, op: str) -> ReadOnlyStoreError:
        return ReadOnlyStoreError(
            f"is read-only here ({op}); its content comes from its input stream (adjunct store) "
            f"or its owner; write to a store of your own instead", store=self.name)

    def __repr__(self) -> str:
        return f"<ReadOnlyView of {self._store!r}>"
