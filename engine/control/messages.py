"""Control messages: watermark, end-of-stream, drain and watermark status (Weir's, after
Flink's ``WatermarkStatus``) (docs/CONTROL.md).

A control message travels in-band on an intermediate stream, between the user messages of
one partition, so it is seen after every message written before it. ``task_name`` is the
upstream task that sent it, or ``None`` for a message from a source or an aggregator;
``task_count`` is how many upstream tasks write control messages to the stream (Weir keeps
this field of Samza's first design: a downstream job run on its own can check it against
its plan); ``version`` is 1.

A :class:`WatermarkStatusMessage` says that the sender's inputs feeding the stream are idle
(``IDLE``: leave my watermark out until I say otherwise) or active again (``ACTIVE``: sent
before anything else the sender writes after an ``IDLE``). Samza has no such message.

Timestamps are milliseconds of event time. A watermark ``W`` says that no message with an
event time ``<= W`` is expected any more. :data:`WATERMARK_NOT_EXIST` (-1) means "no
watermark yet" and :data:`WATERMARK_MAX` means "the end of time" (every window fires).

Example::

    >>> WatermarkMessage(1_000, "Partition 0", 2).type
    <MessageType.WATERMARK: 1>
    >>> MessageType.of(b"user bytes")
    <MessageType.USER_MESSAGE: 0>
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any

__all__ = [
    "CONTROL_VERSION",
    "WATERMARK_NOT_EXIST",
    "WATERMARK_MAX",
    "MessageType",
    "ControlMessage",
    "WatermarkMessage",
    "EndOfStreamMessage",
    "DrainMessage",
    "WatermarkStatus",
    "WatermarkStatusMessage",
    "ControlDecodeFailure",
]

CONTROL_VERSION = 1
"""The version Weir writes and the only one it reads."""

WATERMARK_NOT_EXIST = -1
"""Samza's constant: no watermark has been seen."""

WATERMARK_MAX = (1 << 63) - 1
"""Java's ``Long.MAX_VALUE``: event time has ended (end of input, or a drain)."""


class MessageType(IntEnum):
    """The type byte of a message on an intermediate stream (Samza's ordinals)."""

    USER_MESSAGE = 0
    WATERMARK = 1
    END_OF_STREAM = 2
    DRAIN = 3
    WATERMARK_STATUS = 4
    """Weir's (no Samza ordinal): a reader before Weir's idleness refuses it as an unknown
    type byte instead of misreading it."""

    @classmethod
    def of(cls, obj: Any) -> "MessageType":
        """The type of an object sent to an intermediate stream: a control message's own
        type, USER_MESSAGE for anything else."""
        return obj.type if isinstance(obj, ControlMessage) else cls.USER_MESSAGE


class ControlMessage:
    """Base of the control messages (frozen dataclasses below)."""

    __slots__ = ()
    type: MessageType
    task_name: str | None
    task_count: int | None
    version: int


@dataclass(frozen=True, slots=True)
class WatermarkMessage(ControlMessage):
    """Event time of the sender's output has advanced to ``timestamp``."""

    timestamp: int
    task_name: str | None = None
    task_count: int | None = None
    version: int = CONTROL_VERSION

    @property
    def type(self) -> MessageType:
        return MessageType.WATERMARK


@dataclass(frozen=True, slots=True)
class EndOfStreamMessage(ControlMessage):
    """Every input of the sender has ended: it will write nothing more to this stream."""

    task_name: str | None = None
    task_count: int | None = None
    version: int = CONTROL_VERSION

    @property
    def type(self) -> MessageType:
        return MessageType.END_OF_STREAM


@dataclass(frozen=True, slots=True)
class DrainMessage(ControlMessage):
    """The sender has drained for the drain request ``run_id``: it processed everything it
    had and stopped; the stream continues after a redeploy."""

    run_id: str
    task_name: str | None = None
    task_count: int | None = None
    version: int = CONTROL_VERSION

    @property
    def type(self) -> MessageType:
        return MessageType.DRAIN


class WatermarkStatus(Enum):
    """Whether an upstream task's watermark counts downstream (Flink's ``WatermarkStatus``)."""

    ACTIVE = "ACTIVE"
    IDLE = "IDLE"


@dataclass(frozen=True, slots=True)
class WatermarkStatusMessage(ControlMessage):
    """The sender's inputs feeding this stream went idle (``IDLE``: receivers leave its
    watermark out of their minimum) or it resumed (``ACTIVE``: written before any other
    message it writes after ``IDLE``)."""

    status: WatermarkStatus
    task_name: str | None = None
    task_count: int | None = None
    version: int = CONTROL_VERSION

    @property
    def type(self) -> MessageType:
        return MessageType.WATERMARK_STATUS

    @property
    def idle(self) -> bool:
        return self.status is WatermarkStatus.IDLE


@dataclass(frozen=True, slots=True)
class ControlDecodeFailure:
    """What the intermediate serde hands on in place of a control message it could not
    decode; the task's control bookkeeping raises ``error`` when the envelope's turn comes,
    so the failure is never dropped and happens in order."""

    error: Exception
