"""An application planned onto one Spark query (weir.engine.spark.appplan, apprunner.plan_app,
``weir plan --runner spark``): stages, tasks, shuffle routes, stores and refused shapes.
Planning starts no Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.app._pipeline import Pipeline
from weir.engine.cli import main
from weir.engine.spark.appplan import UnsupportedOnSparkError, route_keys
from weir.engine.spark.apprunner import plan_app
from weir.engine.spark.sparkhash import partition_of

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("partitions", [1, 2, 3, 4, 7, 16, 200])
def test_each_route_key_lands_on_its_own_spark_partition(partitions):
    keys = route_keys(partitions)
    assert [partition_of([k], ["int"], partitions) for k in keys] == list(range(partitions))


def _pipeline(tmp_path: Path, app: str, module: str = "tests.engine.app._apps") -> Pipeline:
    p = Pipeline(tmp_path, app)
    return p.with_config(app__class=f"{module}:{app}")


def test_a_three_stage_application_becomes_a_source_stage_and_two_shuffled_stages(tmp_path):
    p = _pipeline(tmp_path, "ThreeStage")
    p.create("events", 3)
    app = plan_app(p.config).app
    assert [s.reads_sources for s in app.stages] == [True, False, False]
    source = app.stages[0]
    assert [t.ssps for t in source.plan.tasks] == [(("filelog", "events", i),) for i in range(3)]
    by_user = app.stages[1]
    assert by_user.partitions == 3   # inferred as embedded: the largest input/output count
    assert [t.name for t in by_user.plan.tasks] == ["Partition 0", "Partition 1", "Partition 2"]
    assert by_user.plan.tasks[2].ssps == (("filelog", "t-1-partition_by-by-user", 2),)
    assert by_user.stores == ("t-1-window-per-user",)
    assert [s.plan.operator for s in app.stages] == ["t-1-stage-0", "t-1-stage-1", "t-1-stage-2"]
    assert {s.plan.config["app.stage"] for s in app.stages} == {"0", "1", "2"}
    assert app.stage_inputs(2) == frozenset({"filelog.t-1-partition_by-by-second"})
    assert not (tmp_path / "log" / "t-1-partition_by-by-user").exists()   # nothing created


def test_stages_reading_source_streams_run_together_as_the_first_spark_stage(tmp_path):
    p = _pipeline(tmp_path, "ClickJoin")
    p.create("impressions", 2)
    p.create("clicks", 2)
    app = plan_app(p.config).app
    assert [s.indices for s in app.stages] == [(0, 1), (2,)]
    source = app.source
    assert source.plan.operator == "t-1-stage-0-1"
    assert source.plan.config["app.stage"] == "-1"   # every operator its task's inputs reach
    assert [t.ssps for t in source.plan.tasks] == [
        (("filelog", "clicks", i), ("filelog", "impressions", i)) for i in range(2)]
    join = app.stages[1]
    assert join.plan.tasks[1].ssps == (("filelog", "t-1-partition_by-imp-by-ad", 1),
                                       ("filelog", "t-1-partition_by-click-by-ad", 1))


def test_a_stage_reading_a_source_and_an_intermediate_stream_is_refused_by_name(tmp_path):
    p = _pipeline(tmp_path, "IntermediateAndSource", "tests.engine.spark._apps")
    p.create("events", 2)
    p.create("extra", 2)
    with pytest.raises(UnsupportedOnSparkError) as err:
        plan_app(p.config)
    message = str(err.value)
    assert "app.class" in message and "stage 1 reads source streams (filelog.extra)" in message
    assert "run the application embedded" in message


def test_a_stage_fed_by_shuffles_of_different_partition_counts_is_refused(tmp_path):
    p = _pipeline(tmp_path, "UnevenShuffles", "tests.engine.spark._apps")
    p.create("events", 2)
    with pytest.raises(UnsupportedOnSparkError, match="different partition counts"):
        plan_app(p.config)


def _props(p: Pipeline, path: Path) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in sorted(p.config.items())))
    return path


def test_weir_plan_runner_spark_prints_the_query_as_a_table(tmp_path, capsys, monkeypatch):
    p = _pipeline(tmp_path, "ThreeStage")
    p.create("events", 2)
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["plan", str(_props(p, tmp_path / "app.properties")), "--runner", "spark"]) == 0
    out = capsys.readouterr().out
    assert "on Spark: one streaming query, 3 stage(s)" in out
    assert "readStream weirlog" in out and "repartition(2, route)" in out
    assert "t-1-stage-1" in out and "t-1-window-per-user (rocksdb)" in out
    assert "(shuffle)" in out and "filelog.out (sink)" in out


def test_weir_plan_runner_spark_json_lists_the_stages(tmp_path, capsys, monkeypatch):
    p = _pipeline(tmp_path, "WindowedCounts")
    p.create("events", 2)
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["plan", str(_props(p, tmp_path / "app.properties")), "--runner", "spark",
                 "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["stage"] for s in plan["stages"]] == ["0", "1"]
    assert plan["checkpoint"] == str(tmp_path / "checkpoints" / "spark")
