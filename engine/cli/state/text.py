"""How ``weir state`` shows offsets, sizes and store values in tables and JSON."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from weir.stores.changelog import NO_OFFSET

__all__ = ["num", "size_text", "jsonable", "typed_key"]


def num(n: int | None) -> str:
    """An offset or a count: ``-`` for none, ``empty`` for an empty changelog."""
    if n is None:
        return "-"
    return "empty" if n == NO_OFFSET else f"{n:,}"


def size_text(n: int | None) -> str:
    """A size in bytes, in the largest unit that fits (``-`` for none)."""
    if n is None:
        return "-"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it: bytes as text (or ``{"base64": ...}``), objects JSON
    cannot encode as their ``repr``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode()
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(data).decode()}
    try:
        orjson.dumps(value)
        return value
    except TypeError:
        return repr(value)


def typed_key(serde: Any, key: bytes) -> Any:
    """``key`` read with the store's key serde, or the bytes when the serde cannot read it."""
    try:
        return serde.from_bytes(key)
    except Exception:  # noqa: BLE001 - a key the serde cannot read is shown as bytes
        return key
