"""Errors of control messages: every one names the stream, partition and offset it came from.

A control message that cannot be trusted stops the task: dropping an end-of-stream would
leave the job waiting forever, and a watermark from an unknown writer could fire windows
early. So these errors are never dropped by ``task.drop.deserialization.errors`` (that key
covers user messages only).

Example::

    >>> from weir.engine.model import SystemStreamPartition
    >>> err = UnknownControlVersionError(2, ssp=SystemStreamPartition("filelog", "p1", 3), offset=17)
    >>> print(err)  # doctest: +ELLIPSIS
    filelog.p1 partition 3 offset 17: control message version 2 is not supported ...
"""

from __future__ import annotations

from typing import Any

from weir.engine.errors import EngineError

__all__ = [
    "ControlMessageError",
    "UnknownMessageTypeError",
    "MalformedControlMessageError",
    "UnknownControlVersionError",
    "BadTaskCountError",
    "DrainRequestError",
    "JobNotRunningError",
]


def _where(ssp: Any, offset: int | None) -> str:
    if ssp is None:
        return "control message"
    return f"{ssp.system}.{ssp.stream} partition {ssp.partition} offset {offset}"


class ControlMessageError(EngineError):
    """A control message on an intermediate stream is invalid. ``ssp`` and ``offset`` say
    where it is; the message says what to do."""

    def __init__(self, detail: str, *, ssp: Any = None, offset: int | None = None,
                 fix: str = ""):
        super().__init__(f"{_where(ssp, offset)}: {detail}" + (f"; {fix}" if fix else ""))
        self.ssp, self.offset, self.detail = ssp, offset, detail

    @property
    def stream(self) -> str | None:
        return None if self.ssp is None else f"{self.ssp.system}.{self.ssp.stream}"

    @property
    def partition(self) -> int | None:
        return None if self.ssp is None else self.ssp.partition


class UnknownMessageTypeError(ControlMessageError):
    """The first byte of a record on an intermediate stream is not a message type (0..4), or
    the record is empty: it was not written by Weir's (or Samza's >= 0.13.1) intermediate
    message serde."""


class MalformedControlMessageError(ControlMessageError):
    """A control message's JSON does not parse, has a field of the wrong type, lacks a
    required field or has an unknown one."""


class UnknownControlVersionError(ControlMessageError):
    """A control message carries a ``version`` this Weir does not read."""

    def __init__(self, version: Any, *, ssp: Any = None, offset: int | None = None):
        super().__init__(
            f"control message version {version!r} is not supported (this Weir reads version 1)",
            ssp=ssp, offset=offset,
            fix="the upstream job runs a newer Weir: upgrade this job, or stop the upstream "
                "job and let it rewrite the stream with the older version")
        self.version = version


class BadTaskCountError(ControlMessageError):
    """A control message's ``taskCount`` is not a positive integer, disagrees with the
    number of upstream tasks this task expects, or more distinct upstream tasks wrote to
    the partition than the count allows."""

    def __init__(self, detail: str, *, ssp: Any = None, offset: int | None = None,
                 expected: int | None = None, got: Any = None):
        super().__init__(
            detail, ssp=ssp, offset=offset,
            fix="the upstream stage runs with another number of tasks than this job was "
                "planned for (a changed partition count or grouper?); re-plan the "
                "application (`weir plan`) and run every stage with the same config")
        self.expected, self.got = expected, got


class DrainRequestError(EngineError):
    """A drain request file exists but cannot be read (names the file and the fix)."""


class JobNotRunningError(DrainRequestError):
    """``weir drain`` (:func:`~weir.engine.control.drain.request_drain`) of a job that no
    ``weir run`` runs with this config's checkpoint directory: refused, nothing written (the
    next run would otherwise drain at once). Names the job and the directory it looked in."""

    def __init__(self, job: str, checkpoint_dir: str, detail: str = ""):
        super().__init__(
            f"job '{job}' is not running: no `weir run` holds its job lock in {checkpoint_dir}"
            f"{detail}. A drain request is for a running job and names it; nothing was "
            f"written. Start the job first; relative paths in the config (task.checkpoint.path, "
            f"job.data.dir) resolve against the working directory, so run `weir drain` from "
            f"the directory the job was started in (or use absolute paths)")
        self.job, self.checkpoint_dir = job, checkpoint_dir
