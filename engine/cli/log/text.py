"""Text in and out for ``weir log``: parsing input lines, fitting them to a stream's serdes,
and printing records readably."""

from __future__ import annotations

import datetime as _dt
from enum import Enum
from typing import TYPE_CHECKING, Any

import orjson

from weir.engine.errors import EngineError
from weir.engine.model import NO_TIMESTAMP, IncomingMessageEnvelope
from weir.engine.config.serdes import StreamSerdesBase

if TYPE_CHECKING:
    from weir.stores.serdes import SerdeBase

__all__ = ["InputFormat", "InputLineError", "parse_line", "encode_key", "encode_message",
           "format_record", "format_timestamp", "is_marker"]


class InputFormat(Enum):
    LINES = "lines"   # each line is a message, no key
    KV = "kv"         # key=value
    JSON = "json"     # one JSON value per line; --key-field picks the key from an object


class InputLineError(EngineError):
    """A line of ``weir log produce`` input could not be parsed."""

    def __init__(self, source: str, lineno: int, message: str, produced: int):
        super().__init__(f"{source} line {lineno}: {message}; {produced} record(s) before it "
                         f"were produced; fix the line and produce the rest")
        self.source, self.lineno, self.produced = source, lineno, produced


def parse_line(line: str, fmt: InputFormat, key_field: str | None) -> tuple[Any, Any, bool]:
    """``(key, message, message_is_text)`` of one non-empty input line; ``key`` is None when
    the line has none. Raises ValueError with a short reason."""
    if fmt is InputFormat.LINES:
        return None, line, True
    if fmt is InputFormat.KV:
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError("expected key=value")
        return key, value, True
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc})") from None
    key = None
    if key_field is not None:
        if not isinstance(obj, dict) or key_field not in obj:
            raise ValueError(f"no field {key_field!r} for the key")
        key = obj[key_field]
    return key, obj, False


def _serde_name(serde: SerdeBase | None) -> str:
    return serde.name if serde is not None else "bytes"


def _fit(value: Any, serde: SerdeBase | None, is_text: bool) -> Any:
    """Turn input (text, or a parsed JSON value) into what ``serde`` takes."""
    name = _serde_name(serde)
    if name == "int64":
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"the int64 serde needs an integer, got {value!r}")
        return int(value)
    if name == "string":
        return value if isinstance(value, str) else orjson.dumps(value).decode()
    if name in ("json", "msgpack") and is_text and isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value  # plain text becomes a JSON string
    return value


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return orjson.dumps(value)


def encode_key(serdes: StreamSerdesBase, key: Any, is_text: bool = True) -> bytes | None:
    if key is None:
        return None
    if serdes.key_serde is None:
        return _to_bytes(key)
    return serdes.serialize_key(_fit(key, serdes.key_serde, is_text))


def encode_message(serdes: StreamSerdesBase, message: Any, raw_line: str, is_text: bool) -> bytes:
    """The record's message bytes as the stream's serdes write them: without a message serde
    the line's bytes, still through ``serialize_message`` (an intermediate stream puts its
    user-message type byte in front, or a job reads the record as a broken control message)."""
    if serdes.msg_serde is None:
        return serdes.serialize_message(raw_line.encode() if not is_text else _to_bytes(message))
    return serdes.serialize_message(_fit(message, serdes.msg_serde, is_text))


# -- output ---------------------------------------------------------------------------------

def format_timestamp(ts: int) -> str:
    if ts == NO_TIMESTAMP:
        return "-"
    try:
        when = _dt.datetime.fromtimestamp(ts / 1000, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ts)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _show(value: Any) -> str:
    if value is None:
        return "<null>"
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            return repr(raw)
        return text if text.isprintable() else repr(text)
    if isinstance(value, str):
        return value if value.isprintable() else repr(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def format_record(env: IncomingMessageEnvelope, serdes: StreamSerdesBase) -> str:
    """One readable line: partition, offset, timestamp, key and value (deserialized with the
    stream's serdes when it has any; shown raw with a note when that fails). A transaction's
    marker reads ``marker=commit producer=P epoch=E transaction=N``; a record of a
    transaction that did not commit ends with ``(aborted)``, ``(fenced)`` or ``(open)``."""
    from weir.engine.systems.filelog.consumer import TransactionMarker, UncommittedValue
    head = f"partition={env.ssp.partition} offset={env.offset}"
    if env.is_end_of_stream:
        return f"{head} end-of-stream"
    message = env.message
    if isinstance(message, TransactionMarker):
        return (f"{head} timestamp={format_timestamp(env.timestamp)} "
                f"marker={message.type.name.lower()} producer={message.producer_id} "
                f"epoch={message.epoch} transaction={message.sequence}")
    flag = ""
    if isinstance(message, UncommittedValue):
        flag = f"  ({message.outcome.value})"
        env = IncomingMessageEnvelope(env.ssp, env.offset, env.key, message.value,
                                      env.timestamp, env.size, env.kind)
    note = ""
    try:
        env = serdes.deserialize(env)
    except EngineError as exc:
        note = f"  (not deserializable: {exc.__cause__ or exc})"
    value = "<tombstone>" if env.message is None else _show(env.message)
    return (f"{head} timestamp={format_timestamp(env.timestamp)} key={_show(env.key)} "
            f"value={value}{note}{flag}")


def is_marker(env: IncomingMessageEnvelope) -> bool:
    """Whether ``env`` carries a transaction's marker (annotating file-log consumers)."""
    from weir.engine.systems.filelog.consumer import TransactionMarker
    return isinstance(env.message, TransactionMarker)
