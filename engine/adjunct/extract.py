"""What goes into an adjunct store: key/value extractors, projection, seal markers, errors.

By default the store holds the envelope's key and message as they are (typed by the input
stream's serdes). ``stores.<s>.adstore.key.value.extractor.factory`` names a user factory;
``stores.<s>.adstore.projection`` keeps only some fields of mapping values. A message whose
key the extractor rejects (it raises, or returns None) stops the container with an
:class:`AdjunctKeyError` naming store, stream, partition and offset, or is dropped and
counted (``stores.<s>.adstore.rejected.keys=drop``).

Example::

    >>> from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
    >>> env = IncomingMessageEnvelope(SystemStreamPartition("log", "p", 0), 7, "sku-1",
    ...                               {"name": "pen", "price": 2, "stock": 40})
    >>> x = Projection(EnvelopeExtractor(), ("name", "price"))
    >>> x.get_key(env), x.get_value(env)
    ('sku-1', {'name': 'pen', 'price': 2})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from weir.stores.adjunct import (ADSTORE_EXTRACTOR_FACTORY, EMPTY_SEAL_KEY, SEAL_KEY,
                                 AdjunctSpec, SealKind)
from weir.stores.config import Config
from weir.stores.errors import ConfigError

from weir.engine.errors import EngineError
from weir.engine.model import SystemStreamPartition
from weir.engine.systems.registry import _import_target

__all__ = ["AdjunctKeyError", "AdjunctValueError", "EnvelopeExtractor", "KeyValueExtractor",
           "Projection", "is_seal", "seal_kind", "make_extractor", "SEAL_KEY_BYTES",
           "EMPTY_SEAL_KEY_BYTES"]

SEAL_KEY_BYTES = SEAL_KEY.encode()
EMPTY_SEAL_KEY_BYTES = EMPTY_SEAL_KEY.encode()


def seal_kind(key: Any, message: Any) -> SealKind | None:
    """The kind of a seal marker (a reserved key, typed or bytes, with a null message); None
    for any other message."""
    if message is not None:
        return None
    if key == SEAL_KEY or key == SEAL_KEY_BYTES:
        return SealKind.DATASET
    if key == EMPTY_SEAL_KEY or key == EMPTY_SEAL_KEY_BYTES:
        return SealKind.EMPTY
    return None


def is_seal(key: Any, message: Any) -> bool:
    """True for a seal marker (either kind, :func:`seal_kind`)."""
    return seal_kind(key, message) is not None


class KeyValueExtractor(Protocol):
    """What ``stores.<s>.adstore.key.value.extractor.factory`` returns."""

    def get_key(self, envelope: Any) -> Any: ...
    def get_value(self, envelope: Any) -> Any: ...


class EnvelopeExtractor:
    """The default: the envelope's key and message."""

    __slots__ = ()

    def get_key(self, envelope: Any) -> Any:
        return envelope.key

    def get_value(self, envelope: Any) -> Any:
        return envelope.message


class Projection:
    """Keeps only ``fields`` of the (mapping) values ``inner`` extracts; a None value (a
    delete) stays None."""

    __slots__ = ("inner", "fields")

    def __init__(self, inner: KeyValueExtractor, fields: tuple[str, ...]):
        self.inner, self.fields = inner, tuple(fields)

    def get_key(self, envelope: Any) -> Any:
        return self.inner.get_key(envelope)

    def get_value(self, envelope: Any) -> Any:
        value = self.inner.get_value(envelope)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise TypeError(f"projection needs a mapping value, got {type(value).__name__}")
        return {f: value[f] for f in self.fields if f in value}


class AdjunctKeyError(EngineError):
    """An adjunct store's extractor rejected the key of a message. Names the store, stream,
    partition and offset, and the two ways out."""

    def __init__(self, store: str, ssp: SystemStreamPartition, offset: int, reason: str):
        super().__init__(
            f"adjunct store '{store}': the key extractor rejected the message at "
            f"{ssp.system}.{ssp.stream} partition {ssp.partition} offset {offset}: {reason}. "
            f"Fix the message's producer or the extractor, or set "
            f"stores.{store}.adstore.rejected.keys=drop to skip and count such messages")
        self.store, self.ssp, self.offset = store, ssp, offset


class AdjunctValueError(EngineError):
    """An adjunct store's extractor or projection failed on the value of a message."""

    def __init__(self, store: str, ssp: SystemStreamPartition, offset: int, reason: str):
        super().__init__(
            f"adjunct store '{store}': extracting the value of the message at "
            f"{ssp.system}.{ssp.stream} partition {ssp.partition} offset {offset} failed: "
            f"{reason}. Fix the message's producer, the extractor or "
            f"stores.{store}.adstore.projection")
        self.store, self.ssp, self.offset = store, ssp, offset


def make_extractor(spec: AdjunctSpec, config: Config) -> KeyValueExtractor:
    """The extractor of one adjunct store: the user factory's (called as
    ``Factory(config, store)``) or :class:`EnvelopeExtractor`, under the projection."""
    extractor: Any = EnvelopeExtractor()
    if spec.extractor_factory is not None:
        key = ADSTORE_EXTRACTOR_FACTORY.key(store=spec.store)
        try:
            factory = _import_target(spec.extractor_factory)
            extractor = factory(config, spec.store)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of user code names the key
            raise ConfigError(f"cannot build the extractor {spec.extractor_factory!r}: "
                              f"{type(exc).__name__}: {exc}", key=key,
                              origin=config.origin(key)) from exc
        missing = [m for m in ("get_key", "get_value") if not callable(getattr(extractor, m, None))]
        if missing:
            raise ConfigError(f"{spec.extractor_factory!r} returned {type(extractor).__name__}, "
                              f"which has no {' or '.join(missing)}", key=key,
                              origin=config.origin(key))
    if spec.projection:
        extractor = Projection(extractor, spec.projection)
    return extractor

