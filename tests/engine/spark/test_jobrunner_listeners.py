"""What ``weir run --runner spark`` refuses for jobs on Spark, with typed errors that name
the task class, its listeners and what to do."""

from __future__ import annotations

import pytest

from weir.engine.spark.jobrunner import ControlListenerOnSparkError, plan_job
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config
from weir.stores.errors import ConfigError


def _config(tmp_path, task_class: str) -> Config:
    config = Config({
        "job.name": "listens", "task.class": task_class, "task.inputs": "filelog.src",
        "job.data.dir": str(tmp_path / "data"), "systems.filelog.factory": "filelog",
        "systems.filelog.root": str(tmp_path / "log"),
        "task.checkpoint.path": str(tmp_path / "cp")})
    SystemRegistry(config).admin("filelog").create_stream(StreamSpec("src", 1, bounded=True))
    return config


def test_a_task_listening_for_watermarks_is_refused_naming_its_class_and_listeners(tmp_path):
    task_class = "tests.engine.runloop._control_tasks:Recorder"
    with pytest.raises(ControlListenerOnSparkError) as raised:
        plan_job(_config(tmp_path, task_class))
    error = raised.value
    assert isinstance(error, ConfigError) and error.key == "task.class"
    assert error.task_class == task_class and error.listeners == ("on_watermark",)
    assert task_class in str(error) and "app.class" in str(error)
    assert "run this job embedded" in str(error)


def test_a_task_listening_for_drains_is_refused_naming_on_drain(tmp_path):
    task_class = "tests.engine.runloop._control_tasks:Drainer"
    with pytest.raises(ControlListenerOnSparkError) as raised:
        plan_job(_config(tmp_path, task_class))
    assert "on_drain" in raised.value.listeners
