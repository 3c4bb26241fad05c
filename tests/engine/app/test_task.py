"""ApplicationTask needs the engine's task context: the TaskInstance's, with control."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from weir.engine.app.task import ApplicationTask
from weir.engine.errors import EngineError, TaskError
from weir.engine.model import SystemStreamPartition
from weir.engine.runloop.instance import TaskInstance

SSP = SystemStreamPartition("memory", "clicks", 0)


def test_an_application_task_refuses_an_instance_without_control_bookkeeping():
    inst = TaskInstance("Partition 0", ApplicationTask(), [SSP])
    with pytest.raises(TaskError) as info:
        inst.init()
    assert isinstance(info.value.__cause__, EngineError)
    assert "task context with control bookkeeping" in str(info.value.__cause__)


def test_an_application_task_refuses_a_context_of_its_own_making():
    context = SimpleNamespace(task_name="Partition 0", control=object(), collector=object())
    with pytest.raises(EngineError, match="task 'Partition 0'.*weir run"):
        ApplicationTask().init(context)
