"""The coordinator's errors: a damaged coordinator stream, a refused change of an immutable
setting, a second run of a job that already runs, a coordinator that cannot be reached.

Each message names the stream and offset, the config key with its old and new value, or the
URL, and says what to do.
"""

from __future__ import annotations

from enum import Enum

from weir.stores.errors import ConfigError

from weir.engine.errors import EngineError

__all__ = [
    "CoordinatorError",
    "CoordinatorFailure",
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


class CoordinatorFailure(Enum):
    """How a request to the coordinator's HTTP endpoint failed, with what to do about it."""

    NOT_LISTENING = "not-listening"
    """Nothing accepts connections at the URL."""
    OVERLOADED = "overloaded"
    """The endpoint answered 503 (or 429): it is up, with every connection busy."""
    CLOSED = "closed"
    """The endpoint closed the connection without an answer."""
    TIMEOUT = "timeout"
    """No answer in time (``job.coordinator.http.client.timeout.ms``), or 408."""
    NO_MODEL = "no-model"
    """404: the coordinator has no job model yet."""
    SERVER_ERROR = "server-error"
    """500, 502 or 504."""
    UNREACHABLE = "unreachable"
    """Any other network error (no route, unknown host ...)."""

    @property
    def hint(self) -> str:
        return _FAILURE_HINTS[self]


_FAILURE_HINTS = {
    CoordinatorFailure.NOT_LISTENING:
        "The coordinator runs inside `weir run`; that process has stopped (or the URL is "
        "stale): start the job again",
    CoordinatorFailure.OVERLOADED:
        "The coordinator is up but had no free connection for this client: something holds "
        "many connections to it (the runner's log names the address; `ss -tnp state "
        "established dport = :<port>` names the processes). Stop it, or raise "
        "job.coordinator.http.max.connections / job.coordinator.http.max.connections.per.client; "
        "the job's own containers get connections kept for them when they send their token "
        "(WEIR_COORDINATOR_TOKEN, set by `weir run`)",
    CoordinatorFailure.CLOSED:
        "The coordinator closed the connection without an answer: it is over every "
        "connection limit (see the runner's log) or stopping",
    CoordinatorFailure.TIMEOUT:
        "The coordinator accepted the connection but did not answer in time: the `weir run` "
        "process is overloaded or paused (raise job.coordinator.http.client.timeout.ms if "
        "it is just slow)",
    CoordinatorFailure.NO_MODEL:
        "The coordinator has no job model yet; it builds one when `weir run` starts",
    CoordinatorFailure.SERVER_ERROR:
        "The coordinator failed to answer; the `weir run` log has the error",
    CoordinatorFailure.UNREACHABLE:
        "Check that the URL's host is reachable from this machine",
}


class CoordinatorUnavailableError(CoordinatorError):
    """A container could not read its job model from the coordinator's HTTP endpoint;
    ``failure`` says how the last attempt failed (the message's advice follows it)."""

    def __init__(self, url: str, reason: str, attempts: int,
                 failure: CoordinatorFailure = CoordinatorFailure.UNREACHABLE):
        super().__init__(
            f"cannot read the job model from the job coordinator at {url} after {attempts} "
            f"attempt(s): {reason}. {failure.hint}")
        self.url, self.reason, self.attempts, self.failure = url, reason, attempts, failure


class CoordinatorWriteError(CoordinatorError):
    """Messages could not be written to the coordinator stream."""
