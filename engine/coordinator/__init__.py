"""The coordinator stream and the job coordinator (docs/COORDINATOR.md).

A job's config, its tasks' changelog partitions, task and partition assignments and its
containers' locality live in a one-partition compacted stream,
``__samza_coordinator_<job>_<id>``, of Samza's JSON messages (:mod:`.messages`,
:mod:`.stream`). ``weir run`` writes the submitted config's changes to it; the
:class:`JobCoordinator` reads the job's config back from it, refuses changes of immutable
settings (:mod:`.guard`), builds the job model with stable assignments, follows config
written while the job runs (``weir coordinator set-config``) and serves the model over HTTP
(:mod:`.server`) to the containers (:mod:`.client`). While it runs it holds the job's run lock
(:mod:`.run_lock`): one run of a job at a time, whatever its directories.
docs/COORDINATOR.md is the guide.
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

# Loaded on first use: `weir run` needs the coordinator, not the containers' HTTP client
# (urllib) nor the server; a container process needs the client only.
_LAZY = {
    "ConfigDiff": "weir.engine.coordinator.submit",
    "ContainerSetup": "weir.engine.coordinator.client",
    "CoordinatorClient": "weir.engine.coordinator.client",
    "CoordinatorError": "weir.engine.coordinator.errors",
    "CoordinatorFailure": "weir.engine.coordinator.errors",
    "CoordinatorMessage": "weir.engine.coordinator.messages",
    "CoordinatorSettings": "weir.engine.coordinator.settings",
    "CoordinatorState": "weir.engine.coordinator.state",
    "CoordinatorStreamCorruptError": "weir.engine.coordinator.errors",
    "CoordinatorStreamStore": "weir.engine.coordinator.stream",
    "CoordinatorUnavailableError": "weir.engine.coordinator.errors",
    "CoordinatorWriteError": "weir.engine.coordinator.errors",
    "ImmutableSettingError": "weir.engine.coordinator.errors",
    "JobAlreadyRunningError": "weir.engine.coordinator.errors",
    "JobCoordinator": "weir.engine.coordinator.coordinator",
    "Locality": "weir.engine.coordinator.state",
    "MessageType": "weir.engine.coordinator.messages",
    "ModelChange": "weir.engine.coordinator.coordinator",
    "ModelSnapshot": "weir.engine.coordinator.coordinator",
    "RunLock": "weir.engine.coordinator.run_lock",
    "StateDirectories": "weir.engine.coordinator.guard",
    "StateReset": "weir.engine.coordinator.coordinator",
    "check_immutable_settings": "weir.engine.coordinator.guard",
    "check_running_directories": "weir.engine.coordinator.guard",
    "config_messages": "weir.engine.coordinator.submit",
    "coordinator_stream_name": "weir.engine.coordinator.settings",
    "coordinator_system": "weir.engine.coordinator.settings",
    "decode_message": "weir.engine.coordinator.messages",
    "plan_restarts": "weir.engine.coordinator.coordinator",
    "read_run_record": "weir.engine.coordinator.run_lock",
}

__all__ = [
    "ConfigDiff", "ContainerSetup", "CoordinatorClient", "CoordinatorError", "CoordinatorFailure",
    "CoordinatorMessage", "CoordinatorSettings", "CoordinatorState",
    "CoordinatorStreamCorruptError", "CoordinatorStreamStore", "CoordinatorUnavailableError",
    "CoordinatorWriteError", "ImmutableSettingError", "JobAlreadyRunningError", "JobCoordinator",
    "Locality", "MessageType", "ModelChange", "ModelSnapshot", "RunLock", "StateDirectories",
    "StateReset", "check_immutable_settings", "check_running_directories", "config_messages",
    "coordinator_stream_name", "coordinator_system", "decode_message", "plan_restarts",
    "read_run_record",
]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
