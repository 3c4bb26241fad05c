"""The coordinator stream store: bootstrap, catch-up and writes of one job's coordinator stream.

A :class:`CoordinatorStreamStore` is Samza's ``CoordinatorStreamStore`` (docs/COORDINATOR.md,
5.4) over any system (the file log by default):

* :meth:`~CoordinatorStreamStore.create` makes the stream if it is missing: one partition,
  compacted (cleanup policy ``compact``), ``job.coordinator.segment.bytes`` when set;
* :meth:`~CoordinatorStreamStore.bootstrap` reads every message from the oldest offset to
  the head; each message's ``[type, key]`` gets its value, a null value removes it (the same
  view compaction leaves behind, so a compacted stream reads the same as the full one);
* :meth:`~CoordinatorStreamStore.catch_up` reads the messages written since, and returns them;
  :meth:`get` / :meth:`entries` answer from memory (read-your-writes holds because
  :meth:`write` catches up after writing);
* :meth:`~CoordinatorStreamStore.write` sends messages in order and flushes them (durable when
  it returns). The file log has one writer per partition, so the writer is opened for each
  batch and closed after it: ``weir coordinator set-config`` can write while the job runs. A
  writer busy in another process is waited for up to ``job.coordinator.write.timeout.ms``.

A record that is not a coordinator message, or that fails its checksum, raises
:class:`~weir.engine.coordinator.errors.CoordinatorStreamCorruptError` naming the offset.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.systems.registry import SystemRegistry
    >>> config = Config({"job.name": "doc", "task.inputs": "mem-coord-doc.words",
    ...                  "systems.mem-coord-doc.factory": "memory"})
    >>> store = CoordinatorStreamStore.for_job(config, source="doc")
    >>> store.create()
    True
    >>> store.write([CoordinatorMessage.set_config("task.commit.ms", "5000", source="doc")])
    >>> store.config()["task.commit.ms"], store.config().origin("task.commit.ms")
    ('5000', 'coordinator stream __samza_coordinator_doc_1 offset 0')
    >>> store.close()
    >>> from weir.engine.systems.memory import reset_memory_systems
    >>> reset_memory_systems("mem-coord-doc")
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from weir.stores.config import Config

from weir.engine.coordinator.errors import CoordinatorStreamCorruptError, CoordinatorWriteError
from weir.engine.coordinator.messages import (CoordinatorMessage, MessageDecodeError, MessageType,
                                              decode_message)
from weir.engine.coordinator.settings import CoordinatorSettings
from weir.engine.errors import CorruptRecordError, PartitionLockedError, SystemError_
from weir.engine.model import EnvelopeKind, OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import CleanupPolicy, StreamSpec
from weir.engine.systems.registry import SystemRegistry

__all__ = ["CoordinatorStreamStore", "config_origin"]

log = logging.getLogger("weir.coordinator")

_MESSAGE = EnvelopeKind.MESSAGE
_BACKOFF_FIRST_S = 0.02
_BACKOFF_MAX_S = 0.5


def config_origin(stream: str, offset: int | None) -> str:
    """The origin a config value read from the coordinator stream reports in errors."""
    return f"coordinator stream {stream} offset {offset}"


class CoordinatorStreamStore:
    """One job's coordinator stream, read into memory; see the module docstring.

    Thread-safe: the job coordinator's catch-up thread and its HTTP handlers share it.
    """

    def __init__(self, registry: SystemRegistry, settings: CoordinatorSettings, *,
                 source: str):
        self.registry = registry
        self.settings = settings
        self.source = source
        self.ssp = SystemStreamPartition(settings.system, settings.stream, 0)
        self._ss = SystemStream(settings.system, settings.stream)
        self._lock = threading.RLock()
        self._entries: dict[str, dict[str, CoordinatorMessage]] = {}
        self._consumer: Any = None
        self._bootstrapped = False
        self.messages_read = 0
        self.messages_written = 0
        self.next_offset = 0

    @classmethod
    def for_job(cls, config: Config, *, source: str,
                registry: SystemRegistry | None = None) -> "CoordinatorStreamStore":
        """The store of the job of ``config`` (its system resolved from config)."""
        return cls(registry if registry is not None else SystemRegistry(config),
                   CoordinatorSettings.from_config(config), source=source)

    @property
    def stream(self) -> str:
        return self.settings.stream

    @property
    def where(self) -> str:
        """The ``weir log`` options that find this stream from any directory."""
        root = self.registry.admin(self.ssp.system).root
        where = f"--system {shlex.quote(self.ssp.system)}"
        return where + (f" --root {shlex.quote(os.path.abspath(root))}" if root else "")

    # -- lifecycle ---------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.registry.admin(self.ssp.system).stream_exists(self.stream)

    def create(self) -> bool:
        """Create the stream if missing (1 partition, compacted); False if it existed. An
        existing stream with more partitions is refused."""
        admin = self.registry.admin(self.ssp.system)
        if admin.stream_exists(self.stream):
            count = admin.partition_count(self.stream)
            if count != 1:
                raise SystemError_(f"coordinator stream '{self._ss}' has {count} partitions; "
                                   f"a coordinator stream has exactly one")
            return False
        extra = ({"segment.bytes": str(self.settings.segment_bytes)}
                 if self.settings.segment_bytes else {})
        created = admin.create_stream(StreamSpec(self.stream, 1, CleanupPolicy.COMPACT,
                                                 config=extra))
        if created:
            log.info("created coordinator stream %s", self._ss)
        return created

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.stop()
                self._consumer = None

    def __enter__(self) -> "CoordinatorStreamStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------
    def bootstrap(self) -> int:
        """Read every message from the oldest offset to the head (creating nothing: a
        missing stream reads as empty). Returns the number of messages read."""
        with self._lock:
            if self._bootstrapped:
                return len(self.catch_up())
            self._bootstrapped = True
            if not self.exists():
                return 0
            return self._read(None)

    def catch_up(self) -> list[CoordinatorMessage]:
        """Apply the messages written since the last read; returns them in order."""
        with self._lock:
            if not self._bootstrapped:
                self.bootstrap()
                return []
            if self._consumer is None and not self.exists():
                return []
            out: list[CoordinatorMessage] = []
            self._read(out)
            return out

    def _open_consumer(self) -> Any:
        if self._consumer is None:
            # No metadata call: it would scan the active segment. A compacted stream keeps
            # its first segment's base, so offset 0 is in range (compaction leaves gaps).
            consumer = self.registry.consumer(self.ssp.system)
            consumer.register(self.ssp, self.next_offset)
            consumer.start()
            self._consumer = consumer
        return self._consumer

    def _read(self, out: list[CoordinatorMessage] | None) -> int:
        """Apply every message up to the head; append them to ``out`` when given."""
        consumer = self._open_consumer()
        ssp = self.ssp
        entries = self._entries
        decode = decode_message
        decoded = 0
        while True:
            try:
                batch = consumer.poll([ssp], 0).get(ssp)
            except CorruptRecordError as exc:
                raise CoordinatorStreamCorruptError(self.stream, exc.offset,
                                                    f"the record fails its check ({exc})",
                                                    where=self.where) from exc
            if not batch:
                break
            for env in batch:
                if env.kind is not _MESSAGE:
                    continue
                try:
                    msg = decode(env.key, env.message, env.offset)
                except MessageDecodeError as exc:
                    raise CoordinatorStreamCorruptError(self.stream, env.offset, str(exc),
                                                        where=self.where) from None
                namespace = entries.get(msg.type)
                if namespace is None:
                    namespace = entries[msg.type] = {}
                if msg.values is None:
                    namespace.pop(msg.key, None)
                else:
                    namespace[msg.key] = msg
                self.next_offset = env.offset + 1
                decoded += 1
                if out is not None:
                    out.append(msg)
        self.messages_read += decoded
        return decoded

    def get(self, type: str | MessageType, key: str) -> CoordinatorMessage | None:
        """The current message of ``[type, key]`` (None when absent or deleted)."""
        with self._lock:
            return self._entries.get(str(type), {}).get(key)

    def entries(self, type: str | MessageType) -> dict[str, CoordinatorMessage]:
        """Key -> current message of one type (Samza's namespace view), in write order."""
        with self._lock:
            return dict(self._entries.get(str(type), {}))

    def types(self) -> list[str]:
        with self._lock:
            return sorted(t for t, e in self._entries.items() if e)

    def config(self) -> Config:
        """The job config held by the stream: every ``set-config`` key with its value.
        Origins name the stream and the offset of each value."""
        values: dict[str, str] = {}
        origins: dict[str, str] = {}
        for key, msg in self.entries(MessageType.SET_CONFIG).items():
            value = msg.value("value")
            if value is None:
                continue  # Samza skips values that decode to null
            values[key] = str(value)
            origins[key] = config_origin(self.stream, msg.offset)
        return Config(values, origins=origins)

    # -- writing -----------------------------------------------------------------------------
    def write(self, messages: Iterable[CoordinatorMessage]) -> None:
        """Send ``messages`` in order and flush them; then read them back. Waits up to
        ``job.coordinator.write.timeout.ms`` for a writer in another process."""
        batch = [(m.key_bytes(), m.value_bytes(), m) for m in messages]
        if not batch:
            return
        limit = self.settings.max_message_bytes
        for key, value, msg in batch:
            size = len(key) + (len(value) if value is not None else 0)
            if size > limit:
                raise CoordinatorWriteError(
                    f"coordinator message {msg.type} {msg.key!r} is {size} bytes, more than "
                    f"job.coordinator.max.message.bytes={limit}; nothing was written. Shorten "
                    f"the value or raise the limit")
        self.create()
        deadline = time.monotonic() + self.settings.write_timeout_ms / 1000
        sleep = _BACKOFF_FIRST_S
        while True:
            try:
                self._send(batch)
                break
            except PartitionLockedError as exc:
                if time.monotonic() + sleep > deadline:
                    raise CoordinatorWriteError(
                        f"coordinator stream '{self._ss}' is being written by another process "
                        f"for more than {self.settings.write_timeout_ms} ms "
                        f"(job.coordinator.write.timeout.ms): {exc}") from exc
                time.sleep(sleep)
                sleep = min(sleep * 2, _BACKOFF_MAX_S)
        self.messages_written += len(batch)
        self.catch_up()  # read-your-writes (bootstraps first when nothing was read yet)

    def _send(self, batch: list[tuple[bytes, bytes | None, CoordinatorMessage]]) -> None:
        producer = self.registry.producer(self.ssp.system)
        producer.register(self.source)
        producer.start()
        try:
            for key, value, _ in batch:
                producer.send(self.source, OutgoingMessageEnvelope(self._ss, value, key=key,
                                                                   partition=0))
            producer.flush(self.source)
        finally:
            producer.stop()

    def snapshot(self) -> Mapping[str, Mapping[str, CoordinatorMessage]]:
        """Every namespace's current messages (for ``weir coordinator show``)."""
        with self._lock:
            return {t: dict(e) for t, e in self._entries.items() if e}
