"""The system registry: from ``systems.<name>.factory`` to admins, consumers and producers.

``systems.<name>.factory`` (Samza's ``systems.<name>.samza.factory`` is accepted too) is one of

- ``filelog``: the durable file log (:class:`weir.engine.systems.filelog.FileLogSystemFactory`);
- ``memory``: the in-process memory system (:class:`weir.engine.systems.memory.MemorySystemFactory`;
  Samza's ``org.apache.samza.system.inmemory.InMemorySystemFactory`` means the same);
- Samza's ``org.apache.samza.system.kafka.KafkaSystemFactory``: the file log (Weir has no
  Kafka client; ``weir config show`` and ``weir run`` say so in a note);
- ``module:Class`` or a dotted ``package.module.Class`` naming a class (instantiated without
  arguments) or a factory object with ``get_admin``/``get_consumer``/``get_producer``: a
  :class:`~weir.engine.systems.api.SystemFactoryBase`, or a duck-typed factory adapted once
  here (:mod:`weir.engine.systems.foreign`).

Built-in defaults: a system *named* ``filelog`` or ``memory`` with no factory configured uses
the built-in of that name, so ``weir log --root DIR`` and small test configs need no
``systems.filelog.factory`` line. Any other system must configure its factory.

Admins are created once per system and cached; every call of :meth:`SystemRegistry.consumer`
or :meth:`SystemRegistry.producer` makes a new one (the caller starts and stops it).

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.model import SystemStream
    >>> from weir.engine.systems.api import StreamSpec
    >>> reg = SystemRegistry(Config({"systems.mem-reg-doc.factory": "memory"}))
    >>> reg.admin("mem-reg-doc").create_stream(StreamSpec("clicks", 4))
    True
    >>> reg.partition_counts([SystemStream("mem-reg-doc", "clicks")])
    {SystemStream(system='mem-reg-doc', stream='clicks'): 4}
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable
from typing import Any

from weir.stores.config import Config, ConfigError, declare

from weir.engine.errors import StreamNotFoundError
from weir.engine.model import SystemStream, SystemStreamPartition
from weir.engine.config.serdes import SerdeManager, StreamSerdesBase
from weir.engine.systems.api import (PartitionMetadata, SystemAdminBase, SystemConsumerBase,
                                     SystemFactoryBase, SystemProducerBase)
from weir.engine.systems.foreign import adapt_factory

__all__ = [
    "SYSTEM_FACTORY",
    "BUILTIN_FACTORIES",
    "process_local_systems",
    "DEFAULT_SYSTEMS",
    "SystemRegistry",
    "resolve_factory",
    "configured_systems",
]

SYSTEM_FACTORY = declare(
    "systems.<system>.factory", str, None,
    "Factory of the system: `filelog`, `memory`, `module:Class` or a dotted class name. "
    "Systems named `filelog` or `memory` default to the built-in of that name.",
    component="systems", aliases=("systems.<system>.samza.factory",))

BUILTIN_FACTORIES: dict[str, str] = {
    "filelog": "weir.engine.systems.filelog:FileLogSystemFactory",
    "memory": "weir.engine.systems.memory:MemorySystemFactory",
    # Samza's in-memory system is our memory system.
    "org.apache.samza.system.inmemory.InMemorySystemFactory": "weir.engine.systems.memory:MemorySystemFactory",
    # Samza's Kafka system is the file log (a config note says so: engine/config/samza_keys.py).
    "org.apache.samza.system.kafka.KafkaSystemFactory": "weir.engine.systems.filelog:FileLogSystemFactory",
}
"""Short names (and Samza class names) of the built-in system factories."""

DEFAULT_SYSTEMS: tuple[str, ...] = ("filelog", "memory")
"""System names that resolve to the built-in of the same name without any config."""

_SAMZA_FACTORY_ALIAS = "systems.<system>.samza.factory"


def _factory_key(config: Config, system: str) -> str | None:
    """The concrete key that sets the system's factory, if any."""
    for name in (SYSTEM_FACTORY.key(system=system), _SAMZA_FACTORY_ALIAS.replace("<system>", system)):
        if name in config:
            return name
    return None


def configured_systems(config: Config) -> list[str]:
    """Names of the systems that have a factory configured, sorted."""
    names = set()
    for key in config:
        if key.startswith("systems.") and (key.endswith(".factory")):
            middle = key[len("systems."):-len(".factory")]
            if middle.endswith(".samza"):
                middle = middle[:-len(".samza")]
            if middle and "." not in middle:
                names.add(middle)
    return sorted(names)


def process_local_systems(config: Config, named: Iterable[str] = ()) -> list[str]:
    """The systems of ``config`` (configured ones and ``named``) whose streams live in one
    process's memory (their factory says ``process_local = True``, as the memory system's
    does): a job that uses one cannot spread its tasks over processes."""
    out = []
    for system in sorted(set(configured_systems(config)) | set(named)):
        try:
            factory = resolve_factory(config, system)
        except ConfigError:
            continue  # reported where the system is used
        if factory.process_local:
            out.append(system)
    return out


def _import_target(spec: str) -> Any:
    """Import ``module:attr`` or ``package.module.Attr``; raise ImportError/AttributeError."""
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
    else:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"{spec!r} is neither `module:Class` nor `package.module.Class`")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_factory(config: Config, system: str) -> SystemFactoryBase:
    """The factory of ``system`` (a duck-typed one adapted: :func:`adapt_factory`). Raises
    ConfigError naming the key and where it was set when the factory is unset (for a
    non-default system), unknown or cannot be imported."""
    key = _factory_key(config, system)
    if key is None:
        if system in DEFAULT_SYSTEMS:
            spec, origin = BUILTIN_FACTORIES[system], None
        else:
            raise ConfigError(
                f"system '{system}' has no factory; set it to filelog, memory or module:Class",
                key=SYSTEM_FACTORY.key(system=system))
    else:
        origin = config.origin(key)
        raw = config.get_str(key) or ""
        spec = BUILTIN_FACTORIES.get(raw, BUILTIN_FACTORIES.get(raw.lower(), raw))
    try:
        target = _import_target(spec)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"cannot load system factory {spec!r} for system '{system}' "
            f"({type(exc).__name__}: {exc}); use filelog, memory or an importable "
            f"module:Class", key=key or SYSTEM_FACTORY.key(system=system), origin=origin) from None
    if isinstance(target, type):
        try:
            factory = target()
        except Exception as exc:
            raise ConfigError(
                f"system factory {spec!r} for system '{system}' cannot be created without "
                f"arguments ({type(exc).__name__}: {exc})",
                key=key or SYSTEM_FACTORY.key(system=system), origin=origin) from exc
    else:
        factory = target
    missing = [m for m in ("get_admin", "get_consumer", "get_producer")
               if not callable(getattr(factory, m, None))]
    if missing:
        raise ConfigError(
            f"system factory {spec!r} for system '{system}' lacks {', '.join(missing)}; "
            f"a system factory implements engine.systems.api.SystemFactory",
            key=key or SYSTEM_FACTORY.key(system=system), origin=origin)
    return adapt_factory(factory, system, key=key or SYSTEM_FACTORY.key(system=system),
                         origin=origin)


class SystemRegistry:
    """The systems of one job: factories resolved from config, admins cached per system.

    Thread-safe for admin lookups; consumers and producers are handed out new and owned by
    the caller.
    """

    def __init__(self, config: Config):
        self.config = config if isinstance(config, Config) else Config(config)
        self._factories: dict[str, SystemFactoryBase] = {}
        self._admins: dict[str, SystemAdminBase] = {}
        self._lock = threading.Lock()
        self.serdes = SerdeManager(self.config)

    # -- systems -------------------------------------------------------------------------
    def systems(self) -> list[str]:
        """Configured system names (those with a ``systems.<name>.factory``)."""
        return configured_systems(self.config)

    def factory(self, system: str) -> SystemFactoryBase:
        with self._lock:
            factory = self._factories.get(system)
            if factory is None:
                factory = self._factories[system] = resolve_factory(self.config, system)
            return factory

    def admin(self, system: str) -> SystemAdminBase:
        """The system's admin, created on first use and cached."""
        admin = self._admins.get(system)
        if admin is not None:
            return admin
        factory = self.factory(system)
        with self._lock:
            admin = self._admins.get(system)
            if admin is None:
                admin = self._admins[system] = factory.get_admin(system, self.config)
            return admin

    def admin_for(self, ss: SystemStream | SystemStreamPartition) -> SystemAdminBase:
        return self.admin(ss.system)

    def consumer(self, system: str) -> SystemConsumerBase:
        """A new consumer of ``system`` (register, start, poll, stop it yourself)."""
        return self.factory(system).get_consumer(system, self.config)

    def producer(self, system: str) -> SystemProducerBase:
        """A new producer of ``system`` (register, start, stop it yourself)."""
        return self.factory(system).get_producer(system, self.config)

    def serdes_for(self, ss: SystemStream) -> StreamSerdesBase:
        """The key/message serdes of a stream (see :mod:`weir.engine.config.serdes`)."""
        return self.serdes.for_stream(ss)

    def stream_not_found(self, system: str, stream: str, hint: str = "") -> StreamNotFoundError:
        """The error for a missing stream of ``system``, naming where it was looked for (the
        admin's ``root`` directory, for systems that keep streams in one)."""
        root = self.admin(system).root
        where = f"{root} (systems.{system}.root)" if root is not None else None
        if not hint:
            create = f"weir log create {stream}" + (f" --root {root}" if where else "")
            hint = f"create it with `{create}` or set the job's inputs right"
        return StreamNotFoundError(system, stream, hint, where=where)

    # -- batched admin calls -------------------------------------------------------------
    def partition_counts(self, streams: Iterable[SystemStream]) -> dict[SystemStream, int]:
        """Partition count of each stream, one ``admin.partition_counts`` call per system. A
        missing stream raises StreamNotFoundError."""
        out: dict[SystemStream, int] = {}
        for system, group in _group_by_system(streams).items():
            counts = self.admin(system).partition_counts([ss.stream for ss in group])
            for ss in group:
                if ss.stream not in counts:
                    raise self.stream_not_found(system, ss.stream)
                out[ss] = counts[ss.stream]
        return out

    def metadata(self, ssps: Iterable[SystemStreamPartition]) -> dict[SystemStreamPartition, PartitionMetadata]:
        """Metadata of many SSPs: one ``admin.metadata`` call per system."""
        out: dict[SystemStreamPartition, PartitionMetadata] = {}
        by_system: dict[str, list[SystemStreamPartition]] = {}
        for ssp in ssps:
            by_system.setdefault(ssp.system, []).append(ssp)
        for system, group in by_system.items():
            out.update(self.admin(system).metadata(group))
        return out

    def stream_metadata(self, ss: SystemStream) -> dict[int, PartitionMetadata]:
        """Metadata of every partition of one stream, by partition."""
        admin = self.admin(ss.system)
        if not admin.stream_exists(ss.stream):
            raise self.stream_not_found(ss.system, ss.stream)
        ssps = [SystemStreamPartition(ss.system, ss.stream, p)
                for p in range(admin.partition_count(ss.stream))]
        return {ssp.partition: md for ssp, md in admin.metadata(ssps).items()}


def _group_by_system(streams: Iterable[SystemStream]) -> dict[str, list[SystemStream]]:
    grouped: dict[str, list[SystemStream]] = {}
    for ss in streams:
        ss = SystemStream(*ss)
        group = grouped.setdefault(ss.system, [])
        if ss not in group:
            group.append(ss)
    return grouped
