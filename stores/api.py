"""The typed store API a task sees through ``context.store(name)``.

:class:`KeyValueStore` is what :func:`weir.stores.builder.build_store` returns. Keys and values are
typed objects (converted by the store's serdes); ordering is the unsigned byte order of the
*serialized* keys, so with the ``int64`` serde numbers sort numerically and with ``string``
text sorts by code point.

=========================== =======================================================================
``get(k)``                  the value, or ``None`` when absent
``get_all(ks)``             ``{k: v}`` for the keys found; missing keys are absent from the dict
``put(k, v)``               insert or replace; ``None`` key or value raises ``NullKeyOrValueError``
``put_all(pairs)``          a mapping or iterable of pairs; all are checked before any is written
``delete(k)``               remove; no error when absent
``delete_all(ks)``          remove each
``range(lo, hi)``           iterator over ``lo <= k < hi``; ``None`` bound = unbounded; ``lo >= hi``
                            yields nothing
``prefix(p)``               iterator over keys starting with ``p`` (``bytes``/``string`` key serdes)
``all()``                   iterator over every entry
``snapshot(lo, hi)``        a stable view of ``[lo, hi)``: later writes and deletes are not visible
``flush()``                 write everything down: the cache's dirty entries, the engine, the
                            changelog (``ChangelogSink.flush``) -- a commit calls this;
                            ``flush(FlushScope.CHANGELOG)`` leaves the engine's files to catch
                            up later (the changelog is the durable copy)
``close()``                 flush and release; a second close does nothing
=========================== =======================================================================

Iterators yield ``(key, value)`` pairs, are context managers and must be closed (they pin
engine resources). Using a closed store, iterator or snapshot raises ``StoreClosedError``.

Example::

    >>> from pathlib import Path
    >>> from weir.stores.config import Config
    >>> from weir.stores.spec import StoreSpec
    >>> from weir.stores.builder import build_store
    >>> cfg = Config({"stores.counts.factory": "memory", "stores.counts.key.serde": "string",
    ...               "stores.counts.msg.serde": "int64"})
    >>> store = build_store(StoreSpec.from_config(cfg, "counts"), Path("unused"),
    ...                     changelog=None, config=cfg)
    >>> store.put("b", 2); store.put("a", 1); store.get("a"), store.get("zzz")
    (1, None)
    >>> with store.range("a", "c") as it:
    ...     list(it)
    [('a', 1), ('b', 2)]
    >>> store.close()
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from typing import Any, Protocol, TypeVar, runtime_checkable

from weir.stores.errors import NullKeyOrValueError, StoreClosedError

__all__ = [
    "FlushScope",
    "K",
    "V",
    "KeyValueIterator",
    "KeyValueSnapshot",
    "ReadOnlyKeyValueStore",
    "KeyValueStore",
    "null_key_error",
    "null_value_error",
    "closed_store_error",
    "checked_pairs",
    "checked_keys",
]

K = TypeVar("K")
"""The key type of a store (``str`` for the ``string`` serde, ``int`` for ``int64`` ...)."""
V = TypeVar("V")
"""The value type of a store."""


@runtime_checkable
class KeyValueIterator(Protocol[K, V]):
    """``(key, value)`` pairs in key order; a context manager that must be closed (``closed``
    says whether it was, by itself or with its store or snapshot)."""

    @property
    def closed(self) -> bool: ...
    def __iter__(self) -> Iterator[tuple[K, V]]: ...
    def __next__(self) -> tuple[K, V]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "KeyValueIterator[K, V]": ...
    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class KeyValueSnapshot(Protocol[K, V]):
    """A stable view of a key range; ``iterator()`` may be called any number of times until
    it is closed (``closed``)."""

    @property
    def closed(self) -> bool: ...
    def iterator(self) -> KeyValueIterator[K, V]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "KeyValueSnapshot[K, V]": ...
    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class ReadOnlyKeyValueStore(Protocol[K, V]):
    """The read side of a store (what adjunct stores give a task)."""

    name: str

    def get(self, key: K) -> V | None: ...
    def get_all(self, keys: Iterable[K]) -> dict[K, V]: ...
    def range(self, lo: K | None, hi: K | None) -> KeyValueIterator[K, V]: ...
    def prefix(self, prefix: K) -> KeyValueIterator[K, V]: ...
    def all(self) -> KeyValueIterator[K, V]: ...
    def snapshot(self, lo: K | None, hi: K | None) -> KeyValueSnapshot[K, V]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...


class FlushScope(Enum):
    """What a ``flush`` makes survive a crash.

    ``ENGINE`` (the default): everything written so far reaches the engine and its files hold
    it (RocksDB flushes its memtable or fsyncs its WAL, LMDB commits its transaction), and the
    changelog is flushed. ``CHANGELOG``: every layer's buffered writes reach the engine (reads
    see them) and the changelog is flushed, but the engine's files may lag: after a crash the
    changelog is the copy to restore from. A logged store's commit uses ``CHANGELOG`` while the
    store keeps changing (its ``OFFSET`` file, docs/RECOVERY.md, would vouch for nothing
    anyway: the next change removes it), and ``ENGINE`` when it settles."""

    ENGINE = "engine"
    CHANGELOG = "changelog"


@runtime_checkable
class KeyValueStore(ReadOnlyKeyValueStore[K, V], Protocol[K, V]):
    """A readable and writable store.

    ``write_batch(pairs)`` applies ``(key, value)`` pairs in order where a ``None`` value
    deletes; it is how a cache writes its dirty entries down, and is open to users who want
    one batched call for mixed puts and deletes.
    """

    def put(self, key: K, value: V) -> None: ...
    def put_all(self, items: Mapping[K, V] | Iterable[tuple[K, V]]) -> None: ...
    def delete(self, key: K) -> None: ...
    def delete_all(self, keys: Iterable[K]) -> None: ...
    def write_batch(self, items: Iterable[tuple[K, V | None]]) -> None: ...
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None: ...


# -- shared checks (used by every layer that is the outermost one) ---------------------------

def null_key_error(store: str) -> NullKeyOrValueError:
    return NullKeyOrValueError("None is not a valid key", store=store)


def null_value_error(store: str) -> NullKeyOrValueError:
    return NullKeyOrValueError("None is not a valid value; use delete(key) to remove a key",
                               store=store)


def closed_store_error(store: str) -> StoreClosedError:
    return StoreClosedError("store used after close(); a task must not keep store references "
                            "past its close() (reopen the store through its storage manager)",
                            store=store)


def checked_pairs(items: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
                  store: str) -> list[tuple[Any, Any]]:
    """``items`` as a list of pairs, after checking that each item is a ``(key, value)`` pair
    and that no key or value is ``None``."""
    if items is None:
        raise NullKeyOrValueError("None is not a valid pairs list (put_all)", store=store)
    if isinstance(items, Mapping):
        pairs = list(items.items())
    else:
        pairs = list(items)
        for pair in pairs:
            # A 2-character str or bytes would otherwise unpack into a "key" and a "value".
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise _not_a_pair(pair, store)
    for key, value in pairs:
        if key is None:
            raise NullKeyOrValueError("None is not a valid key (in put_all); nothing was written",
                                      store=store)
        if value is None:
            raise NullKeyOrValueError(
                f"None is not a valid value (key {key!r} in put_all); nothing was written; "
                f"use delete_all for deletes", store=store)
    return pairs


def _not_a_pair(item: Any, store: str) -> TypeError:
    return TypeError(f"store '{store}': put_all takes a mapping or (key, value) pairs, got the "
                     f"item {item!r}; nothing was written")


def checked_keys(keys: Iterable[Any], store: str) -> list[Any]:
    """``keys`` as a list, after checking that none is ``None``."""
    if keys is None:
        raise NullKeyOrValueError("None is not a valid keys list", store=store)
    keys = list(keys)
    for key in keys:
        if key is None:
            raise NullKeyOrValueError("None is not a valid key (in a keys list); nothing was "
                                      "done", store=store)
    return keys
