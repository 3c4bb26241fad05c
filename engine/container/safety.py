"""Start-up checks that a task's checkpoint, its state and its streams belong together.

The container runs them after reading the checkpoints and before restoring anything, so a
mismatch stops the job before a single file is changed:

* **Stream identity** (:func:`check_identities`): every input partition and every store's
  changelog partition must be the incarnation the checkpoint was written against (the
  identity a system reports in ``PartitionMetadata.identity``; the file log's is the random
  ``incarnation`` in ``stream.json``). A stream deleted and created again gets a new identity,
  and its offsets name other records: resuming there would skip or double-count. Mismatch:
  :class:`~weir.engine.errors.StreamIdentityMismatchError`. A checkpoint written before
  identities existed is accepted (logged once) and records them from its next commit.
* **State without a checkpoint** (:func:`check_state_without_checkpoint`): a task without a
  checkpoint whose logged store holds state -- records in its changelog (committed, or of a
  transaction still open; transaction markers and aborted records are not state), an ``OFFSET`` file
  vouching for non-empty local files, or local engine files nothing vouches for -- would
  restore (or wipe) that state and then read its input from the default offsets again,
  counting every message twice. Refused with
  :class:`~weir.recovery.errors.StateWithoutCheckpointError` offering the safe ways out. A
  first run is never refused: its changelogs are empty and its stores have no files yet, or
  engine files that hold no key (a first run killed before its first commit: the engine is
  opened and looked into only then).

Every message names the ``weir checkpoint`` command to run with the job's own config file
(:func:`config_file_of`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.errors import ChangelogPartitionMismatchError, StateWithoutCheckpointError
from weir.recovery.offset_file import OFFSET_FILE_NAME, OffsetFileCorruptError, read_offset_file
from weir.stores.offline import open_read_only
from weir.stores.changelog import NO_OFFSET
from weir.stores.locking import LOCK_FILE_NAME
from weir.stores.config import Config

from weir.engine.consumers.offsets import OffsetPolicy, offset_policy
from weir.engine.container.task_storage import LoggedStore
from weir.engine.errors import OpenTransactionError, StreamIdentityMismatchError
from weir.engine.model import SystemStream, SystemStreamPartition, TaskName
from weir.engine.systems.api import partition_identities

__all__ = ["config_file_of", "current_identities", "check_identities",
           "check_changelog_partition", "check_state_without_checkpoint", "changelog_holds_state",
           "reset_ssps"]

log = logging.getLogger("weir.container")


def config_file_of(config: Config) -> str:
    """The job's config file as recorded in the config's origins (``<job config>`` when the
    config was built in code): what the ``weir checkpoint`` commands take."""
    for key in ("job.name", *sorted(config)):
        origin = config.origin(key)
        if origin and ":" in origin and not origin.startswith("--"):
            return origin.rsplit(":", 1)[0]
    return "<job config>"


def current_identities(registry, ssps: Iterable[SystemStreamPartition]
                       ) -> dict[SystemStreamPartition, str | None]:
    """The identity of each partition now, asking each system's admin once."""
    by_system: dict[str, list[SystemStreamPartition]] = {}
    for ssp in ssps:
        by_system.setdefault(ssp.system, []).append(ssp)
    out: dict[SystemStreamPartition, str | None] = {}
    for system, group in sorted(by_system.items()):
        out.update(partition_identities(registry.admin(system), group))
    return out


def _short(identity: str | None) -> str:
    return "none" if identity is None else identity[:12]


def check_identities(task: TaskName, checkpoint: Checkpoint | None,
                     inputs: Mapping[SystemStreamPartition, str | None],
                     changelogs: Mapping[str, tuple[SystemStreamPartition, str | None]], *,
                     checkpoint_path: str, job_config: str,
                     reset: Collection[SystemStreamPartition] = ()) -> None:
    """Raise :class:`StreamIdentityMismatchError` when ``checkpoint`` was written against
    another incarnation of one of the task's inputs (``inputs``: SSP -> current identity;
    SSPs in ``reset`` ignore their checkpointed offsets and are not checked) or of one of its
    stores' changelogs (``changelogs``: store -> (changelog SSP, current identity))."""
    if checkpoint is None:
        return
    unknown = []
    for ssp, current in sorted(inputs.items()):
        if ssp not in checkpoint.input_offsets or ssp in reset:
            continue
        recorded = checkpoint.input_identities.get(ssp)
        if recorded is None:
            unknown.append(str(ssp))
            continue
        if recorded != current:
            offset = checkpoint.input_offsets[ssp]
            raise StreamIdentityMismatchError(
                f"task '{task}': input stream '{ssp.system}.{ssp.stream}' partition "
                f"{ssp.partition} is not the stream its checkpoint was written against "
                f"(checkpoint {checkpoint_path} recorded identity {_short(recorded)}, the "
                f"stream now has {_short(current)}): it was deleted and created again, so the "
                f"checkpointed offset {offset} names other records now. Nothing was read or "
                f"changed. Put the old stream's files back from a backup, or, if they are gone "
                f"for good, start the job's state over with `weir checkpoint reset "
                f"{job_config} --yes` (moves checkpoints, local stores and changelogs aside "
                f"together; the input is then read from samza.offset.default)",
                task=str(task), ssp=ssp, recorded=recorded, current=current,
                checkpoint_path=checkpoint_path)
    for store, (ssp, current) in sorted(changelogs.items()):
        if store not in checkpoint.changelog_offsets:
            continue
        check_changelog_partition(task, store, checkpoint, ssp, checkpoint_path=checkpoint_path,
                                  job_config=job_config)
        if store not in checkpoint.changelog_partitions:
            unknown.append(f"changelog partition of store '{store}'")
        recorded = checkpoint.changelog_identities.get(store)
        if recorded is None:
            unknown.append(f"changelog of store '{store}'")
            continue
        if recorded != current:
            raise StreamIdentityMismatchError(
                f"task '{task}': the changelog of store '{store}' ('{ssp.system}.{ssp.stream}' "
                f"partition {ssp.partition}) is not the one its checkpoint was written against "
                f"(checkpoint {checkpoint_path} recorded identity {_short(recorded)}, the "
                f"changelog now has {_short(current)}): it was deleted and created again, so "
                f"the checkpointed changelog offset {checkpoint.changelog_offsets[store]} "
                f"names other records and restoring from it would give the wrong state. "
                f"Nothing was restored or changed. Put the old changelog's files back from a "
                f"backup, or start the job's state over with `weir checkpoint reset "
                f"{job_config} --yes`",
                task=str(task), ssp=ssp, recorded=recorded, current=current,
                checkpoint_path=checkpoint_path, store=store)
    if unknown:
        log.info("task '%s': checkpoint %s records no stream identity (or changelog "
                 "partition) for %s (written by an older Weir, nothing to check them against); "
                 "they are recorded from the next commit on", task, checkpoint_path,
                 ", ".join(unknown))


def check_changelog_partition(task: TaskName, store: str, checkpoint: Checkpoint,
                              ssp: SystemStreamPartition, *, checkpoint_path: str,
                              job_config: str) -> None:
    """Raise :class:`~weir.recovery.errors.ChangelogPartitionMismatchError` when
    ``checkpoint`` recorded another changelog partition for ``store`` than ``ssp``, the one
    the job model (the coordinator stream's ``set-changelog``) gives the task now. A
    checkpoint that recorded none (written before the field existed) is not checked."""
    recorded = checkpoint.changelog_partitions.get(store)
    if recorded is None or tuple(recorded) == (ssp.system, ssp.stream, ssp.partition):
        return
    system, stream, partition = recorded
    raise ChangelogPartitionMismatchError(
        f"task '{task}': store '{store}' would be restored from changelog partition "
        f"{ssp.system}.{ssp.stream}#{ssp.partition} (the task's changelog partition in the job's "
        f"coordinator stream now), but its checkpoint {checkpoint_path} was written against "
        f"{system}.{stream}#{partition}: that partition holds the task's state, the other "
        f"one another task's (or nothing), and restoring from it would run the task on the "
        f"wrong state. Nothing was restored or changed. The coordinator stream's changelog "
        f"assignment of the task was changed (restored from another backup, or a "
        f"set-changelog record written by hand): put the coordinator stream back from the "
        f"backup that goes with these checkpoints (`weir coordinator show --job "
        f"{job_config}` lists the assignments), or write the task's set-changelog record back to partition "
        f"{partition}; if the checkpoints are the wrong ones, put the right ones back, or "
        f"start the job's state over with `weir checkpoint reset {job_config} --yes`",
        task=str(task), store=store, recorded=(system, stream, partition),
        current=(ssp.system, ssp.stream, ssp.partition), checkpoint_path=checkpoint_path)


def _local_state(store: LoggedStore, *, changelog_empty: bool) -> str | None:
    """What the store's local files hold when that may be state (else None): an ``OFFSET``
    file vouching for a non-empty state, or engine files nothing vouches for (a run that
    crashed after writing them, or an ``OFFSET`` file that cannot be trusted).

    Engine files nothing vouches for are looked into when the changelog is empty: a store
    whose engine holds no key then holds no state (a first run killed before its first
    commit, or a job that had nothing to count), and refusing it would strand a job that
    never counted anything. Keys in the engine beside an empty changelog are state the
    changelog cannot back, and are refused."""
    directory = store.directory
    if directory is None or not directory.is_dir():
        return None
    try:
        found = read_offset_file(directory)
    except OffsetFileCorruptError:
        found = None
        vouched = "a damaged OFFSET file"
    else:
        vouched = "no OFFSET file"
    if found is not None:
        if found.offset == NO_OFFSET:
            return None  # vouched empty
        return (f"its local files in {directory} hold the state up to changelog offset "
                f"{found.offset} (OFFSET file)")
    files = [p.name for p in directory.iterdir() if p.name not in _NOT_STATE]
    if not files:
        return None
    if changelog_empty and found is None and vouched == "no OFFSET file" \
            and _engine_is_empty(store, directory):
        return None
    return (f"its local files in {directory} ({len(files)} engine file(s), {vouched}) may hold "
            f"state that nothing vouches for")


def _engine_is_empty(store: LoggedStore, directory) -> bool:
    """True when the store's engine opens and holds no key; False when it holds one or cannot
    be opened (then the files are treated as state: nothing is assumed)."""
    if store.spec is None:
        return False
    try:  # read only: looking creates nothing (no other engine's files among these)
        engine = open_read_only(store.spec, directory)
    except Exception:  # noqa: BLE001 - unreadable files may be state: refuse, never guess
        return False
    try:
        with engine.all() as items:
            return next(iter(items), None) is None
    except Exception:  # noqa: BLE001
        return False
    finally:
        engine.close()


def changelog_holds_state(source, newest: int | None = None) -> bool:
    """Whether a changelog (whose newest offset is ``newest``, asked when None) holds a
    record that is state: a
    committed one, or one of a transaction still open (it may yet commit). Offsets taken by
    transaction markers alone, or by records of aborted transactions, are not state: a
    changelog holding nothing else restores an empty store (issue 23, point 9: the commit
    markers of an earlier producer in a new changelog refused a job after a reset)."""
    if newest is None:
        newest = source.newest_offset()
    if newest == NO_OFFSET:
        return False
    try:
        for _ in source.read(source.oldest_offset(), newest):
            return True
    except OpenTransactionError:
        return True
    return False


_NOT_STATE = frozenset({LOCK_FILE_NAME, OFFSET_FILE_NAME, LOCK_FILE_NAME + ".tmp"})


def check_state_without_checkpoint(task: TaskName, stores: Iterable[LoggedStore], *,
                                   checkpoint_path: str, previous_exists: bool,
                                   job_config: str) -> None:
    """Raise :class:`StateWithoutCheckpointError` when the task (which has no checkpoint)
    has a logged store holding state in its changelog or its local files."""
    found = []
    for store in stores:
        newest = store.source.newest_offset()
        why = []
        holds = newest != NO_OFFSET and changelog_holds_state(store.source, newest)
        if holds:
            why.append(f"its changelog {store.changelog} holds records up to offset {newest}")
        local = _local_state(store, changelog_empty=not holds)
        if local is not None:
            why.append(local)
        if why:
            found.append((store.name, "; ".join(why)))
    if not found:
        return
    details = "; ".join(f"store '{name}': {why}" for name, why in found)
    if previous_exists:
        previous = (f"go back to the previous checkpoint, which is still there, with `weir "
                    f"checkpoint use-previous {job_config} --task '{task}'`, or ")
    else:
        previous = ""
    raise StateWithoutCheckpointError(
        f"task '{task}' has no checkpoint ({checkpoint_path} is missing) but its state is "
        f"still there ({details}). Restoring that state and reading the input again from its "
        f"default offsets would count every message twice, so nothing was restored or "
        f"changed. To go on safely: {previous}put the checkpoint file back from a backup, or "
        f"start the job's state over with `weir checkpoint reset {job_config} --yes` (moves "
        f"checkpoints, local stores and changelogs aside together, deleting nothing)",
        task=str(task), stores=tuple(name for name, _ in found), checkpoint_path=checkpoint_path)


def reset_ssps(policies: Config | Mapping[SystemStream, OffsetPolicy],
               ssps: Iterable[SystemStreamPartition]) -> set[SystemStreamPartition]:
    """The SSPs whose stream has ``samza.reset.offset=true`` (checkpointed offsets ignored)."""
    if isinstance(policies, Config):
        return {ssp for ssp in ssps if offset_policy(policies, ssp.system_stream).reset}
    return {ssp for ssp in ssps if policies[ssp.system_stream].reset}
