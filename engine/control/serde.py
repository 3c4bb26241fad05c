"""The in-band wire format of intermediate streams (Samza's IntermediateMessageSerde, 2.2).

Every message on an intermediate stream is ``[type byte] ++ payload``:

* type byte 0 (user message): the payload is the stream's user message serde applied to the
  message (bytes as they are when the stream has none);
* 1 (watermark), 2 (end-of-stream), 3 (drain): the payload is compact UTF-8 JSON, byte for
  byte what Samza's Jackson mapper writes::

      {"timestamp":123,"taskName":"Partition 0","version":1}
      {"taskName":"Partition 0","version":1}
      {"taskName":"Partition 0","version":1,"runId":"run-1"}

  plus ``"taskCount":N`` after ``taskName`` when the sender knows how many upstream tasks
  write the stream (Weir's senders always do; a message without it is exactly Samza's);
* 4 (watermark status, Weir's: Samza has none), in the same style::

      {"status":"IDLE","taskName":"Partition 0","taskCount":2,"version":1}

  written only by a task whose inputs went idle (``task.watermark.idle.timeout.ms``), so a
  stream of a job without idleness carries exactly Samza's bytes. A reader that does not know
  type 4 refuses it (:class:`UnknownMessageTypeError`) rather than misread it.

On read the dashed forms ``task-name``, ``task-count`` and ``run-id`` are accepted too, and an
unknown property is refused, as Samza's reader does. Keys of control messages are null.

Failures name the stream, partition and offset: an empty record or a type byte outside 0..4
(:class:`UnknownMessageTypeError`), bad JSON or fields (:class:`MalformedControlMessageError`),
an unknown version (:class:`UnknownControlVersionError`), a task count that is not a positive
integer (:class:`BadTaskCountError`). :meth:`IntermediateStreamSerdes.deserialize` does not
raise them: it hands a :class:`ControlDecodeFailure` on in the envelope, and the task's
control bookkeeping raises the error when that envelope's turn comes, so it can never be
dropped as a bad user message. A failure of the user serde is a normal
:class:`~weir.engine.errors.DeserializationError`.

Example::

    >>> encode_control(WatermarkMessage(123, "Partition 0"))
    b'\\x01{"timestamp":123,"taskName":"Partition 0","version":1}'
    >>> decode_control(b'\\x02{"task-name":null,"version":1}')
    EndOfStreamMessage(task_name=None, task_count=None, version=1)
"""

from __future__ import annotations

from typing import Any

import orjson

from weir.engine.config.serdes import StreamSerdes, StreamSerdesBase, WireFormat
from weir.engine.control.errors import (BadTaskCountError, MalformedControlMessageError,
                                        UnknownControlVersionError, UnknownMessageTypeError)
from weir.engine.control.messages import (CONTROL_VERSION, ControlDecodeFailure, ControlMessage,
                                          DrainMessage, EndOfStreamMessage, MessageType,
                                          WatermarkMessage, WatermarkStatus,
                                          WatermarkStatusMessage)
from weir.engine.model import EnvelopeKind, IncomingMessageEnvelope, OutgoingMessageEnvelope

__all__ = [
    "USER_TYPE_BYTE",
    "encode_control",
    "decode_control",
    "IntermediateStreamSerdes",
]

USER_TYPE_BYTE = b"\x00"
_MESSAGE = EnvelopeKind.MESSAGE
_WATERMARK, _EOS, _DRAIN, _STATUS = (bytes([t]) for t in (1, 2, 3, 4))
_ALIASES = {"task-name": "taskName", "task-count": "taskCount", "run-id": "runId"}
_FIELDS = {
    MessageType.WATERMARK: frozenset({"timestamp", "taskName", "taskCount", "version"}),
    MessageType.END_OF_STREAM: frozenset({"taskName", "taskCount", "version"}),
    MessageType.DRAIN: frozenset({"taskName", "taskCount", "version", "runId"}),
    MessageType.WATERMARK_STATUS: frozenset({"status", "taskName", "taskCount", "version"}),
}
_STATUSES = {s.value: s for s in WatermarkStatus}
_OLD_FORMAT_HINT = ("messages written by Samza before 0.13.1 or by a plain producer have no "
                    "type byte; write intermediate streams only through Weir (or Samza's "
                    "IntermediateMessageSerde)")


def _head(msg: ControlMessage) -> dict[str, Any]:
    body: dict[str, Any] = {"taskName": msg.task_name}
    if msg.task_count is not None:
        body["taskCount"] = msg.task_count
    body["version"] = msg.version
    return body


def encode_control(msg: ControlMessage) -> bytes:
    """The bytes of a control message on an intermediate stream (type byte + JSON)."""
    if isinstance(msg, WatermarkMessage):
        return _WATERMARK + orjson.dumps({"timestamp": msg.timestamp, **_head(msg)})
    if isinstance(msg, EndOfStreamMessage):
        return _EOS + orjson.dumps(_head(msg))
    if isinstance(msg, DrainMessage):
        return _DRAIN + orjson.dumps({**_head(msg), "runId": msg.run_id})
    if isinstance(msg, WatermarkStatusMessage):
        return _STATUS + orjson.dumps({"status": msg.status.value, **_head(msg)})
    raise TypeError(f"not a control message: {msg!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def decode_control(data: bytes, *, ssp: Any = None, offset: int | None = None) -> ControlMessage:
    """Decode a control message (its type byte included); raises the typed errors of
    :mod:`weir.engine.control.errors`, naming ``ssp`` and ``offset``."""
    if not data:
        raise UnknownMessageTypeError(f"empty record; {_OLD_FORMAT_HINT}", ssp=ssp, offset=offset)
    try:
        kind = MessageType(data[0])
    except ValueError:
        raise UnknownMessageTypeError(f"unknown message type byte {data[0]}; {_OLD_FORMAT_HINT}",
                                      ssp=ssp, offset=offset) from None
    if kind is MessageType.USER_MESSAGE:
        raise MalformedControlMessageError("a user message is not a control message",
                                           ssp=ssp, offset=offset)
    try:
        raw = orjson.loads(data[1:])
    except orjson.JSONDecodeError as exc:
        raise MalformedControlMessageError(
            f"the {kind.name.lower().replace('_', '-')} message is not JSON ({exc})",
            ssp=ssp, offset=offset) from None
    if not isinstance(raw, dict):
        raise MalformedControlMessageError(f"the control message is not a JSON object: {raw!r}",
                                           ssp=ssp, offset=offset)
    fields: dict[str, Any] = {}
    for name, value in raw.items():
        canonical = _ALIASES.get(name, name)
        if canonical not in _FIELDS[kind]:
            raise MalformedControlMessageError(
                f"unknown property {name!r} in a {kind.name.lower().replace('_', '-')} message "
                f"(allowed: {', '.join(sorted(_FIELDS[kind]))})", ssp=ssp, offset=offset)
        fields[canonical] = value
    version = fields.get("version", CONTROL_VERSION)
    if version != CONTROL_VERSION or not _is_int(version):
        raise UnknownControlVersionError(version, ssp=ssp, offset=offset)
    task_name = fields.get("taskName")
    if task_name is not None and not isinstance(task_name, str):
        raise MalformedControlMessageError(f"taskName must be a string or null, got {task_name!r}",
                                           ssp=ssp, offset=offset)
    task_count = fields.get("taskCount")
    if task_count is not None and (not _is_int(task_count) or task_count < 1):
        raise BadTaskCountError(f"taskCount must be a positive integer, got {task_count!r}",
                                ssp=ssp, offset=offset, got=task_count)
    if kind is MessageType.WATERMARK:
        ts = fields.get("timestamp")
        if not _is_int(ts):
            raise MalformedControlMessageError(
                f"a watermark needs an integer timestamp, got {ts!r}", ssp=ssp, offset=offset)
        return WatermarkMessage(ts, task_name, task_count, version)
    if kind is MessageType.END_OF_STREAM:
        return EndOfStreamMessage(task_name, task_count, version)
    if kind is MessageType.WATERMARK_STATUS:
        status = _STATUSES.get(fields.get("status")) if isinstance(fields.get("status"), str) \
            else None
        if status is None:
            raise MalformedControlMessageError(
                f"a watermark-status message needs a status of "
                f"{' or '.join(repr(v) for v in _STATUSES)}, got {fields.get('status')!r}",
                ssp=ssp, offset=offset)
        return WatermarkStatusMessage(status, task_name, task_count, version)
    run_id = fields.get("runId")
    if not isinstance(run_id, str):
        raise MalformedControlMessageError(f"a drain message needs a string runId, got {run_id!r}",
                                           ssp=ssp, offset=offset)
    return DrainMessage(run_id, task_name, task_count, version)


class IntermediateStreamSerdes(StreamSerdesBase):
    """The serdes of an intermediate stream: the type byte around the stream's user serdes
    (``inner``, a :class:`~weir.engine.config.serdes.StreamSerdes`, whose ``key_serde`` and
    ``msg_serde`` it declares as its own; :attr:`WireFormat.INTERMEDIATE`).

    ``deserialize`` turns a user record into a typed envelope (kind MESSAGE) and a control
    record into an envelope of kind CONTROL whose message is the control message (or a
    :class:`ControlDecodeFailure`); ``serialize`` writes a control message (key null) or a
    user message with the type byte in front.
    """

    __slots__ = ("inner", "system_stream", "key_serde_name", "msg_serde_name", "key_serde",
                 "msg_serde", "_key", "_msg")

    wire_format = WireFormat.INTERMEDIATE

    def __init__(self, inner: StreamSerdes):
        self.inner = inner
        self.system_stream = inner.system_stream
        self.key_serde, self.msg_serde = inner.key_serde, inner.msg_serde
        self.key_serde_name = inner.key_serde_name
        self.msg_serde_name = f"intermediate({inner.msg_serde_name})"
        self._key = inner.key_serde.from_bytes if inner.key_serde is not None else None
        self._msg = inner.msg_serde.from_bytes if inner.msg_serde is not None else None

    def deserialize(self, envelope: IncomingMessageEnvelope) -> IncomingMessageEnvelope:
        if envelope.kind is not _MESSAGE:
            return envelope
        data = envelope.message
        if data is None:  # a null user message (no type byte: a null value has no bytes)
            return envelope
        if data[:1] == USER_TYPE_BYTE:   # one envelope out, serdes applied directly
            key = envelope.key
            if key is not None and self._key is not None:
                try:
                    key = self._key(key)
                except Exception as exc:
                    raise self.inner._failure("key", self.inner.key_serde_name, envelope,
                                              exc) from exc
            message = data[1:]
            if self._msg is not None:
                try:
                    message = self._msg(message)
                except Exception as exc:
                    raise self.inner._failure("message", self.inner.msg_serde_name, envelope,
                                              exc) from exc
            return IncomingMessageEnvelope(envelope.ssp, envelope.offset, key, message,
                                           envelope.timestamp, envelope.size, _MESSAGE)
        try:
            message: Any = decode_control(data or b"", ssp=envelope.ssp, offset=envelope.offset)
        except Exception as exc:  # noqa: BLE001 - raised in order by the task's control
            message = ControlDecodeFailure(exc)
        return IncomingMessageEnvelope(envelope.ssp, envelope.offset, None, message,
                                       envelope.timestamp, envelope.size, EnvelopeKind.CONTROL)

    def serialize_key(self, key: Any) -> bytes | None:
        return self.inner.serialize_key(key)

    def serialize_message(self, message: Any) -> bytes | None:
        if isinstance(message, ControlMessage):
            return encode_control(message)
        body = self.inner.serialize_message(message)
        return None if body is None else USER_TYPE_BYTE + body

    def serialize(self, envelope: OutgoingMessageEnvelope) -> tuple[bytes | None, bytes | None]:
        message = envelope.message
        if isinstance(message, ControlMessage):
            return None, encode_control(message)
        return self.inner.serialize_key(envelope.key), self.serialize_message(message)
