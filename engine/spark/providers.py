"""Weir's registry of state providers, and the stores of a Spark operator.

**What "registered as a Spark state provider" means here.** Spark's own state store SPI
(``spark.sql.streaming.stateStore.providerClass``) names a JVM class that Spark instantiates by
reflection inside the executor JVM; it cannot name Python code. And ``transformWithState`` /
``transformWithStateInPandas`` accept only Spark's own ``RocksDBStateStoreProvider``, compared by
exact class name (a subclass is refused). Both were re-checked on PySpark 4.3.0
(docs/SPARK.md, "What registered as a Spark state provider means"). So Weir registers its stores as the state
providers of *its own* Spark operators, by name, in this registry; the operators run inside the
Spark plan (``repartition`` + ``mapInArrow``) and keep their state in the query's checkpoint
(docs/SPARK.md).

A provider is a store engine of Weir's one engine registry
(:mod:`weir.stores.engines.registry`, docs/ENGINES.md) opened for a local replica
(:attr:`~weir.stores.engines.registry.Durability.PROCESS`: the replica must survive the kill of
its Python worker, not of the machine, since the checkpoint's versions are the durable copy).
Built in:

========  ===================================================================================
rocksdb   RocksDB (rocksdict), write-ahead log on: a replica survives the kill of its Python
          worker without a sync per batch, and the next worker adopts it
lmdb      LMDB, commits not fsynced (the checkpoint's versions are the durable copy)
memory    a sorted dict; the replica lives as long as its Python worker
========  ===================================================================================

Every engine registered with ``register_engine`` is a provider too, under the same names and
aliases, and a provider registered here is an engine a job's ``stores.<s>.factory`` can name.

A store picks its provider with ``stores.<s>.factory`` (as in a job), else the session's
``spark.weir.state.provider``. :func:`register_state_provider` adds one::

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> provider = register_state_provider(
    ...     "scratch", lambda store, directory, spec: MemoryEngine(store), persistent=False,
    ...     description="a test engine")
    >>> state_provider("scratch").persistent
    False
    >>> unregister_state_provider("scratch")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.stores.config import Config
from weir.stores.engines._base import BytesEngine
from weir.stores.engines.registry import (Capability, Durability, StoreEngine, register_engine,
                                          store_engine, store_engines, unregister_engine)
from weir.stores.spec import STORE_FACTORY, StoreSpec

__all__ = ["StateProvider", "StateStoreSpec", "register_state_provider",
           "unregister_state_provider", "state_provider", "state_providers", "store_specs"]

Opener = Callable[[str, Path, "StoreSpec | None"], BytesEngine]


@dataclass(frozen=True)
class StateProvider:
    """A registered store engine as Spark sees it: ``open(store, directory, spec)`` opens a
    replica's bytes engine. ``persistent`` says whether the engine's files outlive the process
    (a new Python worker can then adopt the replica instead of rebuilding it)."""

    engine: StoreEngine

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def persistent(self) -> bool:
        return self.engine.persistent

    @property
    def description(self) -> str:
        return self.engine.description

    def open(self, store: str, directory: Path, spec: StoreSpec | None) -> BytesEngine:
        """The replica's engine of ``store`` in ``directory`` (``spec``: its options)."""
        if spec is None:
            spec = StoreSpec(store, self.engine, "bytes", "bytes")
        return self.engine.open(spec, Path(directory), Durability.PROCESS)


@dataclass(frozen=True)
class _ProviderOpener:
    """A provider's ``open(store, directory, spec)`` as an engine's opener."""

    open: Opener

    def __call__(self, spec: StoreSpec, directory: Path, durability: Durability) -> BytesEngine:
        return self.open(spec.name, directory, spec)


def register_state_provider(name: str, open: Opener, *, persistent: bool = True,
                            description: str = "") -> StateProvider:
    """Register ``open(store, directory, spec) -> BytesEngine`` under ``name``: a store engine
    of the one registry (docs/ENGINES.md), so ``stores.<s>.factory`` can name it in a job too.
    The module that registers must be imported in the Python workers too (PySpark pickles the
    operator, not the registry): register at import time of a module the operator's function
    uses."""
    key = name.strip().lower()
    if not key:
        raise ValueError("a state provider needs a name")
    engine = register_engine(StoreEngine(
        key, _ProviderOpener(open),
        capabilities=Capability.PERSISTENT if persistent else Capability.NONE,
        description=description))
    return StateProvider(engine)


def unregister_state_provider(name: str) -> None:
    unregister_engine(name)


def state_provider(name: str, *, key: str | None = None, origin: str | None = None) -> StateProvider:
    """The provider called ``name`` (case-insensitive; every name and alias of the engine
    registry, Samza's factory class names included); :class:`UnknownEngineError` (a
    ConfigError) naming ``key`` and the closest name when there is none."""
    return StateProvider(store_engine(name, key=key, origin=origin, what="state provider"))


def state_providers() -> list[StateProvider]:
    """Every registered provider, built-ins first."""
    return [StateProvider(engine) for engine in store_engines()]


@dataclass(frozen=True)
class StateStoreSpec:
    """One store of a Spark operator: its provider and its :class:`StoreSpec` (serdes, engine
    and its options)."""

    name: str
    provider: str
    spec: StoreSpec

    def describe(self) -> dict[str, str]:
        """What the operator's metadata records about the store."""
        return {"provider": self.provider, "key.serde": self.spec.key_serde,
                "msg.serde": self.spec.value_serde}


def store_specs(names: list[str] | tuple[str, ...], config: Config | Mapping[str, Any] | None,
                default_provider: str) -> list[StateStoreSpec]:
    """The specs of an operator's stores from ``stores.<s>.*`` keys of ``config``: a store's
    provider is its ``stores.<s>.factory``, else ``default_provider``; serdes default to
    ``bytes``. Unknown ``stores.<s>.*`` keys are refused (as in a job)."""
    config = config if isinstance(config, Config) else Config(config or {})
    out = []
    for name in names:
        factory_key = STORE_FACTORY.key(store=name)
        raw = config.get_str(factory_key) or default_provider
        origin = config.origin(factory_key) if factory_key in config else None
        provider = state_provider(raw, key=factory_key if factory_key in config else
                                  "spark.weir.state.provider", origin=origin)
        values = {k: v for k, v in config.items() if k.startswith(f"stores.{name}.")}
        values[factory_key] = provider.name
        values.setdefault(f"stores.{name}.key.serde", "bytes")
        values.setdefault(f"stores.{name}.msg.serde", "bytes")
        origins = {k: o for k in values if (o := config.origin(k))}
        spec = StoreSpec.from_config(Config({**{k: v for k, v in config.items()
                                                if not k.startswith("stores.")}, **values},
                                            origins=origins), name)
        out.append(StateStoreSpec(name, provider.name, spec))
    return out
