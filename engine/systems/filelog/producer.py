"""The file log's SystemProducer: buffered appends through one writer per partition.

``send`` frames the record into the partition writer's buffer (written to the file when the
buffer passes ``systems.<system>.producer.buffer.bytes``); ``flush(source)`` writes every
buffered record of this producer and fsyncs per the stream's fsync policy. A record is
*acknowledged* when a ``flush`` that follows its ``send`` returns (see ``writer.py`` for what
survives which crash). The producer opens a partition's *shared* writer the first time it
writes to it and keeps it until ``stop()``: producers of one process share that writer (see
``_shared.py``), and producers of other processes (the other containers of a job, other jobs)
append to the same partition in turn (``WriterSharing.SHARED``); only an exclusive writer (a
tool such as ``weir log produce``) refuses them with ``PartitionLockedError``.

The partition of an envelope is ``envelope.partition`` when set, else
``partition_for(partition_key or key, count)``, else (no key at all) round-robin.

``send_batch(source, stream, partition, pairs)`` sends raw ``(key, value)`` records to one
partition in one call, without an envelope per record (a store's changelog write-down).

Example::

    >>> # producer = FileLogSystemFactory().get_producer("filelog", config)
    >>> # producer.register("task-0"); producer.start()
    >>> # producer.send("task-0", OutgoingMessageEnvelope(SystemStream("filelog", "out"), b"v", key=b"k"))
    >>> # producer.flush("task-0")   # durable from here on
"""

from __future__ import annotations

from collections.abc import Iterable

from weir.engine.errors import SystemError_
from weir.engine.model import NO_TIMESTAMP, OutgoingMessageEnvelope, SystemStream, partition_for
from weir.engine.systems.api import SystemProducerBase

from weir.engine.systems.filelog import _shared
from weir.engine.systems.filelog.settings import FileLogSettings
from weir.engine.systems.filelog.stream import StreamMeta, load_meta
from weir.engine.systems.filelog.writer import PartitionWriter

__all__ = ["FileLogProducer"]


class _Output:
    """One stream this producer writes: its description and a writer slot per partition."""

    __slots__ = ("meta", "writers", "count", "next_rr")

    def __init__(self, meta: StreamMeta):
        self.meta = meta
        self.count = meta.partitions
        self.writers: list[PartitionWriter | None] = [None] * meta.partitions
        self.next_rr = 0


class FileLogProducer(SystemProducerBase):
    """``SystemProducer`` of a file log system."""

    def __init__(self, settings: FileLogSettings):
        self.settings = settings
        self.system = settings.system
        self._sources: set[str] = set()
        self._outputs: dict[SystemStream, _Output] = {}
        self._open: list[PartitionWriter] = []

    def register(self, source: str) -> None:
        self._sources.add(source)

    def start(self) -> None:
        """Nothing to start: writers open on first use."""

    def send(self, source: str, envelope: OutgoingMessageEnvelope) -> None:
        out = self._outputs.get(envelope.system_stream)
        if out is None:
            out = self._output(envelope.system_stream)
        partition = envelope.partition
        if partition is None:
            partition = self._choose(out, envelope)
        try:
            writer = out.writers[partition]
        except (IndexError, TypeError):
            raise SystemError_(f"stream '{self.system}.{out.meta.name}' has partitions "
                               f"0..{out.count - 1}, not {partition!r}") from None
        if writer is None or partition < 0:
            writer = self._writer(out, partition)
        timestamp = envelope.timestamp
        mutex = writer.mutex
        mutex.acquire()
        try:
            writer.append(envelope.key, envelope.message,
                          NO_TIMESTAMP if timestamp is None else timestamp)
        except TypeError:
            raise SystemError_(
                f"stream '{self.system}.{out.meta.name}': the file log takes bytes keys and "
                f"messages, got key {type(envelope.key).__name__} and message "
                f"{type(envelope.message).__name__}; configure serdes for this stream (systems."
                f"{self.system}.streams.{out.meta.name}.samza.key.serde / .msg.serde)") from None
        finally:
            mutex.release()

    def send_batch(self, source: str, stream: SystemStream, partition: int,
                   items: Iterable[tuple[bytes | None, bytes | None]], *,
                   require_keys: bool = False) -> int:
        """Send raw ``(key, value)`` records (bytes; ``None`` value: a tombstone) to one
        partition of ``stream``, in order, without a timestamp; returns how many were sent.

        The same records as one :meth:`send` of an ``OutgoingMessageEnvelope(stream, value,
        key, partition=partition)`` each, in one call: no envelope per record and one writer
        lock for the batch (a store's changelog write-down uses it). ``require_keys`` refuses
        a null key with ``SystemError_``.
        """
        out = self._outputs.get(stream)
        if out is None:
            out = self._output(stream)
        try:
            writer = out.writers[partition]
        except (IndexError, TypeError):
            raise SystemError_(f"stream '{self.system}.{out.meta.name}' has partitions "
                               f"0..{out.count - 1}, not {partition!r}") from None
        if writer is None or partition < 0:
            writer = self._writer(out, partition)
        with writer.mutex:
            try:
                return writer.append_all(items, NO_TIMESTAMP, require_keys=require_keys)
            except TypeError as exc:
                raise SystemError_(
                    f"stream '{self.system}.{out.meta.name}': the file log takes bytes keys "
                    f"and messages ({exc}); a batch sent with send_batch must hold bytes "
                    f"keys and bytes or None values") from None

    def _output(self, stream: SystemStream) -> _Output:
        if stream.system != self.system:
            raise SystemError_(f"{stream} belongs to system '{stream.system}', not to this "
                               f"'{self.system}' producer")
        out = self._outputs[stream] = _Output(load_meta(self.settings.root, stream.stream,
                                                        self.system))
        return out

    def _choose(self, out: _Output, envelope: OutgoingMessageEnvelope) -> int:
        key = envelope.partition_key if envelope.partition_key is not None else envelope.key
        if key is None:
            out.next_rr = (out.next_rr + 1) % out.count
            return out.next_rr
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise SystemError_(f"stream '{self.system}.{out.meta.name}': the partition key must "
                               f"be bytes (serialized), got {type(key).__name__}")
        return partition_for(bytes(key), out.count)

    def _writer(self, out: _Output, partition: int) -> PartitionWriter:
        if partition < 0:
            raise SystemError_(f"stream '{self.system}.{out.meta.name}' has partitions "
                               f"0..{out.count - 1}, not {partition}")
        writer = _shared.acquire_for_producer(self.settings, out.meta, partition)
        out.writers[partition] = writer
        self._open.append(writer)
        return writer

    def flush(self, source: str) -> None:
        """Write everything sent so far (by any source of this producer) and fsync per policy.
        Every record sent before this call is acknowledged when it returns."""
        for writer in self._open:
            with writer.mutex:
                writer.flush()

    def write_through(self, source: str) -> None:
        """Write everything sent so far to the files without fsync, so readers see it now
        (a stage downstream); not an acknowledgement: durable only after :meth:`flush`."""
        for writer in self._open:
            with writer.mutex:
                if not writer.closed:
                    writer.write_buffered()

    def end_stream(self, stream: str) -> dict[int, int]:
        """Flush, then end every partition of a bounded stream (see the admin's
        ``end_stream``). Returns the upcoming offset per partition."""
        key = SystemStream(self.system, stream)
        out = self._outputs.get(key) or self._output(key)
        if not out.meta.bounded:
            raise SystemError_(f"stream '{self.system}.{stream}' is not bounded, so it cannot "
                               f"end; create bounded streams with StreamSpec(bounded=True)")
        ends = {}
        for partition in range(out.count):
            writer = out.writers[partition] or self._writer(out, partition)
            with writer.mutex:
                ends[partition] = writer.end_stream()
        return ends

    close_stream = end_stream

    def stop(self) -> None:
        """Flush everything sent (fsync per the stream's policy) and release every partition;
        the last producer of a partition in this process also fsyncs and unlocks it. Another
        producer sharing a writer does not keep this one's records in the buffer."""
        errors = []
        for writer in self._open:
            try:
                with writer.mutex:
                    if not writer.closed:
                        writer.flush()
            except Exception as exc:  # release and close the others, then report
                errors.append(exc)
            try:
                _shared.release(writer)
            except Exception as exc:
                errors.append(exc)
        self._open.clear()
        self._outputs.clear()
        if errors:
            raise errors[0]
