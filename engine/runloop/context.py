"""The :class:`~weir.engine.task.TaskContext` a task instance hands to ``init``:
:class:`InstanceContext` (docs/ARCHITECTURE.md, "Task context")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from weir.stores.config import Config, ConfigError

from weir.engine.metrics import TaskMetrics
from weir.engine.model import SystemStreamPartition, TaskName
from weir.engine.task import SYSTEM_CLOCK

if TYPE_CHECKING:
    from weir.engine.control.task_control import TaskControl
    from weir.engine.runloop.collector import ProducerCollector

__all__ = ["InstanceContext"]


class InstanceContext:
    """The :class:`~weir.engine.task.TaskContext` a :class:`TaskInstance` hands to ``init``:
    what every task sees, plus what the engine's own tasks use (an application's
    :class:`~weir.engine.app.task.ApplicationTask` refuses any other context):

    - ``collector``: the task's :class:`ProducerCollector` (``serdes_for``,
      ``send_serialized``, ``partition_count``);
    - ``control``: the task's :class:`~weir.engine.control.task_control.TaskControl`, or None
      when the task has no control bookkeeping (a job that is not an application).
    """

    __slots__ = ("task_name", "ssps", "config", "metrics", "_stores", "control", "collector",
                 "clock")

    def __init__(self, task_name: TaskName, ssps: frozenset[SystemStreamPartition],
                 config: Config, stores: Mapping[str, Any], metrics: TaskMetrics,
                 control: TaskControl | None, collector: ProducerCollector):
        self.task_name, self.ssps, self.config = task_name, ssps, config
        self.metrics, self._stores = metrics, stores
        self.control = control
        self.collector = collector
        self.clock = SYSTEM_CLOCK     # processing time (weir.testing gives its own)

    def store(self, name: str) -> Any:
        try:
            return self._stores[name]
        except KeyError:
            known = ", ".join(sorted(self._stores)) or "none"
            raise ConfigError(f"task '{self.task_name}' has no store '{name}' (its stores: "
                              f"{known}); configure it with stores.{name}.factory",
                              key=f"stores.{name}.factory") from None
