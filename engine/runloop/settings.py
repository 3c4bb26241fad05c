"""The run loop's settings, parsed once from config, and what they mean for a task's stores.

:class:`RunLoopConfig` holds the ``task.*`` / ``job.container.thread.pool.size`` keys of the run
loop. :func:`store_access` says whether several user calls of one task can touch its stores at
the same time under those settings; the task instance then gives the task locked stores
(:class:`~weir.stores.layers.locked.LockedLayer`), and the inline path, where that cannot
happen, keeps its stores bare.

Example::

    >>> from weir.engine.task import TaskKind
    >>> settings = RunLoopConfig.from_config({"task.max.concurrency": "4",
    ...                                       "job.container.thread.pool.size": "2"})
    >>> store_access(settings, TaskKind.SYNC)
    <StoreAccess.CONCURRENT: 'concurrent'>
    >>> store_access(RunLoopConfig(max_concurrency=4), TaskKind.SYNC)  # inline: one at a time
    <StoreAccess.ONE_CALL_AT_A_TIME: 'one-call-at-a-time'>
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from weir.stores.config import Config, ConfigError, declare

from weir.engine.task import TaskKind

__all__ = [
    "TASK_MAX_CONCURRENCY", "JOB_CONTAINER_THREAD_POOL_SIZE", "TASK_WINDOW_MS", "TASK_COMMIT_MS",
    "TASK_CALLBACK_TIMEOUT_MS", "TASK_SHUTDOWN_MS", "TASK_MAX_IDLE_MS",
    "EXACTLY_ONCE_COMMIT_MS", "RunLoopConfig", "StoreAccess", "store_access",
]

_C = "run loop"
TASK_MAX_CONCURRENCY = declare("task.max.concurrency", int, 1, "Messages in flight per task; "
                               "> 1 lets async and thread-pool tasks finish out of order.", component=_C)
JOB_CONTAINER_THREAD_POOL_SIZE = declare(
    "job.container.thread.pool.size", int, 0, "Threads running sync process/window/commit; "
    "0 runs them inline on the loop thread.", component=_C)
TASK_WINDOW_MS = declare("task.window.ms", int, -1, "Call window() of windowable tasks this "
                         "often (milliseconds); -1: never.", component=_C)
TASK_COMMIT_MS = declare(
    "task.commit.ms", int, 60_000, "Commit every task this often (milliseconds); -1: only on "
    "request, end-of-stream and shutdown. A task with nothing new since its last commit "
    "skips it (for up to a minute). With task.processing.guarantee=exactly_once the default "
    "is 100 (Kafka Streams' commit.interval.ms under exactly-once): outputs are visible to "
    "read_committed readers at the commit, so the commit interval is their latency.",
    component=_C)
TASK_CALLBACK_TIMEOUT_MS = declare(
    "task.callback.timeout.ms", int, -1, "Fail the task with CallbackTimeoutError when a "
    "message is not finished within this time (milliseconds); -1: no limit. Applies to async "
    "tasks (callback and coroutine) and to sync tasks run on the thread pool "
    "(job.container.thread.pool.size > 0), not to sync tasks run inline on the loop thread.",
    component=_C)
TASK_SHUTDOWN_MS = declare("task.shutdown.ms", int, 30_000, "On shutdown, wait this long "
                           "(milliseconds) for messages in flight before the final commit.", component=_C)
TASK_MAX_IDLE_MS = declare("task.max.idle.ms", int, 10, "Longest wait (milliseconds) for new "
                           "messages before the loop re-checks timers and requests.", component=_C)


EXACTLY_ONCE_COMMIT_MS = 100
"""``task.commit.ms`` when the config does not set it and the job is exactly-once (see
:meth:`RunLoopConfig.for_exactly_once`)."""


def _at_least(config: Config, key, value: int, minimum: int) -> int:
    if value < minimum:
        raise ConfigError(f"must be >= {minimum}, got {value}", key=key.name,
                          origin=config.origin(key.name))
    return value


@dataclass(frozen=True, slots=True)
class RunLoopConfig:
    """The run loop's settings; :meth:`from_config` checks every range (a
    :class:`~weir.stores.errors.ConfigError` names the key and where it was set)."""

    max_concurrency: int = 1
    thread_pool_size: int = 0
    window_ms: int = -1
    commit_ms: int = 60_000
    callback_timeout_ms: int = -1
    shutdown_ms: int = 30_000
    max_idle_ms: int = 10

    @classmethod
    def from_config(cls, config: Config | Mapping[str, str]) -> "RunLoopConfig":
        cfg = config if isinstance(config, Config) else Config(config)
        return cls(_at_least(cfg, TASK_MAX_CONCURRENCY, TASK_MAX_CONCURRENCY.get(cfg), 1),
                   _at_least(cfg, JOB_CONTAINER_THREAD_POOL_SIZE,
                             JOB_CONTAINER_THREAD_POOL_SIZE.get(cfg), 0),
                   TASK_WINDOW_MS.get(cfg), TASK_COMMIT_MS.get(cfg),
                   TASK_CALLBACK_TIMEOUT_MS.get(cfg),
                   _at_least(cfg, TASK_SHUTDOWN_MS, TASK_SHUTDOWN_MS.get(cfg), 0),
                   _at_least(cfg, TASK_MAX_IDLE_MS, TASK_MAX_IDLE_MS.get(cfg), 1))

    def for_exactly_once(self, config: Config | Mapping[str, str]) -> "RunLoopConfig":
        """These settings for an exactly-once job: ``task.commit.ms`` is
        :data:`EXACTLY_ONCE_COMMIT_MS` unless the config sets it (a read_committed reader
        sees a task's outputs at its commit: the interval is their latency)."""
        if TASK_COMMIT_MS.name in config:
            return self
        return replace(self, commit_ms=EXACTLY_ONCE_COMMIT_MS)


class StoreAccess(Enum):
    """How many user calls of one task may use its stores at the same moment."""

    ONE_CALL_AT_A_TIME = "one-call-at-a-time"
    """The run loop never overlaps two calls of the task (``task.max.concurrency=1``, or sync
    tasks run on the loop thread): the stores are used bare, without a lock."""
    CONCURRENT = "concurrent"
    """Several calls of the task may run at once on different threads (thread pool, callbacks
    completed from other threads, coroutines that hand store calls to threads): every store
    operation holds the store's lock, so each one is atomic and no write is lost."""


def store_access(settings: RunLoopConfig, kind: TaskKind) -> StoreAccess:
    """What the run loop allows for a task of ``kind`` under ``settings``.

    Calls overlap only with ``task.max.concurrency`` > 1, and then only off the loop thread:
    on the thread pool (``job.container.thread.pool.size`` > 0), or for async tasks, whose
    work completes on other threads (callbacks) or on the asyncio thread (coroutines, which
    may hand store calls to executor threads). A sync task without a pool runs on the loop
    thread, one call after the other, whatever the concurrency."""
    if settings.max_concurrency > 1 and (settings.thread_pool_size > 0
                                         or kind is not TaskKind.SYNC):
        return StoreAccess.CONCURRENT
    return StoreAccess.ONE_CALL_AT_A_TIME
