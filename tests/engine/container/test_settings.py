"""Config is parsed once, at the edge: a container given its JobSettings hands each component
its own settings object, and no component parses the raw config for its own keys again."""

from __future__ import annotations

import pytest

from tests.engine.container.test_container import (emitted_counts, job_config, run_container,
                                                   words, write_words)
from weir.engine.chooser.spec import ChooserSpec
from weir.engine.consumers import consumers as consumers_module
from weir.engine.consumers import offsets as offsets_module
from weir.engine.container.settings import JobSettings
from weir.engine.runloop import failures as failures_module
from weir.engine.runloop import settings as runloop_settings
from weir.engine.systems.memory import reset_memory_systems
from weir.engine.systems.registry import SystemRegistry
from weir.stores import spec as spec_module
from weir.stores.config import ConfigError


def _refuse(what: str):
    def parse(*args, **kwargs):
        raise AssertionError(f"{what} parsed from the raw config after JobSettings was built")
    return parse


def test_a_container_given_its_settings_parses_no_setting_again(tmp_path, monkeypatch):
    system = "mem-settings-once"
    cfg = job_config(tmp_path, system, **{"task.max.concurrency": "2",
                                          "job.container.thread.pool.size": "2"})
    registry = SystemRegistry(cfg)
    write_words(registry, system, words(40))
    settings = JobSettings.from_config(cfg, registry)
    for owner, name in ((runloop_settings.RunLoopConfig, "from_config"),
                        (failures_module.IgnoredExceptions, "from_config"),
                        (consumers_module.ConsumerSettings, "from_config"),
                        (ChooserSpec, "from_config"),
                        (spec_module.StoreSpec, "from_config")):
        monkeypatch.setattr(owner, name, classmethod(_refuse(f"{owner.__name__}.{name}")))
    monkeypatch.setattr(offsets_module, "offset_policy", _refuse("offset_policy"))
    try:
        _, result = run_container(cfg, settings=settings)
        assert result.reason == "end-of-stream"
        assert sum(emitted_counts(registry, system).values()) == 40
    finally:
        reset_memory_systems(system)


def test_job_settings_hold_each_components_settings(tmp_path):
    cfg = job_config(tmp_path, "mem-settings-fields", **{
        "task.max.concurrency": "3", "job.container.thread.pool.size": "2",
        "task.poll.interval.ms": "25", "task.ignored.exceptions": "ValueError",
        "metrics.reporter.interval.ms": "1000"})
    settings = JobSettings.from_config(cfg, SystemRegistry(cfg))
    assert settings.run_loop.max_concurrency == 3
    assert settings.run_loop.thread_pool_size == 2
    assert settings.consumers.poll_interval_ms == 25
    assert settings.ignored.matches(ValueError("x"))
    assert settings.metrics.interval_ms == 1000
    assert [s.name for s in settings.stores] == ["counts"]
    (ss,) = settings.offsets
    assert ss.stream == "words" and settings.offsets[ss].default.value == "oldest"
    assert "mem-settings-fields" in settings.systems


def test_a_bad_value_fails_when_the_settings_are_built_naming_its_key(tmp_path):
    cfg = job_config(tmp_path, "mem-settings-bad", **{"task.poll.interval.ms": "soon"})
    with pytest.raises(ConfigError, match="task.poll.interval.ms"):
        JobSettings.from_config(cfg, SystemRegistry(cfg))


@pytest.mark.parametrize("guarantee,commit_ms,expected", [
    ("at_least_once", None, 60_000),
    ("exactly_once", None, 100),          # Kafka Streams' default under exactly-once
    ("exactly_once_v2", None, 100),
    ("exactly_once", "2500", 2500),       # an explicit interval wins
    ("at_least_once", "2500", 2500),
])
def test_the_commit_interval_defaults_to_100_ms_under_exactly_once(tmp_path, guarantee,
                                                                   commit_ms, expected):
    extra = {"task.processing.guarantee": guarantee}
    if commit_ms is not None:
        extra["task.commit.ms"] = commit_ms
    cfg = job_config(tmp_path, "fl-commit-default", **extra)
    settings = JobSettings.from_config(cfg, SystemRegistry(cfg))
    assert settings.run_loop.commit_ms == expected
