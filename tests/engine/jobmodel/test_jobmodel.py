"""weir.engine.jobmodel.model: grouping SSPs into tasks, tasks into containers, changelog partitions, JSON."""

from __future__ import annotations

import json
import pickle
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.engine.errors import StreamNotFoundError
from weir.engine.jobmodel.model import (
    ContainerModel,
    JobModel,
    JobModelError,
    SspGrouper,
    TaskMode,
    TaskModel,
    assign_containers,
    build_job_model,
    changelog_partition_mapping,
    ssp_grouper,
)
from weir.engine.model import SystemStream, SystemStreamPartition
from weir.stores.config import Config, ConfigError

A, B, C = SystemStream("fl", "a"), SystemStream("fl", "b"), SystemStream("fl", "c")


def cfg(**keys: str) -> Config:
    values = {k.replace("__", "."): v for k, v in keys.items()}
    return Config(values, origins={k: f"job.properties:{i + 1}" for i, k in enumerate(values)})


def ssp(ss: SystemStream, p: int) -> SystemStreamPartition:
    return SystemStreamPartition(ss.system, ss.stream, p)


def partitions_of(model: JobModel) -> dict[str, set[str]]:
    return {name: {str(s) for s in t.ssps} for name, t in model.tasks().items()}


# -- grouping -----------------------------------------------------------------------------------

def test_group_by_partition_gives_task_n_partition_n_of_every_input():
    model = build_job_model(cfg(task__inputs="fl.a, fl.b"), {A: 3, B: 2})
    assert partitions_of(model) == {
        "Partition 0": {"fl.a#0", "fl.b#0"},
        "Partition 1": {"fl.a#1", "fl.b#1"},
        "Partition 2": {"fl.a#2"},
    }


def test_group_by_ssp_gives_one_task_per_ssp_named_like_samza():
    config = cfg(task__inputs="fl.a,fl.b", job__systemstreampartition__grouper__factory="ssp")
    model = build_job_model(config, {A: 2, B: 1})
    assert partitions_of(model) == {
        "SystemStreamPartition [fl, a, 0]": {"fl.a#0"},
        "SystemStreamPartition [fl, a, 1]": {"fl.a#1"},
        "SystemStreamPartition [fl, b, 0]": {"fl.b#0"},
    }


@pytest.mark.parametrize("value, grouper", [
    ("org.apache.samza.container.grouper.stream.GroupByPartitionFactory", SspGrouper.BY_PARTITION),
    ("org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory", SspGrouper.BY_SSP),
    ("PARTITION", SspGrouper.BY_PARTITION),
    ("ssp", SspGrouper.BY_SSP),
])
def test_samza_grouper_class_names_and_short_names_are_accepted(value, grouper):
    assert ssp_grouper(cfg(job__systemstreampartition__grouper__factory=value)) is grouper


def test_unknown_grouper_fails_naming_key_and_line():
    config = cfg(task__inputs="fl.a", job__systemstreampartition__grouper__factory="random")
    with pytest.raises(ConfigError, match=r"grouper.factory' \(set at job.properties:2\).*partition, ssp"):
        build_job_model(config, {A: 1})


def test_broadcast_ssps_go_to_every_task_and_are_not_grouped():
    config = cfg(task__inputs="fl.a, fl.b", task__broadcast__inputs="fl.b#0, fl.c#[0-1]")
    model = build_job_model(config, {A: 2, B: 2, C: 3})
    assert partitions_of(model) == {
        "Partition 0": {"fl.a#0", "fl.b#0", "fl.c#0", "fl.c#1"},
        "Partition 1": {"fl.a#1", "fl.b#1", "fl.b#0", "fl.c#0", "fl.c#1"},
    }


def test_broadcast_partitions_alone_create_no_task():
    config = cfg(task__inputs="fl.a", task__broadcast__inputs="fl.a#[0-1]")
    model = build_job_model(config, {A: 3})
    assert list(model.tasks()) == ["Partition 2"]
    assert partitions_of(model)["Partition 2"] == {"fl.a#0", "fl.a#1", "fl.a#2"}


def test_broadcast_partition_beyond_the_stream_fails_naming_the_key():
    config = cfg(task__inputs="fl.a", task__broadcast__inputs="fl.c#3")
    with pytest.raises(ConfigError, match=r"task.broadcast.inputs.*partition 3 of 'fl.c'.*3 partitions"):
        build_job_model(config, {A: 1, C: 3})


def test_input_without_partition_count_fails_naming_the_stream():
    config = cfg(task__inputs="fl.a, fl.missing")
    with pytest.raises(StreamNotFoundError, match=r"fl.missing.*task.inputs at job.properties:1"):
        build_job_model(config, {A: 1})


def test_job_without_inputs_fails_naming_task_inputs():
    with pytest.raises(ConfigError, match="task.inputs"):
        build_job_model(cfg(job__name="x"), {A: 1})


# -- containers ---------------------------------------------------------------------------------

def test_tasks_are_dealt_round_robin_in_string_order_of_names():
    model = build_job_model(cfg(task__inputs="fl.a", job__container__count="3"), {A: 12})
    assert {cid: list(c.tasks) for cid, c in model.containers.items()} == {
        "0": ["Partition 0", "Partition 11", "Partition 4", "Partition 7"],
        "1": ["Partition 1", "Partition 2", "Partition 5", "Partition 8"],
        "2": ["Partition 10", "Partition 3", "Partition 6", "Partition 9"],
    }


def test_more_containers_than_tasks_fails_naming_the_key_and_line():
    config = cfg(task__inputs="fl.a", job__container__count="4")
    with pytest.raises(ConfigError, match=r"job.container.count' \(set at job.properties:2\).*only 2 tasks"):
        build_job_model(config, {A: 2})


def test_zero_containers_is_a_bad_value():
    with pytest.raises(ConfigError, match="at least 1 container"):
        build_job_model(cfg(task__inputs="fl.a", job__container__count="0"), {A: 2})


def test_samza_yarn_container_count_alias_is_read():
    model = build_job_model(cfg(task__inputs="fl.a", yarn__container__count="2"), {A: 2})
    assert list(model.containers) == ["0", "1"]


def names(n: int) -> list[str]:
    return [f"Partition {i}" for i in range(n)]


def test_same_container_count_keeps_the_previous_assignment():
    previous = {"Partition 0": "1", "Partition 1": "1", "Partition 2": "0", "Partition 3": "0"}
    assert assign_containers(names(4), 2, previous) == {
        "0": ["Partition 2", "Partition 3"], "1": ["Partition 0", "Partition 1"]}


def test_more_containers_move_only_the_surplus_from_the_end_of_each_container():
    previous = assign_containers(names(8), 2)
    assert previous == {"0": names(8)[0::2], "1": names(8)[1::2]}
    flat = {t: cid for cid, ts in previous.items() for t in ts}
    assert assign_containers(names(8), 4, flat) == {
        "0": ["Partition 0", "Partition 2"], "1": ["Partition 1", "Partition 3"],
        "2": ["Partition 6", "Partition 4"], "3": ["Partition 7", "Partition 5"]}


def test_fewer_containers_spread_the_removed_containers_tasks_over_the_rest():
    previous = {f"Partition {i}": str(i % 4) for i in range(8)}
    assert assign_containers(names(8), 2, previous) == {
        "0": ["Partition 0", "Partition 4", "Partition 6", "Partition 2"],
        "1": ["Partition 1", "Partition 5", "Partition 7", "Partition 3"]}


def test_previous_assignment_of_other_tasks_is_ignored():
    previous = {"Partition 0": "1", "Partition 1": "0"}
    assert assign_containers(names(3), 2, previous) == assign_containers(names(3), 2)


def test_previous_job_model_keeps_tasks_on_their_containers():
    config = cfg(task__inputs="fl.a", job__container__count="2")
    first = build_job_model(config, {A: 4})
    swapped = JobModel(config, {"0": first.containers["1"], "1": first.containers["0"]})
    again = build_job_model(config, {A: 4}, previous=swapped)
    assert again.task_assignment() == swapped.task_assignment()


@given(tasks=st.integers(1, 40), before=st.integers(1, 8), after=st.integers(1, 8))
def test_containers_are_balanced_and_every_task_is_placed_once(tasks, before, after):
    before, after = min(before, tasks), min(after, tasks)
    first = assign_containers(names(tasks), before)
    previous = {t: cid for cid, ts in first.items() for t in ts}
    result = assign_containers(names(tasks), after, previous)
    assert list(result) == [str(i) for i in range(after)]
    placed = [t for ts in result.values() for t in ts]
    assert sorted(placed) == sorted(names(tasks))
    sizes = [len(ts) for ts in result.values()]
    assert max(sizes) - min(sizes) <= 1


# -- changelog partitions -----------------------------------------------------------------------

def test_task_partition_n_gets_changelog_partition_n_even_past_ten():
    model = build_job_model(cfg(task__inputs="fl.a"), {A: 12})
    assert model.changelog_mapping() == {f"Partition {i}": i for i in range(12)}
    assert model.max_change_log_stream_partitions == 12


def test_ssp_tasks_get_changelog_partitions_in_name_order():
    config = cfg(task__inputs="fl.b,fl.a", job__systemstreampartition__grouper__factory="ssp")
    model = build_job_model(config, {A: 2, B: 1})
    assert model.changelog_mapping() == {
        "SystemStreamPartition [fl, a, 0]": 0, "SystemStreamPartition [fl, a, 1]": 1,
        "SystemStreamPartition [fl, b, 0]": 2}


def test_previous_changelog_mapping_wins_and_new_tasks_take_the_next_free_partition():
    previous = {"SystemStreamPartition [fl, a, 0]": 4, "gone": 7}
    mapping = changelog_partition_mapping(
        ["SystemStreamPartition [fl, a, 0]", "SystemStreamPartition [fl, a, 1]", "Partition 7"],
        previous)
    assert mapping == {"Partition 7": 8, "SystemStreamPartition [fl, a, 0]": 4,
                       "SystemStreamPartition [fl, a, 1]": 9}


def test_added_partitions_keep_existing_tasks_changelog_partitions():
    config = cfg(task__inputs="fl.a")
    first = build_job_model(config, {A: 2})
    grown = build_job_model(config, {A: 4}, previous=first)
    assert grown.changelog_mapping() == {f"Partition {i}": i for i in range(4)}
    moved = build_job_model(config, {A: 3}, changelog_mapping={"Partition 0": 1, "Partition 1": 0})
    assert moved.changelog_mapping() == {"Partition 0": 1, "Partition 1": 0, "Partition 2": 2}


# -- stability and JSON -------------------------------------------------------------------------

def test_same_inputs_and_config_give_the_same_model_and_json():
    config = cfg(task__inputs="fl.a, fl.b", task__broadcast__inputs="fl.c#0",
                 job__container__count="2")
    counts = {A: 5, B: 3, C: 1}
    one = build_job_model(config, counts)
    shuffled = list(counts.items())
    random.Random(7).shuffle(shuffled)
    two = build_job_model(Config(dict(reversed(list(config.items())))), dict(shuffled))
    assert one == two
    assert one.to_json() == two.to_json()


def test_json_has_samza_shape():
    model = build_job_model(cfg(task__inputs="fl.a", job__name="wc"), {A: 1})
    data = json.loads(model.to_json())
    assert data["config"] == {"task.inputs": "fl.a", "job.name": "wc"}
    assert data["containers"] == {"0": {"processor-id": "0", "tasks": {"Partition 0": {
        "task-name": "Partition 0",
        "system-stream-partitions": [{"system": "fl", "stream": "a", "partition": 0, "keyBucket": -1}],
        "changelog-partition": 0,
        "task-mode": "Active"}}}}
    assert data["max-change-log-stream-partitions"] == 1


def test_json_round_trip_gives_an_equal_model():
    config = cfg(task__inputs="fl.a,fl.b", task__broadcast__inputs="fl.b#1", job__container__count="2")
    model = build_job_model(config, {A: 3, B: 2})
    again = JobModel.from_json(model.to_json())
    assert again == model
    assert again.to_json() == model.to_json()
    assert again.max_change_log_stream_partitions == model.max_change_log_stream_partitions


def test_json_reader_accepts_old_container_ids_missing_key_buckets_and_unknown_fields():
    text = json.dumps({"config": {"a": "1"}, "extra": True, "containers": {"x": {
        "container-id": 3, "whatever": 1, "tasks": {"Partition 2": {
            "task-name": "Partition 2", "changelog-partition": 2, "new-field": [],
            "system-stream-partitions": [{"system": "fl", "stream": "a", "partition": 2}]}}}}})
    model = JobModel.from_json(text)
    assert list(model.containers) == ["3"]
    task = model.task("Partition 2")
    assert task.ssps == {ssp(A, 2)} and task.task_mode is TaskMode.ACTIVE
    assert model.max_change_log_stream_partitions == 3


@pytest.mark.parametrize("text, match", [
    ('{"containers": {"0": {"tasks": {}}}}', "neither 'processor-id' nor 'container-id'"),
    ("not json", "not valid JSON"),
    ('{"containers": {"0": {"processor-id": "0", "tasks": {"t": {}}}}}', "malformed"),
    ('{"containers": {"0": {"processor-id": "0", "tasks": {"t": {"changelog-partition": 0, '
     '"system-stream-partitions": [{"system": "s", "stream": "t", "partition": 0, "keyBucket": 2}]}}}}}',
     "keyBucket 2"),
])
def test_bad_job_model_json_raises_job_model_error(text, match):
    with pytest.raises(JobModelError, match=match):
        JobModel.from_json(text)


def test_job_model_pickles_for_shipping_to_executors():
    model = build_job_model(cfg(task__inputs="fl.a", job__container__count="2"), {A: 3})
    again = pickle.loads(pickle.dumps(model))
    assert again == model and hash(again) == hash(model)


def test_models_are_immutable():
    task = TaskModel("Partition 0", [ssp(A, 0)], 0)
    container = ContainerModel("0", {"Partition 0": task})
    with pytest.raises(TypeError):
        container.tasks["Partition 1"] = task  # type: ignore[index]
    assert isinstance(task.ssps, frozenset)


@given(counts=st.lists(st.integers(0, 6), min_size=1, max_size=3), containers=st.integers(1, 4),
       by_ssp=st.booleans())
def test_every_input_partition_is_read_by_exactly_one_task(counts, containers, by_ssp):
    streams = [SystemStream("fl", f"s{i}") for i in range(len(counts))]
    keys = {"task.inputs": ",".join(str(s) for s in streams), "job.container.count": str(containers)}
    if by_ssp:
        keys["job.systemstreampartition.grouper.factory"] = "ssp"
    config = Config(keys)
    partition_counts = dict(zip(streams, counts))
    task_count = sum(counts) if by_ssp else max(counts)
    if task_count == 0 or containers > task_count:
        with pytest.raises(ConfigError):
            build_job_model(config, partition_counts)
        return
    model = build_job_model(config, partition_counts)
    read = [s for t in model.tasks().values() for s in t.ssps]
    assert sorted(read) == sorted(ssp(s, p) for s, n in partition_counts.items() for p in range(n))
    changelog = list(model.changelog_mapping().values())
    assert len(set(changelog)) == len(changelog) == task_count
    assert model.max_change_log_stream_partitions == max(changelog) + 1


@pytest.mark.parametrize("cores, partitions, expected", [(2, 4, 2), (8, 3, 3), (1, 4, 1)])
def test_automatic_container_count_is_tasks_or_usable_cores_whichever_is_fewer(
        monkeypatch, cores, partitions, expected):
    from weir.engine.jobmodel import model as jobmodel
    monkeypatch.setattr(jobmodel, "usable_cores", lambda: cores)
    config = cfg(task__inputs="fl.a", job__container__count="auto")
    assert len(build_job_model(config, {A: partitions}).containers) == expected


def test_every_core_by_default_up_to_the_task_count(monkeypatch):
    """``auto`` is the default: producers of several processes may write one file-log
    partition, so nothing stands in the way of a container per core."""
    from weir.engine.jobmodel import model as jobmodel
    monkeypatch.setattr(jobmodel, "usable_cores", lambda: 8)
    assert len(build_job_model(cfg(task__inputs="fl.a"), {A: 4}).containers) == 4
    monkeypatch.setattr(jobmodel, "usable_cores", lambda: 2)
    assert len(build_job_model(cfg(task__inputs="fl.a"), {A: 4}).containers) == 2


def test_a_job_on_the_in_process_memory_system_runs_in_one_container_by_default(monkeypatch):
    from weir.engine.jobmodel import model as jobmodel
    monkeypatch.setattr(jobmodel, "usable_cores", lambda: 8)
    mem = SystemStream("mem", "a")
    config = cfg(task__inputs="mem.a", systems__mem__factory="memory")
    assert len(build_job_model(config, {mem: 4}).containers) == 1
    explicit = cfg(task__inputs="mem.a", systems__mem__factory="memory",
                   job__container__count="2")  # a number is used exactly
    assert len(build_job_model(explicit, {mem: 4}).containers) == 2


def test_an_explicit_container_count_is_used_exactly_whatever_the_cores(monkeypatch):
    from weir.engine.jobmodel import model as jobmodel
    monkeypatch.setattr(jobmodel, "usable_cores", lambda: 8)
    assert len(build_job_model(cfg(task__inputs="fl.a", job__container__count="1"),
                               {A: 4}).containers) == 1


@pytest.mark.parametrize("bad", ["two", "0", "-1", "auto2"])
def test_a_bad_container_count_names_the_key_and_says_auto_or_a_number(bad):
    with pytest.raises(ConfigError, match=r"job.container.count.*positive integer or 'auto'"):
        build_job_model(cfg(task__inputs="fl.a", job__container__count=bad), {A: 4})
