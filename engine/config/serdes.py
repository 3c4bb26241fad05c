"""Per-stream serdes: which serde turns a stream's bytes into keys and messages.

Systems move ``bytes``; tasks see objects. For a stream ``(system, stream)`` the key serde is
the stream property ``samza.key.serde`` (looked up in Samza's order by
:func:`weir.engine.config.streams.stream_property`: ``streams.<id>.samza.key.serde``, then
``systems.<system>.streams.<stream>.samza.key.serde``, then
``systems.<system>.default.stream.samza.key.serde``), then the system default
``systems.<system>.samza.key.serde``; with none of them set the key stays ``bytes``. The
message serde is found the same way from ``samza.msg.serde``. Serde names are resolved by
:func:`weir.stores.serdes.serde_from_name` (``string``, ``int64``, ``json``, ``msgpack``, ``bytes``
or a user serde registered with ``serializers.registry.<name>.class``).

Deserialization failures raise :class:`~weir.engine.errors.DeserializationError` naming the SSP
and offset; whether to drop such a message or stop the job is the caller's decision
(``task.drop.deserialization.errors``, read by the consumer multiplexer).

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.model import IncomingMessageEnvelope, SystemStream, SystemStreamPartition
    >>> cfg = Config({"systems.filelog.samza.msg.serde": "json",
    ...               "systems.filelog.streams.orders.samza.key.serde": "string"})
    >>> serdes = stream_serdes(cfg, SystemStream("filelog", "orders"))
    >>> (serdes.key_serde_name, serdes.msg_serde_name)
    ('string', 'json')
    >>> env = IncomingMessageEnvelope(SystemStreamPartition("filelog", "orders", 0), 7,
    ...                               b"alice", b'{"amount": 3}')
    >>> typed = serdes.deserialize(env)
    >>> (typed.key, typed.message)
    ('alice', {'amount': 3})
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from weir.stores.config import Config, declare
from weir.stores.errors import SerdeError

from weir.engine.errors import DeserializationError
from weir.engine.model import (EnvelopeFactory, EnvelopeKind, IncomingMessageEnvelope,
                               OutgoingMessageEnvelope, SystemStream, SystemStreamPartition)
from weir.engine.config.streams import stream_property, stream_property_origin

if TYPE_CHECKING:  # stores.serdes is imported late (see _serde_from_name)
    from weir.stores.serdes import SerdeBase

__all__ = [
    "STREAM_ID_KEY_SERDE",
    "STREAM_ID_MSG_SERDE",
    "STREAM_KEY_SERDE",
    "STREAM_MSG_SERDE",
    "DEFAULT_STREAM_KEY_SERDE",
    "DEFAULT_STREAM_MSG_SERDE",
    "SYSTEM_KEY_SERDE",
    "SYSTEM_MSG_SERDE",
    "NO_SERDE",
    "FailedRecord",
    "WireFormat",
    "StreamSerdesBase",
    "StreamSerdes",
    "SerdeManager",
    "stream_serdes",
]

_C = "serdes"
STREAM_ID_KEY_SERDE = declare(
    "streams.<id>.samza.key.serde", str, None,
    "Key serde of the stream with this stream id (wins over the system-level settings).",
    component=_C)
STREAM_ID_MSG_SERDE = declare(
    "streams.<id>.samza.msg.serde", str, None,
    "Message serde of the stream with this stream id (wins over the system-level settings).",
    component=_C)
STREAM_KEY_SERDE = declare(
    "systems.<system>.streams.<stream>.samza.key.serde", str, None,
    "Key serde of one stream of a system.", component=_C)
STREAM_MSG_SERDE = declare(
    "systems.<system>.streams.<stream>.samza.msg.serde", str, None,
    "Message serde of one stream of a system.", component=_C)
DEFAULT_STREAM_KEY_SERDE = declare(
    "systems.<system>.default.stream.samza.key.serde", str, None,
    "Key serde of every stream of the system that sets none itself.", component=_C)
DEFAULT_STREAM_MSG_SERDE = declare(
    "systems.<system>.default.stream.samza.msg.serde", str, None,
    "Message serde of every stream of the system that sets none itself.", component=_C)
SYSTEM_KEY_SERDE = declare(
    "systems.<system>.samza.key.serde", str, None,
    "System-wide default key serde (Samza's older form), used after the stream-level "
    "settings; unset everywhere means keys stay bytes.", component=_C)
SYSTEM_MSG_SERDE = declare(
    "systems.<system>.samza.msg.serde", str, None,
    "System-wide default message serde (Samza's older form), used after the stream-level "
    "settings; unset everywhere means messages stay bytes.", component=_C)

FailedRecord = Callable[[IncomingMessageEnvelope, Exception], IncomingMessageEnvelope]
"""``failed(raw_envelope, error)``: what an envelope factory returns for a record that does not
deserialize (the consumer multiplexer keeps the error and raises or drops it in order)."""

NO_SERDE = "bytes"
"""The serde name reported for a stream without a serde: keys or messages stay ``bytes``."""


def _serde_from_name(name: str, config: Config, key: str | None):
    # Imported late: stores.serdes is the storage core's serde registry. Unknown names raise
    # ConfigError naming ``key`` (the key that chose the serde) and where it was set.
    from weir.stores.serdes import serde_from_name
    return serde_from_name(name, config, key=key)


def _resolve(config: Config, ss: SystemStream, prop: str, system_key) -> tuple[str | None, str | None]:
    """``(serde name, config key)`` for one of ``samza.key.serde``/``samza.msg.serde``."""
    found = stream_property_origin(config, ss, prop)
    if found is not None:
        return stream_property(config, ss, prop), found[0]
    key = system_key.key(system=ss.system)
    if key in config:
        return config.get_str(key), key
    return None, None


class WireFormat(Enum):
    """How a stream's records carry the bytes of its serdes."""

    PLAIN = "plain"
    """The key and message serdes' bytes as they are (every stream a user configures)."""
    INTERMEDIATE = "intermediate"
    """A type byte in front of the message (user message or control message) and null
    messages without one: Samza's intermediate-stream format (:mod:`weir.engine.control.serde`)."""


class StreamSerdesBase(ABC):
    """The seam of one stream's serdes, what the consumer multiplexer, the message collector,
    operators and tools call (docs/ARCHITECTURE.md, "Seams"). Every implementation derives
    from it and sets the attributes; the optional capabilities have their defaults here:

    - ``system_stream``, ``key_serde_name``, ``msg_serde_name`` (:data:`NO_SERDE` for bytes);
    - ``key_serde`` / ``msg_serde``: the store serdes (:class:`~weir.stores.serdes.SerdeBase`)
      applied to keys and messages, None for *bytes as they are* (default None: bytes);
      an intermediate stream's are the user serdes inside its wire format;
    - ``wire_format``: :class:`WireFormat` (default :attr:`WireFormat.PLAIN`);
    - ``is_passthrough``: True when ``deserialize`` hands every envelope back unchanged, so a
      consumer may skip it (default False: call it);
    - ``deserialize(envelope)``, ``serialize(envelope)``, ``serialize_key(key)``,
      ``serialize_message(message)``: required;
    - ``envelope_factory(failed)``: a function ``make(ssp, offset, key, message, timestamp,
      size)`` that builds, from a raw record, the envelope ``deserialize`` would return for
      it (what a consumer that ``takes_envelope_factory`` calls per record); a record that
      does not deserialize becomes ``failed(raw_envelope, error)``, ``error`` being what
      ``deserialize`` raises. Default: ``deserialize`` of the raw envelope.

    >>> serdes = StreamSerdes(SystemStream("filelog", "raw"))
    >>> isinstance(serdes, StreamSerdesBase), serdes.is_passthrough, serdes.wire_format.value
    (True, True, 'plain')
    """

    __slots__ = ()

    system_stream: SystemStream
    key_serde_name: str
    msg_serde_name: str
    key_serde: SerdeBase | None = None
    msg_serde: SerdeBase | None = None
    wire_format: WireFormat = WireFormat.PLAIN

    @property
    def is_passthrough(self) -> bool:
        return False

    @abstractmethod
    def deserialize(self, envelope: IncomingMessageEnvelope) -> IncomingMessageEnvelope: ...

    def envelope_factory(self, failed: FailedRecord) -> EnvelopeFactory:
        """See the class docstring; this default builds the raw envelope and deserializes
        it (a subclass builds the typed one directly where it can)."""
        deserialize, make = self.deserialize, IncomingMessageEnvelope

        def factory(ssp: SystemStreamPartition, offset: int, key: Any, message: Any,
                    timestamp: int, size: int) -> IncomingMessageEnvelope:
            envelope = make(ssp, offset, key, message, timestamp, size)
            try:
                return deserialize(envelope)
            except Exception as exc:  # noqa: BLE001 - the caller raises or drops it in order
                return failed(envelope, exc)

        return factory

    @abstractmethod
    def serialize_key(self, key: Any) -> bytes | None: ...

    @abstractmethod
    def serialize_message(self, message: Any) -> bytes | None: ...

    @abstractmethod
    def serialize(self, envelope: OutgoingMessageEnvelope) -> tuple[bytes | None, bytes | None]: ...


@dataclass(frozen=True, slots=True)
class StreamSerdes(StreamSerdesBase):
    """The key and message serdes of one stream. A ``None`` serde means *bytes as they are*.

    ``deserialize`` returns a new envelope with typed key and message (the same envelope when
    both serdes are bytes, or for a control envelope); ``None`` keys and messages (null keys,
    tombstones) stay ``None``. ``serialize`` gives the bytes to send for an outgoing envelope.

    ``deserialize`` is the consumers' per-message call: it is built once per stream for its
    pair of serdes (no serde checks per message; ``try`` costs nothing in CPython 3.11+).
    """

    system_stream: SystemStream
    key_serde: SerdeBase | None = None
    msg_serde: SerdeBase | None = None
    key_serde_name: str = NO_SERDE
    msg_serde_name: str = NO_SERDE
    deserialize: Callable[[IncomingMessageEnvelope], IncomingMessageEnvelope] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "deserialize", self._deserializer())

    def __reduce__(self):  # the built ``deserialize`` is a closure: rebuild it on unpickling
        return (type(self), (self.system_stream, self.key_serde, self.msg_serde,
                             self.key_serde_name, self.msg_serde_name))

    @property
    def is_passthrough(self) -> bool:
        return self.key_serde is None and self.msg_serde is None

    def _deserializer(self) -> Callable[[IncomingMessageEnvelope], IncomingMessageEnvelope]:
        """``deserialize``: the typed copy of an envelope; raises DeserializationError
        naming SSP and offset."""
        if self.is_passthrough:
            return _same_envelope
        key_from = None if self.key_serde is None else self.key_serde.from_bytes
        msg_from = None if self.msg_serde is None else self.msg_serde.from_bytes
        key_name, msg_name, failure = self.key_serde_name, self.msg_serde_name, self._failure
        make, message_kind = IncomingMessageEnvelope, EnvelopeKind.MESSAGE

        def deserialize(envelope: IncomingMessageEnvelope) -> IncomingMessageEnvelope:
            if envelope.kind is not message_kind:
                return envelope
            key, message = envelope.key, envelope.message
            if key is not None and key_from is not None:
                try:
                    key = key_from(key)
                except Exception as exc:
                    raise failure("key", key_name, envelope, exc) from exc
            if message is not None and msg_from is not None:
                try:
                    message = msg_from(message)
                except Exception as exc:
                    raise failure("message", msg_name, envelope, exc) from exc
            return make(envelope.ssp, envelope.offset, key, message, envelope.timestamp,
                        envelope.size, message_kind)

        return deserialize

    def envelope_factory(self, failed: FailedRecord) -> EnvelopeFactory:
        """The typed envelope of a raw record built at once (no raw envelope, no copy): the
        file log calls it per record. A key or message that does not deserialize gives
        ``failed(raw_envelope, DeserializationError)``, the error ``deserialize`` raises."""
        make = IncomingMessageEnvelope
        if self.is_passthrough:
            return make
        key_from = None if self.key_serde is None else self.key_serde.from_bytes
        msg_from = None if self.msg_serde is None else self.msg_serde.from_bytes
        key_name, msg_name, failure = self.key_serde_name, self.msg_serde_name, self._failure

        def bad(what: str, serde: str, ssp: SystemStreamPartition, offset: int, key: Any,
                message: Any, timestamp: int, size: int,
                exc: Exception) -> IncomingMessageEnvelope:
            raw = make(ssp, offset, key, message, timestamp, size)
            error = failure(what, serde, raw, exc)
            error.__cause__ = exc
            return failed(raw, error)

        def factory(ssp, offset, key, message, timestamp, size):
            typed_key = key
            if key is not None and key_from is not None:
                try:
                    typed_key = key_from(key)
                except Exception as exc:  # noqa: BLE001 - delivered as a failed record
                    return bad("key", key_name, ssp, offset, key, message, timestamp, size, exc)
            if message is None or msg_from is None:
                return make(ssp, offset, typed_key, message, timestamp, size)
            try:
                return make(ssp, offset, typed_key, msg_from(message), timestamp, size)
            except Exception as exc:  # noqa: BLE001 - delivered as a failed record
                return bad("message", msg_name, ssp, offset, key, message, timestamp, size, exc)

        return factory

    def _failure(self, what: str, serde: str, envelope: IncomingMessageEnvelope,
                 exc: Exception) -> DeserializationError:
        return DeserializationError(
            f"cannot deserialize the {what} with serde '{serde}' ({type(exc).__name__}: {exc})",
            ssp=envelope.ssp, offset=envelope.offset)

    def serialize_key(self, key: Any) -> bytes | None:
        return self._to_bytes(key, self.key_serde, self.key_serde_name, "key")

    def serialize_message(self, message: Any) -> bytes | None:
        return self._to_bytes(message, self.msg_serde, self.msg_serde_name, "message")

    def serialize(self, envelope: OutgoingMessageEnvelope) -> tuple[bytes | None, bytes | None]:
        """``(key_bytes, message_bytes)`` of an outgoing envelope; raises SerdeError naming the
        stream and serde."""
        return self.serialize_key(envelope.key), self.serialize_message(envelope.message)

    def _to_bytes(self, obj: Any, serde: Any, name: str, what: str) -> bytes | None:
        if obj is None:
            return None
        if serde is None:
            if type(obj) is bytes:
                return obj
            if isinstance(obj, (bytearray, memoryview)):
                return bytes(obj)
            prop = "key" if what == "key" else "msg"
            raise SerdeError(
                f"stream '{self.system_stream}' has no {what} serde, so its {what} must be "
                f"bytes, got {type(obj).__name__}; set "
                f"systems.{self.system_stream.system}.streams.{self.system_stream.stream}"
                f".samza.{prop}.serde (e.g. json or string)")
        try:
            return serde.to_bytes(obj)
        except Exception as exc:
            raise SerdeError(
                f"stream '{self.system_stream}': cannot serialize the {what} "
                f"{_short_repr(obj)} with serde '{name}' ({type(exc).__name__}: {exc})") from exc


def _same_envelope(envelope: IncomingMessageEnvelope) -> IncomingMessageEnvelope:
    """The deserializer of a stream without serdes: bytes as they are."""
    return envelope


def _short_repr(obj: Any, limit: int = 80) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def stream_serdes(config: Config, ss: SystemStream) -> StreamSerdes:
    """Build the serdes of ``ss`` from config. An unknown serde name raises ConfigError
    naming the key that chose it and where it was set."""
    serdes: dict[str, tuple[Any, str]] = {}
    for what, prop, system_key in (("key", "samza.key.serde", SYSTEM_KEY_SERDE),
                                   ("msg", "samza.msg.serde", SYSTEM_MSG_SERDE)):
        name, key = _resolve(config, ss, prop, system_key)
        if not name:
            serdes[what] = (None, NO_SERDE)
            continue
        serdes[what] = (_serde_from_name(name, config, key), name)
    return StreamSerdes(ss, serdes["key"][0], serdes["msg"][0], serdes["key"][1], serdes["msg"][1])


class SerdeManager:
    """The serdes of every stream of a job, built on first use and cached.

    ``deserialize(envelope)`` / ``serialize(outgoing)`` pick the stream's serdes from the
    envelope, so the consumer multiplexer and the message collector need one object.
    """

    __slots__ = ("_config", "_cache")

    def __init__(self, config: Config):
        self._config = config
        self._cache: dict[SystemStream, StreamSerdesBase] = {}

    def for_stream(self, ss: SystemStream) -> StreamSerdesBase:
        """The serdes of ``ss``; an intermediate stream (``streams.<id>.samza.intermediate``)
        gets the in-band wire format around them (``weir.engine.control.serde``)."""
        serdes = self._cache.get(ss)
        if serdes is None:
            ss = SystemStream(*ss)
            serdes = stream_serdes(self._config, ss)
            from weir.engine.control.settings import is_intermediate
            if is_intermediate(self._config, ss):
                from weir.engine.control.serde import IntermediateStreamSerdes
                serdes = IntermediateStreamSerdes(serdes)
            self._cache[ss] = serdes
        return serdes

    def deserialize(self, envelope: IncomingMessageEnvelope) -> IncomingMessageEnvelope:
        ssp = envelope.ssp
        return self.for_stream(SystemStream(ssp.system, ssp.stream)).deserialize(envelope)

    def serialize(self, envelope: OutgoingMessageEnvelope) -> tuple[bytes | None, bytes | None]:
        return self.for_stream(envelope.system_stream).serialize(envelope)
