"""Iterator plumbing shared by the engines and layers (internal).

- :class:`GeneratorIterator`: a closable iterator over a generator of pairs (the RocksDB and
  LMDB engines' iterators subclass it to release their read transaction or native cursor).
- :class:`ListIterator`: a closable iterator over an already materialized list of pairs (the
  memory engine's ranges and snapshots).
- :class:`MappedIterator`: a closable iterator that maps each ``(key, value)`` pair of an inner
  iterator through two functions (the serialized layer's typed iterators).
- :class:`IteratorRegistry`: the open iterators of a store or snapshot, so closing the owner
  closes them all and a later ``next()`` raises :class:`~weir.stores.errors.StoreClosedError`
  instead of reading freed engine state.
- :class:`ClosingSnapshot`: every engine's snapshot: hands out iterators, closes them with
  itself, then frees its view (``_release``).

Every iterator is a context manager; closing twice is harmless; ``next()`` on a closed
iterator raises ``StoreClosedError`` naming the store.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any, Self

from weir.stores.errors import StoreClosedError

__all__ = ["GeneratorIterator", "ListIterator", "MappedIterator", "IteratorRegistry",
           "ClosingSnapshot", "closed_iterator_error", "EMPTY"]

EMPTY: tuple = ()


def closed_iterator_error(store: str) -> StoreClosedError:
    return StoreClosedError(
        "iterator used after it was closed (or after its store or snapshot was closed); "
        "open a new iterator with range(), prefix() or all()", store=store)


class _ClosableIterator:
    """Context-manager and close bookkeeping for the concrete iterators below."""

    __slots__ = ("_store", "_closed", "__weakref__")

    def __init__(self, store: str):
        self._store = store
        self._closed = False

    def __iter__(self) -> Any:
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True


class GeneratorIterator(_ClosableIterator):
    """Iterates ``gen``; ``for`` loops run directly on it.

    :meth:`close` closes the generator (a loop running over it stops) and then calls
    ``_release``, where a subclass frees what its engine holds beyond the generator.
    """

    __slots__ = ("_gen",)

    def __init__(self, store: str, gen: Iterator[tuple[bytes, bytes]] | None):
        super().__init__(store)
        self._gen = gen if gen is not None else iter(EMPTY)

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        if self._closed:
            raise closed_iterator_error(self._store)
        return self._gen

    def __next__(self) -> tuple[bytes, bytes]:
        if self._closed:
            raise closed_iterator_error(self._store)
        return next(self._gen)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        gen, self._gen = self._gen, iter(EMPTY)
        close = getattr(gen, "close", None)
        if close is not None:
            try:
                close()
            except ValueError:
                pass  # running right now in another thread; _release (or that step's end) stops it
        self._release()

    def _release(self) -> None:
        """Free what the engine holds for this iterator beyond the generator: by default
        nothing (closing the generator dropped it)."""


class ListIterator(_ClosableIterator):
    """Iterates a list of ``(key, value)`` pairs taken at creation time."""

    __slots__ = ("_items", "_pos")

    def __init__(self, store: str, items: list[tuple[bytes, bytes]]):
        super().__init__(store)
        self._items = items
        self._pos = 0

    def __next__(self) -> tuple[bytes, bytes]:
        if self._closed:
            raise closed_iterator_error(self._store)
        pos = self._pos
        items = self._items
        if pos >= len(items):
            raise StopIteration
        self._pos = pos + 1
        return items[pos]

    def close(self) -> None:
        self._closed = True
        self._items = []


class MappedIterator(_ClosableIterator):
    """Maps an inner iterator's pairs through ``key_fn`` and ``value_fn``.

    ``on_error(exc, raw_key)`` turns a mapping failure into the error to raise (the serialized
    layer uses it to name the store and key). Closing this iterator closes the inner one.
    """

    __slots__ = ("_inner", "_next", "_key_fn", "_value_fn", "_on_error")

    def __init__(self, store: str, inner: Any, key_fn: Callable[[bytes], Any],
                 value_fn: Callable[[bytes], Any],
                 on_error: Callable[[Exception, bytes], Exception]):
        super().__init__(store)
        self._inner = inner
        self._next = inner.__next__
        self._key_fn = key_fn
        self._value_fn = value_fn
        self._on_error = on_error

    def __next__(self) -> tuple[Any, Any]:
        if self._closed:
            raise closed_iterator_error(self._store)
        key, value = self._next()
        try:
            return self._key_fn(key), self._value_fn(value)
        except Exception as exc:
            raise self._on_error(exc, key) from exc

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        # A ``for`` loop gets a generator: one resumed frame per pair instead of a __next__
        # call (and the inner iterator's own fast path, when it has one).
        if self._closed:
            raise closed_iterator_error(self._store)
        return self._generate(iter(self._inner))

    def _generate(self, inner: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Any, Any]]:
        key_fn, value_fn = self._key_fn, self._value_fn
        for key, value in inner:
            if self._closed:
                break
            try:
                pair = key_fn(key), value_fn(value)
            except Exception as exc:
                raise self._on_error(exc, key) from exc
            yield pair
        # Closed under a running loop (this iterator, or the inner one by its store's close):
        # say so rather than end quietly with a partial result.
        if self._closed or self._inner.closed:
            raise closed_iterator_error(self._store)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._inner.close()


class IteratorRegistry:
    """Weak set of the open iterators (or snapshots) of one owner; ``close_all`` on close."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: weakref.WeakSet = weakref.WeakSet()

    def track(self, it: Any) -> Any:
        self._open.add(it)
        return it

    def close_all(self) -> None:
        for it in list(self._open):
            it.close()
        self._open.clear()

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._open))


class ClosingSnapshot:
    """A stable view that hands out iterators (:meth:`iterator`) and closes them with itself.

    Subclasses build each iterator in ``_new_iterator`` and free the view in ``_release``;
    closing twice is harmless, :meth:`iterator` on a closed snapshot raises
    :class:`~weir.stores.errors.StoreClosedError`.
    """

    __slots__ = ("_store", "_iterators", "_closed", "__weakref__")

    def __init__(self, store: str):
        self._store = store
        self._iterators = IteratorRegistry()
        self._closed = False

    def iterator(self) -> Any:
        """A new iterator over the whole snapshot, from its first key."""
        if self._closed:
            raise StoreClosedError("snapshot is closed; take a new one with snapshot()",
                                   store=self._store)
        return self._iterators.track(self._new_iterator())

    def _new_iterator(self) -> Any:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._iterators.close_all()
        self._release()

    def _release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
