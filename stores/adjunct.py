"""Adjunct data store settings: ``stores.<s>.adstore.*``, parsed once into :class:`AdjunctSpec`.

An *adjunct* (AD) store is a read-only store filled from one input stream (docs/ADJUNCT.md;
Samza's side inputs are the shipped form of the idea). The storage core only declares and
parses its keys; the engine binds the store to the stream's partitions
(:mod:`weir.engine.adjunct`) and the recovery package decides what a start does with its local
files (:mod:`weir.recovery.adjunct`).

Example::

    >>> from weir.stores.config import Config
    >>> cfg = Config({"stores.products.factory": "rocksdb",
    ...               "stores.products.key.serde": "string", "stores.products.msg.serde": "json",
    ...               "stores.products.adstore.input": "filelog.products-cdc",
    ...               "stores.products.adstore.projection": "name, price"})
    >>> spec = adjunct_specs(cfg)["products"]
    >>> spec.input, spec.projection, spec.versioned, spec.on_rejected_key
    (('filelog', 'products-cdc'), ('name', 'price'), False, <RejectedKeys.FAIL: 'fail'>)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from weir.stores.config import Config, declare
from weir.stores.errors import ConfigError

__all__ = [
    "AdjunctSpec",
    "RejectedKeys",
    "SEAL_KEY",
    "EMPTY_SEAL_KEY",
    "SealKind",
    "adjunct_specs",
    "ADSTORE_INPUT",
    "ADSTORE_EXTRACTOR_FACTORY",
    "ADSTORE_PROJECTION",
    "ADSTORE_VERSIONED",
    "ADSTORE_REJECTED_KEYS",
    "ADSTORE_STALENESS_MS",
]

_C = "stores"

SEAL_KEY = "__weir.seal__"
"""The reserved key of a seal marker (with a null value): the end of one version of a bounded
dataset (``weir log produce --seal``, :func:`weir.engine.adjunct.seal_dataset`). A versioned
adjunct store switches to the version it built when it reads one; other adjunct stores ignore
it. Data records may not use this key. A seal that ends a version holding no record is taken for
a repeated seal (an operator's retry) and switches nothing: see :data:`EMPTY_SEAL_KEY`."""

EMPTY_SEAL_KEY = "__weir.seal.empty__"
"""The reserved key of a seal marker that ends a version which is empty on purpose (``weir log
produce --seal-empty``, ``seal_dataset(..., kind=SealKind.EMPTY)``): a versioned adjunct store
switches to it although it holds no record. Data records may not use this key."""


class SealKind(Enum):
    """What a seal marker says about the version it ends (its reserved key)."""

    DATASET = "seal"
    """The end of a version of the dataset (:data:`SEAL_KEY`). A version with no record is
    not switched to: such a seal repeats the previous one."""
    EMPTY = "seal-empty"
    """The end of a version that is empty on purpose (:data:`EMPTY_SEAL_KEY`)."""

    @property
    def key(self) -> str:
        return EMPTY_SEAL_KEY if self is SealKind.EMPTY else SEAL_KEY


class RejectedKeys(Enum):
    """What an adjunct store does with a message whose key its extractor rejects."""

    FAIL = "fail"
    """Stop with :class:`~weir.engine.adjunct.AdjunctKeyError` naming stream, partition and
    offset."""
    DROP = "drop"
    """Skip the message, count it (``adjunct-rejected``) and log it once per partition."""


ADSTORE_INPUT = declare(
    "stores.<store>.adstore.input", str, None,
    "Makes <store> an adjunct data store filled from this stream (`system.stream`): its "
    "messages are put into the store (a null value deletes the key) and never delivered to the "
    "task, which reads the store through context.store(<store>) and cannot write it. The "
    "stream must be in task.inputs (one store per task) or task.broadcast.inputs (one store per "
    "container, shared by its tasks). Mark the stream samza.bootstrap=true to read it to its "
    "head before any other input.", component=_C)
ADSTORE_EXTRACTOR_FACTORY = declare(
    "stores.<store>.adstore.key.value.extractor.factory", str, None,
    "`module:Factory` called once per store as Factory(config, store_name), returning an "
    "object with get_key(envelope) and get_value(envelope) (the typed envelope of the input "
    "stream). Unset: the envelope's key and message.", component=_C)
ADSTORE_PROJECTION = declare(
    "stores.<store>.adstore.projection", list, [],
    "Fields of each (mapping) value to keep, comma-separated; the others are not stored. "
    "Empty: the whole value.", component=_C)
ADSTORE_VERSIONED = declare(
    "stores.<store>.adstore.versioned", bool, False,
    "The input is a bounded dataset delivered in versions, each ended by a seal marker "
    "(`weir log produce --seal`): the store builds the next version beside the one it serves "
    "and switches atomically at the seal (a process call sees one version from start to end), "
    "then drops the old version.", component=_C)
ADSTORE_REJECTED_KEYS = declare(
    "stores.<store>.adstore.rejected.keys", RejectedKeys, RejectedKeys.FAIL,
    "A message whose key the extractor rejects (it raises, or returns None): `fail` stops the "
    "container with an error naming stream, partition and offset; `drop` skips and counts it.",
    component=_C)
ADSTORE_STALENESS_MS = declare(
    "stores.<store>.adstore.staleness.ms", int, 86_400_000,
    "A persistent adjunct store whose offset file is older than this is not valid at start: it "
    "is re-created and bootstrapped again (Samza's fixed 1 day for side-input stores).",
    component=_C)


@dataclass(frozen=True)
class AdjunctSpec:
    """The adjunct settings of one store (``stores.<store>.adstore.*``)."""

    store: str
    input: tuple[str, str]
    """``(system, stream)`` the store is filled from."""
    extractor_factory: str | None = None
    projection: tuple[str, ...] = ()
    versioned: bool = False
    on_rejected_key: RejectedKeys = RejectedKeys.FAIL
    staleness_ms: int = 86_400_000

    @classmethod
    def from_config(cls, config: Config, store: str) -> "AdjunctSpec":
        key = ADSTORE_INPUT.key(store=store)
        raw = (config.get_str(key) or "").strip()
        system, dot, stream = raw.partition(".")
        if not dot or not system or not stream:
            raise ConfigError(f"must be `system.stream`, got {raw!r}", key=key,
                              origin=config.origin(key))
        factory = ADSTORE_EXTRACTOR_FACTORY.get(config, store=store)
        fkey = ADSTORE_EXTRACTOR_FACTORY.key(store=store)
        if factory is not None and ":" not in factory:
            raise ConfigError(f"must be `module:Factory`, got {factory!r}", key=fkey,
                              origin=config.origin(fkey))
        staleness = ADSTORE_STALENESS_MS.get(config, store=store)
        if staleness <= 0:
            skey = ADSTORE_STALENESS_MS.key(store=store)
            raise ConfigError(f"must be positive, got {staleness}", key=skey,
                              origin=config.origin(skey))
        projection = tuple(f.strip() for f in ADSTORE_PROJECTION.get(config, store=store)
                           if f.strip())
        return cls(store, (system, stream), factory, projection,
                   ADSTORE_VERSIONED.get(config, store=store),
                   ADSTORE_REJECTED_KEYS.get(config, store=store), staleness)


def adjunct_specs(config: Config) -> dict[str, AdjunctSpec]:
    """Every store with ``stores.<s>.adstore.input`` set, by store name."""
    if not isinstance(config, Config):
        config = Config(config)
    out = {}
    for key in sorted(config):
        if key.startswith("stores.") and key.endswith(".adstore.input"):
            store = key[len("stores."):-len(".adstore.input")]
            if store and "." not in store:
                out[store] = AdjunctSpec.from_config(config, store)
    return out
