"""Envelopes built by hand for the chooser tests."""

from __future__ import annotations

from weir.engine.chooser import MessageChooser
from weir.engine.model import NO_TIMESTAMP, IncomingMessageEnvelope, SystemStream, SystemStreamPartition

__all__ = ["ssp", "env", "eos", "drain", "ss"]


def ss(stream: str, system: str = "mem") -> SystemStream:
    return SystemStream(system, stream)


def ssp(stream: str, partition: int = 0, system: str = "mem") -> SystemStreamPartition:
    return SystemStreamPartition(system, stream, partition)


def env(stream: str | SystemStreamPartition, offset: int = 0, partition: int = 0,
        timestamp: int = NO_TIMESTAMP) -> IncomingMessageEnvelope:
    where = stream if isinstance(stream, SystemStreamPartition) else ssp(stream, partition)
    return IncomingMessageEnvelope(where, offset, None, f"{where}@{offset}".encode(), timestamp)


def eos(stream: str | SystemStreamPartition, offset: int, partition: int = 0) -> IncomingMessageEnvelope:
    where = stream if isinstance(stream, SystemStreamPartition) else ssp(stream, partition)
    return IncomingMessageEnvelope.end_of_stream(where, offset)


def drain(chooser: MessageChooser) -> list[IncomingMessageEnvelope]:
    """Everything the chooser returns until it returns None."""
    out = []
    while (e := chooser.choose()) is not None:
        out.append(e)
    return out
