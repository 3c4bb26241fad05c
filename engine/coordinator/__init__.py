"""The coordinator stream and the job coordinator (seed design 003, SAMZA-REFERENCE 5).

A job's config, its tasks' changelog partitions, task and partition assignments and its
containers' locality live in a one-partition compacted stream,
``__samza_coordinator_<job>_<id>``, of Samza's JSON messages (:mod:`.messages`,
:mod:`.stream`). ``weir run`` writes the submitted config's changes to it; the
:class:`JobCoordinator` reads the job's config back from it, refuses changes of immutable
settings (:mod:`.guard`), builds the job model with stable assignments, follows config
written while the job runs (``weir coordinator set-config``) and serves the model over HTTP
(:mod:`.server`) to the containers (:mod:`.client`). While it runs it holds the job's run lock
(:mod:`.run_lock`): one run of a job at a time, whatever its directories. docs/COORDINATOR.md is the guide.
"""

from weir.engine.coordinator.client import ContainerSetup, CoordinatorClient
from weir.engine.coordinator.coordinator import (JobCoordinator, ModelChange, ModelSnapshot,
                                                 StateReset, plan_restarts)
from weir.engine.coordinator.errors import (CoordinatorError, CoordinatorStreamCorruptError,
                                            CoordinatorUnavailableError, CoordinatorWriteError,
                                            ImmutableSettingError, JobAlreadyRunningError)
from weir.engine.coordinator.guard import (StateDirectories, check_immutable_settings,
                                           check_running_directories)
from weir.engine.coordinator.messages import CoordinatorMessage, MessageType, decode_message
from weir.engine.coordinator.run_lock import RunLock, read_run_record
from weir.engine.coordinator.settings import (CoordinatorSettings, coordinator_stream_name,
                                              coordinator_system)
from weir.engine.coordinator.state import CoordinatorState, Locality
from weir.engine.coordinator.stream import CoordinatorStreamStore
from weir.engine.coordinator.submit import ConfigDiff, config_messages

__all__ = [
    "ConfigDiff", "ContainerSetup", "CoordinatorClient", "CoordinatorError",
    "CoordinatorMessage", "CoordinatorSettings", "CoordinatorState",
    "CoordinatorStreamCorruptError", "CoordinatorStreamStore", "CoordinatorUnavailableError",
    "CoordinatorWriteError", "ImmutableSettingError", "JobAlreadyRunningError", "JobCoordinator",
    "Locality", "MessageType", "ModelChange", "ModelSnapshot", "RunLock", "StateDirectories",
    "StateReset", "check_immutable_settings", "check_running_directories", "config_messages",
    "coordinator_stream_name", "coordinator_system", "decode_message", "plan_restarts",
    "read_run_record",
]
