"""Seal markers: the end of one version of a bounded dataset in an adjunct stream.

A producer writes a dataset version's records, then a seal marker (the reserved key
``__weir.seal__`` with a null message) into every partition of the stream. A versioned adjunct
store (``stores.<s>.adstore.versioned=true``) switches to the version it built when it reads the
marker. :func:`seal_dataset` is the API call; ``weir log produce STREAM --seal`` the command.

A seal that ends a version holding no record switches nothing: it is taken for a repeated seal
(an operator retrying ``--seal``) and the store keeps serving the version it serves, saying so.
A version that is empty on purpose is sealed with :attr:`SealKind.EMPTY` (the key
``__weir.seal.empty__``; ``weir log produce STREAM --seal-empty``).

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.systems.api import StreamSpec
    >>> from weir.engine.systems.memory import reset_memory_systems
    >>> from weir.engine.systems.registry import SystemRegistry
    >>> reg = SystemRegistry(Config({"systems.seal-doc.factory": "memory"}))
    >>> reg.admin("seal-doc").create_stream(StreamSpec("model", 2))
    True
    >>> seal_dataset(reg, "seal-doc", "model")
    {0: 0, 1: 0}
    >>> reset_memory_systems("seal-doc")
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from weir.stores.adjunct import EMPTY_SEAL_KEY, SEAL_KEY, SealKind

from weir.engine.config.serdes import StreamSerdesBase, WireFormat
from weir.engine.errors import EngineError
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition

__all__ = ["seal_dataset", "seal_key_bytes", "SEAL_KEY", "EMPTY_SEAL_KEY", "SealKind"]

_SOURCE = "weir-seal"


def seal_key_bytes(serdes: StreamSerdesBase, kind: SealKind = SealKind.DATASET) -> bytes:
    """The key of a seal of ``kind`` as the stream's key serde writes it (bytes as they are
    without one). A seal's message is null, and an intermediate stream hands null-message
    records over with their keys undecoded (:class:`WireFormat`), so its seals carry the key's
    UTF-8 bytes as they are."""
    serde = serdes.key_serde
    if serde is None or serdes.wire_format is not WireFormat.PLAIN:
        return kind.key.encode()
    try:
        return serde.to_bytes(kind.key)
    except Exception as exc:  # noqa: BLE001 - e.g. an int64 key serde
        raise EngineError(f"the stream's key serde ({serdes.key_serde_name}) "
                          f"cannot write the seal key {kind.key!r}: {exc}; a versioned dataset "
                          f"needs a stream with string, json, msgpack or bytes keys") from exc


def seal_dataset(registry: Any, system: str, stream: str,
                 partitions: Iterable[int] | None = None, *, producer: Any = None,
                 kind: SealKind = SealKind.DATASET) -> dict[int, int]:
    """Write a seal marker to ``partitions`` of ``system.stream`` (default: every partition)
    and flush. Returns the offset each marker got when the system tells it (the partition's
    newest offset after the flush). ``producer``: a started producer to use (registered
    under source ``weir-seal``); otherwise one is made and stopped here. ``kind``:
    :attr:`SealKind.EMPTY` seals a version that is empty on purpose (a plain seal of a version
    without records is taken for a repeated seal and switches nothing)."""
    ss = SystemStream(system, stream)
    if partitions is None:
        partitions = range(registry.partition_counts([ss])[ss])
    partitions = sorted(set(partitions))
    key = seal_key_bytes(registry.serdes_for(ss), kind)
    own = producer is None
    if own:
        producer = registry.producer(system)
        producer.register(_SOURCE)
        producer.start()
    try:
        for p in partitions:
            producer.send(_SOURCE, OutgoingMessageEnvelope(ss, None, key=key, partition=p))
        producer.flush(_SOURCE)
    finally:
        if own:
            producer.stop()
    md = registry.metadata([SystemStreamPartition(system, stream, p) for p in partitions])
    return {p: md[SystemStreamPartition(system, stream, p)].newest for p in partitions}
