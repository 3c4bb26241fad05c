"""PySpark's ``StatefulProcessor`` API on a Weir store: state variables, timers, TTL, and the
per-partition driver that calls the processor the way Spark's ``transformWithState`` does.

The processor is PySpark's own class, unchanged; what it gets in ``init`` is a
:class:`WeirProcessorHandle`, a ``StatefulProcessorHandle`` subclass (the seam PySpark's own
``TwsTester`` uses) whose ``ValueState``, ``ListState`` and ``MapState`` keep their data in one
bytes store of the partition instead of calling Spark's JVM state server over a socket.

**Layout** (bytes keys in the partition's ``tws`` store; ``k`` = the grouping key, pickled and
length-prefixed so a key's entries share a prefix)::

    v\\0<name>\\0 k                   value state      -> u64 expiry | pickled row
    l\\0<name>\\0 k  u64 seq          list element     -> u64 expiry | pickled row
    L\\0<name>\\0 k                   next list seq    -> u64
    m\\0<name>\\0 k  <user key>       map entry        -> u64 expiry | pickled row
    t\\0 k  u64 expiry               timer of a key
    T\\0 u64 expiry  k               the same timer, ordered by expiry (firing)
    x\\0 u64 expiry  <state key>     TTL index: what may expire then

Rows are stored as Spark stores them (``schema.toInternal`` of the normalised value) and come
back as tuples (``schema.fromInternal``), as Spark's state clients return them.

**Time model** (:class:`BatchTime`, copied from Spark's ``transformWithState``):

* ``None``: no timers, no TTL (both raise, as in Spark); ``TimerValues(-1, -1)``.
* ``ProcessingTime``: every task of a batch sees the same batch timestamp (recorded with the
  batch, so a retry or replay sees it too); timers with ``expiry <= batch timestamp`` fire after
  the batch's rows; a TTL'd value written at batch timestamp ``t`` expires at ``t + ttl`` and is
  invisible from the first batch whose timestamp is ``>= t + ttl`` (Spark:
  ``batchTimestampMs >= expirationMs``), then evicted at that batch's end.
* ``EventTime``: the watermark of batch ``b`` is ``max(watermark of b-1, max event time over
  every partition through batch b-1 - delay)``, starting at 0; rows at or below the previous
  batch's watermark are dropped as late (Spark filters late rows with the previous batch's
  watermark); timers with ``expiry <= watermark`` fire after the batch's rows, in expiry order.
  When the watermark advances, Spark runs a batch without data (the operator asks for it, see
  :mod:`weir.engine.spark.transform`), so the timers of the last watermark fire too.

Spark's ``TwsTester`` does the same in memory; the tests drive this module with an injected
clock and compare with Spark's own operator.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pyspark.errors import PySparkRuntimeError
from pyspark.sql.streaming.stateful_processor import (ExpiredTimerInfo, ListState, MapState,
                                                      StatefulProcessor,
                                                      StatefulProcessorHandle, TimerValues,
                                                      ValueState)


from weir.engine.spark.errors import SparkError, StateVariableError

__all__ = ["TimeMode", "BatchTime", "WeirProcessorHandle", "ProcessorDriver", "encode_key",
           "TWS_STORE"]

TWS_STORE = "tws"


class DeletedStateVariableError(StateVariableError, PySparkRuntimeError):
    """A state variable used after ``deleteIfExists``: a Weir error that is also the
    ``PySparkRuntimeError`` Spark raises for the same call, so a processor catching either
    behaves the same on both."""
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_NO_EXPIRY = 0


class TimeMode(Enum):
    NONE = "none"
    PROCESSING_TIME = "processingtime"
    EVENT_TIME = "eventtime"

    @classmethod
    def parse(cls, raw: str) -> "TimeMode":
        try:
            return cls(str(raw).replace("_", "").replace(" ", "").lower())
        except ValueError:
            raise SparkError(f"time_mode {raw!r}: expected None, ProcessingTime or EventTime") \
                from None


@dataclass(frozen=True)
class BatchTime:
    """The clock of one batch, the same for every task and attempt of it."""

    mode: TimeMode
    processing_ms: int = -1
    watermark_ms: int = -1           # for eviction and timers (this batch's watermark)
    late_watermark_ms: int = -1      # rows at or below it are late (the previous batch's)

    def timer_values(self) -> TimerValues:
        if self.mode is TimeMode.NONE:
            return TimerValues(-1, -1)
        if self.mode is TimeMode.PROCESSING_TIME:
            return TimerValues(self.processing_ms, -1)
        return TimerValues(self.processing_ms, self.watermark_ms)

    @property
    def timer_threshold(self) -> int | None:
        if self.mode is TimeMode.PROCESSING_TIME:
            return self.processing_ms
        if self.mode is TimeMode.EVENT_TIME:
            return self.watermark_ms
        return None


def _normalize(value: Any) -> Any:
    from pyspark.sql.streaming.stateful_processor_api_client import _normalize_state_value

    return _normalize_state_value(value)


def encode_key(key: tuple) -> bytes:
    """The grouping key's bytes, length-prefixed (so a key's entries share a prefix)."""
    raw = pickle.dumps(tuple(_normalize(v) for v in key), protocol=4)
    return _U32.pack(len(raw)) + raw


def decode_key(data: bytes, pos: int = 0) -> tuple[tuple, int]:
    (length,) = _U32.unpack_from(data, pos)
    start = pos + 4
    return pickle.loads(data[start:start + length]), start + length


class _Codec:
    """A state variable's rows <-> bytes with its schema (when known)."""

    def __init__(self, schema: Any):
        self.schema = schema

    def dumps(self, value: Any) -> bytes:
        value = tuple(_normalize(v) for v in value)
        if self.schema is not None:
            value = self.schema.toInternal(value)
        return pickle.dumps(value, protocol=4)

    def loads(self, data: bytes | memoryview) -> tuple:
        value = pickle.loads(data)
        if self.schema is not None:
            value = self.schema.fromInternal(value)
        return tuple(value)


class _Store:
    """The bytes operations a handle needs, over the partition's staged ``tws`` engine."""

    def __init__(self, engine: Any):
        self.engine = engine

    def get(self, key: bytes) -> bytes | None:
        return self.engine.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.engine.put(key, value)

    def delete(self, key: bytes) -> None:
        self.engine.delete(key)

    def scan(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        with self.engine.prefix(prefix) as it:
            return list(it)

    def scan_range(self, lo: bytes, hi: bytes | None) -> list[tuple[bytes, bytes]]:
        with self.engine.range(lo, hi) as it:
            return list(it)

    def delete_prefix(self, prefix: bytes) -> None:
        for k, _ in self.scan(prefix):
            self.engine.delete(k)


class _Var:
    """What every state variable shares: name, prefix, codec, TTL."""

    tag = b"?"

    def __init__(self, handle: "WeirProcessorHandle", name: str, schema: Any, ttl_ms: int | None):
        self.h = handle
        self.name = name
        self.deleted = False
        self.codec = _Codec(schema)
        self.ttl_ms = ttl_ms
        self.prefix = self.tag + b"\0" + name.encode() + b"\0"

    def _expiry(self) -> int:
        if not self.ttl_ms:
            return _NO_EXPIRY
        return self.h.time.processing_ms + self.ttl_ms

    def _pack(self, value: Any, expiry: int) -> bytes:
        return _U64.pack(expiry) + self.codec.dumps(value)

    def _live(self, raw: bytes | None) -> bool:
        if raw is None:
            return False
        (expiry,) = _U64.unpack_from(raw, 0)
        return expiry == _NO_EXPIRY or self.h.time.processing_ms < expiry

    def _index_ttl(self, state_key: bytes, expiry: int) -> None:
        if expiry != _NO_EXPIRY:
            self.h.store.put(b"x\0" + _U64.pack(expiry) + state_key, b"")

    def _key(self) -> bytes:
        if self.deleted:
            raise DeletedStateVariableError(
                f"state variable '{self.name}' was removed with deleteIfExists('{self.name}'): "
                f"get it again from the handle (getValueState/getListState/getMapState) before "
                f"using it (Spark fails the same call)")
        return self.prefix + self.h.current_key()


class _WeirValueState(ValueState, _Var):
    tag = b"v"

    def __init__(self, handle, name, schema, ttl_ms):  # no ValueState.__init__: no JVM client
        _Var.__init__(self, handle, name, schema, ttl_ms)

    def exists(self) -> bool:
        return self._live(self.h.store.get(self._key()))

    def get(self):
        raw = self.h.store.get(self._key())
        if not self._live(raw):
            return None
        return self.codec.loads(memoryview(raw)[8:])

    def update(self, newValue) -> None:
        key, expiry = self._key(), self._expiry()
        self.h.store.put(key, self._pack(newValue, expiry))
        self._index_ttl(key, expiry)

    def clear(self) -> None:
        self.h.store.delete(self._key())


class _WeirListState(ListState, _Var):
    tag = b"l"

    def __init__(self, handle, name, schema, ttl_ms):
        _Var.__init__(self, handle, name, schema, ttl_ms)
        self.seq_prefix = b"L\0" + name.encode() + b"\0"

    def _elements(self) -> list[tuple[bytes, bytes]]:
        return [(k, v) for k, v in self.h.store.scan(self._key()) if self._live(v)]

    def exists(self) -> bool:
        return bool(self._elements())

    def get(self) -> Iterator[tuple]:
        return iter([self.codec.loads(memoryview(v)[8:]) for _, v in self._elements()])

    def _append(self, values: list) -> None:
        base = self._key()
        if not values:
            return
        kb = self.h.current_key()
        seq_key = self.seq_prefix + kb
        raw = self.h.store.get(seq_key)
        seq = _U64.unpack(raw)[0] if raw is not None else 0
        expiry = self._expiry()
        for value in values:
            element = base + _U64.pack(seq)
            self.h.store.put(element, self._pack(value, expiry))
            self._index_ttl(element, expiry)
            seq += 1
        self.h.store.put(seq_key, _U64.pack(seq))

    def put(self, newState) -> None:
        self.clear()
        self._append(list(newState))

    def appendValue(self, newState) -> None:
        self._append([newState])

    def appendList(self, newState) -> None:
        self._append(list(newState))

    def clear(self) -> None:
        self.h.store.delete_prefix(self._key())
        self.h.store.delete(self.seq_prefix + self.h.current_key())


class _WeirMapState(MapState, _Var):
    tag = b"m"

    def __init__(self, handle, name, key_schema, value_schema, ttl_ms):
        _Var.__init__(self, handle, name, value_schema, ttl_ms)
        self.key_codec = _Codec(key_schema)

    def _entry(self, user_key) -> bytes:
        return self._key() + self.key_codec.dumps(user_key)

    def _entries(self) -> list[tuple[bytes, bytes]]:
        return [(k, v) for k, v in self.h.store.scan(self._key()) if self._live(v)]

    def exists(self) -> bool:
        return bool(self._entries())

    def getValue(self, key):
        raw = self.h.store.get(self._entry(key))
        if not self._live(raw):
            return None
        return self.codec.loads(memoryview(raw)[8:])

    def containsKey(self, key) -> bool:
        return self._live(self.h.store.get(self._entry(key)))

    def updateValue(self, key, value) -> None:
        entry, expiry = self._entry(key), self._expiry()
        self.h.store.put(entry, self._pack(value, expiry))
        self._index_ttl(entry, expiry)

    def _pairs(self) -> list[tuple[tuple, tuple]]:
        skip = len(self._key())
        return [(self.key_codec.loads(k[skip:]), self.codec.loads(memoryview(v)[8:]))
                for k, v in self._entries()]

    def iterator(self):
        return iter(self._pairs())

    def keys(self):
        return iter([k for k, _ in self._pairs()])

    def values(self):
        return iter([v for _, v in self._pairs()])

    def removeKey(self, key) -> None:
        self.h.store.delete(self._entry(key))

    def clear(self) -> None:
        self.h.store.delete_prefix(self._key())


class WeirProcessorHandle(StatefulProcessorHandle):
    """A ``StatefulProcessorHandle`` over a Weir store (see the module docstring).

    ``schemas`` maps state variable names to the StructTypes the driver parsed from the
    processor's ``init`` (DDL strings cannot be parsed without a JVM in a Python worker).
    """

    def __init__(self, store: Any, time: BatchTime, schemas: Mapping[str, Any] | None = None):
        # no StatefulProcessorHandle.__init__: there is no JVM state server to talk to
        self.store = _Store(store)
        self.time = time
        self.schemas = dict(schemas or {})
        self._key: bytes | None = None
        self._key_tuple: tuple | None = None
        self.variables: dict[str, _Var] = {}

    # -- the current grouping key ------------------------------------------------------------
    def set_key(self, key: tuple) -> None:
        self._key_tuple = tuple(key)
        self._key = encode_key(self._key_tuple)

    def set_key_bytes(self, key_bytes: bytes) -> None:
        self._key = key_bytes
        self._key_tuple = decode_key(key_bytes)[0]

    def current_key(self) -> bytes:
        if self._key is None:
            raise SparkError("state accessed outside handleInputRows / handleExpiredTimer / "
                             "handleInitialState: there is no current grouping key")
        return self._key

    # -- state variables ----------------------------------------------------------------------
    def _schema(self, name: str, schema: Any, suffix: str = "") -> Any:
        from pyspark.sql.types import StructType

        if isinstance(schema, StructType):
            return schema
        return self.schemas.get(name + suffix)

    def _check_ttl(self, name: str, ttl: int | None) -> None:
        if ttl is not None and self.time.mode is not TimeMode.PROCESSING_TIME:
            raise SparkError(
                f"STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL: state '{name}' asks for "
                f"a TTL, which needs time_mode='ProcessingTime' (as in Spark)")

    def _register(self, var: _Var) -> _Var:
        existing = self.variables.get(var.name)
        if existing is not None and type(existing) is not type(var):
            raise SparkError(f"state variable '{var.name}' is already defined as another kind")
        self.variables[var.name] = var
        return var

    def getValueState(self, stateName, schema, ttlDurationMs=None):
        self._check_ttl(stateName, ttlDurationMs)
        return self._register(_WeirValueState(self, stateName, self._schema(stateName, schema),
                                              ttlDurationMs))

    def getListState(self, stateName, schema, ttlDurationMs=None):
        self._check_ttl(stateName, ttlDurationMs)
        return self._register(_WeirListState(self, stateName, self._schema(stateName, schema),
                                             ttlDurationMs))

    def getMapState(self, stateName, userKeySchema, valueSchema, ttlDurationMs=None):
        self._check_ttl(stateName, ttlDurationMs)
        return self._register(_WeirMapState(self, stateName,
                                            self._schema(stateName, userKeySchema, "#key"),
                                            self._schema(stateName, valueSchema),
                                            ttlDurationMs))

    def deleteIfExists(self, stateName) -> None:
        name = stateName.encode()
        for tag in (b"v", b"l", b"L", b"m"):
            self.store.delete_prefix(tag + b"\0" + name + b"\0")
        var = self.variables.pop(stateName, None)
        if var is not None:
            var.deleted = True

    # -- timers ---------------------------------------------------------------------------------
    def _check_timers(self, operation: str) -> None:
        if self.time.mode is TimeMode.NONE:
            raise SparkError(f"cannot {operation} with time_mode='None' (as in Spark: timers need "
                             f"ProcessingTime or EventTime)")

    def registerTimer(self, expiryTimestampMs: int) -> None:
        self._check_timers("register a timer")
        kb = self.current_key()
        expiry = _U64.pack(int(expiryTimestampMs))
        self.store.put(b"t\0" + kb + expiry, b"")
        self.store.put(b"T\0" + expiry + kb, b"")

    def deleteTimer(self, expiryTimestampMs: int) -> None:
        self._check_timers("delete a timer")
        kb = self.current_key()
        expiry = _U64.pack(int(expiryTimestampMs))
        self.store.delete(b"t\0" + kb + expiry)
        self.store.delete(b"T\0" + expiry + kb)

    def listTimers(self) -> Iterator[int]:
        self._check_timers("list timers")
        prefix = b"t\0" + self.current_key()
        return iter([_U64.unpack_from(k, len(prefix))[0] for k, _ in self.store.scan(prefix)])

    def expired_timers(self, threshold: int) -> list[tuple[int, bytes]]:
        """``(expiry, key bytes)`` of every timer with ``expiry <= threshold``, in firing
        order (expiry, then key)."""
        if threshold < 0:
            return []
        hi = b"T\0" + _U64.pack(threshold + 1)
        out = []
        for k, _ in self.store.scan_range(b"T\0", hi):
            (expiry,) = _U64.unpack_from(k, 2)
            out.append((expiry, k[10:]))
        return out

    # -- TTL eviction ---------------------------------------------------------------------------
    def evict_expired(self) -> int:
        """Delete every TTL'd state whose expiry is at or before the batch timestamp (the end
        of a ProcessingTime batch); returns how many entries went."""
        if self.time.mode is not TimeMode.PROCESSING_TIME:
            return 0
        now = self.time.processing_ms
        hi = b"x\0" + _U64.pack(now + 1)
        removed = 0
        for k, _ in self.store.scan_range(b"x\0", hi):
            (expiry,) = _U64.unpack_from(k, 2)
            state_key = k[10:]
            raw = self.store.get(state_key)
            if raw is not None and _U64.unpack_from(raw, 0)[0] == expiry:
                self.store.delete(state_key)
                removed += 1
            self.store.delete(k)
        return removed


class ProcessorDriver:
    """Runs a processor over one partition's batch the way Spark's operator does: initial
    state (first batch only), then each key's rows, then the expired timers, then TTL
    eviction. ``emit`` receives what the processor yields (pandas DataFrames or Rows)."""

    def __init__(self, processor: StatefulProcessor, handle: WeirProcessorHandle,
                 emit: Callable[[Any], None]):
        self.processor = processor
        self.handle = handle
        self.emit = emit
        self.counts = {"keys": 0, "timers_fired": 0, "initial_keys": 0, "evicted": 0}

    def start(self) -> None:
        self.processor.init(self.handle)

    def initial(self, key: tuple, states: Iterator[Any]) -> None:
        self.handle.set_key(key)
        tv = self.handle.time.timer_values()
        for state in states:
            self.processor.handleInitialState(key, state, tv)
        self.counts["initial_keys"] += 1

    def rows(self, key: tuple, rows: Iterator[Any]) -> None:
        self.handle.set_key(key)
        result = self.processor.handleInputRows(key, rows, self.handle.time.timer_values())
        if result is not None:
            for item in result:
                self.emit(item)
        self.counts["keys"] += 1

    def timers(self) -> None:
        threshold = self.handle.time.timer_threshold
        if threshold is None:
            return
        tv = self.handle.time.timer_values()
        for expiry, kb in self.handle.expired_timers(threshold):
            self.handle.set_key_bytes(kb)
            key = self.handle._key_tuple
            result = self.processor.handleExpiredTimer(
                key=key, timerValues=tv, expiredTimerInfo=ExpiredTimerInfo(expiry))
            if result is not None:
                for item in result:
                    self.emit(item)
            self.handle.deleteTimer(expiry)
            self.counts["timers_fired"] += 1

    def finish(self) -> None:
        self.counts["evicted"] = self.handle.evict_expired()
        self.handle._key = None
        self.processor.close()
