"""The job coordinator: config, job model and assignments from the coordinator stream.

A :class:`JobCoordinator` runs inside ``weir run`` (Samza's job coordinator / application
master). :meth:`~JobCoordinator.start`:

1. takes the job's run lock beside the coordinator stream
   (:class:`~weir.engine.coordinator.run_lock.RunLock`, held until :meth:`~JobCoordinator.stop`:
   a second run of the job, even one with other directories, is refused with
   :class:`~weir.engine.coordinator.errors.JobAlreadyRunningError`), creates the coordinator
   stream if missing and bootstraps it
   (:class:`~weir.engine.coordinator.stream.CoordinatorStreamStore`);
2. checks the submitted config against what the stream says about earlier runs
   (:func:`~weir.engine.coordinator.guard.check_immutable_settings`); with
   :attr:`StateReset.RESET` it deletes the job's state instead
   (:mod:`weir.engine.coordinator.reset`);
3. builds the job model with the stream's assignments (a task keeps its changelog partition
   and, while the container count stays, its container);
4. writes the submitted config's changes (:mod:`weir.engine.coordinator.submit`), the model's
   new assignments and the locality of the containers that run in the caller's process in
   one batch, and reads the job's config back from the stream: the stream is the source of
   truth (a model built from other config is built again from the stream's).

While the job runs, :meth:`~JobCoordinator.start_catch_up` reads new messages every
``job.coordinator.catchup.interval.ms``. New config (``weir coordinator set-config``) that
passes the same checks, and does not move the directories the job keeps its state in
(:func:`~weir.engine.coordinator.guard.check_running_directories`), gives a new model with the
next version; listeners get a :class:`ModelChange` naming the containers to restart, stop and
start. Config that fails the checks is refused (logged, shown by ``/health``); the running
model stays.

:meth:`~JobCoordinator.serve` starts the HTTP endpoint
(:class:`~weir.engine.coordinator.server.CoordinatorServer`); the runner calls it before it
starts container processes, and for a job whose one container runs in its own process only
when ``job.coordinator.http.serve=always`` or a port is set.

Example::

    coordinator = JobCoordinator(load_config("job.properties"))
    model = coordinator.start()          # written, checked, built
    url = coordinator.serve()            # http://127.0.0.1:PORT
    coordinator.start_catch_up()
    ...
    coordinator.stop()
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

import orjson
from weir.stores._crc import crc32c

from weir.stores.config import Config
from weir.stores.errors import WeirError

from weir.engine.config.streams import all_input_streams
from weir.engine.coordinator.errors import JobAlreadyRunningError
from weir.engine.coordinator.guard import (StateDirectories, check_immutable_settings,
                                           check_running_directories, directory_changes)
from weir.engine.coordinator.messages import CoordinatorMessage, MessageType
from weir.engine.coordinator.run_lock import RunLock
from weir.engine.coordinator.settings import CoordinatorSettings
from weir.engine.coordinator.state import (CoordinatorState, Locality, assignment_messages,
                                            localities)
from weir.engine.coordinator.stream import CoordinatorStreamStore
from weir.engine.coordinator.submit import ConfigDiff, config_messages, merge_origins
from weir.engine.jobmodel.model import CONTAINER_COUNT, JobModel, build_job_model
from weir.engine.systems.registry import SystemRegistry

if TYPE_CHECKING:
    from weir.engine.coordinator.prometheus import Family

__all__ = ["StateReset", "ModelSnapshot", "ModelChange", "JobCoordinator", "plan_restarts",
           "SUBMIT_SOURCE", "COORDINATOR_SOURCE"]

log = logging.getLogger("weir.coordinator")

SUBMIT_SOURCE = "job-submission"
"""The ``source`` of the config messages ``weir run`` writes."""
COORDINATOR_SOURCE = "job-coordinator"
"""The ``source`` of the assignments the job coordinator writes."""

_HISTORY = 16
"""Job model versions kept for containers that start with an older version than the newest
(a container restarted for version N reads version N even when N+1 appeared meanwhile)."""

_MODEL_ONLY_KEYS = frozenset({CONTAINER_COUNT.name, *CONTAINER_COUNT.aliases})
"""Config keys that reach the containers only through the job model: a change restarts just
the containers whose model changed."""


class StateReset(Enum):
    """Whether a start may delete the job's state to accept new immutable settings."""

    KEEP = "keep"
    """Refuse changes of immutable settings (the default)."""
    RESET = "reset"
    """``--reset-state``: delete local stores, changelogs, checkpoints and assignments."""


@dataclass(frozen=True)
class ModelSnapshot:
    """One version of the job model, serialized once for every request that reads it."""

    version: int
    model: JobModel
    model_json: bytes
    config_json: bytes
    model_id: str
    created_ms: int

    @classmethod
    def of(cls, version: int, model: JobModel) -> "ModelSnapshot":
        data = model.to_dict()
        data["job-model-version"] = version
        containers = orjson.dumps(data["containers"],
                                  option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
        config = model.config
        return cls(version, model, orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS),
                   orjson.dumps({"job-model-version": version,
                                 "config": {k: config[k] for k in sorted(config)},
                                 "origins": {k: config.origin(k) for k in sorted(config)
                                             if config.origin(k)}}),
                   f"{crc32c(containers):08x}", int(time.time() * 1000))


@dataclass(frozen=True)
class ModelChange:
    """A new job model while the job runs, and what the runner must do about it."""

    old: ModelSnapshot
    new: ModelSnapshot
    diff: ConfigDiff
    restart: tuple[str, ...]
    """Containers in both models whose model or config changed: stop (final commit), start."""
    stop: tuple[str, ...]
    """Containers the new model no longer has."""
    start: tuple[str, ...]
    """Containers the new model adds."""


def plan_restarts(old: JobModel, new: JobModel) -> tuple[tuple[str, ...], tuple[str, ...],
                                                         tuple[str, ...]]:
    """``(restart, stop, start)`` container ids for a change from ``old`` to ``new``.

    A container restarts when its tasks changed, or when any config key other than the
    container count changed (containers read their config once, at start)."""
    def rest(config: Config) -> dict[str, str]:
        return {k: v for k, v in config.items() if k not in _MODEL_ONLY_KEYS}
    config_changed = rest(old.config) != rest(new.config)
    restart = tuple(cid for cid in old.containers if cid in new.containers and (
        config_changed or old.containers[cid] != new.containers[cid]))
    stop = tuple(cid for cid in old.containers if cid not in new.containers)
    start = tuple(cid for cid in new.containers if cid not in old.containers)
    return restart, stop, start


@dataclass
class _Counters:
    catch_ups: int = 0
    catch_up_failures: int = 0
    config_changes: int = 0
    config_refused: int = 0
    locality_writes: int = 0
    restarts_planned: int = 0
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))


class JobCoordinator:
    """Config, job model and assignments of one job; see the module docstring.

    ``config`` is the submitted config (file plus ``--set``); ``registry`` the job's systems
    (made from ``config`` when not given).
    """

    def __init__(self, config: Config, *, registry: SystemRegistry | None = None,
                 reset: StateReset = StateReset.KEEP):
        self.submitted = config if isinstance(config, Config) else Config(config)
        self.settings = CoordinatorSettings.from_config(self.submitted)
        self.registry = registry if registry is not None else SystemRegistry(self.submitted)
        self.reset = reset
        self.store = CoordinatorStreamStore(self.registry, self.settings,
                                            source=COORDINATOR_SOURCE)
        self.host = socket.gethostname()
        self._snapshot: ModelSnapshot | None = None
        self._history: dict[int, ModelSnapshot] = {}
        self._listeners: list[Callable[[ModelChange], None]] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.counters = _Counters()
        self._refused_config: Config | None = None
        self.refused: str | None = None
        """Why the last config read while running was refused (None: nothing refused)."""
        self.catch_up_error: str | None = None
        self.last_catch_up_ms = 0
        self.directories: StateDirectories | None = None
        """Where the job keeps its state (set by :meth:`start`; config written while it runs
        may not move them)."""
        self._run_lock: RunLock | None = None

    # -- start ---------------------------------------------------------------------------
    def start(self, *, local: Callable[[JobModel], Iterable[str]] | None = None) -> JobModel:
        """Lock, bootstrap, check, write the config, build the job model (see the module
        docstring). Raises JobAlreadyRunningError / ImmutableSettingError / ConfigError /
        StreamNotFoundError with nothing written when the submission is refused (the run lock
        is released again).

        The config's changes, the model's new assignments and the locality of the
        containers ``local(model)`` names (those that run on this host, in this process: the
        caller knows) go down in one write, one durable batch; then the job's config is read
        back from the stream. When it is not the config the model was built from (a
        ``weir coordinator set-config`` wrote between the bootstrap and this write), the
        model is built again from what the stream holds and its assignments written."""
        if self._run_lock is None or not self._run_lock.held:
            self.directories = StateDirectories.of(self.submitted)
            self._run_lock = RunLock.acquire(self.registry, self.settings, self.directories)
        try:
            return self._start(local)
        except BaseException:
            self._run_lock.release()
            raise

    def claim_run(self) -> None:
        """Take the run lock ahead of :meth:`start` (``weir run`` does, before it takes the
        job lock, so that a second run with other directories is refused before it creates
        anything). A second run with the *same* directories is left to the job lock, which
        refuses it with ``JobLockedError`` naming the holder; :meth:`start` takes the run lock
        if this did not."""
        self.directories = StateDirectories.of(self.submitted)
        try:
            self._run_lock = RunLock.acquire(self.registry, self.settings, self.directories)
        except JobAlreadyRunningError as exc:
            if StateDirectories.from_record(exc.holder) != self.directories:
                raise

    def _start(self, local: Callable[[JobModel], Iterable[str]] | None) -> JobModel:
        store, config = self.store, self.submitted
        counts = self.registry.partition_counts(all_input_streams(config))
        read = store.bootstrap()  # a missing stream reads as empty; created when written
        previous = CoordinatorState.from_store(store)
        log.info("bootstrapped coordinator stream %s.%s: %d messages, %d config keys",
                 self.settings.system, self.settings.stream, read, len(previous.config))
        if self.reset is StateReset.RESET:
            from weir.engine.coordinator.reset import reset_job_state
            reset_job_state(previous, config, store, self.registry)
            previous = CoordinatorState(config=previous.config)
        else:
            check_immutable_settings(previous, config, counts)
            self._warn_moved_directories(previous, config)
        diff = ConfigDiff.between(previous.config, config)
        # Once the submission is written, the stream holds the submitted config's values.
        model = build_job_model(config, counts, changelog_mapping=previous.changelog,
                                task_assignment=previous.task_containers or None)
        messages = config_messages(previous.config, config, source=SUBMIT_SOURCE) if diff else []
        messages += assignment_messages(previous, model, source=COORDINATOR_SOURCE)
        localities = [m for cid in (local(model) if local is not None else ())
                      if (m := self._locality_message(cid, self.host)) is not None]
        store.write(messages + localities)
        if diff:
            log.info("wrote the job's config to the coordinator stream: %s", diff.describe())
        self.counters.locality_writes += len(localities)
        effective = merge_origins(store.config(), config)  # the stream is the source of truth
        if dict(effective) == dict(model.config):
            model = replace(model, config=effective)
        else:
            log.info("the coordinator stream's config changed while the job started: building "
                     "the job model from it")
            state = CoordinatorState.from_store(store)
            model = build_job_model(effective, counts, changelog_mapping=state.changelog,
                                    task_assignment=previous.task_containers or None)
            store.write(assignment_messages(state, model, source=COORDINATOR_SOURCE))
        self._warn_moved_hosts(previous, model)
        with self._lock:
            self._publish(ModelSnapshot.of(1, model))
        return model

    def _publish(self, snapshot: ModelSnapshot) -> None:
        self._history[snapshot.version] = snapshot
        for old in sorted(self._history)[:-_HISTORY]:
            del self._history[old]
        self._snapshot = snapshot

    def _warn_moved_directories(self, previous: CoordinatorState, config: Config) -> None:
        if previous.is_new:
            return
        for key, old, new in directory_changes(previous.config, config):
            log.warning("%s changed since the last run (%s -> %s): the job reads its "
                        "checkpoints and stores from %s. If its data was not moved there, a "
                        "task whose changelog holds state refuses to start "
                        "(StateWithoutCheckpointError): stop, then move the data there "
                        "(docs/COORDINATOR.md, 'Moving a job's data') or put the old value "
                        "back", key, old if old is not None else "not set",
                        new if new is not None else "not set", self.directories.describe())

    def _warn_moved_hosts(self, previous: CoordinatorState, model: JobModel) -> None:
        if not self.settings.host_affinity:
            return
        for cid in model.containers:
            loc = previous.locality.get(cid)
            if loc is not None and loc.host != self.host:
                log.warning("container %s last ran on host %s, not on this host %s: its "
                            "local stores are restored from their changelogs here", cid,
                            loc.host, self.host)

    # -- reading -------------------------------------------------------------------------
    @property
    def snapshot(self) -> ModelSnapshot | None:
        """The current job model version (None before :meth:`start`)."""
        return self._snapshot

    def snapshot_of(self, version: int) -> ModelSnapshot | None:
        """Job model ``version`` if it is one of the last 16 (None otherwise)."""
        return self._history.get(version)

    def version_of(self, model: JobModel) -> int:
        """The version of ``model`` (a model this coordinator published; the newest version
        when it is not one of the last 16)."""
        for version, snap in sorted(self._history.items(), reverse=True):
            if snap.model is model:
                return version
        return self._snapshot.version if self._snapshot is not None else 0

    @property
    def model(self) -> JobModel:
        snap = self._snapshot
        if snap is None:
            raise RuntimeError("the job coordinator has not started")
        return snap.model

    @property
    def url(self) -> str | None:
        """The HTTP endpoint's URL once :meth:`serve` started it."""
        return self._server.url if self._server is not None else None

    @property
    def container_token(self) -> str:
        """What the job's container processes send the endpoint (``WEIR_COORDINATOR_TOKEN``),
        once :meth:`serve` started it; "" before."""
        return self._server.container_token if self._server is not None else ""

    def locality(self) -> dict[str, Locality]:
        """Container id -> where it last ran (the stream's ``set-container-host-assignment``)."""
        return localities(self.store)

    # -- locality ------------------------------------------------------------------------
    def record_locality(self, container_id: str, host: str, *, jmx_url: str = "",
                        jmx_tunneling_url: str = "") -> None:
        """Write where container ``container_id`` runs (``set-container-host-assignment``),
        unless the stream already says so."""
        with self._lock:
            message = self._locality_message(container_id, host, jmx_url=jmx_url,
                                             jmx_tunneling_url=jmx_tunneling_url)
            if message is None:
                return
            self.store.write([message])
            self.counters.locality_writes += 1

    def _locality_message(self, container_id: str, host: str, *, jmx_url: str = "",
                          jmx_tunneling_url: str = "") -> CoordinatorMessage | None:
        """The ``set-container-host-assignment`` to write, or None when the stream already
        says so."""
        current = self.store.get(MessageType.SET_CONTAINER_HOST_ASSIGNMENT, container_id)
        if current is not None and current.value("host") == host \
                and current.value("jmx-url") == jmx_url:
            return None
        return CoordinatorMessage.set_container_host(
            container_id, host, jmx_url=jmx_url, jmx_tunneling_url=jmx_tunneling_url,
            source=f"container-{container_id}")

    # -- running -------------------------------------------------------------------------
    def on_change(self, listener: Callable[[ModelChange], None]) -> Callable[[], None]:
        """Call ``listener`` (on the catch-up thread) with every new job model; returns the
        function that stops it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)
        return unsubscribe

    def serve(self, *, wait: bool = True) -> str:
        """Start the HTTP endpoint; returns its URL. With ``wait`` False it returns once the
        socket listens, and :meth:`wait_served` says whether the endpoint started."""
        from weir.engine.coordinator.server import CoordinatorServer
        if self._server is None:
            self._server = CoordinatorServer(self, self.settings)
            self._server.start(wait=wait)
            log.info("job coordinator of '%s' serves the job model at %s",
                     self.settings.job_name, self._server.url)
        return self._server.url

    def wait_served(self) -> None:
        """Raise CoordinatorError when the HTTP endpoint started by ``serve(wait=False)``
        failed to start (nothing when it runs, or when nothing was served)."""
        if self._server is not None:
            self._server.wait_started()

    def start_catch_up(self) -> None:
        """Read new coordinator messages every ``job.coordinator.catchup.interval.ms``."""
        interval = self.settings.catchup_interval_ms
        if interval <= 0 or self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval / 1000):
                try:
                    self.catch_up_once()
                except Exception as exc:  # noqa: BLE001 - the job keeps its current model
                    self.counters.catch_up_failures += 1
                    self.catch_up_error = f"{type(exc).__name__}: {exc}"
                    log.error("job coordinator: reading the coordinator stream failed; the "
                              "job keeps its current model: %s", exc)

        self._thread = threading.Thread(target=loop, name="weir-coordinator-catch-up",
                                        daemon=True)
        self._thread.start()

    def catch_up_once(self) -> ModelChange | None:
        """Read new messages; on new config, build and publish a new model (see the module
        docstring). Returns the change, or None."""
        with self._lock:
            messages = self.store.catch_up()
            self.counters.catch_ups += 1
            self.last_catch_up_ms = int(time.time() * 1000)
            self.catch_up_error = None
            current = self._snapshot
            if current is None:
                return None
            if any(m.type == MessageType.SET_CONFIG for m in messages):
                self._refused_config = None  # new config: try again
            stream_config = self.store.config()
            if stream_config == current.model.config or stream_config == self._refused_config:
                return None
            change = self._rebuild(current, stream_config)
        if change is not None:
            for listener in list(self._listeners):
                try:
                    listener(change)
                except Exception:  # noqa: BLE001 - one listener never stops the others
                    log.exception("job coordinator: a model-change listener failed")
        return change

    def _rebuild(self, current: ModelSnapshot, stream_config: Config) -> ModelChange | None:
        config = merge_origins(stream_config, self.submitted)
        diff = ConfigDiff.between(current.model.config, config)
        state = CoordinatorState.from_store(self.store)
        try:
            _check_running_config(config)
            registry = SystemRegistry(config)
            counts = registry.partition_counts(all_input_streams(config))
            check_immutable_settings(replace(state, config=current.model.config), config, counts)
            if self.directories is not None:
                check_running_directories(self.directories, current.model.config, config)
            model = build_job_model(config, counts, changelog_mapping=state.changelog,
                                    task_assignment=current.model.task_assignment())
        except WeirError as exc:
            self._refused_config = stream_config
            self.counters.config_refused += 1
            self.refused = f"config change refused ({diff.describe()}): {exc}"
            log.error("job coordinator: %s; the job keeps running with job model version %d",
                      self.refused, current.version)
            return None
        self.refused = None
        self.store.write(assignment_messages(state, model, source=COORDINATOR_SOURCE))
        snapshot = ModelSnapshot.of(current.version + 1, model)
        restart, stop, start = plan_restarts(current.model, model)
        self._publish(snapshot)
        self.counters.config_changes += 1
        self.counters.restarts_planned += len(restart) + len(stop) + len(start)
        log.info("job coordinator: new config (%s) gives job model version %d; containers to "
                 "restart: %s, stop: %s, start: %s", diff.describe(), snapshot.version,
                 ", ".join(restart) or "none", ", ".join(stop) or "none",
                 ", ".join(start) or "none")
        return ModelChange(current, snapshot, diff, restart, stop, start)

    # -- health and metrics --------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        snap = self._snapshot
        status = "starting" if snap is None else (
            "failing" if self.catch_up_error else "ok")
        return {
            "status": status,
            "job": self.settings.job_name,
            "job-id": self.settings.job_id,
            "coordinator-stream": f"{self.settings.system}.{self.settings.stream}",
            "job-model-version": snap.version if snap else None,
            "job-model-id": snap.model_id if snap else None,
            "containers": len(snap.model.containers) if snap else 0,
            "tasks": len(snap.model.tasks()) if snap else 0,
            "messages-read": self.store.messages_read,
            "next-offset": self.store.next_offset,
            "last-catch-up-ms": self.last_catch_up_ms,
            "catch-up-error": self.catch_up_error,
            "refused-config": self.refused,
        }

    def metric_families(self) -> list[Family]:
        """The coordinator's Prometheus families (``prometheus`` is imported here: only the
        endpoint's ``/metrics`` asks for them)."""
        from weir.engine.coordinator.prometheus import Family

        snap, c = self._snapshot, self.counters
        job = {"job": self.settings.job_name, "job_id": self.settings.job_id}
        return [
            Family("weir_coordinator_job_model_version", "gauge",
                   "Version of the job model being served (1 at start, +1 per config change).",
                   [(job, snap.version if snap else 0)]),
            Family("weir_coordinator_containers", "gauge", "Containers in the job model.",
                   [(job, len(snap.model.containers) if snap else 0)]),
            Family("weir_coordinator_tasks", "gauge", "Tasks in the job model.",
                   [(job, len(snap.model.tasks()) if snap else 0)]),
            Family("weir_coordinator_stream_messages_read_total", "counter",
                   "Coordinator stream messages read (bootstrap and catch-up).",
                   [(job, self.store.messages_read)]),
            Family("weir_coordinator_stream_messages_written_total", "counter",
                   "Coordinator stream messages written by this coordinator.",
                   [(job, self.store.messages_written)]),
            Family("weir_coordinator_catch_ups_total", "counter",
                   "Reads of new coordinator stream messages while running.",
                   [(job, c.catch_ups)]),
            Family("weir_coordinator_catch_up_failures_total", "counter",
                   "Catch-ups that failed (the job kept its model).",
                   [(job, c.catch_up_failures)]),
            Family("weir_coordinator_config_changes_total", "counter",
                   "Config changes applied while running (each a new job model version).",
                   [(job, c.config_changes)]),
            Family("weir_coordinator_config_refused_total", "counter",
                   "Config changes refused while running (immutable setting, bad value).",
                   [(job, c.config_refused)]),
            Family("weir_coordinator_container_restarts_planned_total", "counter",
                   "Container restarts, stops and starts asked for by new job models.",
                   [(job, c.restarts_planned)]),
            Family("weir_coordinator_locality_writes_total", "counter",
                   "Container locality records written.", [(job, c.locality_writes)]),
            Family("weir_coordinator_start_time_seconds", "gauge",
                   "When the job coordinator started (Unix time).", [(job, c.started_ms / 1000)]),
        ]

    # -- stop ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop catch-up and the HTTP endpoint, close the stream. Safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._server is not None:
            self._server.stop()
            self._server = None
        self.store.close()
        if self._run_lock is not None:
            self._run_lock.release()

    def __enter__(self) -> "JobCoordinator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _check_running_config(config: Config) -> None:
    """Parse every declared key of config written while the job runs (a bad value is refused
    before it reaches a container), the job-level keys, and every settings object a container
    builds from it (``weir run``'s preflight: ``task.max.concurrency=0`` parses as an int but
    no container runs with it)."""
    from weir.engine.config.job import JobConfig, validate_config
    from weir.engine.container.settings import JobSettings
    from weir.engine.task import load_task_factory

    validate_config(config)
    job = JobConfig.from_config(config)
    load_task_factory(config)
    JobSettings.from_config(config, SystemRegistry(config), job=job)


