"""AdjunctDataStoreManager: what a task instance consults before it delivers a message.

One manager per task. It knows the task's adjunct *feeds* (input partition -> the stores it
fills, with their extractor, and whether this task writes them: a broadcast store is written
by one designated task of the container, the others skip its messages). The task instance
asks :meth:`~AdjunctDataStoreManager.consumes` for every envelope: adjunct messages are
applied to their stores (:meth:`~AdjunctDataStoreManager.apply`) and never reach the task.
The task reads the stores through ``context.store(name)``
(:meth:`~AdjunctDataStoreManager.views`, read-only). While the task's ``process`` runs, the
served version of each versioned store is pinned (:meth:`~AdjunctDataStoreManager.wrap`),
so one call sees one version from start to end.

``job.adstore.manager.factory`` replaces the class: the factory is called as
``Factory(task_name, feeds, views)`` and returns an object with the same methods.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.stores.adjunct import AdjunctSpec
    >>> from weir.stores.spec import StoreSpec
    >>> from weir.recovery.adjunct import AdjunctStore
    >>> from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition as SSP
    >>> cfg = Config({"stores.p.factory": "memory", "stores.p.key.serde": "string",
    ...               "stores.p.msg.serde": "string", "stores.p.adstore.input": "log.p"})
    >>> store = AdjunctStore(StoreSpec.from_config(cfg, "p"), AdjunctSpec.from_config(cfg, "p"),
    ...                      None, cfg, partitions=["0"])
    >>> store.open(None)
    >>> ssp = SSP("log", "p", 0)
    >>> m = AdjunctDataStoreManager("Partition 0", {ssp: [Feed(store, EnvelopeExtractor(), True)]},
    ...                             {"p": store.view()})
    >>> m.consumes(ssp)
    True
    >>> m.apply(IncomingMessageEnvelope(ssp, 0, "pen", "blue"))
    >>> m.views()["p"].get("pen")
    'blue'
    >>> store.close()
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.recovery.adjunct import AdjunctStore, pinned
from weir.stores.adjunct import RejectedKeys

from weir.engine.adjunct.extract import (AdjunctKeyError, AdjunctValueError, EnvelopeExtractor,
                                         KeyValueExtractor, seal_kind)
from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition

__all__ = ["AdjunctDataStoreManager", "Feed", "EnvelopeExtractor"]

log = logging.getLogger("weir.adjunct")


@dataclass
class Feed:
    """One adjunct store fed by one input partition, as one task sees it."""

    store: AdjunctStore
    extractor: KeyValueExtractor
    writer: bool
    """This task applies the partition's messages to the store (the designated writer of a
    broadcast store; always for a task's own store)."""
    rejected: int = 0
    warned: set = field(default_factory=set)


class AdjunctDataStoreManager:
    """The adjunct stores of one task (see the module docstring)."""

    def __init__(self, task_name: str, feeds: Mapping[SystemStreamPartition, list[Feed]],
                 views: Mapping[str, Any]):
        self.task_name = task_name
        self.feeds = {ssp: list(fs) for ssp, fs in feeds.items()}
        self._views = dict(views)
        stores: dict[int, AdjunctStore] = {}
        for fs in self.feeds.values():
            for feed in fs:
                stores[id(feed.store)] = feed.store
        self.stores = list(stores.values())
        self.versioned = [s for s in self.stores if s.adjunct.versioned]
        self.written = [s for s in self.stores if any(
            f.writer and f.store is s for fs in self.feeds.values() for f in fs)]

    # -- delivery --------------------------------------------------------------------------
    def consumes(self, ssp: SystemStreamPartition) -> bool:
        """True when messages of ``ssp`` go to adjunct stores, not to the task."""
        return ssp in self.feeds

    def apply(self, envelope: IncomingMessageEnvelope) -> None:
        """Put the message into every store its partition feeds (that this task writes): a
        None value deletes the key, a seal marker switches a versioned store."""
        ssp, offset = envelope.ssp, envelope.offset
        partition = str(ssp.partition)
        seal = seal_kind(envelope.key, envelope.message)
        for feed in self.feeds[ssp]:
            if not feed.writer:
                continue
            store = feed.store
            if seal is not None:
                store.seal(partition, offset, seal)
                continue
            try:
                key = feed.extractor.get_key(envelope)
                reason = None if key is not None else "it returned no key (None)"
            except Exception as exc:  # noqa: BLE001 - user code: reported with the position
                key, reason = None, f"{type(exc).__name__}: {exc}"
            if reason is not None:
                self._rejected(feed, envelope, reason)
                store.applied(partition, offset)
                continue
            try:
                value = feed.extractor.get_value(envelope)
            except Exception as exc:  # noqa: BLE001
                raise AdjunctValueError(store.name, ssp, offset,
                                        f"{type(exc).__name__}: {exc}") from exc
            if value is None:
                store.delete(key)
            else:
                store.put(key, value)
            store.applied(partition, offset)

    def _rejected(self, feed: Feed, envelope: IncomingMessageEnvelope, reason: str) -> None:
        store = feed.store
        if store.adjunct.on_rejected_key is RejectedKeys.FAIL:
            raise AdjunctKeyError(store.name, envelope.ssp, envelope.offset, reason)
        feed.rejected += 1
        store.counters.rejected += 1
        if envelope.ssp not in feed.warned:
            feed.warned.add(envelope.ssp)
            log.warning("adjunct store '%s': dropping messages of %s whose key the extractor "
                        "rejects (first at offset %d: %s); counted as adjunct-rejected",
                        store.name, envelope.ssp, envelope.offset, reason)

    @property
    def rejected(self) -> int:
        """Messages dropped because their key was rejected (``rejected.keys=drop``)."""
        return sum(f.rejected for fs in self.feeds.values() for f in fs)

    def wrap(self, process: Callable[..., Any], *, coroutine: bool = False) -> Callable[..., Any]:
        """``process`` as the task instance calls it: adjunct messages are applied instead
        of delivered; other calls run with every versioned store pinned."""
        feeds, apply, versioned = self.feeds, self.apply, tuple(self.versioned)
        if coroutine:
            async def process_async(envelope, collector, coordinator):
                if envelope.ssp in feeds:
                    apply(envelope)
                    return None
                if not versioned:
                    return await process(envelope, collector, coordinator)
                with pinned(versioned):
                    return await process(envelope, collector, coordinator)
            return process_async
        if not versioned:
            @functools.wraps(process)
            def deliver(envelope, collector, coordinator):
                if envelope.ssp in feeds:
                    return apply(envelope)
                return process(envelope, collector, coordinator)
            return deliver

        @functools.wraps(process)
        def deliver_pinned(envelope, collector, coordinator):
            if envelope.ssp in feeds:
                return apply(envelope)
            with pinned(versioned):
                return process(envelope, collector, coordinator)
        return deliver_pinned

    # -- what the task sees, commit, close -------------------------------------------------
    def views(self) -> dict[str, Any]:
        """The task's adjunct stores by name, read-only."""
        return dict(self._views)

    def flush(self) -> None:
        """At the task's commit: flush the stores this task writes and record their offsets
        beside them."""
        for store in self.written:
            store.flush()

    def checkpoint_extras(self) -> dict[str, Any]:
        """What the task's checkpoint records of its adjunct stores (``extras["adjunct"]``):
        per store, the version served and built and the offsets applied."""
        return {"adjunct": {s.name: {"serving": s.serving, "building": s.building,
                                     "offsets": dict(s.offsets)}
                            for s in self.stores}}

    def close(self) -> None:
        """Nothing to release: the container's adjunct storage closes the stores."""
        return None

    def __repr__(self) -> str:
        return (f"<AdjunctDataStoreManager task={self.task_name!r} "
                f"stores={[s.name for s in self.stores]}>")
