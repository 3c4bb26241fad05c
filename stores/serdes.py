"""Serdes: how typed keys and values become the bytes engines store.

A serde is any object with ``to_bytes(obj) -> bytes`` and ``from_bytes(data) -> obj``. The
built-ins, by config name:

========== ============================== ===================================================
name       aliases                        bytes
========== ============================== ===================================================
``bytes``  ``byte``, ``bytebuffer``       the value itself (``bytes``, ``bytearray``, ``memoryview``)
``string`` ``str``, ``utf8``              UTF-8
``int64``  ``long``, ``integer``, ``int`` 8 bytes big-endian, sign bit flipped, so that byte
                                          order equals numeric order (-1 sorts before 0)
``json``   ``jsonv2``                     compact JSON via orjson, dict keys sorted
``msgpack``                               MessagePack (tuples come back as lists)
========== ============================== ===================================================

Samza's serde factory class names (``org.apache.samza.serializers.StringSerdeFactory``,
``LongSerdeFactory``, ``IntegerSerdeFactory``, ``JsonSerdeFactory``, ``JsonSerdeV2Factory``,
``ByteSerdeFactory``, ``ByteBufferSerdeFactory``, ``MetricsSnapshotSerdeFactory`` (JSON)) are
accepted as values of ``serializers.registry.<name>.class`` and map to the matching built-in.
Two differences from Samza's wire formats: ``int64`` flips the sign bit (Samza's ``LongSerde``
does not, so negative numbers sort after positive ones there), and ``integer`` is the same
8-byte ``int64`` here, not Samza's 4-byte ``IntegerSerde``.

User serdes are registered with ``serializers.registry.<name>.class=module:Class``. Weir calls
``Class(config)`` when the constructor takes one positional argument (it receives the whole job
``Config``), and ``Class()`` otherwise. Two optional extras:

- ``prefix_safe = True``: the encoding of a prefix is a byte prefix of the encoding of every
  extension (as with UTF-8 strings), so ``store.prefix(p)`` works with the serde;
- ``to_bytes_many(objs) -> list[bytes]``: a batch form of ``to_bytes`` used when a cache writes
  its dirty entries down; it may raise on any bad object (the layer then redoes the batch one
  object at a time to name it).

Serdes raise whatever their codec raises; :class:`~weir.stores.layers.serialized.SerializedLayer`
turns every failure into a :class:`~weir.stores.errors.SerdeError` naming the store and the key.

Example::

    >>> from weir.stores.config import Config
    >>> s = serde_from_name("long", Config())
    >>> s.name, s.to_bytes(-1) < s.to_bytes(0) < s.to_bytes(1), s.from_bytes(s.to_bytes(-42))
    ('int64', True, -42)
"""

from __future__ import annotations

import functools
import importlib
import inspect
import struct
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

import msgpack
import orjson

from weir.stores.config import Config, declare
from weir.stores.errors import ConfigError, SerdeError

__all__ = [
    "Serde",
    "SerdeBase",
    "BytesSerde",
    "StringSerde",
    "Int64Serde",
    "JsonSerde",
    "MsgpackSerde",
    "BUILTIN_SERDES",
    "SERDE_REGISTRY_CLASS",
    "serde_from_name",
]

SERDE_REGISTRY_CLASS = declare(
    "serializers.registry.<name>.class", str, None,
    "Registers a serde under <name>: `module:Class` (a user serde with to_bytes/from_bytes, "
    "constructed as Class(config) if its constructor takes one argument, else Class()), or a "
    "Samza serde factory class name, which maps to the matching built-in serde.",
    component="serdes")


@runtime_checkable
class Serde(Protocol):
    """Turns objects into bytes and back. ``from_bytes(to_bytes(x)) == x`` for supported x."""

    def to_bytes(self, obj: Any) -> bytes: ...
    def from_bytes(self, data: bytes) -> Any: ...


class SerdeBase:
    """The base of every serde a store uses: the built-in serdes, and a user serde named in
    config as the loader adapts it. It declares a serde's optional capabilities with their
    defaults, which the serialized layer calls without probing:

    - ``name``: how errors name the serde (default ``""``: its class name is used);
    - ``prefix_safe``: whether the encoding of a prefix is a prefix of the encoding (default
      False: ``prefix()`` scans are refused);
    - ``to_bytes_many(objs)``: a batch of ``to_bytes`` (default: ``to_bytes`` mapped in C);
    - ``private_to_bytes()``: a ``to_bytes`` for one caller that never calls it from two
      threads at once, which may hold state of its own (default: ``to_bytes``; MessagePack
      gives a ``Packer`` of the caller's: ``msgpack.packb`` builds one per call).

    ``to_bytes``/``from_bytes`` are plain attributes in the built-in serdes, holding the fastest
    callable available (often a C function), so a call through a layer costs one C call, not a
    Python frame.

    >>> class Upper(SerdeBase):
    ...     def to_bytes(self, obj): return obj.upper().encode()
    ...     def from_bytes(self, data): return data.decode()
    >>> Upper().to_bytes_many(["a", "b"]), Upper().prefix_safe, Upper().name
    ([b'A', b'B'], False, '')
    """

    name: str = ""
    prefix_safe: bool = False
    to_bytes: Callable[[Any], bytes]
    from_bytes: Callable[[bytes], Any]

    def to_bytes_many(self, objs: Iterable[Any]) -> list[bytes]:
        """``[to_bytes(o) for o in objs]``, iterated in C."""
        return list(map(self.to_bytes, objs))

    def private_to_bytes(self) -> Callable[[Any], bytes]:
        """``to_bytes`` for one caller that never calls it from two threads at once; a serde
        may return a faster callable holding state of its own. Default: ``to_bytes``."""
        return self.to_bytes

    def __repr__(self) -> str:
        return f"<serde {self.name}>"


_ONLY_BYTES = frozenset((bytes,))


def _bytes_to_bytes(obj: Any) -> bytes:
    if type(obj) is bytes:
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    raise TypeError(f"the bytes serde takes bytes, bytearray or memoryview, not {type(obj).__name__}")


class BytesSerde(SerdeBase):
    """Bytes pass through unchanged (``bytearray``/``memoryview`` become ``bytes``)."""

    name = "bytes"
    prefix_safe = True

    def __init__(self) -> None:
        self.to_bytes = _bytes_to_bytes
        # bytes(b) returns b itself for bytes and copies a buffer (memoryview): one C call.
        self.from_bytes = bytes

    def to_bytes_many(self, objs: Iterable[Any]) -> list[bytes]:
        objs = list(objs)
        if set(map(type, objs)) <= _ONLY_BYTES:  # the common case, checked in C
            return objs
        return list(map(_bytes_to_bytes, objs))


class StringSerde(SerdeBase):
    """UTF-8 text; byte order of the encoding equals code point order."""

    name = "string"
    prefix_safe = True

    def __init__(self) -> None:
        # Unbound str/bytes methods: UTF-8 and strict errors are their defaults, and a
        # non-str argument raises TypeError.
        self.to_bytes = str.encode
        self.from_bytes = bytes.decode


_INT64_BIAS = 1 << 63
_U64 = struct.Struct(">Q")
_FLIP_HIGH_BIT = bytes(b ^ 0x80 for b in range(256))


def _int64_to_bytes(obj: int, _pack=_U64.pack, _bias=_INT64_BIAS) -> bytes:
    # No type check on the hot path: a float or str makes the addition or the pack fail.
    try:
        return _pack(obj + _bias)
    except (struct.error, TypeError):
        if isinstance(obj, int):
            raise OverflowError(f"{obj} is outside the int64 range [-2**63, 2**63)") from None
        raise TypeError(f"the int64 serde takes int, not {type(obj).__name__}") from None


def _int64_from_bytes(data: bytes, _unpack=_U64.unpack, _bias=_INT64_BIAS) -> int:
    if len(data) != 8:
        raise ValueError(f"the int64 serde reads exactly 8 bytes, got {len(data)}")
    return _unpack(data)[0] - _bias


class Int64Serde(SerdeBase):
    """Signed 64-bit integers as 8 big-endian bytes with the sign bit flipped.

    Flipping the sign bit (adding 2**63) maps [-2**63, 2**63) onto [0, 2**64) monotonically,
    so unsigned byte order, the order every engine uses, equals numeric order.
    """

    name = "int64"

    def __init__(self) -> None:
        self.to_bytes = _int64_to_bytes
        self.from_bytes = _int64_from_bytes

    def to_bytes_many(self, objs: Iterable[int]) -> list[bytes]:
        """All numbers in three C calls: pack them as signed big-endian int64s into one
        buffer, flip the first byte of every 8 (the sign bit), cut the buffer into 8-byte
        values. A non-int or out-of-range number fails the whole batch (``struct.error``); the
        caller then redoes it with ``to_bytes`` to name the culprit."""
        objs = objs if isinstance(objs, (list, tuple)) else list(objs)
        n = len(objs)
        buf = bytearray(struct.pack(f">{n}q", *objs))
        buf[0::8] = buf[0::8].translate(_FLIP_HIGH_BIT)
        return list(struct.unpack("8s" * n, buf))


class JsonSerde(SerdeBase):
    """Compact JSON (orjson) with sorted dict keys, so equal dicts give equal bytes."""

    name = "json"

    def __init__(self) -> None:
        self.to_bytes = functools.partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)
        self.from_bytes = orjson.loads


class MsgpackSerde(SerdeBase):
    """MessagePack (``use_bin_type``; strings come back as ``str``, tuples as lists)."""

    name = "msgpack"

    def __init__(self) -> None:
        self.to_bytes = msgpack.packb
        self.from_bytes = msgpack.unpackb

    def private_to_bytes(self) -> Callable[[Any], bytes]:
        """The ``pack`` of a Packer of the caller's own (``packb`` builds a Packer per call)."""
        return msgpack.Packer(use_bin_type=True).pack


BUILTIN_SERDES: dict[str, type[SerdeBase]] = {
    "bytes": BytesSerde,
    "string": StringSerde,
    "int64": Int64Serde,
    "json": JsonSerde,
    "msgpack": MsgpackSerde,
}
"""Built-in serde classes by canonical name."""

_ALIASES: dict[str, str] = {
    "byte": "bytes", "bytebuffer": "bytes",
    "str": "string", "utf8": "string", "utf-8": "string",
    "long": "int64", "integer": "int64", "int": "int64",
    "jsonv2": "json",
}

_SAMZA_FACTORIES: dict[str, str] = {
    "org.apache.samza.serializers.ByteSerdeFactory": "bytes",
    "org.apache.samza.serializers.ByteBufferSerdeFactory": "bytes",
    "org.apache.samza.serializers.StringSerdeFactory": "string",
    "org.apache.samza.serializers.LongSerdeFactory": "int64",
    "org.apache.samza.serializers.IntegerSerdeFactory": "int64",
    "org.apache.samza.serializers.JsonSerdeFactory": "json",
    "org.apache.samza.serializers.JsonSerdeV2Factory": "json",
    # Samza's metrics snapshots are JSON maps (MetricsSnapshotSerde writes them with Jackson).
    "org.apache.samza.serializers.MetricsSnapshotSerdeFactory": "json",
}


def _builtin(name: str) -> SerdeBase | None:
    canonical = _ALIASES.get(name.lower(), name.lower())
    cls = BUILTIN_SERDES.get(canonical)
    return cls() if cls is not None else None


def serde_from_name(name: str, config: Config, *, key: str | None = None) -> Serde:
    """Resolve a serde name as used in ``stores.<s>.key.serde`` and friends.

    A ``serializers.registry.<name>.class`` entry wins; otherwise ``name`` must be a built-in
    name or alias. ``key`` names the config key that referred to ``name``, for the error
    message. Raises :class:`~weir.stores.errors.ConfigError` for unknown names, unimportable classes
    and objects that are not serdes.
    """
    registry_key = SERDE_REGISTRY_CLASS.key(name=name)
    target = config.get_str(registry_key)
    if target == "":
        raise ConfigError("is empty: set it to module:Class, or remove it to use the built-in "
                          f"serde named {name!r}", key=registry_key,
                          origin=config.origin(registry_key))
    if target:
        samza = _SAMZA_FACTORIES.get(target)
        if samza is not None:
            return BUILTIN_SERDES[samza]()
        return _load_user_serde(target, config, registry_key)
    serde = _builtin(name.strip())
    if serde is None:
        known = ", ".join(BUILTIN_SERDES)
        raise ConfigError(
            f"unknown serde {name!r}: use one of {known} (aliases: {', '.join(_ALIASES)}), or "
            f"register it with {registry_key}=module:Class",
            key=key, origin=config.origin(key) if key else None)
    return serde


def _load_user_serde(target: str, config: Config, registry_key: str) -> Serde:
    origin = config.origin(registry_key)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"bad value {target!r}: expected module:Class (for example myjob.serdes:PointSerde) "
            f"or a Samza serde factory class name ({', '.join(sorted(_SAMZA_FACTORIES))})",
            key=registry_key, origin=origin)
    try:
        module = importlib.import_module(module_name)
        cls = functools.reduce(getattr, attr.split("."), module)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import serde {target!r}: {exc}; check the module is on "
                          f"PYTHONPATH and the class name is spelled right",
                          key=registry_key, origin=origin) from exc
    except Exception as exc:  # the module itself fails: SyntaxError, an error at import time
        raise ConfigError(f"cannot import serde {target!r}: importing {module_name} raised "
                          f"{type(exc).__name__}: {exc}; fix that module",
                          key=registry_key, origin=origin) from exc
    try:
        serde = cls(config) if _takes_one_argument(cls) else cls()
    except Exception as exc:
        raise ConfigError(f"constructing serde {target!r} failed: {exc!r}",
                          key=registry_key, origin=origin) from exc
    if not (callable(getattr(serde, "to_bytes", None)) and callable(getattr(serde, "from_bytes", None))):
        raise ConfigError(f"{target!r} is not a serde: it needs to_bytes(obj) and from_bytes(data)",
                          key=registry_key, origin=origin)
    return _CheckedSerde(serde, target)


class _CheckedSerde(SerdeBase):
    """A user serde whose ``to_bytes`` results are checked to be ``bytes``: a serde returning
    ``str`` (or anything else) fails at once with a SerdeError naming it, instead of deep in an
    engine with an error that names neither the key nor the serde. Built-in serdes are not
    wrapped. A user serde deriving from :class:`SerdeBase` that overrides ``private_to_bytes``
    declares it returns bytes: that callable is handed out as it is; otherwise
    ``private_to_bytes`` is the checked ``to_bytes``."""

    __slots__ = ("_serde", "name", "from_bytes", "prefix_safe", "_private")

    def __init__(self, serde: Any, target: str):
        self._serde = serde
        self.name = getattr(serde, "name", None) or target
        self.from_bytes = serde.from_bytes
        self.prefix_safe = bool(getattr(serde, "prefix_safe", False))
        self._private = (serde.private_to_bytes if isinstance(serde, SerdeBase) and
                         type(serde).private_to_bytes is not SerdeBase.private_to_bytes
                         else self._checked_to_bytes)

    def _checked_to_bytes(self) -> Callable[[Any], bytes]:
        return self.to_bytes

    def private_to_bytes(self) -> Callable[[Any], bytes]:
        return self._private()

    def to_bytes(self, obj: Any) -> bytes:
        data = self._serde.to_bytes(obj)
        if type(data) is not bytes:
            if isinstance(data, (bytearray, memoryview)):
                return bytes(data)
            raise SerdeError(f"serde {self.name!r} returned {type(data).__name__}, not bytes, "
                             f"for {obj!r}; its to_bytes must return bytes")
        return data

    def to_bytes_many(self, objs: list[Any]) -> list[bytes]:
        to_bytes = self.to_bytes
        return [to_bytes(obj) for obj in objs]


def _takes_one_argument(cls: Any) -> bool:
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) == 1 or (len(positional) == 1 and not required)
