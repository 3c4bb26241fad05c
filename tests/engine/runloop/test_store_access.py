"""Which stores a task gets: locked where the run loop lets its calls overlap, bare elsewhere.

The inline sync path (no thread pool) never overlaps two calls of a task, whatever
``task.max.concurrency`` says, and pays nothing; the thread pool, callback tasks and coroutine
tasks with ``task.max.concurrency`` > 1 get every store under its lock, and their commits and
close hold those locks. A run loop never overlaps calls of a task whose stores were opened for
one call at a time.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from weir.engine.errors import EngineError
from weir.engine.runloop.loop import RunLoop
from weir.engine.runloop.settings import RunLoopConfig, StoreAccess, store_access
from weir.engine.task import TaskKind
from weir.stores.builder import build_store
from weir.stores.config import Config
from weir.stores.layers.cached import CachedLayer
from weir.stores.layers.locked import LockedLayer
from weir.stores.spec import StoreSpec

from tests.engine.runloop._helpers import (
    A, ScriptedSource, eos, instance, msgs)

pytestmark = pytest.mark.timeout(30)


class _Storage:
    """A task's storage with one memory store (cache 4, batch 2) and a record of flushes."""

    def __init__(self):
        cfg = Config({"stores.s.factory": "memory", "stores.s.key.serde": "string",
                      "stores.s.msg.serde": "int64", "stores.s.object.cache.size": "4",
                      "stores.s.write.batch.size": "2"})
        self.store = build_store(StoreSpec.from_config(cfg, "s"), Path("unused"),
                                 changelog=None, config=cfg)
        self.flushed_holding: list[bool] = []
        self.lock = None

    def stores(self):
        return {"s": self.store}

    def flush(self):
        self.flushed_holding.append(self.lock is not None and self.lock._is_owned())
        self.store.flush()
        return {}

    def unsettled(self):
        return False

    def close(self):
        self.store.close()


class Sync:
    def init(self, context):
        self.store = context.store("s")

    def process(self, envelope, collector, coordinator):
        self.store.put(envelope.key, envelope.offset)


class Callback(Sync):
    def process_async(self, envelope, collector, coordinator, callback):
        self.store.put(envelope.key, envelope.offset)
        callback.complete()


class Coroutine(Sync):
    async def process(self, envelope, collector, coordinator):
        self.store.put(envelope.key, envelope.offset)


@pytest.mark.parametrize("kind,concurrency,pool,expected", [
    (TaskKind.SYNC, 1, 0, StoreAccess.ONE_CALL_AT_A_TIME),
    (TaskKind.SYNC, 8, 0, StoreAccess.ONE_CALL_AT_A_TIME),   # inline: one after the other
    (TaskKind.SYNC, 1, 4, StoreAccess.ONE_CALL_AT_A_TIME),   # the loop orders the pool calls
    (TaskKind.SYNC, 8, 4, StoreAccess.CONCURRENT),
    (TaskKind.CALLBACK, 1, 0, StoreAccess.ONE_CALL_AT_A_TIME),
    (TaskKind.CALLBACK, 2, 0, StoreAccess.CONCURRENT),      # completed from any thread
    (TaskKind.COROUTINE, 1, 0, StoreAccess.ONE_CALL_AT_A_TIME),
    (TaskKind.COROUTINE, 2, 0, StoreAccess.CONCURRENT),     # may hand store calls to threads
])
def test_store_access_follows_the_run_loop_settings_and_the_task_shape(
        kind, concurrency, pool, expected):
    settings = RunLoopConfig(max_concurrency=concurrency, thread_pool_size=pool)
    assert store_access(settings, kind) is expected


@pytest.mark.parametrize("task,config,locked", [
    (Sync, {}, False),
    (Sync, {"task.max.concurrency": "8"}, False),
    (Sync, {"task.max.concurrency": "8", "job.container.thread.pool.size": "2"}, True),
    (Callback, {"task.max.concurrency": "2"}, True),
    (Coroutine, {"task.max.concurrency": "2"}, True),
], ids=["inline", "inline-concurrency-8", "pool", "callback", "coroutine"])
def test_the_task_gets_locked_stores_exactly_where_calls_can_overlap(
        task, config, locked, asyncio_thread):
    storage = _Storage()
    obj = task()
    inst = instance(obj, [A], config=config, storage=storage, async_runner=asyncio_thread)
    inst.init()
    try:
        if locked:
            assert isinstance(obj.store, LockedLayer) and obj.store.inner is storage.store
        else:
            assert obj.store is storage.store and isinstance(obj.store, CachedLayer)
    finally:
        inst.close()


def test_commit_and_close_hold_the_store_locks_of_a_concurrent_task():
    storage = _Storage()
    task = Sync()
    config = {"task.max.concurrency": "4", "job.container.thread.pool.size": "2"}
    inst = instance(task, [A], config=config, storage=storage)
    inst.init()
    storage.lock = task.store.lock
    inst.commit()
    inst.close()
    assert storage.flushed_holding == [True]


def test_a_run_loop_refuses_to_overlap_calls_of_a_task_whose_stores_are_not_locked():
    storage = _Storage()
    inst = instance(Sync(), [A], config={}, storage=storage)   # built for one call at a time
    with pytest.raises(EngineError, match=r"task 'Partition 0' may run up to 4 messages at "
                                          r"once .* stores were opened for one call at a time"):
        RunLoop([inst], ScriptedSource(), {"task.max.concurrency": "4",
                                          "job.container.thread.pool.size": "2"})


def test_a_pooled_task_with_concurrency_keeps_every_write(asyncio_thread):
    """Many pooled calls of one task put unique keys at once into a tiny cache: none is lost."""
    storage = _Storage()

    class Slow(Sync):
        def process(self, envelope, collector, coordinator):
            for i in range(20):
                self.store.put(f"{envelope.offset}-{i}", i)
            threading.Event().wait(0.0001)

    config = {"task.max.concurrency": "8", "job.container.thread.pool.size": "4"}
    inst = instance(Slow(), [A], config=config, storage=storage)
    loop = RunLoop([inst], ScriptedSource(*msgs(A, *range(300)), eos(A, 300)), config)
    inst.init()
    loop.run()
    with storage.store.all() as it:
        keys = {k for k, _ in it}
    inst.close()
    assert keys == {f"{o}-{i}" for o in range(300) for i in range(20)}
