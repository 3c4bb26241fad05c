"""The tasks of the concurrency reliability test (``tests/reliability/test_concurrency.py``).

Every input message ``"<word> <id>"`` makes the task

* put ``id`` -> its offset into the stores ``uniq_rocks`` (RocksDB) and ``uniq_lmdb`` (LMDB):
  one unique key per message, written by many calls at once;
* add one to ``word`` in ``counts_rocks`` and ``counts_lmdb``: a read-modify-write of shared
  keys, ordered the way docs/TASKS.md says a task must order it under
  ``task.max.concurrency`` > 1 (a lock per key; in a coroutine, no ``await`` between the
  read and the write of the asyncio-thread part).

The three classes are the three ways the run loop overlaps calls of one task: ``PoolTask``
(sync ``process`` on the container's thread pool), ``CallbackTask`` (``process_async``
finishing on the task's own executor threads) and ``CoroutineTask`` (``async def process`` on
the asyncio thread, with half of its store calls handed to executor threads). Each call
sleeps a little between its store operations, so that calls really overlap.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from weir.engine.task import AsyncStreamTask, ClosableTask, InitableTask, StreamTask

__all__ = ["PoolTask", "CallbackTask", "CoroutineTask", "ENGINES"]

ENGINES = ("rocks", "lmdb")


class _Stores:
    def init(self, context):
        self.uniq = [context.store(f"uniq_{e}") for e in ENGINES]
        self.counts = [context.store(f"counts_{e}") for e in ENGINES]
        self.key_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    def put_unique(self, envelope) -> None:
        _, uid = envelope.message.split(" ")
        for store in self.uniq:
            store.put(uid, envelope.offset)

    def count(self, envelope) -> None:
        word, _ = envelope.message.split(" ")
        with self.key_locks[word]:
            for store in self.counts:
                store.put(word, (store.get(word) or 0) + 1)


class PoolTask(_Stores, StreamTask, InitableTask):
    def process(self, envelope, collector, coordinator):
        self.put_unique(envelope)
        time.sleep(0)
        self.count(envelope)


class CallbackTask(_Stores, AsyncStreamTask, InitableTask, ClosableTask):
    def init(self, context):
        super().init(context)
        self.executor = ThreadPoolExecutor(4, thread_name_prefix="callback-task")

    def process_async(self, envelope, collector, coordinator, callback):
        def work():
            try:
                self.put_unique(envelope)
                time.sleep(0)
                self.count(envelope)
            except BaseException as exc:  # noqa: BLE001 - the loop reports it
                callback.fail(exc)
            else:
                callback.complete()

        self.executor.submit(work)

    def close(self):
        self.executor.shutdown(wait=True)


class CoroutineTask(_Stores, AsyncStreamTask, InitableTask):
    async def process(self, envelope, collector, coordinator):
        if envelope.offset % 2:
            await asyncio.to_thread(self.put_unique, envelope)   # off the asyncio thread
        else:
            self.put_unique(envelope)
        await asyncio.sleep(0)
        if envelope.offset % 3:
            await asyncio.to_thread(self.count, envelope)
        else:
            self.count(envelope)
