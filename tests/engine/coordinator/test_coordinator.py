"""The job coordinator on a real file log: config written and read back, stable assignments,
the immutable-settings guard, --reset-state, and config written while the job runs."""

from __future__ import annotations

import shutil

import pytest

from weir.engine.coordinator import (CoordinatorState, CoordinatorStreamStore, ImmutableSettingError,
                                     JobCoordinator, StateReset)
from weir.engine.coordinator.messages import CoordinatorMessage, MessageType
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry

from tests.engine.coordinator._helpers import STREAM, create_inputs, job_config


def started(config, reset=StateReset.KEEP):
    coordinator = JobCoordinator(config, reset=reset)
    try:
        coordinator.start()
    finally:
        coordinator.stop()
    return coordinator


def stream_state(config) -> tuple[CoordinatorState, int]:
    with CoordinatorStreamStore.for_job(config, source="test") as store:
        store.bootstrap()
        return CoordinatorState.from_store(store), store.next_offset


def test_the_first_start_writes_the_config_and_the_assignments(tmp_path):
    config = job_config(tmp_path, **{"job.container.count": "2"})
    create_inputs(config, 4)

    coordinator = started(config)

    state, _ = stream_state(config)
    assert dict(state.config) == dict(config)
    assert state.changelog == {f"Partition {p}": p for p in range(4)}
    assert state.task_containers == {"Partition 0": "0", "Partition 1": "1",
                                     "Partition 2": "0", "Partition 3": "1"}
    assert state.partition_counts == {("filelog", "words"): 4}
    assert coordinator.snapshot.version == 1


def test_a_restart_runs_with_the_config_read_back_from_the_stream_writing_only_changes(tmp_path):
    config = job_config(tmp_path, **{"task.window.ms": "1000", "task.commit.ms": "5000"})
    create_inputs(config, 2)
    started(config)
    _, before = stream_state(config)

    changed = job_config(tmp_path, drop=(), **{"task.commit.ms": "2000",
                                                "task.max.concurrency": "2"})
    coordinator = started(changed)

    state, after = stream_state(changed)
    assert after - before == 3  # task.commit.ms changed, task.max.concurrency added, window deleted
    assert dict(state.config) == dict(changed) and "task.window.ms" not in state.config
    model_config = coordinator.snapshot.model.config
    assert dict(model_config) == dict(state.config)
    # Values come from the stream; where the file says the same, errors point at the file.
    assert model_config.origin("task.commit.ms").endswith("job.properties:" + str(
        list(changed).index("task.commit.ms") + 1))


def test_an_unchanged_resubmission_writes_nothing(tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    started(config)
    _, before = stream_state(config)

    started(config)

    assert stream_state(config)[1] == before


def test_existing_tasks_keep_their_changelog_partitions_when_tasks_are_added(tmp_path):
    config = job_config(tmp_path, **{"job.systemstreampartition.grouper.factory": "ssp"})
    create_inputs(config, 2)
    started(config)
    first, _ = stream_state(config)
    SystemRegistry(config).admin("filelog").create_stream(StreamSpec("clicks", 2))

    more = job_config(tmp_path, **{"job.systemstreampartition.grouper.factory": "ssp",
                                   "task.inputs": "filelog.words,filelog.clicks"})
    coordinator = started(more)

    mapping = coordinator.snapshot.model.changelog_mapping()
    assert {t: mapping[t] for t in first.changelog} == first.changelog
    new = {t: p for t, p in mapping.items() if t not in first.changelog}
    assert sorted(new.values()) == [2, 3] and all("clicks" in t for t in new)


# -- the immutable-settings guard ------------------------------------------------------------

def _refused(tmp_path, first: dict, second: dict, *, key: str, old: str, new: str,
             partitions=(2, 2)):
    config = job_config(tmp_path, **first)
    create_inputs(config, partitions[0])
    started(config)
    if partitions[1] != partitions[0]:
        shutil.rmtree(tmp_path / "log" / "words")
        SystemRegistry(config).admin("filelog").create_stream(
            StreamSpec("words", partitions[1], bounded=True))
    _, before = stream_state(config)
    changed = job_config(tmp_path, **second)

    with pytest.raises(ImmutableSettingError) as info:
        JobCoordinator(changed).start()

    message = str(info.value)
    assert f"config key '{key}'" in message and "job.properties:" in message
    assert repr(old) in message and repr(new) in message
    assert "--reset-state" in message
    assert stream_state(changed)[1] == before  # nothing written
    return info.value


def test_changing_the_grouper_is_refused_naming_key_values_and_fix(tmp_path):
    _refused(tmp_path, {}, {"job.systemstreampartition.grouper.factory": "ssp"},
             key="job.systemstreampartition.grouper.factory", old="partition", new="ssp")


def test_changing_an_input_partition_count_of_a_stateful_job_is_refused(tmp_path):
    _refused(tmp_path, {}, {}, key="task.inputs", old="filelog.words with 2 partitions",
             new="filelog.words with 4 partitions", partitions=(2, 4))


def test_a_stateless_job_may_change_its_input_partition_count(tmp_path):
    stateless = ("stores.counts.factory", "stores.counts.key.serde", "stores.counts.msg.serde",
                 "stores.counts.changelog")
    config = job_config(tmp_path, drop=stateless, **{"task.class": "tests.engine._jobs:PassThrough"})
    create_inputs(config, 2)
    started(config)
    shutil.rmtree(tmp_path / "log" / "words")
    SystemRegistry(config).admin("filelog").create_stream(StreamSpec("words", 4))

    coordinator = started(config)

    assert len(coordinator.snapshot.model.tasks()) == 4


def test_changing_a_stores_changelog_is_refused(tmp_path):
    _refused(tmp_path, {}, {"stores.counts.changelog": "filelog.counts-log"},
             key="stores.counts.changelog", old="filelog.counts-changelog",
             new="filelog.counts-log")


def test_changing_the_container_count_of_a_job_with_host_affinity_is_refused(tmp_path):
    _refused(tmp_path, {"job.host-affinity.enabled": "true", "job.container.count": "1"},
             {"job.host-affinity.enabled": "true", "job.container.count": "2"},
             key="job.container.count", old="1", new="2")


def test_host_affinity_compares_automatic_container_counts_as_resolved(tmp_path, monkeypatch):
    from weir.engine.jobmodel import model
    monkeypatch.setattr(model, "usable_cores", lambda: 2)
    auto = {"job.host-affinity.enabled": "true", "job.container.count": "auto"}
    config = job_config(tmp_path, **auto)  # auto: 2 of 2
    create_inputs(config, 2)
    started(config)
    same = job_config(tmp_path, **{"job.host-affinity.enabled": "true",
                                   "job.container.count": "2"})
    started(same)  # the same count, written out: allowed
    monkeypatch.setattr(model, "usable_cores", lambda: 1)  # auto on a 1-core machine: 1
    with pytest.raises(ImmutableSettingError) as info:
        JobCoordinator(job_config(tmp_path, **auto)).start()
    assert "auto (1 on this machine)" in str(info.value)


def test_without_host_affinity_the_container_count_may_change_and_tasks_move_little(tmp_path):
    config = job_config(tmp_path, **{"job.container.count": "2"})
    create_inputs(config, 6)
    started(config)

    coordinator = started(job_config(tmp_path, **{"job.container.count": "3"}))

    model = coordinator.snapshot.model
    assert {c: sorted(m.tasks) for c, m in model.containers.items()} == {
        "0": ["Partition 0", "Partition 2"], "1": ["Partition 1", "Partition 3"],
        "2": ["Partition 4", "Partition 5"]}
    assert model.changelog_mapping() == {f"Partition {p}": p for p in range(6)}


def test_reset_state_accepts_a_refused_change_by_moving_the_jobs_state_aside(tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    started(config)
    (tmp_path / "checkpoints").mkdir(exist_ok=True)
    (tmp_path / "checkpoints" / "Partition%200.json").write_text("{}")
    store_dir = tmp_path / "state" / "counts" / "Partition_0"
    store_dir.mkdir(parents=True)
    (store_dir / "data").write_text("x")
    SystemRegistry(config).admin("filelog").create_stream(StreamSpec("counts-changelog", 2))
    changed = job_config(tmp_path, **{"stores.counts.changelog": "filelog.counts-log"})

    coordinator = started(changed, reset=StateReset.RESET)

    assert not (tmp_path / "checkpoints" / "Partition%200.json").exists()
    assert not (tmp_path / "state" / "counts").exists()
    assert not (tmp_path / "log" / "counts-changelog").exists()
    # moved aside, never deleted
    (kept_checkpoints,) = tmp_path.glob("checkpoints.reset-*")
    assert (kept_checkpoints / "Partition%200.json").read_text() == "{}"
    (kept_store,) = (tmp_path / "state").glob("counts.reset-*")
    assert (kept_store / "Partition_0" / "data").read_text() == "x"
    assert len(list((tmp_path / "log").glob("counts-changelog.reset-*"))) == 1
    state, _ = stream_state(changed)
    assert state.config["stores.counts.changelog"] == "filelog.counts-log"
    assert state.changelog == {"Partition 0": 0, "Partition 1": 1}
    assert coordinator.snapshot.version == 1
    started(changed)  # the next start without --reset-state passes the guard


# -- config written while the job runs -------------------------------------------------------

def _write(config, key: str, value: str | None) -> None:
    with CoordinatorStreamStore.for_job(config, source="coordinator-stream-writer") as store:
        msg = (CoordinatorMessage.delete(MessageType.SET_CONFIG, key, source="w") if value is None
               else CoordinatorMessage.set_config(key, value, source="w"))
        store.write([msg])


def test_new_config_while_running_gives_the_next_model_version_and_the_containers_to_restart(tmp_path):
    config = job_config(tmp_path, **{"job.container.count": "2"})
    create_inputs(config, 4)
    with JobCoordinator(config) as coordinator:
        coordinator.start()
        seen = []
        coordinator.on_change(seen.append)
        assert coordinator.catch_up_once() is None  # nothing new

        _write(config, "job.container.count", "3")
        change = coordinator.catch_up_once()

        assert change is not None and seen == [change]
        assert (change.old.version, change.new.version) == (1, 2)
        assert (change.restart, change.stop, change.start) == (("1",), (), ("2",))
        assert change.diff.changed == ("job.container.count",)
        assert coordinator.snapshot_of(1).model.containers.keys() == {"0", "1"}
        assert stream_state(config)[0].task_containers["Partition 3"] == "2"

        _write(config, "task.commit.ms", "1000")
        change = coordinator.catch_up_once()
        assert change.new.version == 3 and change.restart == ("0", "1", "2")


def test_an_immutable_change_while_running_is_refused_and_the_model_stays(tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    with JobCoordinator(config) as coordinator:
        coordinator.start()
        _write(config, "stores.counts.changelog", "filelog.elsewhere")

        assert coordinator.catch_up_once() is None
        assert coordinator.catch_up_once() is None  # refused once, not again and again

        assert coordinator.snapshot.version == 1
        assert coordinator.counters.config_refused == 1
        assert "stores.counts.changelog" in coordinator.health()["refused-config"]
        _write(config, "stores.counts.changelog", "filelog.counts-changelog")
        _write(config, "task.commit.ms", "1000")
        assert coordinator.catch_up_once().new.version == 2
        assert coordinator.health()["refused-config"] is None


def test_a_bad_value_written_while_running_is_refused_with_the_key(tmp_path):
    config = job_config(tmp_path)
    create_inputs(config, 2)
    with JobCoordinator(config) as coordinator:
        coordinator.start()
        _write(config, "task.commit.ms", "soon")

        assert coordinator.catch_up_once() is None
        assert "task.commit.ms" in coordinator.refused and STREAM in coordinator.refused


@pytest.mark.parametrize("key, value, needle", [
    ("task.max.concurrency", "0", "must be >= 1"),
    ("stores.counts.msg.serde", "no-such-serde", "stores.counts.msg.serde"),
])
def test_a_value_the_containers_would_refuse_is_refused_while_running(tmp_path, key, value,
                                                                       needle):
    # Each parses as its key's type, so the running check let it through; the new model
    # restarted the containers, which refused it, and the running job stopped with exit 2
    # (docs: a refused change leaves the job running with its model).
    config = job_config(tmp_path)
    create_inputs(config, 2)
    with JobCoordinator(config) as coordinator:
        coordinator.start()
        _write(config, key, value)

        assert coordinator.catch_up_once() is None
        assert coordinator.snapshot.version == 1
        assert needle in coordinator.refused
