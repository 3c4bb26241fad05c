"""The one place where a store's layers are composed.

From the outside in (what a task holds first)::

    LockedLayer        one lock per store, held by every operation   only by shared_store(), when
                                                                     calls of a task may overlap
    PutSizeCheck       refuses a value over the limit at put()       if disallow.large.messages
    CachedLayer        LRU cache of Python objects, dirty write-back if object.cache.size > 0
    SerializedLayer    typed <-> bytes with the key and msg serdes   always
    LargeMessageLayer  refuses (or drops) a value over               if logged, or if disallow /
                       changelog.max.message.size.bytes             drop.large.messages
    LoggedLayer        every change appended to the ChangelogSink    if a changelog is given
    engine             the registered engine, bytes only             always
                       (docs/ENGINES.md)

The cache sits above serialization (as in Samza's default stack), so a hot key's read costs a
dict lookup and its write a dict store: no serde work until dirty entries are written down, and
a key written many times between write-downs is serialized and logged once. docs/STORES.md
has the measurements behind this choice and its one cost (cached values are shared objects).

The lock layer is not part of :func:`build_store`: a store is built before the engine knows
how its task will be run, and most tasks never share their stores between threads. The task
instance adds it with :func:`shared_store` when the run loop lets several calls of the task
run at once (``task.max.concurrency`` > 1 off the loop thread; docs/TASKS.md).

Example::

    >>> import tempfile, pathlib
    >>> from weir.stores.config import Config
    >>> from weir.testing import FileChangelog
    >>> from weir.stores.spec import StoreSpec
    >>> cfg = Config({"stores.s.factory": "memory", "stores.s.key.serde": "string",
    ...               "stores.s.msg.serde": "json", "stores.s.changelog": "filelog.s-log"})
    >>> log = FileChangelog(pathlib.Path(tempfile.mkdtemp()) / "s-log")
    >>> store = build_store(StoreSpec.from_config(cfg, "s"), pathlib.Path("unused"),
    ...                     changelog=log, config=cfg)
    >>> store.put("k", {"n": 1}); store.flush(); list(log.read(0, log.newest_offset()))
    [(0, b'k', b'{"n":1}')]
    >>> store.close(); log.close()
"""

from __future__ import annotations

from pathlib import Path

from weir.stores.api import KeyValueStore
from weir.stores.changelog import ChangelogSink
from weir.stores.config import Config
from weir.stores.engines._base import BytesEngine
from weir.stores.engines.registry import Durability
from weir.stores.layers.cached import CachedLayer
from weir.stores.layers.large import LargeMessageLayer, PutSizeCheck
from weir.stores.layers.locked import LockedLayer
from weir.stores.layers.logged import LoggedLayer
from weir.stores.layers.serialized import SerializedLayer
from weir.stores.serdes import serde_from_name
from weir.stores.spec import STORE_KEY_SERDE, STORE_MSG_SERDE, LargeMessages, StoreSpec

__all__ = ["build_store", "compose_store", "open_engine", "shared_store"]


def open_engine(spec: StoreSpec, directory: Path, *, logged: bool) -> BytesEngine:
    """Open the bare bytes engine of ``spec`` in ``directory`` (the store's own directory).

    Restore uses this directly: it writes changelog records straight into the engine, below
    serdes, cache and logging. ``logged`` tells the engine that a changelog holds every change
    (:attr:`Durability.CHANGELOG <weir.stores.engines.registry.Durability.CHANGELOG>`: RocksDB
    then turns its write-ahead log off). The engine is the one registered for the spec
    (docs/ENGINES.md).
    """
    durability = Durability.CHANGELOG if logged else Durability.LOCAL
    return spec.engine.open(spec, Path(directory), durability)


def build_store(spec: StoreSpec, directory: Path, *, changelog: ChangelogSink | None,
                config: Config) -> KeyValueStore:
    """Open the store described by ``spec`` and return its typed API.

    ``changelog`` decides logging: with a sink every change is appended to it; with None the
    store is not logged (the caller -- a storage manager -- passes the sink of
    ``spec.changelog``). ``config`` resolves serde names (``serializers.registry.*``).
    """
    engine = open_engine(spec, directory, logged=changelog is not None)
    try:
        return compose_store(spec, engine, changelog=changelog, config=config)
    except BaseException:
        engine.close()  # release the directory lock: the caller never gets a store to close
        raise


def compose_store(spec: StoreSpec, engine: BytesEngine, *, changelog: ChangelogSink | None,
                  config: Config, cache: bool = True) -> KeyValueStore:
    """The typed store of ``spec`` over an engine the caller opened: the same layers as
    :func:`build_store` (Cached -> Serialized -> LargeMessage -> Logged -> ``engine``, with the
    put-size check on top when ``spec`` asks for it). ``cache=False`` leaves the object cache
    out whatever ``spec`` says (for an engine that already buffers every write, such as the
    Spark state provider's staged view of a replica). Closing the store closes ``engine``."""
    key_serde = serde_from_name(spec.key_serde, config, key=STORE_KEY_SERDE.key(store=spec.name))
    value_serde = serde_from_name(spec.value_serde, config,
                                  key=STORE_MSG_SERDE.key(store=spec.name))
    store: BytesEngine = engine if changelog is None else LoggedLayer(engine, changelog)
    large = spec.large_messages
    if changelog is not None or large is not LargeMessages.FAIL_AT_WRITE:
        store = LargeMessageLayer(store, max_bytes=spec.max_message_bytes,
                                  drop=large is LargeMessages.DROP)
    typed: KeyValueStore = SerializedLayer(store, key_serde, value_serde)
    if cache and spec.object_cache_size > 0:
        typed = CachedLayer(typed, capacity=spec.object_cache_size,
                            write_batch_size=spec.write_batch_size)
    if large is LargeMessages.FAIL_AT_PUT:
        typed = PutSizeCheck(typed, serialize=value_serde.to_bytes,
                             max_bytes=spec.max_message_bytes)
    return typed


def shared_store(store: KeyValueStore) -> LockedLayer:
    """``store`` for several threads at once: every operation holds the store's lock, so each
    is atomic and no write is lost (:mod:`weir.stores.layers.locked`). The storage manager
    keeps flushing and closing ``store`` itself; whoever does that while the task may run holds
    :attr:`LockedLayer.lock` around it."""
    return LockedLayer(store)
