"""Exactly-once processing: each task's outputs, changelog writes and input offsets commit
together (``task.processing.guarantee=exactly_once``; docs/EXACTLY-ONCE.md).

A task gets one :class:`~weir.engine.systems.filelog.transactions.TransactionalProducer` per
file-log system of the job, all under the task's transactional id
``<job.name>-<job.id>/<task>``. Its collector and its stores' changelogs write through them,
so everything the task writes between two commits is one transaction. The commit
(:meth:`TaskTransaction.prepare`, the checkpoint write, :meth:`TaskTransaction.commit`) makes
the checkpoint file the transaction's decision record; at the next start
:meth:`TaskTransaction.recover` finishes the previous run's transaction from the checkpoint --
rolled forward when the checkpoint names it, aborted otherwise -- before any store is
restored.

Example (what the container does for each task)::

    txn = TaskTransaction.for_task(name, job, registry, systems, checkpoints.path_for(name))
    txn.recover(last_checkpoint, job_config="job.properties")   # before restore
    ...                                                          # task sends, stores log
    extras = txn.prepare()          # durable, state 'prepared'
    checkpoints.write(name, Checkpoint(offsets, changelog_offsets, extras))   # the decision
    txn.commit()                    # markers: visible to read_committed readers
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from weir.recovery.checkpoint import Checkpoint
from weir.stores.changelog import ForwardingChangelog
from weir.stores.config import Config, ConfigError, declare
from weir.stores.spec import StoreSpec

from weir.engine.config.job import JobConfig
from weir.engine.errors import FencedCheckpointError, ProducerStateMissingError
from weir.engine.systems.filelog.producer_state import (CHECKPOINT_EXTRAS_KEY, TxnId,
                                                        load_producer_state, producer_state_path)

if TYPE_CHECKING:  # imported where a task's transaction is made: a job without exactly-once
    from weir.engine.systems.filelog.transactions import InitResult, TransactionalProducer

__all__ = [
    "TASK_PROCESSING_GUARANTEE",
    "ProcessingGuarantee",
    "processing_guarantee",
    "transactional_id",
    "transactional_systems",
    "TaskTransaction",
    "TransactionalChangelog",
]

log = logging.getLogger("weir.container")

TASK_PROCESSING_GUARANTEE = declare(
    "task.processing.guarantee", str, "at_least_once",
    "at_least_once (Samza's behaviour: after a crash the messages processed since the last "
    "commit are processed again and what they sent is sent again) or exactly_once (Kafka "
    "Streams' exactly_once_v2, which is accepted too): each task's outputs and changelog "
    "writes since its last commit are one transaction on the file log, committed atomically "
    "with its checkpoint, so after a crash a commit interval's outputs, state changes and "
    "input offsets are all visible or none is. Needs every store changelog on a file-log "
    "system; outputs to systems without transactions stay at-least-once. See "
    "docs/EXACTLY-ONCE.md.", component="exactly-once",
    choices=("at_least_once", "exactly_once", "exactly_once_v2"))


class ProcessingGuarantee(Enum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


def processing_guarantee(config: Config, registry: Any,
                         specs: Iterable[StoreSpec] = ()) -> ProcessingGuarantee:
    """The job's guarantee; with exactly-once every logged store's changelog must be on a
    file-log system (a ConfigError names ``stores.<s>.changelog`` otherwise)."""
    value = TASK_PROCESSING_GUARANTEE.get(config)
    guarantee = (ProcessingGuarantee.AT_LEAST_ONCE if value == "at_least_once"
                 else ProcessingGuarantee.EXACTLY_ONCE)
    if guarantee is ProcessingGuarantee.EXACTLY_ONCE:
        for spec in specs:
            if spec.logged and not _is_file_log(registry, spec.changelog[0]):
                key = f"stores.{spec.name}.changelog"
                raise ConfigError(
                    f"task.processing.guarantee=exactly_once needs the changelog of store "
                    f"'{spec.name}' on a file-log system (transactions exist there only), but "
                    f"'{spec.changelog[0]}' is not one; point {key} at a file-log system, or "
                    f"set task.processing.guarantee=at_least_once", key=key,
                    origin=config.origin(key))
    return guarantee


def _is_file_log(registry: Any, system: str) -> bool:
    from weir.engine.systems.filelog import FileLogSystemFactory
    try:
        return isinstance(registry.factory(system), FileLogSystemFactory)
    except ConfigError:
        return False


def transactional_systems(registry: Any, systems: Iterable[str]) -> list[str]:
    """The systems among ``systems`` that take part in transactions (the file logs)."""
    return sorted(s for s in set(systems) if _is_file_log(registry, s))


def transactional_id(job: JobConfig, task: str) -> str:
    """A task's transactional id: ``<job.name>-<job.id>/<task>`` (one per task, as Kafka
    Streams' producer per task)."""
    return f"{job.name}-{job.id}/{task}"


class TaskTransaction:
    """The transaction of one task across the job's file-log systems (see the module
    docstring). ``producers`` maps each system to the task's transactional producer."""

    def __init__(self, task: str, producers: Mapping[str, TransactionalProducer],
                 checkpoint_path: str):
        self.task = str(task)
        self.producers = dict(producers)
        self.checkpoint_path = str(checkpoint_path)

    @classmethod
    def for_task(cls, task: str, job: JobConfig, registry: Any, systems: Iterable[str],
                 checkpoint_path: str) -> "TaskTransaction":
        """One producer per file-log system among ``systems``, under the task's
        transactional id (not initialised yet: :meth:`recover` does that)."""
        from weir.engine.systems.filelog.transactions import TransactionalProducer

        tid = transactional_id(job, task)
        producers = {system: TransactionalProducer(registry.admin(system).settings, tid)
                     for system in transactional_systems(registry, systems)}
        return cls(task, producers, checkpoint_path)

    # -- start ----------------------------------------------------------------------------
    def recover(self, checkpoint: Checkpoint | None, *,
                job_config: str | None = None) -> list[InitResult]:
        """Initialise every producer (fencing older incarnations) and finish the previous
        run's transaction: roll it forward when ``checkpoint`` names it (the crash came after
        the checkpoint rename), abort it otherwise. A checkpoint that names a transaction the
        producer state records as aborted was written by a fenced process:
        :class:`~weir.engine.errors.FencedCheckpointError`, nothing changed."""
        named = _named(checkpoint)
        self.check(checkpoint, job_config=job_config)
        results = []
        for system, producer in sorted(self.producers.items()):
            result = producer.init_transactions(
                lambda tid, named=named: any(tid.matches(entry) for entry in named))
            if result.resolved is not None:
                log.info("task '%s': %s the transaction %d of its previous run on system "
                         "'%s' (%d partition(s))", self.task,
                         "rolled forward" if result.resolved == "committed" else "aborted",
                         result.previous.sequence, system, len(result.previous.partitions))
            results.append(result)
        return results

    def check(self, checkpoint: Checkpoint | None, *, job_config: str | None = None) -> None:
        """Refuse, changing nothing, a checkpoint that :meth:`recover` cannot act on: one
        naming a transaction whose producer state is gone
        (:class:`~weir.engine.errors.ProducerStateMissingError`), or one the state records as
        aborted (:class:`~weir.engine.errors.FencedCheckpointError`). The container checks
        every task before it recovers any."""
        named = _named(checkpoint)
        for system, producer in self.producers.items():
            self._require_states(system, producer, named, job_config)
            state = producer.state()
            if state is None:
                continue
            for entry in named:
                if entry.get("transactional_id") != producer.transactional_id \
                        or entry.get("producer_id") != state.producer_id:
                    continue
                epoch, sequence = int(entry.get("epoch", -1)), int(entry.get("sequence", -1))
                if state.was_aborted(epoch, sequence):
                    raise FencedCheckpointError(self.task, self.checkpoint_path,
                                                producer.transactional_id, epoch, sequence,
                                                job_config)

    def _require_states(self, system: str, producer: TransactionalProducer,
                        named: list[Mapping[str, Any]], job_config: str | None) -> None:
        """Every transaction the checkpoint names on ``system`` has its producer state."""
        for entry in named:
            if entry.get("system", system) != system \
                    or entry.get("transactional_id") != producer.transactional_id:
                continue
            pid = int(entry.get("producer_id", -1))
            if load_producer_state(producer.root, pid) is None:
                raise ProducerStateMissingError(
                    self.task, self.checkpoint_path, producer.transactional_id, pid,
                    int(entry.get("epoch", -1)), int(entry.get("sequence", -1)),
                    producer_state_path(producer.root, pid), job_config)

    # -- commit ---------------------------------------------------------------------------
    def prepare(self) -> dict[str, Any]:
        """Make the transaction durable on every system; returns the checkpoint extras that
        name it (empty when nothing was written since the last commit)."""
        decision = {"kind": "weir-checkpoint", "path": self.checkpoint_path, "task": self.task}
        named: list[TxnId] = []
        for _, producer in sorted(self.producers.items()):
            txn = producer.prepare(decision)
            if txn is not None:
                named.append(txn)
        return {CHECKPOINT_EXTRAS_KEY: [t.to_extras() for t in named]} if named else {}

    def commit(self) -> None:
        """The checkpoint is durable: write the commit markers."""
        for _, producer in sorted(self.producers.items()):
            producer.commit()

    def close(self) -> None:
        """Abort an ongoing transaction (no final commit happened), leave a prepared one to
        the next start, release the producers. Every producer is attempted."""
        first: BaseException | None = None
        for _, producer in sorted(self.producers.items()):
            try:
                producer.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others, then report
                first = first or exc
        if first is not None:
            raise first


def _named(checkpoint: Checkpoint | None) -> list[Mapping[str, Any]]:
    if checkpoint is None:
        return []
    entries = checkpoint.extras.get(CHECKPOINT_EXTRAS_KEY) or []
    return [e for e in entries if isinstance(e, Mapping)]


class TransactionalChangelog(ForwardingChangelog):
    """The sink and source of one changelog partition written through a task's
    transactional producer. Batch headers and markers take offsets, so the newest offset is
    the partition writer's position (exact: the task is the partition's only writer) rather
    than a count of appended records. Every other capability -- the bulk read restore uses,
    the partition's identity recorded in ``OFFSET`` files, the compaction lag -- is forwarded
    (:class:`~weir.stores.changelog.ForwardingChangelog`)."""

    __slots__ = ("producer", "stream", "partition_number", "append", "append_all",
                 "append_columns")

    def __init__(self, sink: Any, source: Any, producer: TransactionalProducer):
        super().__init__(sink, source)
        self.producer = producer
        self.stream, self.partition_number = sink.ssp.stream, sink.ssp.partition
        # The sink's own methods, bound once: an append costs no frame of this wrapper.
        self.append = sink.append
        self.append_all = sink.append_all
        self.append_columns = sink.append_columns

    def newest_offset(self) -> int:
        newest = self.producer.newest_offset(self.stream, self.partition_number)
        return self.source.newest_offset() if newest is None else newest

    def __repr__(self) -> str:
        return f"TransactionalChangelog({self.source!r})"
