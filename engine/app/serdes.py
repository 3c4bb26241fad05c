"""Serdes the application planner registers for intermediate streams and operator stores.

* :class:`KeySerde` (``weir-key``): MessagePack that reads arrays back as tuples, so a key
  that was a tuple is hashable again downstream (the plain ``msgpack`` serde gives lists);
* :class:`TimeKeySerde` (``weir-time-key``): ``(time, second, key)`` tuples whose byte order
  is the order of ``time`` then ``second`` (signed 64-bit, big-endian with the sign bit
  flipped), then the key's MessagePack bytes. A window store keyed ``(end, start, key)``
  can so range-scan every window that ends by a watermark; a 2-tuple ``(time, second)``
  encodes as the prefix of every key with those numbers (a range bound).

Example::

    >>> s = TimeKeySerde()
    >>> s.from_bytes(s.to_bytes((60_000, 0, ("ann", 1))))
    (60000, 0, ('ann', 1))
    >>> s.to_bytes((-1, 0, "a")) < s.to_bytes((0, 0, "a")) < s.to_bytes((1, 0, "a"))
    True
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import msgpack

from weir.stores.serdes import SerdeBase

__all__ = ["KeySerde", "TimeKeySerde", "KEY_SERDE", "TIME_KEY_SERDE", "registry_config"]

KEY_SERDE = "weir-key"
TIME_KEY_SERDE = "weir-time-key"

_FLIP = 1 << 63
_TWO = struct.Struct(">QQ")


class KeySerde(SerdeBase):
    """MessagePack; arrays come back as tuples (hashable keys)."""

    name = KEY_SERDE

    def to_bytes(self, obj: Any) -> bytes:
        return msgpack.packb(obj, use_bin_type=True)

    def private_to_bytes(self) -> Callable[[Any], bytes]:
        """The ``pack`` of a Packer of the caller's own (``packb`` builds one per call)."""
        return msgpack.Packer(use_bin_type=True).pack

    def from_bytes(self, data: bytes) -> Any:
        return msgpack.unpackb(data, raw=False, use_list=False)


class TimeKeySerde(SerdeBase):
    """``(time, second, key)`` in time order; see the module docstring."""

    name = TIME_KEY_SERDE

    def to_bytes(self, obj: Any) -> bytes:
        head = _TWO.pack(obj[0] + _FLIP, obj[1] + _FLIP)
        if len(obj) == 2:
            return head
        return head + msgpack.packb(obj[2], use_bin_type=True)

    def from_bytes(self, data: bytes) -> Any:
        a, b = _TWO.unpack_from(data)
        return (a - _FLIP, b - _FLIP, msgpack.unpackb(data[16:], raw=False, use_list=False))


def registry_config() -> dict[str, str]:
    """The ``serializers.registry.*`` entries of these serdes."""
    return {f"serializers.registry.{KEY_SERDE}.class": "weir.engine.app.serdes:KeySerde",
            f"serializers.registry.{TIME_KEY_SERDE}.class": "weir.engine.app.serdes:TimeKeySerde"}
