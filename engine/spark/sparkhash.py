"""Spark's ``hash()`` (Murmur3, seed 42) in Python, to place a key in a state partition the way
``repartition(P, key)`` does: partition = ``pmod(hash(key), P)``.

Used offline by ``weir spark repartition``, where no JVM runs. Covers the key types a grouping
key has in practice (string, binary, boolean, byte/short/int/date, long/timestamp, float,
double); the tests compare it with Spark's own ``hash`` on every type.

Example::

    >>> spark_hash(["a"], ["string"]), spark_hash([1], ["int"]), spark_hash([1], ["long"])
    (1485273170, -559580957, -1712319331)
    >>> partition_of(["a"], ["string"], 4)
    2
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Sequence
from typing import Any

__all__ = ["spark_hash", "partition_of", "SUPPORTED_TYPES"]

_SEED = 42
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_M32 = 0xFFFFFFFF
SUPPORTED_TYPES = ("string", "binary", "boolean", "byte", "short", "int", "date", "long",
                   "timestamp", "float", "double")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & _M32
    k1 = _rotl(k1, 15)
    return (k1 * _C2) & _M32


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = _rotl(h1, 13)
    return (h1 * 5 + 0xE6546B64) & _M32


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    h1 ^= h1 >> 16
    return h1


def _hash_int(value: int, seed: int) -> int:
    return _fmix(_mix_h1(seed, _mix_k1(value & _M32)), 4)


def _hash_long(value: int, seed: int) -> int:
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed, _mix_k1(value & _M32))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    return _fmix(h1, 8)


def _hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes``: 4-byte little-endian words, then every
    remaining byte mixed on its own (Spark's tail, not the reference one)."""
    h1 = seed
    aligned = len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        (word,) = struct.unpack_from("<i", data, i)
        h1 = _mix_h1(h1, _mix_k1(word))
    for i in range(aligned, len(data)):
        byte = data[i] - 256 if data[i] > 127 else data[i]  # Java bytes are signed
        h1 = _mix_h1(h1, _mix_k1(byte))
    return _fmix(h1, len(data))


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def _one(value: Any, kind: str, seed: int) -> int:
    if value is None:
        return seed
    if kind == "string":
        return _hash_bytes(str(value).encode("utf-8"), seed)
    if kind == "binary":
        return _hash_bytes(bytes(value), seed)
    if kind == "boolean":
        return _hash_int(1 if value else 0, seed)
    if kind in ("byte", "short", "int"):
        return _hash_int(int(value), seed)
    if kind == "date":
        days = (value - datetime.date(1970, 1, 1)).days if isinstance(value, datetime.date) \
            else int(value)
        return _hash_int(days, seed)
    if kind == "long":
        return _hash_long(int(value), seed)
    if kind == "timestamp":
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.timezone.utc)
            micros = (value - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) \
                // datetime.timedelta(microseconds=1)
        else:
            micros = int(value)
        return _hash_long(micros, seed)
    if kind == "float":
        f = float(value)
        bits = 0 if f == 0.0 else struct.unpack("<i", struct.pack("<f", f))[0]
        if f != f:
            bits = 0x7FC00000
        return _hash_int(bits, seed)
    if kind == "double":
        d = float(value)
        bits = 0 if d == 0.0 else struct.unpack("<q", struct.pack("<d", d))[0]
        if d != d:
            bits = 0x7FF8000000000000
        return _hash_long(bits, seed)
    raise ValueError(f"Spark hash of type {kind!r} is not supported here (supported: "
                     f"{', '.join(SUPPORTED_TYPES)})")


def spark_hash(values: Sequence[Any], kinds: Sequence[str]) -> int:
    """``hash(col1, col2, ...)`` as Spark computes it (a signed 32-bit int)."""
    h = _SEED
    for value, kind in zip(values, kinds):
        h = _one(value, kind.lower(), h)
    return _signed(h)


def partition_of(values: Sequence[Any], kinds: Sequence[str], partitions: int) -> int:
    """``pmod(hash(values), partitions)``: the partition ``repartition(partitions, cols)``
    sends the row to."""
    return spark_hash(values, kinds) % partitions
