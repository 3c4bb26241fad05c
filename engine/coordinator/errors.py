"""The coordinator's errors: a damaged coordinator stream, a refused change of an immutable
setting, a second run of a job that already runs, a coordinator that cannot be reached.

Each message names the stream and offset, the config key with its old and new value, or the
URL, and says what to do.
"""

from __future__ import annotations

from weir.stores.errors import ConfigError

from weir.engine.errors import EngineError

__all__ = [
    "CoordinatorError",
    "CoordinatorStreamCorruptError",
    "ImmutableSettingError",
    "JobAlreadyRunningError",
    "CoordinatorUnavailableError",
    "CoordinatorWriteError",
]


class CoordinatorError(EngineError):
    """Base of the coordinator's errors."""


class CoordinatorStreamCorruptError(CoordinatorError):
    """A record of the coordinator stream is not a coordinator message (bad JSON, wrong shape,
    an unknown format version) or failed its checksum. Names the stream and the offset.

    Weir stops rather than skip it: the record may hold config, a changelog partition of a
    task or a deletion, and running without it could mix the state of two tasks."""

    def __init__(self, stream: str, offset: int | None, reason: str, *, where: str = ""):
        """``where``: the ``weir log`` options that find the stream (``--system S --root
        DIR``), so the advised command runs as given from any directory."""
        where = f" {where}" if where else ""
        super().__init__(
            f"coordinator stream '{stream}' offset {offset}: {reason}. The job's config, "
            f"changelog partition mapping and locality are read from this stream, so the job "
            f"cannot start until the record is repaired: restore the stream's directory from "
            f"a backup, or, when the damage is at the end (`weir log tail {stream} --from "
            f"{offset if offset is not None else 'oldest'}{where}`), see docs/COORDINATOR.md, "
            f"'A damaged coordinator stream'")
        self.stream, self.offset, self.reason = stream, offset, reason


class ImmutableSettingError(ConfigError):
    """A setting that decides which state belongs to which task changed between runs (the
    grouper, the partition count of a stateful job's input, a store's changelog, the
    container count of a job with host affinity), or a directory the running job keeps its
    state in changed while it runs (``job.data.dir``, ``task.checkpoint.path``, the store base
    directories).

    ``fix`` replaces the default advice (keep the old value, or ``--reset-state``)."""

    def __init__(self, key: str, old: str, new: str, why: str, *, origin: str | None = None,
                 fix: str | None = None):
        if fix is None:
            fix = (f"Keep {old!r}, or start the job's state over: stop the job and run `weir "
                   f"run <config> --reset-state` (moves the stores' local state, changelogs "
                   f"and checkpoints aside, renamed .reset-<time>; inputs are read again from "
                   f"samza.offset.default)")
        super().__init__(
            f"changes from {old!r} (the job's state was built with it) to {new!r}; {why}. "
            f"{fix}",
            key=key, origin=origin)
        self.old, self.new, self.why, self.fix = old, new, why, fix


class JobAlreadyRunningError(CoordinatorError):
    """Another job coordinator of the same job (the same coordinator stream) runs: a second
    ``weir run`` of the job, started with other directories than the first (with the same
    ones the job lock refuses it first). Names the other run's pid, host, command and
    directories, and this run's.

    Attributes: ``path`` (the run lock file), ``holder`` (what it records, ``{}`` when it
    cannot be read)."""

    def __init__(self, message: str, *, path: str, holder: dict | None = None):
        super().__init__(message)
        self.path, self.holder = path, dict(holder or {})


class CoordinatorUnavailableError(CoordinatorError):
    """A container could not read its job model from the coordinator's HTTP endpoint."""

    def __init__(self, url: str, reason: str, attempts: int):
        super().__init__(
            f"cannot read the job model from the job coordinator at {url} after {attempts} "
            f"attempt(s): {reason}. The coordinator runs inside `weir run`; if that process "
            f"has stopped, start the job again")
        self.url, self.reason, self.attempts = url, reason, attempts


class CoordinatorWriteError(CoordinatorError):
    """Messages could not be written to the coordinator stream."""
