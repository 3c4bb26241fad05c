"""Adjunct store bindings of a job, parsed once: :class:`AdjunctSettings`.

Each store with ``stores.<s>.adstore.input`` is *bound* to its stream: broadcast when the
stream is in ``task.broadcast.inputs`` (one store per container, shared by its tasks),
partitioned when it is in ``task.inputs`` (one store per task), bootstrapped when the stream
is marked ``samza.bootstrap=true``. The checks are the job's: a refused binding names the key
to fix and where it was set.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.stores.spec import StoreSpec
    >>> cfg = Config({"task.inputs": "log.clicks", "task.broadcast.inputs": "log.products#0",
    ...               "systems.log.streams.products.samza.bootstrap": "true",
    ...               "stores.products.factory": "memory", "stores.products.key.serde": "string",
    ...               "stores.products.msg.serde": "json",
    ...               "stores.products.adstore.input": "log.products"})
    >>> s = AdjunctSettings.from_config(cfg, [StoreSpec.from_config(cfg, "products")])
    >>> b = s.bindings[0]
    >>> b.spec.store, str(b.stream), b.broadcast, b.bootstrap
    ('products', 'log.products', True, True)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from weir.stores.adjunct import ADSTORE_INPUT, AdjunctSpec, adjunct_specs
from weir.stores.config import Config, declare
from weir.stores.engines.registry import engine_names
from weir.stores.errors import ConfigError
from weir.stores.spec import StoreSpec

from weir.engine.config.streams import broadcast_inputs, job_inputs, stream_property
from weir.engine.model import SystemStream

__all__ = ["AdjunctBinding", "AdjunctSettings", "JOB_ADSTORE_MANAGER_FACTORY"]

JOB_ADSTORE_MANAGER_FACTORY = declare(
    "job.adstore.manager.factory", str, None,
    "`module:Factory` building each task's adjunct data store manager: called as "
    "Factory(task_name, feeds, views) and returning an object with the methods of "
    "weir.engine.adjunct.AdjunctDataStoreManager (consumes, apply, views, flush, close, "
    "checkpoint_extras, wrap). Unset: AdjunctDataStoreManager itself.", component="adjunct")


@dataclass(frozen=True)
class AdjunctBinding:
    """One adjunct store bound to its input stream."""

    spec: AdjunctSpec
    stream: SystemStream
    broadcast: bool
    bootstrap: bool


@dataclass(frozen=True)
class AdjunctSettings:
    """Every adjunct binding of the job and the manager factory."""

    bindings: tuple[AdjunctBinding, ...] = ()
    manager_factory: str | None = None

    @property
    def names(self) -> frozenset[str]:
        """The adjunct stores' names (the storage managers leave these stores alone)."""
        return frozenset(b.spec.store for b in self.bindings)

    @classmethod
    def from_config(cls, config: Config, stores: Iterable[StoreSpec]) -> "AdjunctSettings":
        specs = adjunct_specs(config)
        by_name = {s.name: s for s in stores}
        inputs = set(job_inputs(config))
        broadcast = {ssp.system_stream for ssp in broadcast_inputs(config)}
        bindings = []
        for name, adjunct in sorted(specs.items()):
            key = ADSTORE_INPUT.key(store=name)
            origin = config.origin(key)
            store = by_name.get(name)
            if store is None:
                raise ConfigError(f"store {name!r} has an adjunct input but no engine; set "
                                  f"stores.{name}.factory ({engine_names()})",
                                  key=key, origin=origin)
            if store.logged:
                raise ConfigError(f"cannot configure both an adjunct input and a changelog for "
                                  f"store {name!r}: its input stream is its changelog; remove "
                                  f"stores.{name}.changelog", key=key, origin=origin)
            ss = SystemStream(*adjunct.input)
            if ss in broadcast and ss in inputs:
                raise ConfigError(f"{ss} is in both task.inputs and task.broadcast.inputs; an "
                                  f"adjunct stream is either broadcast (one store per "
                                  f"container) or partitioned (one store per task)",
                                  key=key, origin=origin)
            if ss not in broadcast and ss not in inputs:
                raise ConfigError(f"{ss} is not an input of the job; add it to task.inputs "
                                  f"(one store per task) or task.broadcast.inputs (one store "
                                  f"per container, shared by its tasks)", key=key, origin=origin)
            bootstrap = (stream_property(config, ss, "samza.bootstrap") or "").lower() == "true"
            bindings.append(AdjunctBinding(adjunct, ss, ss in broadcast, bootstrap))
        return cls(tuple(bindings), JOB_ADSTORE_MANAGER_FACTORY.get(config))
