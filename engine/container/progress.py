"""What a running container reports: counted output, positions, progress and its result.

:class:`ContainerProgress` and :class:`ContainerResult` are picklable: child processes send
them to the runner for the status line and the job summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.engine.model import SystemStream, SystemStreamPartition
from weir.engine.systems.api import SystemProducer

__all__ = ["CountingProducer", "SspPosition", "ContainerProgress", "ContainerResult",
           "ContainerFailure"]


class CountingProducer:
    """A :class:`~weir.engine.systems.api.SystemProducer` that counts what tasks send, per stream.

    Tasks' collectors send through it; changelog sinks use the wrapped producer directly, so
    ``counts`` holds task output only. Other attributes (``end_stream``...) pass through.
    """

    __slots__ = ("inner", "counts", "_send")

    def __init__(self, inner: SystemProducer):
        self.inner = inner
        self.counts: dict[SystemStream, int] = {}
        self._send = inner.send

    def register(self, source: str) -> None:
        self.inner.register(source)

    def start(self) -> None:
        self.inner.start()

    def send(self, source: str, envelope: Any) -> None:
        self._send(source, envelope)
        counts, ss = self.counts, envelope.system_stream
        counts[ss] = counts.get(ss, 0) + 1

    def flush(self, source: str) -> None:
        self.inner.flush(source)

    def stop(self) -> None:
        self.inner.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass(frozen=True, slots=True)
class SspPosition:
    """Where a task stands on one input partition: the first offset it read this run and the
    next offset it will process."""

    start: int
    next: int


@dataclass(frozen=True)
class ContainerProgress:
    """A picklable snapshot of a running container, for the status line.

    ``positions`` maps each input SSP to the next offset to process (the lowest over the tasks
    that share it); ``ended`` holds the SSPs whose end-of-stream was processed.
    """

    container_id: str
    state: str
    processed: int
    positions: Mapping[SystemStreamPartition, int] = field(default_factory=dict)
    ended: frozenset[SystemStreamPartition] = frozenset()
    last_commit_ms: int = 0
    sent: int = 0


@dataclass(frozen=True)
class ContainerResult:
    """What a container did: why it stopped, per-stream message counts and the time taken.

    ``inputs`` counts messages processed per input stream (over every task that read it),
    ``outputs`` messages sent per output stream (changelogs not included).
    """

    container_id: str
    reason: str
    seconds: float
    processed: Mapping[str, int]
    inputs: Mapping[SystemStream, int]
    outputs: Mapping[SystemStream, int]
    pid: int = 0
    """The process the container ran in."""
    loop_seconds: float = 0.0
    """Time in the run loop, from its start to the final commit (``seconds`` adds start-up:
    restore, task init, and the stop)."""

    @property
    def messages_in(self) -> int:
        return sum(self.inputs.values())

    @property
    def messages_out(self) -> int:
        return sum(self.outputs.values())

    def summary(self) -> str:
        rate = self.messages_in / self.seconds if self.seconds > 0 else 0.0
        return (f"container {self.container_id} stopped ({self.reason}): "
                f"{self.messages_in:,} messages in, {self.messages_out:,} out in "
                f"{self.seconds:.2f} s ({rate:,.0f} msg/s)")


@dataclass(frozen=True)
class ContainerFailure:
    """Why a container failed: the error type and message (with the user traceback for a
    task error), or how its process died."""

    container_id: str
    error_type: str
    message: str

    def headline(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"container {self.container_id} failed: {self.error_type}: {first}"
