"""Checkpoints in a stream at the container: ``task.checkpoint.system`` chooses the stream
checkpoint manager, the stream is Samza-named and compacted, and a job resumes from it exactly
as from checkpoint files."""

from __future__ import annotations

from collections import Counter

import pytest

from weir.engine.container.checkpoints import (CheckpointKind, CheckpointSettings,
                                               checkpoint_stream_name, open_checkpoint_manager)
from weir.engine.config.job import JobConfig
from weir.engine.systems.api import CleanupPolicy
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config
from weir.stores.errors import ConfigError

from tests.engine.container.test_container import (emitted_counts, job_config, run_container,
                                                   words, write_words)

pytest.importorskip("weir.engine.systems.filelog")

STREAM = "__samza_checkpoint_ver_1_for_count-words_1"


def test_the_stream_is_named_as_samza_names_its_checkpoint_topic():
    assert checkpoint_stream_name("word_count", "my_id") == \
        "__samza_checkpoint_ver_1_for_word-count_my-id"


@pytest.mark.parametrize("values, kind", [
    ({}, CheckpointKind.FILE),
    ({"task.checkpoint.system": "fl"}, CheckpointKind.STREAM),
    ({"task.checkpoint.system": "fl", "task.checkpoint.factory": "file"}, CheckpointKind.FILE),
    ({"task.checkpoint.system": "fl", "task.checkpoint.factory":
      "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory"}, CheckpointKind.STREAM),
])
def test_the_checkpoint_manager_is_chosen_by_config(values, kind):
    settings = CheckpointSettings.from_config(Config({"job.name": "j", **values}))
    assert settings.kind is kind


def test_a_stream_factory_without_a_system_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match="task.checkpoint.system"):
        CheckpointSettings.from_config(Config({"job.name": "j",
                                               "task.checkpoint.factory": "stream"}))


def test_an_unknown_factory_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown checkpoint manager"):
        CheckpointSettings.from_config(Config({"job.name": "j",
                                               "task.checkpoint.factory": "zookeeper"}))


def _stream_config(tmp_path, system="fl", **extra):
    return job_config(tmp_path, system, **{"task.checkpoint.system": system, **extra})


def test_a_job_writes_its_checkpoints_to_a_compacted_stream_and_no_files(tmp_path):
    cfg = _stream_config(tmp_path)
    items = words(400)
    write_words(SystemRegistry(cfg), "fl", items)

    _, result = run_container(cfg)

    assert result.reason == "end-of-stream"
    admin = SystemRegistry(cfg).admin("fl")
    assert admin.stream_exists(STREAM)
    assert admin.cleanup_policy(STREAM) is CleanupPolicy.COMPACT
    assert not list((tmp_path / "checkpoints").glob("*.json"))
    manager = _open(cfg)
    for p in range(2):
        cp = manager.read_last(f"Partition {p}")
        assert cp.input_offsets[("fl", "words", p)] == 199
        assert cp.changelog_offsets["counts"] >= 0
    assert emitted_counts(SystemRegistry(cfg), "fl") == Counter(items)


def _open(cfg: Config):
    job = JobConfig.from_config(cfg)
    manager = open_checkpoint_manager(CheckpointSettings.from_config(cfg, job), job,
                                      SystemRegistry(cfg), {"Partition 0": 0, "Partition 1": 1})
    for p in range(2):
        manager.register(f"Partition {p}")
    manager.start()
    return manager


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_a_restart_resumes_from_the_stream_checkpoint_without_counting_twice(tmp_path, engine):
    cfg = _stream_config(tmp_path, task="ShutdownAt", engine=engine)
    first = words(300) + ["stop"] + words(99)
    write_words(SystemRegistry(cfg), "fl", first, end=False)
    _, stopped = run_container(cfg)
    assert stopped.reason == "shutdown-requested"
    assert _open(cfg).read_last("Partition 0").input_offsets[("fl", "words", 0)] == 150

    second = words(201)
    write_words(SystemRegistry(cfg), "fl", second, create=False, first=len(first))
    _, result = run_container(cfg)

    assert result.reason == "end-of-stream"
    assert emitted_counts(SystemRegistry(cfg), "fl") == Counter(first + second)


def test_a_checkpoint_stream_on_an_unconfigured_system_is_a_config_error(tmp_path):
    from weir.engine.container.settings import JobSettings

    cfg = job_config(tmp_path, "fl", **{"task.checkpoint.system": "nowhere"})
    with pytest.raises(ConfigError, match="task.checkpoint.system"):
        JobSettings.from_config(cfg, SystemRegistry(cfg))
