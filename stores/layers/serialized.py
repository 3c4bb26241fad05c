"""The typed edge of a store: a :class:`~weir.stores.api.KeyValueStore` over a bytes engine.

Keys and values go through the store's serdes on the way down and come back typed. Every
serde failure becomes a :class:`~weir.stores.errors.SerdeError` naming the store, the key and the
serde, so a poison record is found without a debugger. Ranges and snapshots serialize their
bounds with the key serde and iterate in byte order of the serialized keys.

``prefix(p)`` needs a key serde whose encoding of ``p`` is a byte prefix of the encoding of
every key starting with ``p``: true for ``bytes`` and ``string`` (and user serdes that set
``prefix_safe = True``). For other key serdes (``int64``, ``json``, ``msgpack``) ``prefix``
raises ``SerdeError``; use ``range(lo, hi)`` instead.

Example::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> from weir.stores.serdes import StringSerde, Int64Serde
    >>> store = SerializedLayer(MemoryEngine("s"), StringSerde(), Int64Serde())
    >>> store.put("x", -5); store.get("x"), store.get_all(["x", "nope"])
    (-5, {'x': -5})
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from weir.stores.api import FlushScope
from weir.stores._iterators import MappedIterator
from weir.stores.api import checked_keys, checked_pairs, null_key_error, null_value_error
from weir.stores.engines._base import BytesEngine, BytesSnapshot
from weir.stores.errors import SerdeError, StoredDataError
from weir.stores.serdes import BytesSerde, Serde, SerdeBase
from weir.stores.layers._columns import columns_writer, has_none

__all__ = ["SerializedLayer", "SerializedSnapshot"]


def _serde_name(serde: SerdeBase) -> str:
    return serde.name or type(serde).__name__


class SerializedSnapshot:
    """Typed view of a bytes snapshot."""

    __slots__ = ("_layer", "_inner")

    def __init__(self, layer: "SerializedLayer", inner: BytesSnapshot):
        self._layer = layer
        self._inner = inner

    def iterator(self) -> MappedIterator:
        return self._layer._typed(self._inner.iterator())

    def close(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def __enter__(self) -> "SerializedSnapshot":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerializedLayer:
    """Typed keys and values over a :class:`~weir.stores.engines._base.BytesEngine`."""

    def __init__(self, inner: BytesEngine, key_serde: SerdeBase, value_serde: SerdeBase):
        for which, serde in (("key", key_serde), ("value", value_serde)):
            if not isinstance(serde, SerdeBase):
                raise TypeError(f"store '{inner.name}': the {which} serde must be a "
                                f"weir.stores.serdes.SerdeBase (serde_from_name adapts a user "
                                f"serde), got {type(serde).__qualname__}")
        self.name: str = inner.name
        self._inner = inner
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._kser = key_serde.to_bytes
        self._kde = key_serde.from_bytes
        self._vser = value_serde.to_bytes
        self._vde = value_serde.from_bytes
        self._kser_many = key_serde.to_bytes_many
        self._vser_many = value_serde.to_bytes_many
        self._write_inner = columns_writer(inner)
        self.get = self._bind_get()

    @property
    def inner(self) -> BytesEngine:
        return self._inner

    # -- serde with store/key context ------------------------------------------------------
    def _key(self, key: Any) -> bytes:
        if key is None:
            raise null_key_error(self.name)
        try:
            return self._kser(key)
        except Exception as exc:
            raise self._error("serialize key", self.key_serde, key, exc) from exc

    def _value(self, key: Any, value: Any) -> bytes:
        if value is None:
            raise null_value_error(self.name)
        try:
            return self._vser(value)
        except Exception as exc:
            raise self._error("serialize the value of key", self.value_serde, key, exc) from exc

    def _read_value(self, key: Any, raw: bytes) -> Any:
        try:
            return self._vde(raw)
        except Exception as exc:
            raise self._error("deserialize the value of key", self.value_serde, key, exc) from exc

    def _error(self, what: str, serde: Serde, key: Any, exc: Exception) -> SerdeError:
        # Reading back what the store holds is the store's problem, not the message's.
        kind = StoredDataError if what.startswith("deserialize") else SerdeError
        return kind(f"cannot {what} {key!r} with serde {_serde_name(serde)!r}: "
                          f"{type(exc).__name__}: {exc}; check the store's key.serde/msg.serde "
                          f"settings and the data written", store=self.name, key=key)

    def _iter_error(self, exc: Exception, raw_key: bytes) -> Exception:
        try:
            key = self._kde(raw_key)
        except Exception:
            return self._error("deserialize key", self.key_serde, raw_key, exc)
        return self._error("deserialize the value of key", self.value_serde, key, exc)

    def _typed(self, inner_iterator: Any) -> MappedIterator:
        return MappedIterator(self.name, inner_iterator, self._kde, self._vde, self._iter_error)

    # -- reads -----------------------------------------------------------------------------
    get: Callable[[Any], Any]
    """The value of ``key`` (deserialized), or None when absent (bound per instance)."""

    def _bind_get(self) -> Callable[[Any], Any]:
        """``get`` as a closure over the serdes and the inner store's ``get``: it is the
        object cache's miss path, and cells are cheaper to read than attributes."""
        kser, vde, inner_get, name = self._kser, self._vde, self._inner.get, self.name
        # The bytes serde returns a bytes key itself: skip its call for exactly bytes.
        passthrough = bytes if type(self.key_serde) is BytesSerde else None

        def get(key: Any) -> Any:
            if type(key) is passthrough:
                encoded = key
            else:
                if key is None:
                    raise null_key_error(name)
                try:
                    encoded = kser(key)
                except Exception as exc:
                    raise self._error("serialize key", self.key_serde, key, exc) from exc
            raw = inner_get(encoded)
            if raw is None:
                return None
            try:
                return vde(raw)
            except Exception as exc:
                raise self._error("deserialize the value of key", self.value_serde, key,
                                  exc) from exc

        return get

    def get_all(self, keys: Iterable[Any]) -> dict[Any, Any]:
        keys = checked_keys(keys, self.name)
        encoded = [self._key(k) for k in keys]
        found = self._inner.get_all(encoded)
        result = {}
        for key, kb in zip(keys, encoded):
            raw = found.get(kb)
            if raw is not None:
                result[key] = self._read_value(key, raw)
        return result

    def range(self, lo: Any, hi: Any) -> MappedIterator:
        return self._typed(self._inner.range(self._bound(lo), self._bound(hi)))

    def prefix(self, prefix: Any) -> MappedIterator:
        if not self.key_serde.prefix_safe:
            raise SerdeError(
                f"prefix() needs a key serde whose encoding preserves prefixes (bytes, string); "
                f"{_serde_name(self.key_serde)!r} does not; use range(lo, hi) instead",
                store=self.name, key=prefix)
        return self._typed(self._inner.prefix(self._key(prefix)))

    def all(self) -> MappedIterator:
        return self._typed(self._inner.all())

    def snapshot(self, lo: Any, hi: Any) -> SerializedSnapshot:
        return SerializedSnapshot(self, self._inner.snapshot(self._bound(lo), self._bound(hi)))

    def _bound(self, bound: Any) -> bytes | None:
        return None if bound is None else self._key(bound)

    # -- writes ----------------------------------------------------------------------------
    def put(self, key: Any, value: Any) -> None:
        self._inner.put(self._key(key), self._value(key, value))

    def put_all(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        pairs = checked_pairs(items, self.name)
        self._inner.put_all([(self._key(k), self._value(k, v)) for k, v in pairs])

    def delete(self, key: Any) -> None:
        self._inner.delete(self._key(key))

    def delete_all(self, keys: Iterable[Any]) -> None:
        keys = checked_keys(keys, self.name)
        self._inner.delete_all([self._key(k) for k in keys])

    def write_batch(self, items: Iterable[tuple[Any, Any]]) -> None:
        """Serialize every pair first (a serde failure writes nothing), then one batch down."""
        items = items if isinstance(items, list) else list(items)
        self.write_columns([k for k, _ in items], [v for _, v in items])

    def write_columns(self, keys: list[Any], values: list[Any], *, deletes: bool = True) -> None:
        """``write_batch`` in columns (see :mod:`weir.stores.layers._columns`); ``None`` deletes."""
        try:
            encoded_keys = self._kser_many(keys)
            if deletes and has_none(values):
                vser = self._vser
                encoded_values = [None if v is None else vser(v) for v in values]
            else:
                encoded_values = self._vser_many(values)
        except Exception:
            # Redo the batch through the checked path for a precise, typed error.
            encoded_keys = [self._key(k) for k in keys]
            encoded_values = [None if v is None else self._value(k, v)
                              for k, v in zip(keys, values)]
        self._write_inner(encoded_keys, encoded_values, deletes=deletes)

    # -- lifecycle -------------------------------------------------------------------------
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None:
        self._inner.flush(scope)

    def close(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def __repr__(self) -> str:
        return (f"<SerializedLayer {self.name!r} key={_serde_name(self.key_serde)} "
                f"value={_serde_name(self.value_serde)} over {self._inner!r}>")
