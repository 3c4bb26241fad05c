"""User systems that do not derive from the SPI bases, adapted where their factory is loaded.

A system factory named in config (``systems.<s>.factory=module:Class``) should derive from
:class:`~weir.engine.systems.api.SystemFactoryBase` and hand out admins, consumers and
producers derived from the other bases; then it overrides the optional capabilities it has.
One written to the bare ``Protocol`` s (duck typed, as before the bases existed) still works:
:func:`adapt_factory` wraps it once, in :func:`~weir.engine.systems.registry.resolve_factory`,
and every admin, consumer and producer it makes is wrapped in a class that forwards the
required methods and keeps the bases' defaults for the optional capabilities. To offer a
capability, derive from the base (docs/SYSTEMS.md, "Writing a system"): a duck-typed object
that defines one by name (a factory's ``process_local``, an admin's ``cleanup_policy``, ...)
is refused with a ``ConfigError`` naming the system, the capability and the base to derive
from, rather than having it silently ignored.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from weir.stores.config import ConfigError

from weir.engine.model import IncomingMessageEnvelope, OutgoingMessageEnvelope, SystemStreamPartition
from weir.engine.systems.api import (PartitionMetadata, StreamSpec, SystemAdmin, SystemAdminBase,
                                     SystemConsumer, SystemConsumerBase, SystemFactory,
                                     SystemFactoryBase, SystemProducer, SystemProducerBase)

__all__ = ["adapt_factory", "ForeignFactory", "ForeignAdmin", "ForeignConsumer",
           "ForeignProducer", "OPTIONAL_CAPABILITIES"]

OPTIONAL_CAPABILITIES: dict[type, tuple[str, ...]] = {
    SystemFactoryBase: ("process_local",),
    SystemAdminBase: ("root", "identities", "partition_counts", "cleanup_policy", "is_bounded",
                      "min_compaction_lag_ms", "stream_path", "describe", "list_streams",
                      "delete_stream", "rename_stream", "deletes_streams", "renames_streams"),
    SystemConsumerBase: ("set_isolation_level", "held_back_by", "takes_envelope_factory",
                         "set_envelope_factory"),
    SystemProducerBase: ("send_batch",),
}
"""The optional capabilities each base declares (``system``, which any admin may carry as its
name, is not among them): the names a duck-typed object must not define."""


def _refuse_ignored_capabilities(obj: object, base: type, system: str | None, *,
                                 key: str | None = None, origin: str | None = None) -> None:
    """Raise ConfigError (naming ``key`` set at ``origin``, by default the system's factory
    key) when ``obj`` (not derived from ``base``) defines an optional capability of ``base``
    by name: the adapter would ignore it."""
    defined = [name for name in OPTIONAL_CAPABILITIES[base] if hasattr(obj, name)]
    if defined:
        raise ConfigError(
            f"{type(obj).__qualname__} of system '{system}' defines {', '.join(defined)} but "
            f"does not derive from weir.engine.systems.api.{base.__name__}, so Weir would "
            f"ignore {'it' if len(defined) == 1 else 'them'}: derive it from "
            f"{base.__name__} (docs/SYSTEMS.md, 'Writing a system')",
            key=key or (None if system is None else f"systems.{system}.factory"),
            origin=origin)


def adapt_factory(factory: SystemFactory | SystemFactoryBase, system: str | None = None, *,
                  key: str | None = None, origin: str | None = None) -> SystemFactoryBase:
    """``factory`` itself when it derives from :class:`SystemFactoryBase`, else a
    :class:`ForeignFactory` over it (ConfigError naming ``key`` and ``origin`` if it defines
    a capability by name)."""
    if isinstance(factory, SystemFactoryBase):
        return factory
    _refuse_ignored_capabilities(factory, SystemFactoryBase, system, key=key, origin=origin)
    return ForeignFactory(factory)


class ForeignFactory(SystemFactoryBase):
    """A duck-typed factory; what it makes is adapted unless it derives from the bases."""


    def __init__(self, inner: SystemFactory):
        self.inner = inner

    def get_admin(self, system: str, config: Mapping[str, str]) -> SystemAdminBase:
        admin = self.inner.get_admin(system, config)
        if isinstance(admin, SystemAdminBase):
            return admin
        _refuse_ignored_capabilities(admin, SystemAdminBase, system)
        return ForeignAdmin(admin, system)

    def get_consumer(self, system: str, config: Mapping[str, str]) -> SystemConsumerBase:
        consumer = self.inner.get_consumer(system, config)
        if isinstance(consumer, SystemConsumerBase):
            return consumer
        _refuse_ignored_capabilities(consumer, SystemConsumerBase, system)
        return ForeignConsumer(consumer)

    def get_producer(self, system: str, config: Mapping[str, str]) -> SystemProducerBase:
        producer = self.inner.get_producer(system, config)
        if isinstance(producer, SystemProducerBase):
            return producer
        _refuse_ignored_capabilities(producer, SystemProducerBase, system)
        return ForeignProducer(producer)

    def __repr__(self) -> str:
        return f"ForeignFactory({self.inner!r})"


class ForeignAdmin(SystemAdminBase):
    """A duck-typed admin: the required methods forwarded, the optional capabilities the
    base's defaults; ``system`` is the name it was made for."""

    def __init__(self, inner: SystemAdmin, system: str):
        self.inner = inner
        self.system = system

    def metadata(self, ssps: Iterable[SystemStreamPartition]
                 ) -> dict[SystemStreamPartition, PartitionMetadata]:
        return self.inner.metadata(ssps)

    def partition_count(self, stream: str) -> int:
        return self.inner.partition_count(stream)

    def stream_exists(self, stream: str) -> bool:
        return self.inner.stream_exists(stream)

    def create_stream(self, spec: StreamSpec) -> bool:
        return self.inner.create_stream(spec)

    def offset_comparator(self, a: int, b: int) -> int:
        return self.inner.offset_comparator(a, b)

    def __repr__(self) -> str:
        return f"ForeignAdmin({self.inner!r})"


class ForeignConsumer(SystemConsumerBase):
    """A duck-typed consumer: the required methods forwarded (no transactions)."""


    def __init__(self, inner: SystemConsumer):
        self.inner = inner
        self.poll = inner.poll  # the hot path: no forwarding frame per poll

    def register(self, ssp: SystemStreamPartition, offset: int) -> None:
        self.inner.register(ssp, offset)

    def start(self) -> None:
        self.inner.start()

    def poll(self, ssps: Collection[SystemStreamPartition],  # type: ignore[no-redef]
             timeout: float) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        return self.inner.poll(ssps, timeout)

    def stop(self) -> None:
        self.inner.stop()

    def __repr__(self) -> str:
        return f"ForeignConsumer({self.inner!r})"


class ForeignProducer(SystemProducerBase):
    """A duck-typed producer: the required methods forwarded (``send_batch`` sends one
    envelope per record)."""

    def __init__(self, inner: SystemProducer):
        self.inner = inner
        self.send = inner.send  # the hot path: no forwarding frame per send

    def register(self, source: str) -> None:
        self.inner.register(source)

    def start(self) -> None:
        self.inner.start()

    def send(self, source: str, envelope: OutgoingMessageEnvelope) -> None:  # type: ignore[no-redef]
        self.inner.send(source, envelope)

    def flush(self, source: str) -> None:
        self.inner.flush(source)

    def stop(self) -> None:
        self.inner.stop()

    def __repr__(self) -> str:
        return f"ForeignProducer({self.inner!r})"
