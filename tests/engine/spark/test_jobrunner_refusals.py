"""What ``weir run --runner spark`` and ``weir drain`` refuse for jobs on Spark, with typed
errors that name the task class, its listeners or the running driver, and what to do."""

from __future__ import annotations

import os

import pytest

from weir.engine.cli import main
from weir.engine.spark.jobrunner import (SPARK_RUN_ROLE, ControlListenerOnSparkError,
                                         SparkRunNotDrainableError, plan_job,
                                         refuse_drain_of_spark_run)
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.job_lock import JobLock
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


def test_weir_drain_of_a_job_running_on_spark_is_refused_naming_the_driver_and_sigterm(
        tmp_path, capsys):
    config = _config(tmp_path, "tests.engine.spark.jobtasks:CountAndVote")
    props = tmp_path / "job.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    with JobLock.acquire(tmp_path / "cp", job="listens", role=SPARK_RUN_ROLE):
        with pytest.raises(SparkRunNotDrainableError) as raised:
            refuse_drain_of_spark_run(tmp_path / "cp", "listens")
        assert raised.value.pid == os.getpid()
        assert "SIGTERM" in str(raised.value) and "nothing was written" in str(raised.value)

        assert main(["drain", str(props)]) == 2
    err = capsys.readouterr().err
    assert "runs on Spark" in err and f"kill {os.getpid()}" in err
    assert not (tmp_path / "cp" / "drain-request.json").exists()


def test_weir_drain_of_a_stopped_job_still_says_it_is_not_running(tmp_path, capsys):
    config = _config(tmp_path, "tests.engine.spark.jobtasks:CountAndVote")
    props = tmp_path / "job.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    refuse_drain_of_spark_run(tmp_path / "cp", "listens")          # no lock: nothing to say
    assert main(["drain", str(props)]) == 2
    assert "is not running" in capsys.readouterr().err
