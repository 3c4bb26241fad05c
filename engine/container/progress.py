"""What a running container reports: counted output, positions, the line a task logs when it
resumes, progress and its result.

:class:`ContainerProgress` and :class:`ContainerResult` are picklable: child processes send
them to the runner for the status line and the job summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.engine.model import SystemStream, SystemStreamPartition, TaskName
from weir.engine.systems.api import SystemProducer, SystemProducerBase

__all__ = ["CountingProducer", "SspPosition", "ContainerProgress", "ContainerResult",
           "ContainerFailure", "resume_line", "describe_starts"]


class CountingProducer(SystemProducerBase):
    """A system producer that counts what tasks send, per stream, forwarding every
    capability of :class:`~weir.engine.systems.api.SystemProducerBase` to ``inner``.

    Tasks' collectors send through it; changelog sinks use the wrapped producer directly, so
    ``counts`` holds task output only. Anything else of the wrapped producer is reached
    through ``inner``.
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

    def send_batch(self, source: str, stream: SystemStream, partition: int,
                   items: Iterable[tuple[bytes | None, bytes | None]], *,
                   require_keys: bool = False) -> int:
        n = self.inner.send_batch(source, stream, partition, items, require_keys=require_keys)
        self.counts[stream] = self.counts.get(stream, 0) + n
        return n


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


def describe_starts(positions: dict[SystemStreamPartition, SspPosition]) -> str:
    """Each input's first offset of this run, for the log line of a first checkpoint."""
    return ", ".join(f"{ssp} offset {pos.start}" for ssp, pos in sorted(positions.items()))


def resume_line(task: TaskName, positions: dict[SystemStreamPartition, SspPosition],
                restored: list[Any], reset: set[SystemStreamPartition] | frozenset = frozenset()
                ) -> str:
    """The line a task with a checkpoint logs at start: the offset each input resumes from
    (an input whose stream has ``samza.reset.offset=true``, in ``reset``, starts over from
    ``samza.offset.default`` instead, and says so) and how many changelog records of a
    crashed run's uncommitted work the restore reverted.

    >>> from weir.engine.model import SystemStreamPartition as SSP
    >>> from weir.recovery.restore import Action, RestoreStats
    >>> stats = RestoreStats("Partition 0", "counts", Action.CATCH_UP, 10, 200, 0.1, 41, 50,
    ...                      trimmed_keys=3, trimmed_records=7)
    >>> resume_line("Partition 0", {SSP("filelog", "words", 0): SspPosition(1234, 1234)},
    ...             [stats])
    "task 'Partition 0' resumes from its checkpoint: filelog.words#0 at offset 1234; restore reverted 7 uncommitted changelog record(s) of store 'counts' (3 key(s))"
    >>> other = RestoreStats("Partition 0", "totals", Action.REUSE, 0, 0, 0.0, 5, 5,
    ...                      trimmed_keys=1, trimmed_records=1)
    >>> resume_line("Partition 0", {}, [stats, other]).split("; ")[1]
    "restore reverted 8 uncommitted changelog record(s): store 'counts' 7 (3 key(s)), store 'totals' 1 (1 key(s))"
    >>> words, codes = SSP("filelog", "words", 0), SSP("filelog", "codes", 0)
    >>> resume_line("Partition 0", {words: SspPosition(7, 7), codes: SspPosition(0, 0)}, [],
    ...             reset={codes}).split(": ", 1)[1]
    'filelog.words#0 at offset 7; reset (samza.reset.offset, its checkpointed offset ignored): filelog.codes#0 from offset 0; no uncommitted changelog records to revert'
    """
    resumed = [(ssp, pos) for ssp, pos in sorted(positions.items()) if ssp not in reset]
    restarted = [(ssp, pos) for ssp, pos in sorted(positions.items()) if ssp in reset]
    inputs = ", ".join(f"{ssp} at offset {pos.start}" for ssp, pos in resumed)
    if restarted:
        again = ", ".join(f"{ssp} from offset {pos.start}" for ssp, pos in restarted)
        inputs = (f"{inputs}; " if inputs else "") + (
            f"reset (samza.reset.offset, its checkpointed offset ignored): {again}")
    reverted = [s for s in restored if s.trimmed_keys]
    if not reverted:
        undo = "no uncommitted changelog records to revert"
    elif len(reverted) == 1:
        (s,) = reverted
        undo = (f"restore reverted {s.trimmed_records:,} uncommitted changelog record(s) of "
                f"store '{s.store}' ({s.trimmed_keys:,} key(s))")
    else:
        records = sum(s.trimmed_records for s in reverted)
        stores = ", ".join(f"store '{s.store}' {s.trimmed_records:,} ({s.trimmed_keys:,} "
                           f"key(s))" for s in sorted(reverted, key=lambda s: s.store))
        undo = f"restore reverted {records:,} uncommitted changelog record(s): {stores}"
    return f"task '{task}' resumes from its checkpoint: {inputs or 'no inputs'}; {undo}"
