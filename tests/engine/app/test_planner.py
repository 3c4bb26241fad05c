"""The planner: stages, Samza's names, partition counts, upstream task counts, generated configs
and the graphs it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.engine.app import ApplicationError, Windows
from weir.engine.app.planner import plan_application
from weir.engine.model import SystemStream
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config, ConfigError

APPS: dict = {}


def app(fn):
    APPS[fn.__name__] = fn
    return fn


def describe(name):
    return APPS[name]


@app
def three_inputs(a):
    i1 = a.input("filelog.in1", timestamp=lambda e: 0)
    i2 = a.input("filelog.in2", timestamp=lambda e: 0)
    i3 = a.input("filelog.in3", timestamp=lambda e: 0)
    i1.merge(i2).partition_by(lambda e: e, name="int1").sink(lambda *x: None)
    i2.merge(i3).partition_by(lambda e: e, name="int2").sink(lambda *x: None)


@app
def chain(a):
    s = a.input("filelog.in1")
    (s.map(lambda e: e).filter(bool).partition_by(lambda e: e, name="p1")
      .window(Windows.tumbling(10), name="w").partition_by(lambda p: p.key, name="p2")
      .send_to(a.output("filelog.out", partitions=6)))


@app
def explicit(a):
    a.input("filelog.in1").partition_by(lambda e: e, name="p", partitions=5).sink(lambda *x: None)


@app
def join_inference(a):
    left = a.input("filelog.in2").partition_by(lambda e: e, name="left")
    right = a.input("filelog.in1").partition_by(lambda e: e, name="right", partitions=7)
    left.join(right, key=lambda kv: kv.key, within_ms=5, name="j").sink(lambda *x: None)


@app
def unnamed_partition_by(a):
    a.input("filelog.in1").partition_by(lambda e: e, name=None)


@app
def duplicate(a):
    s = a.input("filelog.in1")
    s.partition_by(lambda e: e, name="same").sink(lambda *x: None)
    s.partition_by(lambda e: e, name="same").sink(lambda *x: None)


@app
def self_fed(a):
    s = a.input("filelog.in1")
    looped = []

    class Late:
        pass
    first = s.partition_by(lambda e: e, name="loop")
    looped.append(first)
    # a partition_by fed by its own intermediate stream through a merge
    merged = s.merge(first)
    spec = merged.spec
    pb = first.spec.params["producer"]
    pb.inputs.append(spec)
    spec.outputs.append(pb)


@app
def table_app(a):
    rates = a.input("filelog.in1", kv=True)
    orders = a.input("filelog.in3", kv=True)
    table = a.table("rates")
    rates.send_to(table)
    orders.join_table(table, key=lambda o: o.key).sink(lambda *x: None)


@app
def no_output(a):
    a.input("filelog.in1").send_to(a.output("filelog.nowhere"))


@app
def timed_windows(a):
    from weir.engine.app import Triggers
    by_key = a.input("filelog.in1").partition_by(lambda e: e, name="p")
    by_key.window(Windows.keyed_tumbling_window(lambda kv: kv.key, 5_000), name="samza").sink(
        lambda *x: None)
    panes = by_key.window(Windows.tumbling(60_000).set_early_trigger(
        Triggers.repeat(Triggers.time_since_first_message(750))), name="early")
    panes.late_elements().sink(lambda *x: None)


@app
def memory_output(a):
    (a.input("filelog.in1").partition_by(lambda e: e, name="p")
      .send_to(a.output("mem.out", partitions=1)))


def setup(tmp_path: Path, name: str, **extra) -> tuple[Config, SystemRegistry]:
    values = {"job.name": "myjob", "app.class": f"{__name__}:describe_{name}",
              "systems.filelog.root": str(tmp_path / "log"),
              "task.checkpoint.path": str(tmp_path / "cp"),
              "job.logged.store.base.dir": str(tmp_path / "st"),
              "job.non-logged.store.base.dir": str(tmp_path / "st")}
    values.update(extra)
    config = Config(values)
    registry = SystemRegistry(config)
    admin = registry.admin("filelog")
    for stream, n in (("in1", 2), ("in2", 3), ("in3", 1)):
        admin.create_stream(StreamSpec(stream, n))
    return config, registry


for _name, _fn in list(APPS.items()):
    globals()[f"describe_{_name}"] = _fn


def test_intermediate_streams_get_samzas_names_and_stages_follow_the_data(tmp_path):
    plan = plan_application(*setup(tmp_path, "chain"))
    assert [s.index for s in plan.stages] == [0, 1, 2]
    assert plan.stages[0].inputs == (SystemStream("filelog", "in1"),)
    assert plan.stages[0].intermediate_outputs == (SystemStream("filelog", "myjob-1-partition_by-p1"),)
    assert plan.stages[1].stores == ("myjob-1-window-w",)
    assert plan.stages[2].outputs == (SystemStream("filelog", "out"),)
    assert plan.streams[SystemStream("filelog", "myjob-1-partition_by-p2")].producer_stage == 1


def test_intermediate_partitions_default_to_the_largest_input_or_output(tmp_path):
    plan = plan_application(*setup(tmp_path, "chain"))
    assert plan.streams[SystemStream("filelog", "myjob-1-partition_by-p1")].partitions == 6


def test_job_intermediate_stream_partitions_sets_every_intermediate_stream(tmp_path):
    plan = plan_application(*setup(tmp_path, "chain", **{"job.intermediate.stream.partitions": "4"}))
    assert {p.partitions for p in plan.streams.values() if p.kind == "intermediate"} == {4}


def test_partition_by_partitions_wins(tmp_path):
    plan = plan_application(*setup(tmp_path, "explicit", **{"job.intermediate.stream.partitions": "4"}))
    assert plan.streams[SystemStream("filelog", "myjob-1-partition_by-p")].partitions == 5


def test_join_inputs_take_the_partition_count_of_the_other_side(tmp_path):
    plan = plan_application(*setup(tmp_path, "join_inference"))
    assert plan.streams[SystemStream("filelog", "myjob-1-partition_by-left")].partitions == 7


def test_inferred_partitions_are_capped_at_256(tmp_path):
    config, registry = setup(tmp_path, "chain")
    registry.admin("filelog").create_stream(StreamSpec("big", 300))
    APPS["big"] = lambda a: a.input("filelog.big").partition_by(lambda e: e, name="p").sink(print)
    globals()["describe_big"] = APPS["big"]
    plan = plan_application(config.merged({"app.class": f"{__name__}:describe_big"}), registry)
    assert plan.streams[SystemStream("filelog", "myjob-1-partition_by-p")].partitions == 256


def test_upstream_tasks_are_the_distinct_tasks_reading_the_partition_by_inputs(tmp_path):
    # in1: 2 partitions, in2: 3, in3: 1 -> grouped by partition: in1+in2 -> 3 tasks, in2+in3 -> 3
    plan = plan_application(*setup(tmp_path, "three_inputs"))
    assert plan.streams[SystemStream("filelog", "myjob-1-partition_by-int1")].upstream_tasks == 3
    # one task per partition of each input: in1 + in2 = 5 tasks, in2 + in3 = 4
    plan = plan_application(*setup(tmp_path, "three_inputs",
                                   **{"job.systemstreampartition.grouper.factory": "ssp"}))
    assert plan.streams[SystemStream("filelog", "myjob-1-partition_by-int1")].upstream_tasks == 5
    assert plan.streams[SystemStream("filelog", "myjob-1-partition_by-int2")].upstream_tasks == 4


def test_the_generated_config_marks_intermediate_streams_and_adds_operator_stores(tmp_path):
    plan = plan_application(*setup(tmp_path, "chain"))
    cfg = plan.job_config()
    sid = "myjob-1-partition_by-p1"
    assert cfg["task.class"] == "weir.engine.app.task:ApplicationTask"
    assert cfg[f"streams.{sid}.samza.intermediate"] == "true"
    assert cfg[f"streams.{sid}.intermediate.upstream.tasks"] == "2"
    assert cfg[f"streams.{sid}.samza.offset.default"] == "oldest"
    assert cfg["stores.myjob-1-window-w.changelog"] == "filelog.myjob-1-window-w-changelog"
    assert cfg["stores.myjob-1-window-w.factory"] == "rocksdb"
    assert cfg.origin("task.class") == "application plan"
    assert cfg["task.inputs"].split(",") == ["filelog.in1", f"filelog.{sid}",
                                             "filelog.myjob-1-partition_by-p2"]


def test_the_users_config_wins_over_generated_defaults(tmp_path):
    config, registry = setup(tmp_path, "chain", **{"stores.myjob-1-window-w.factory": "memory",
                                                   "app.store.factory": "lmdb"})
    cfg = plan_application(config, registry).job_config()
    assert cfg["stores.myjob-1-window-w.factory"] == "memory"
    assert "stores.myjob-1-window-w.changelog" not in cfg      # their store, entirely


def test_a_stage_job_has_its_own_name_directories_and_only_its_inputs_and_stores(tmp_path):
    plan = plan_application(*setup(tmp_path, "chain"))
    cfg = plan.job_config(stage=1)
    assert cfg["job.name"] == "myjob-stage-1" and cfg["app.name"] == "myjob"
    assert cfg["task.inputs"] == "filelog.myjob-1-partition_by-p1"
    assert cfg["task.checkpoint.path"] == str(tmp_path / "cp" / "stage-1")
    assert cfg["job.logged.store.base.dir"] == str(tmp_path / "st" / "stage-1")
    assert cfg["job.drain.path"] == str(tmp_path / "cp" / "drain-request.json")
    assert "stores.myjob-1-window-w.factory" in cfg
    assert "stores.myjob-1-window-w.factory" not in plan.job_config(stage=0)


def test_a_table_fed_straight_from_an_input_makes_it_a_bootstrap_stream(tmp_path):
    with pytest.raises(ApplicationError, match="different partition counts"):
        plan_application(*setup(tmp_path, "table_app"))   # in1 has 2 partitions, in3 has 1
    config, registry = setup(tmp_path, "table_app")
    registry.admin("filelog").create_stream(StreamSpec("in4", 2))
    APPS["table2"] = lambda a: (a.input("filelog.in1", kv=True).send_to(a.table("rates")),
                                a.input("filelog.in4", kv=True).join_table(
                                    a.table("rates"), key=lambda o: o.key).sink(print))
    globals()["describe_table2"] = APPS["table2"]
    cfg = plan_application(config.merged({"app.class": f"{__name__}:describe_table2"}),
                           registry).job_config()
    assert cfg["systems.filelog.streams.in1.samza.bootstrap"] == "true"
    assert cfg["stores.rates.changelog"] == "filelog.myjob-1-table-rates-changelog"


def test_partition_by_window_and_join_need_a_name(tmp_path):
    with pytest.raises(ApplicationError, match="needs name="):
        plan_application(*setup(tmp_path, "unnamed_partition_by"))


def test_two_operators_with_one_name_are_refused(tmp_path):
    with pytest.raises(ApplicationError, match="two operators are named 'myjob-1-partition_by-same'"):
        plan_application(*setup(tmp_path, "duplicate"))


def test_a_partition_by_fed_by_its_own_stream_is_refused(tmp_path):
    with pytest.raises(ApplicationError, match="fed by its own intermediate stream"):
        plan_application(*setup(tmp_path, "self_fed"))


def test_task_inputs_next_to_app_class_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="task.inputs"):
        plan_application(*setup(tmp_path, "chain", **{"task.inputs": "filelog.in1"}))


def test_an_application_with_intermediate_streams_keeps_its_container_count(tmp_path):
    # Producers of several processes append to one file-log partition in turn, so the
    # planner no longer forces one container (tests/e2e/test_pageviews_example.py runs two).
    plan = plan_application(*setup(tmp_path, "chain", **{"job.container.count": "2"}))
    assert any(p.kind == "intermediate" for p in plan.streams.values())
    assert plan.job_config().get_str("job.container.count") == "2"


def test_more_than_one_message_in_flight_per_task_is_refused_for_applications(tmp_path):
    with pytest.raises(ConfigError, match="task.max.concurrency.*one at a time"):
        plan_application(*setup(tmp_path, "chain", **{"task.max.concurrency": "4"}))


def test_an_existing_intermediate_stream_with_another_partition_count_is_refused(tmp_path):
    config, registry = setup(tmp_path, "explicit")
    registry.admin("filelog").create_stream(StreamSpec("myjob-1-partition_by-p", 2))
    with pytest.raises(ApplicationError, match="exists with 2 partitions, the plan needs 5"):
        plan_application(config, registry)


def test_a_missing_output_without_partitions_names_the_fix(tmp_path):
    from weir.engine.errors import StreamNotFoundError
    with pytest.raises(StreamNotFoundError, match="partitions=N"):
        plan_application(*setup(tmp_path, "no_output"))


def test_create_streams_makes_the_intermediate_streams_and_declared_outputs(tmp_path):
    config, registry = setup(tmp_path, "chain")
    plan = plan_application(config, registry)
    created = plan.create_streams()
    assert set(created) == {SystemStream("filelog", "myjob-1-partition_by-p1"),
                            SystemStream("filelog", "myjob-1-partition_by-p2"),
                            SystemStream("filelog", "out")}
    assert plan.create_streams() == []
    assert plan.to_json()["stages"][1]["tasks"] == 6


def test_processing_time_windows_and_timed_triggers_get_a_window_timer(tmp_path):
    config, registry = setup(tmp_path, "timed_windows")
    plan = plan_application(config, registry)
    assert plan.job_config().get_str("task.window.ms") == "100"     # gcd 250, at most 100
    assert ("myjob-1-late_elements-1", "late_elements") in plan.stages[1].ops
    mine = plan_application(*setup(tmp_path / "b", "timed_windows", **{"task.window.ms": "40"}))
    assert mine.job_config().get_str("task.window.ms") == "40"      # the user's wins


def test_event_time_windows_without_timed_triggers_need_no_window_timer(tmp_path):
    plan = plan_application(*setup(tmp_path, "chain"))
    assert "task.window.ms" not in plan.job_config()


def test_an_application_on_the_file_log_is_exactly_once_by_default(tmp_path):
    plan = plan_application(*setup(tmp_path, "chain"))
    job = plan.job_config()
    assert job.get_str("task.processing.guarantee") == "exactly_once"
    assert "task.commit.ms" not in job      # the engine's exactly-once default: 100 ms
    from weir.engine.runloop.settings import RunLoopConfig
    assert RunLoopConfig.from_config(job).for_exactly_once(job).commit_ms == 100
    assert plan.to_json()["guarantee"] == "exactly_once"


def test_a_chosen_guarantee_or_commit_interval_wins(tmp_path):
    plan = plan_application(*setup(tmp_path, "chain",
                                   **{"task.processing.guarantee": "at_least_once"}))
    assert plan.job_config().get_str("task.processing.guarantee") == "at_least_once"
    assert "task.commit.ms" not in plan.job_config()
    plan = plan_application(*setup(tmp_path / "b", "chain", **{"task.commit.ms": "1000"}))
    assert plan.job_config().get_str("task.commit.ms") == "1000"
    assert plan.guarantee == "exactly_once"


def test_an_application_writing_a_system_without_transactions_stays_at_least_once(tmp_path,
                                                                                 caplog):
    config, registry = setup(tmp_path, "memory_output",
                             **{"systems.mem.samza.factory": "memory"})
    with caplog.at_level("INFO", logger="weir.app"):
        plan = plan_application(config, registry)
    assert plan.guarantee == "at_least_once"
    assert "task.commit.ms" not in plan.job_config()
    assert "system 'mem' is not a file log" in caplog.text
