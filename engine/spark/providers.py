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

A provider opens the bytes engine of one store of one local replica. Built in:

========  ===================================================================================
rocksdb   RocksDB (rocksdict), write-ahead log on: a replica survives the kill of its Python
          worker without a sync per batch, and the next worker adopts it
lmdb      LMDB, commits not fsynced (the checkpoint's versions are the durable copy)
memory    a sorted dict; the replica lives as long as its Python worker
========  ===================================================================================

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

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.stores.config import Config
from weir.stores.engines._base import BytesEngine
from weir.stores.engines.lmdb import LMDBEngine, LMDBOptions
from weir.stores.engines.memory import MemoryEngine
from weir.stores.engines.rocksdb import RocksDBEngine, RocksDBOptions
from weir.stores.errors import ConfigError
from weir.stores.spec import STORE_FACTORY, EngineKind, StoreSpec

__all__ = ["StateProvider", "StateStoreSpec", "register_state_provider",
           "unregister_state_provider", "state_provider", "state_providers", "store_specs"]

Opener = Callable[[str, Path, "StoreSpec | None"], BytesEngine]


@dataclass(frozen=True)
class StateProvider:
    """A named way to open a replica's bytes engine: ``open(store, directory, spec)``.
    ``persistent`` says whether the engine's files outlive the process (a new Python worker
    can then adopt the replica instead of rebuilding it)."""

    name: str
    open: Opener
    persistent: bool = True
    description: str = ""


def _open_rocksdb(store: str, directory: Path, spec: StoreSpec | None) -> BytesEngine:
    options = spec.rocksdb if spec is not None and spec.rocksdb is not None else RocksDBOptions()
    return RocksDBEngine(store, directory, options, logged=False)


def _open_lmdb(store: str, directory: Path, spec: StoreSpec | None) -> BytesEngine:
    options = spec.lmdb if spec is not None and spec.lmdb is not None else LMDBOptions()
    return LMDBEngine(store, directory, dataclasses.replace(options, sync=False))


def _open_memory(store: str, directory: Path, spec: StoreSpec | None) -> BytesEngine:
    return MemoryEngine(store)


_BUILTIN = {
    "rocksdb": StateProvider("rocksdb", _open_rocksdb, True,
                             "RocksDB (rocksdict); WAL on, so a killed worker's replica is adopted"),
    "lmdb": StateProvider("lmdb", _open_lmdb, True,
                          "LMDB; fast point reads, commits not fsynced (versions are durable)"),
    "memory": StateProvider("memory", _open_memory, False,
                            "a sorted dict; rebuilt from the checkpoint in every new worker"),
}
_PROVIDERS: dict[str, StateProvider] = dict(_BUILTIN)
_ALIASES = {"in-memory": "memory", "inmemory": "memory",
            "org.apache.samza.storage.kv.rocksdbkeyvaluestorageenginefactory": "rocksdb",
            "org.apache.samza.storage.kv.inmemory.inmemorykeyvaluestorageenginefactory": "memory"}


def register_state_provider(name: str, open: Opener, *, persistent: bool = True,
                            description: str = "") -> StateProvider:
    """Register ``open(store, directory, spec) -> BytesEngine`` under ``name``. The module
    that registers must be imported in the Python workers too (PySpark pickles the operator,
    not the registry): register at import time of a module the operator's function uses."""
    key = name.strip().lower()
    if not key:
        raise ValueError("a state provider needs a name")
    if key in _BUILTIN:
        raise ValueError(f"state provider {key!r} is built in and cannot be replaced")
    provider = StateProvider(key, open, persistent, description)
    _PROVIDERS[key] = provider
    return provider


def unregister_state_provider(name: str) -> None:
    key = name.strip().lower()
    if key in _BUILTIN:
        raise ValueError(f"state provider {key!r} is built in")
    _PROVIDERS.pop(key, None)


def state_provider(name: str, *, key: str | None = None, origin: str | None = None) -> StateProvider:
    """The provider called ``name`` (case-insensitive; Samza's factory class names of the
    built-in engines are accepted); ConfigError naming ``key`` when there is none."""
    low = name.strip().lower()
    provider = _PROVIDERS.get(_ALIASES.get(low, low))
    if provider is None:
        raise ConfigError(f"unknown state provider {name!r}: expected one of "
                          f"{', '.join(sorted(_PROVIDERS))} (register others with "
                          f"weir.spark.register_state_provider)", key=key, origin=origin)
    return provider


def state_providers() -> list[StateProvider]:
    """Every registered provider, built-ins first."""
    return [_PROVIDERS[n] for n in _BUILTIN] + sorted(
        (p for n, p in _PROVIDERS.items() if n not in _BUILTIN), key=lambda p: p.name)


@dataclass(frozen=True)
class StateStoreSpec:
    """One store of a Spark operator: its provider and its :class:`StoreSpec` (serdes, engine
    options; for a provider that is not built in, ``spec.engine`` is a placeholder)."""

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
        values[factory_key] = provider.name if provider.name in EngineKind._value2member_map_ \
            else "memory"
        values.setdefault(f"stores.{name}.key.serde", "bytes")
        values.setdefault(f"stores.{name}.msg.serde", "bytes")
        origins = {k: o for k in values if (o := config.origin(k))}
        spec = StoreSpec.from_config(Config({**{k: v for k, v in config.items()
                                                if not k.startswith("stores.")}, **values},
                                            origins=origins), name)
        out.append(StateStoreSpec(name, provider.name, spec))
    return out
