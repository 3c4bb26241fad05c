"""Errors of Weir on Spark.

Every message names what it is about (operator, partition, version, file, config key) and what
to do. Errors raised inside Spark tasks reach the driver as the text of a Spark exception (the
type name leads the message, so ``weir run --runner spark`` and users can recognise them);
errors the driver can see first (a changed partition count, a missing Java) are raised on the
driver before any Spark job starts.
"""

from __future__ import annotations

from pathlib import Path

from weir.engine.errors import EngineError
from weir.engine.spark.locations import ObjectPath, as_location

__all__ = [
    "SparkError",
    "JavaRuntimeError",
    "StateFileDamagedError",
    "StateHistoryError",
    "PartitionCountChangedError",
    "StateOwnershipError",
    "StatePartitioningError",
    "InputPositionError",
    "SparkJobError",
    "StateVariableError",
    "CheckpointLocationError",
    "CheckpointStorageError",
]


class SparkError(EngineError):
    """Base of the errors of Weir on Spark."""


class JavaRuntimeError(SparkError):
    """No Java runtime, or one older than PySpark needs."""


class StateFileDamagedError(SparkError):
    """A changelog or snapshot file of the Weir state provider fails its checks.

    ``path`` is the file, ``operator``/``partition``/``version`` what it holds, ``reason`` what
    is wrong with it. A damaged *snapshot* never raises this on its own: the provider rebuilds
    it from the changelogs before it; this error means no intact history can give the version
    back.
    """

    def __init__(self, reason: str, *, path: Path | ObjectPath | str, operator: str, partition: int,
                 version: int, kind: str, advice: str | None = None):
        self.path, self.operator, self.partition = as_location(path), operator, partition
        self.version, self.kind, self.reason = version, kind, reason
        advice = advice or (
            f"put the file back from a backup or a copy of the checkpoint and run again; "
            f"nothing was changed. If no copy exists, the state of operator '{operator}' "
            f"partition {partition} cannot be brought to version {version}: restart the query "
            f"from a new checkpoint location (its state starts empty)")
        super().__init__(f"StateFileDamagedError: operator '{operator}' partition {partition}: "
                         f"the {kind} of version {version} ({path}) is damaged: {reason}; "
                         f"{advice}")


class StateHistoryError(SparkError):
    """A version the provider needs was never published or is gone: a changelog missing
    between two versions, no snapshot or changelog reaching back far enough, or a version
    asked for that is newer than anything published."""

    def __init__(self, message: str, *, operator: str, partition: int, version: int,
                 directory: Path | ObjectPath | str):
        self.operator, self.partition, self.version = operator, partition, version
        self.directory = as_location(directory)
        super().__init__(f"StateHistoryError: operator '{operator}' partition {partition}, "
                         f"version {version} ({directory}): {message}")


class PartitionCountChangedError(SparkError):
    """The operator's state was written with another partition count."""

    def __init__(self, *, operator: str, recorded: int, requested: int, meta: Path | ObjectPath | str):
        self.operator, self.recorded, self.requested = operator, recorded, requested
        self.meta = as_location(meta)
        super().__init__(
            f"PartitionCountChangedError: operator '{operator}' keeps its state in {recorded} "
            f"partitions ({meta}) but the query asks for {requested}. A key's partition is "
            f"pmod(hash(key), partitions): with another count every key would find another "
            f"partition's state. Run the query with {recorded} partitions, or stop it and "
            f"rewrite the state for {requested} partitions with `weir spark repartition "
            f"{self.meta.parent.parent.parent} --operator {operator} --partitions {requested}`")


class StateOwnershipError(SparkError):
    """The operator's state belongs to another streaming query (or was written by a query
    whose Spark checkpoint was deleted): adopting its versions would apply another input
    history to this query's batches."""


class StatePartitioningError(SparkError):
    """A task received rows of another state partition (a coalesced or re-partitioned
    shuffle between ``repartition(P, key)`` and the operator)."""


class InputPositionError(SparkError):
    """A Weir task on Spark got input that does not continue where its state says it
    stopped: the offsets recorded with the task's state and the micro-batch disagree."""


class SparkJobError(SparkError):
    """A job run on Spark (``weir run --runner spark``) failed; the message names the cause
    Spark reported and, when it is one of Weir's errors, that error's text."""


class StateVariableError(SparkError, RuntimeError):
    """A processor used a state variable it may not use: one it removed with ``deleteIfExists``
    (Spark fails the same call with a ``PySparkRuntimeError``, also a ``RuntimeError``)."""


class CheckpointLocationError(SparkError):
    """A checkpoint location Weir cannot keep state in: an unknown scheme, a store whose
    client library is not installed, or one without an atomic create-if-absent write."""


class CheckpointStorageError(SparkError):
    """A request to the checkpoint's store failed (credentials, network, a throttled or
    refused request). ``location`` is the file or directory, ``operation`` what was asked.
    Nothing was half-done: a version is either published whole or not at all, so the task can
    be retried (Spark does)."""

    def __init__(self, message: str, *, location: Path | ObjectPath | str, operation: str):
        self.location, self.operation = as_location(location), operation
        super().__init__(f"CheckpointStorageError: {operation} {self.location}: {message}")
