"""Samza's other groupers and broadcast streams, as they behave here."""

from __future__ import annotations

import pytest

from weir.engine.jobmodel.model import ALL_SSP_TASK, build_job_model
from weir.engine.model import SystemStream
from weir.stores.config import Config
from weir.stores.errors import ConfigError

ALL_TO_ONE = "org.apache.samza.container.grouper.stream.AllSspToSingleTaskGrouperFactory"
BY_IDS = "org.apache.samza.container.grouper.task.GroupByContainerIdsFactory"
COUNTS = {SystemStream("kafka", "edits"): 3, SystemStream("kafka", "users"): 2}


def tasks(model) -> dict[str, list[str]]:
    return {name: sorted(map(str, t.ssps)) for name, t in model.tasks().items()}


def test_all_ssp_to_single_task_gives_one_task_every_partition():
    model = build_job_model(Config({"task.inputs": "kafka.edits,kafka.users",
                                    "job.systemstreampartition.grouper.factory": ALL_TO_ONE}),
                            COUNTS)

    assert tasks(model) == {ALL_SSP_TASK: ["kafka.edits#0", "kafka.edits#1", "kafka.edits#2",
                                           "kafka.users#0", "kafka.users#1"]}
    assert list(model.containers) == ["0"]


def test_all_ssp_to_single_task_with_more_containers_says_why_it_has_one_task():
    with pytest.raises(ConfigError, match="AllSspToSingleTaskGrouperFactory: one task reads "
                                          "every partition"):
        build_job_model(Config({"task.inputs": "kafka.edits", "job.container.count": "2",
                                "job.systemstreampartition.grouper.factory": ALL_TO_ONE}),
                        COUNTS)


def test_all_ssp_to_single_task_refuses_broadcast_inputs_as_samza_does():
    with pytest.raises(ConfigError, match="broadcast"):
        build_job_model(Config({"task.inputs": "kafka.edits",
                                "task.broadcast.inputs": "kafka.users#0",
                                "job.systemstreampartition.grouper.factory": ALL_TO_ONE}),
                        COUNTS)


def test_group_by_container_ids_uses_one_container_per_task_when_given_more():
    model = build_job_model(Config({"task.inputs": "kafka.edits", "job.container.count": "5",
                                    "task.name.grouper.factory": BY_IDS}), COUNTS)

    assert {cid: sorted(c.tasks) for cid, c in model.containers.items()} == {
        "0": ["Partition 0"], "1": ["Partition 1"], "2": ["Partition 2"]}


def test_group_by_container_ids_deals_afresh_where_container_count_keeps_the_past():
    config = Config({"task.inputs": "kafka.edits", "job.container.count": "2",
                     "task.name.grouper.factory": BY_IDS})
    previous = {"Partition 0": "1", "Partition 1": "0", "Partition 2": "1"}

    model = build_job_model(config, COUNTS, task_assignment=previous)

    assert model.task_assignment() == {"Partition 0": "0", "Partition 1": "1",
                                       "Partition 2": "0"}


def test_a_samza_broadcast_input_goes_whole_to_every_task():
    model = build_job_model(Config({"task.inputs": "kafka.edits,kafka.users",
                                    "streams.users.samza.system": "kafka",
                                    "streams.users.samza.broadcast": "true"}), COUNTS)

    assert tasks(model) == {
        f"Partition {p}": [f"kafka.edits#{p}", "kafka.users#0", "kafka.users#1"]
        for p in range(3)}
