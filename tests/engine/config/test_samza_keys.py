"""Keys of real Samza jobs: accepted with a note saying what Weir does instead, refused when
misspelt in a namespace Weir reads, and suggestions that keep the key's namespace and shape."""

from __future__ import annotations

import pytest

from weir.engine.config.check import UnknownSamzaKeyError, WarningKind
from weir.engine.config.job import review_config
from weir.engine.config.samza_keys import SamzaTopic
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.spec import StoreSpec

KAFKA = "org.apache.samza.system.kafka.KafkaSystemFactory"
STORE = {"stores.wikipedia-stats.factory":
         "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
         "stores.wikipedia-stats.key.serde": "string",
         "stores.wikipedia-stats.msg.serde": "integer"}


def review(**keys: str):
    return review_config(Config({"job.name": "wikipedia-stats", **keys},
                                origins={k: f"job.properties:{i + 1}"
                                         for i, k in enumerate(keys)}))


def topics(result) -> dict[SamzaTopic, tuple[str, ...]]:
    return {n.topic: n.keys for n in result.notes}


def test_yarn_and_job_factory_keys_are_one_note_saying_what_runs_the_job_instead():
    result = review(**{"job.factory.class": "org.apache.samza.job.yarn.YarnJobFactory",
                       "yarn.package.path": "file:///x.tar.gz",
                       "yarn.container.memory.mb": "2048"})  # an alias Weir reads

    assert result.warnings == []
    assert topics(result) == {SamzaTopic.YARN: ("job.factory.class", "yarn.package.path")}
    message = result.notes[0].message
    assert "weir run" in message and "--runner spark" in message
    assert "the rest of the job runs unchanged" in message
    assert "first at job.properties:1" in message


def test_kafka_system_keys_note_the_file_log_and_the_system_becomes_one():
    config = {"systems.kafka.samza.factory": KAFKA,
              "systems.kafka.consumer.zookeeper.connect": "localhost:2181/",
              "systems.kafka.producer.bootstrap.servers": "localhost:9092",
              "systems.kafka.consumer.auto.offset.reset": "largest",  # the file log's own key
              "systems.kafka.default.stream.replication.factor": "1"}
    result = review(**config)

    assert result.warnings == []
    assert topics(result)[SamzaTopic.KAFKA] == ("systems.kafka.consumer.zookeeper.connect",
                                                "systems.kafka.producer.bootstrap.servers",
                                                "systems.kafka.samza.factory")
    assert topics(result)[SamzaTopic.REPLICATION] == (
        "systems.kafka.default.stream.replication.factor",)
    assert "file log" in next(n for n in result.notes if n.topic is SamzaTopic.KAFKA).message
    registry = SystemRegistry(Config({**config, "systems.kafka.root": "/nonexistent"}))
    assert type(registry.factory("kafka")).__name__ == "FileLogSystemFactory"


def test_zookeeper_config_loader_timer_and_stream_flags_get_their_notes():
    result = review(**{"job.coordinator.factory": "org.apache.samza.zk.ZkJobCoordinatorFactory",
                       "job.coordinator.zk.connect": "localhost:2181",
                       "job.config.loader.factory": "org.apache.samza.config.loaders.X",
                       "metrics.timer.enabled": "false",
                       "streams.raw.samza.bounded": "true",
                       "streams.raw.samza.delete.committed.messages": "true"})

    assert set(topics(result)) == {SamzaTopic.ZOOKEEPER, SamzaTopic.CONFIG_LOADER,
                                   SamzaTopic.METRICS_TIMERS, SamzaTopic.BOUNDED,
                                   SamzaTopic.DELETE_COMMITTED}
    assert result.warnings == []


def test_replication_factors_and_write_batch_size_zero_of_the_stats_job_are_accepted():
    config = {**STORE, "stores.wikipedia-stats.changelog.replication.factor": "1",
              "stores.wikipedia-stats.write.batch.size": "0",
              "stores.wikipedia-stats.object.cache.size": "0",
              "job.coordinator.replication.factor": "1"}
    result = review(**config)

    assert topics(result) == {SamzaTopic.REPLICATION: (
        "job.coordinator.replication.factor",
        "stores.wikipedia-stats.changelog.replication.factor")}
    spec = StoreSpec.from_config(Config(config), "wikipedia-stats")
    assert spec.write_batch_size == 1 and spec.object_cache_size == 0  # 0: write through


@pytest.mark.parametrize("key", ["job.coordinator.replication.factor",
                                 "stores.wikipedia-stats.changelog.replication.factor"])
@pytest.mark.parametrize("value", ["0", "three"])
def test_a_replication_factor_samza_would_refuse_is_refused(key, value):
    with pytest.raises(ConfigError) as caught:
        review(**STORE, **{key: value})
    assert caught.value.key == key


def test_a_misspelt_metrics_key_is_an_error_suggesting_the_real_one():
    with pytest.raises(UnknownSamzaKeyError) as caught:
        review(**{"metrics.reporter.intervl.ms": "1000"})
    assert caught.value.key == "metrics.reporter.intervl.ms"
    assert "did you mean 'metrics.reporter.interval.ms'?" in str(caught.value)
    assert "metrics.* namespace" in str(caught.value)


def test_keys_of_a_reporter_not_in_metrics_reporters_are_ignored_with_a_warning():
    result = review(**{"metrics.reporters": "snapshot",
                       "metrics.reporter.snapshot.class": "snapshot",
                       "metrics.reporter.snapshot.stream": "filelog.metrics",
                       "metrics.reporter.snapshott.interval": "30"})

    (warning,) = result.warnings
    assert warning.kind is WarningKind.UNLISTED_REPORTER
    assert warning.suggestion == "metrics.reporter.snapshot.interval"
    assert "does not list the reporter 'snapshott'" in warning.message


def test_a_kafka_client_key_on_a_file_log_system_suggests_nothing_it_does_not_resemble():
    result = review(**{"systems.filelog.producer.bootstrap.servers": "localhost:9092"})

    (warning,) = result.warnings
    assert warning.suggestion is None  # never systems.filelog.streams.bootstrap.fsync.every.ms


def test_a_suggestion_keeps_the_keys_spelling_and_never_makes_a_stream_id_a_system():
    with pytest.raises(UnknownSamzaKeyError) as caught:
        review(**{"streams.wikipedia-raw.samza.bootstrp": "true"})
    (unknown,) = caught.value.unknown
    assert unknown.suggestion == "streams.wikipedia-raw.samza.bootstrap"


def test_a_typo_in_a_task_key_still_gets_its_suggestion():
    (warning,) = review(**{"task.comit.ms": "1000"}).warnings
    assert warning.suggestion == "task.commit.ms"
